"""Algorithms from functions: kernel formation, kernel fusion, stream and group partitions (paper §2.2-2.4).

=======================  ===================================================================
rule                     lhs → rhs
=======================  ===================================================================
``kernel_formation``     f (a primitive at level 0) → Kernel_ℓ(Load ; f@ℓ ; Save)
``kernel_fusion``        Kernel(f) ; Kernel(g) → Kernel(f ; g)  (Save ; Load eliminated)
``stream_partition``     Kernel(F) → Kernel(Stream_{b,s}(F))      if F is streamable along b
``sliced_stream``        Kernel(F) → Kernel(Stream_{b,s,sliced}(F))  if F streams along b, outputs sliced
``group_partition``      Kernel(weave_a F) → Grid_{a,g}(Kernel(F[a ↦ g]))  if F is weaved over a
=======================  ===================================================================

The last two take parameters (``rule.using(axis="x", size="s_x")``); without an axis they pick the first legal one
read off the kernel. Kernel formation and fusion are :mod:`rewrites.kernels` (their rules gathered in :data:`RULES`
here); the nodes the rules match, :mod:`rewrites.kernel_nodes`. They are equations a user orients by choosing the
axis and size, so the fixpoint driver does not use them.

>>> import napkin_cat as nc
>>> from napkin_cat.rewriting import rewrite
>>> r = rewrite(nc.library.attention(), [kernel_formation])
>>> [s.rule for s in r.trace], [type(b).__name__ for b in r.diagram.boxes]
(['kernel_formation', 'kernel_formation', 'kernel_formation'], ['Kernel', 'Kernel', 'Kernel'])
"""
from __future__ import annotations

import numpy as np
import sympy

import napkin_cat as nc
from napkin_cat.algorithms.partitions import relabel_axis
from napkin_cat.syntax.axis import as_size
from napkin_cat.rewriting.obligation import bind_tiles, random_sizes, shape_of
from napkin_cat.errors import RewriteError
from napkin_cat.rewriting.match import Pattern
from napkin_cat.rewriting import Condition, Obligation, Rule, RuleSet
from napkin_cat.algorithms.streaming import analyse
from rewrites.kernel_nodes import PARTITIONABLE, PLAIN_KERNEL, one_box, refusal
from rewrites.kernels import kernel_formation, kernel_fusion


# ---------------------------------------------------------------------- stream partition
def _stream_axis(m, sliced: bool = False):
    """The rule's axis, or else the first axis the kernel reads that it streams: one no output carries (a
    stream), or, ``sliced``, one an output carries too (a sweep, its outputs written slice by slice)."""
    k = m.box("k")
    axis = m.params.get("axis")
    if axis is not None:
        return axis, m.params.get("size", f"s_{axis}")
    outs = {n for a in k.cod.inside for n in a.names}
    for arr in k.arg.dom.inside:
        for name in arr.names:
            if (name in outs) == sliced:
                try:
                    analyse(k.arg, name, sliced=sliced)
                    return name, m.params.get("size", f"s_{name}")
                except RewriteError:
                    continue
    return None, None


def _streamed(m, sliced: bool = False):
    """``nc.stream`` of the matched kernel along the rule's axis, built once per match (the side condition asks
    the constructor, as the group partition's does; the right-hand side is what it built)."""
    key = "_sliced" if sliced else "_streamed"
    if key not in m.vars:
        axis, size = _stream_axis(m, sliced)
        m.vars[key] = nc.stream(one_box(m, "k"), axis, size, sliced=sliced)
    return m.vars[key]


def _streamable(m, sliced: bool = False):
    axis, _ = _stream_axis(m, sliced)
    k = m.box("k")
    if axis is None:
        return ("the kernel can be swept along none of the axes an input and an output carry" if sliced else
                "the kernel is streamable along none of the axes it reduces")
    if not any(axis in a.names for a in k.arg.dom.inside):
        return f"no input of the kernel carries {axis!r}"
    return refusal(lambda: _streamed(m, sliced))


def _stream_rhs(m, sliced: bool = False):
    return _streamed(m, sliced)


def _sizes_or_symbols(rng):
    """``k(**sizes)``: the sizes, or (at random) nothing, so that the instance stays symbolic."""
    concrete = bool(rng.integers(2))
    return lambda **kw: kw if concrete else {}


def _stream_instance(rng):
    """A kernel streamable along some axis; sizes symbolic or concrete at random."""
    k = _sizes_or_symbols(rng)
    algos = [lambda: nc.library.attention(**k(q=4, x=6, d=3)), lambda: nc.library.matmul(**k(a=3, b=6, c=2)),
             lambda: nc.reduce("max", "q x -> q", **k(q=2, x=6)),
             lambda: nc.library.multi_head_attention(**k(q=2, x=4, d=2, h=2)),
             lambda: nc.einsum("q x, x d -> q d", **k(q=2, x=6, d=2))]
    return nc.kernel(algos[int(rng.integers(len(algos)))]())


def _stream_cost(lhs, rhs, m):
    """Streaming moves the same data: H is unchanged (the whole axis is still transferred)."""
    a, b = nc.cost(lhs).H, nc.cost(rhs).H
    assert all(sympy.simplify(a[l] - b.get(l, 0)) == 0 for l in a), f"H changed: {a} → {b}"


stream_partition = Rule(
    "stream_partition",
    Pattern({"k": PLAIN_KERNEL}),
    _stream_rhs,
    conditions=(Condition("streamable", _streamable, "the kernel must be streamable along the axis"),),
    obligation=Obligation(lambda rng: _stream_instance(rng), cost=_stream_cost),
    doc="""Kernel(F) → Kernel(Stream_{b, s_b}(F)) when F is streamable along b.

    Paper Figs. streaming_condition, recursive_decomposition, streaming_relabeling and the
    fusion theorem (Appendix A.1): streamability is derived from the primitives'
    accumulators (contraction: sum; SoftMax-contraction: online softmax).  Cost claim:
    transfers are unchanged; memory uses s_b in place of b.""",
    oriented=False,
)


# ---------------------------------------------------------------------- sliced stream
def _sliced_instance(rng):
    """A kernel with an output axis an input carries (sliced) and maybe a reduced one; sizes symbolic or not."""
    k = _sizes_or_symbols(rng)
    algos = [lambda: nc.library.attention(**k(q=4, x=6, d=3)), lambda: nc.library.matmul(**k(a=3, b=6, c=2)),
             lambda: nc.einsum("q d, x d -> q x", **k(q=2, x=6, d=2)),
             lambda: nc.library.mlp(**k(n=3, i=2, f=4, o=2)),
             lambda: nc.library.layer_norm(**k(n=4, d=3))]
    return nc.kernel(algos[int(rng.integers(len(algos)))]())


sliced_stream = Rule(
    "sliced_stream",
    Pattern({"k": PLAIN_KERNEL}),
    lambda m: _stream_rhs(m, sliced=True),
    conditions=(Condition("sweepable", lambda m: _streamable(m, sliced=True),
                          "the kernel must stream along the axis, outputs sliced"),),
    obligation=Obligation(lambda rng: _sliced_instance(rng), cost=_stream_cost),
    doc="""Kernel(F) → Kernel(Stream_{b, s_b, sliced}(F)) when F streams along b writing its outputs that carry b
    slice by slice (a sweep).

    The recursive decomposition (paper Fig. recursive_decomposition) read for an axis an output keeps: F weaved
    over b is split_b ; (F ⊗ … ⊗ F) ; join_b run one slice after the other, so what does not carry b (a
    stationary operand) is loaded once and kept, and each trip saves its slice of the outputs; reducers along
    b may run beside.  Cost claim: transfers are unchanged; memory uses s_b in place of b for the slices.""",
    oriented=False,
)


# ---------------------------------------------------------------------- group partition
def _group_axis(m):
    """The rule's axis, or else the first output axis the region is weaved over (not yet grouped)."""
    axis = m.params.get("axis")
    if axis is not None:
        return axis, m.params.get("size", f"g_{axis}")
    k = one_box(m, "k")
    first = k.cod.inside[0].names if k.cod.inside else ()   # a region whose outputs are all discarded has none
    for name in first:
        try:
            nc.group(k, name, f"g_{name}")
            return name, m.params.get("size", f"g_{name}")
        except RewriteError:
            continue
    return None, None


def _grouped(m):
    """``nc.group`` of the matched region along the rule's axis, built once per match (the side condition
    asks the constructor; the right-hand side is what it built)."""
    if "_grouped" not in m.vars:
        axis, size = _group_axis(m)
        m.vars["_grouped"] = nc.group(one_box(m, "k"), axis, size)
    return m.vars["_grouped"]


def _weaved(m):
    axis, size = _group_axis(m)
    if axis is None:
        return "the region is weaved over none of its output axes"
    return refusal(lambda: _grouped(m))


def _group_rhs(m):
    return _grouped(m)


def _group_instance(rng):
    """A kernel (or streamed kernel) weaved over an output axis; sizes symbolic or concrete."""
    k = _sizes_or_symbols(rng)
    algos = [lambda: nc.kernel(nc.library.attention(**k(q=6, x=4, d=3))),
             lambda: nc.stream(nc.kernel(nc.library.attention(**k(q=6, x=4, d=3))), "x", "s_x"),
             lambda: nc.kernel(nc.einsum("q x, x d -> q d", **k(q=6, x=3, d=2))),
             lambda: nc.kernel(nc.elementwise("exp", "q x", **k(q=6, x=2))),
             lambda: nc.stream(nc.library.grouped_query_attention(**k(q=2, x=4, d=2, h=2, g=3)), "x", "s_x")]
    return algos[int(rng.integers(len(algos)))]()


def _counted(diagram, sizes: dict, rng) -> dict:
    """Values moved per level when ``diagram`` runs on random inputs at ``sizes`` (the evaluator counts them)."""
    counters = {}
    xs = [rng.normal(size=shape_of(a, sizes)) for a in diagram.dom.inside]
    nc.evaluate(diagram, *xs, sizes=nc.Sizes(sizes).restrict(diagram), counters=counters)  # one side's sizes
    return counters


def _group_sizes(m, lhs, rhs, rng):
    """Random sizes with at least two groups (of at least 2 where the axis allows), the other tiles bound;
    returns the axis, its full size and the group size as ints, and the sizes."""
    axis, size = _group_axis(m)
    tile = as_size(axis, size)
    full = next(a.axis(axis).size for a in m.box("k").cod.inside if axis in a.names)
    sizes = random_sizes(rng, lhs)
    if isinstance(full, int):
        g = tile if isinstance(tile, int) else max((d for d in range(1, full // 2 + 1) if full % d == 0), default=1)
    else:
        g = tile if isinstance(tile, int) else int(rng.integers(2, 4))
        sizes[str(full)] = g * int(rng.integers(2, 4))
    if not isinstance(tile, int):
        sizes[str(tile)] = g
    sizes = bind_tiles(rng, sizes, lhs, rhs)
    n = int(sympy.sympify(full).subs({nc.symbol(s): v for s, v in sizes.items()}))
    return axis, n, g, sizes


def _group_cost(lhs, rhs, m):
    """Counted by running both sides: H(rhs) = Σ over the groups of H(F[a ↦ group size]) + H(the rest).

    Each H(F[a ↦ g]) is counted by running the ungrouped region on one group's sizes (N_g equal
    groups give N_g · H_g), H(rhs) by running the Grid; the cost functor's H(rhs) must equal the count.
    """
    rng = np.random.default_rng(0)
    axis, n, g, sizes = _group_sizes(m, lhs, rhs, rng)
    k = one_box(m, "k")
    want = {}
    for length in [g] * (n // g) + [n % g] * bool(n % g):
        for level, moved in _counted(relabel_axis(k, axis, length), sizes, rng).items():
            want[level] = want.get(level, 0) + moved
    whole = _counted(k, sizes, rng)
    for level, moved in _counted(lhs, sizes, rng).items():
        want[level] = want.get(level, 0) + moved - whole.get(level, 0)
    got = _counted(rhs, sizes, rng)
    nonzero = lambda c: {level: v for level, v in c.items() if v}  # noqa: E731
    assert nonzero(got) == nonzero(want), (f"group partition moves {got} values per level at sizes {sizes}; "
                                           f"the groups run one by one move {want}")
    env = {nc.symbol(s): v for s, v in sizes.items()}
    H = {level: int(sympy.sympify(h).subs(env)) for level, h in nc.cost(rhs).H.items()}
    assert nonzero(H) == nonzero(got), f"the cost functor's H {H} is not the {got} values counted at sizes {sizes}"


group_partition = Rule(
    "group_partition",
    Pattern({"k": PARTITIONABLE}),
    _group_rhs,
    conditions=(Condition("weaved", _weaved, "the region must be weaved over the axis"),),
    obligation=Obligation(_group_instance, cost=_group_cost),
    doc="""Kernel(weave_a F) → Grid_{a, g_a}(Kernel(F[a ↦ g_a])), i.e. split_a ; (F ⊗ … ⊗ F) ; join_a.

    Paper Figs. weaved_algorithm, group_partitioning and multiple_weaves: a weaved algorithm
    equals sub-algorithms on partitions of the weaved axis; un-weaved inputs go to every
    group.  Cost claim, counted by running both sides: H = N_g · H(F[a ↦ g_a]) with N_g = a/g_a.""",
    oriented=False,
)


RULES = RuleSet((kernel_formation, kernel_fusion, stream_partition, sliced_stream, group_partition))
