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

The last two take parameters (``rule.using(axis="x", size="s_x")``); without an axis they
pick the first legal one read off the kernel.  They are equations a user orients by choosing
the axis and size, so the fixpoint driver does not use them.

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
from napkin_cat.rewriting.match import INPUT, OUTPUT, Pattern, is_convex, where
from napkin_cat.syntax.relabel import map_box
from napkin_cat.cost.iocost import numel
from napkin_cat.rewriting import Condition, Obligation, Rule, RuleSet
from napkin_cat.algorithms.streaming import analyse
from rewrites.softmax import softmax_contraction_to_unscaled
from napkin_cat.syntax.flat import from_layers


# ---------------------------------------------------------------------- node tests
def _is_function_box(net, n) -> bool:
    return (n.kind == "box" and n.spec.kind not in ("load", "save")
            and all(a.level == 0 for a in (*n.dom, *n.cod)))


def _is_kernel(net, n) -> bool:
    return n.kind == "region" and isinstance(n.box, nc.Kernel)


def _is_plain_kernel(net, n) -> bool:
    """A kernel whose inside is Loads ; primitives ; Saves (not yet partitioned)."""
    return _is_kernel(net, n) and not any(isinstance(b, nc.Region) for b in n.box.arg.boxes)


def _is_partitionable(net, n) -> bool:
    return n.kind == "region" and isinstance(n.box, (nc.Kernel, nc.Grid))


FUNCTION_BOX = where("primitive at level 0", _is_function_box, nodes=("box",))
PLAIN_KERNEL = where("unpartitioned Kernel", _is_plain_kernel, nodes=("region",))
KERNEL = where("Kernel", _is_kernel, nodes=("region",))
PARTITIONABLE = where("Kernel or Grid", _is_partitionable, nodes=("region",))


def _single(m, var):
    """The matched node as a one-box diagram."""
    box = m.box(var)
    return nc.Diagram.id(box.dom).then(box)


def _refusal(attempt):
    """A side condition that asks the constructor: True when ``attempt()`` succeeds, else its reason."""
    try:
        attempt()
    except RewriteError as e:
        return str(e)
    return True


# ---------------------------------------------------------------------- kernel formation
def _level(m) -> int:
    return int(m.params.get("level", 1))


def _private_closed(net, nid) -> list:
    """The closed boxes (:mod:`napkin_cat.rewriting.closed`) that feed ``nid`` directly and no one else, each
    reading such boxes only (a tree: a position, a comparison of two), producers first."""
    out = []
    for w in net.ins[nid]:
        p = net.wires[w].src[0]
        if p in (INPUT, OUTPUT) or not _is_function_box(net, net.nodes[p]) or len(net.outs[p]) != 1:
            continue
        below = _private_closed(net, p)     # p's one output is this wire: f alone reads it
        if all(net.wires[v].src[0] in below for v in net.ins[p]):
            out += below + [p]
    return out


def _discards(net, nodes):
    """The discards of f's outputs (a kernel saves only what someone reads), and the closed values that f alone
    reads (a kernel computes them instead of loading them)."""
    ends = [net.wires[w].dst[0] for w in net.outs[nodes["f"]]]
    found = {f"drop{j}": e for j, e in enumerate(x for x in ends if x != OUTPUT and net.nodes[x].kind == "discard")}
    found.update({f"closed{j}": c for j, c in enumerate(_private_closed(net, nodes["f"]))})
    return found


def _kernel_rhs(m):
    b, wires = m.wiring()
    var = {nid: v for v, nid in m.nodes.items()}
    made = {}
    for nid in (n for n in m.net.nodes if n in var and m.net.nodes[n].kind == "box"):   # the closed tree, then f
        src = [m.net.wires[w].src for w in m.net.ins[nid]]
        out = b(_single(m, var[nid]), *(made[s] if s in made else wires[(var[nid], p)] for p, s in enumerate(src)))
        made.update({(nid, p): o for p, o in enumerate(out if isinstance(out, tuple) else (out,))})
    f = m.nodes["f"]
    return nc.kernel(m.finish(b, {("f", p): made[(f, p)] for p in range(len(m.node("f").cod))}), _level(m))


def _function_instance(rng):
    kinds = [lambda: nc.einsum("q d, x d -> q x"), lambda: nc.softmax("q x", over="x"),
             lambda: nc.elementwise("exp", "q x"), lambda: nc.reduce("sum", "q x -> q"),
             lambda: nc.library.attention(), lambda: nc.library.mlp(),
             lambda: softmax_contraction_to_unscaled.apply(nc.library.attention()),
             lambda: nc.library.causal_attention(), lambda: nc.library.alibi_attention()]
    return kinds[int(rng.integers(len(kinds)))]()


def _kernel_cost(lhs, rhs, m):
    box, net = m.box("f"), m.net
    read = [a for a, w in zip(box.cod.inside, net.outs[m.nodes["f"]]) if net.wires[w].dst[0] not in m.nodes.values()]
    moved = sum((numel(a) for a in (*m.dom.inside, *read)), sympy.Integer(0))
    got = nc.cost(rhs).H.get(_level(m), 0) - nc.cost(lhs).H.get(_level(m), 0)
    assert sympy.simplify(got - moved) == 0, f"kernel formation moves {got}, expected {moved}"


kernel_formation = Rule(
    "kernel_formation",
    Pattern({"f": FUNCTION_BOX}, absorb=_discards),
    _kernel_rhs,
    obligation=Obligation(_function_instance, cost=_kernel_cost),
    doc="""f → Kernel_ℓ(Load ; f@ℓ ; Save): a primitive becomes its own kernel (level assignment).

    Paper §2.2 (algorithms embedded in a hierarchy): inputs are loaded to the level
    below, the function runs there, the outputs someone reads are saved (a discarded output
    stays inside).  A closed value that f alone reads (made from no input: a position, a comparison of
    two) is computed inside instead of loaded (:mod:`napkin_cat.rewriting.closed`: a closed diagram is a
    deterministic constant, so computing it where it is read is the same function).  Cost claim: moves
    exactly f's inputs from outside the kernel (not the closed values it computes) and read outputs once.""")


# ---------------------------------------------------------------------- kernel fusion
def _permutation(src, dst):
    """The level-0 map that writes ``src`` in ``dst``'s axis order (what a transfer woven at one position in and
    another out does besides moving), or None when the orders agree."""
    if src.names == dst.names:
        return None
    return nc.elementwise("id", f"{' '.join(src.names)} -> {' '.join(dst.names)}", level=0, dtype=src.dtype,
                          sizes={a.name: a.size for a in src.axes}).boxes[0]


def strip(kernel_box) -> nc.Diagram:
    """The function inside an unpartitioned kernel: Loads and Saves dropped, recoloured to level 0; a transfer
    that permutes its array's axes (woven at one position in and another out) leaves that permutation."""
    to0 = lambda a: a.replace(level=0)  # noqa: E731
    items = []
    for layer in kernel_box.arg.inside:
        left, box, right = layer.boxes_or_types[:3]
        if getattr(box, "data", None) is not None and getattr(box.data, "kind", None) in ("load", "save"):
            box = _permutation(to0(box.dom.inside[0]), to0(box.cod.inside[0]))
            if box is None:
                continue
        else:
            box = map_box(box, to0, lambda n: n)
        items.append((nc.Ty(*map(to0, left.inside)), box, nc.Ty(*map(to0, right.inside))))
    return from_layers(nc.Ty(*map(to0, kernel_box.dom.inside)), nc.Ty(*map(to0, kernel_box.cod.inside)), items)


def _same_level(m):
    a, b = m.box("k1").params["level"], m.box("k2").params["level"]
    return a == b or f"the kernels run at levels {a} and {b}"


def _fed_by(net, k1):
    """Nodes fed by ``k1``'s outputs directly, and the copy nodes that fan those outputs out."""
    direct, copies = [], []
    for w in net.outs[k1]:
        dst = net.wires[w].dst[0]
        if dst == OUTPUT:
            continue
        if net.nodes[dst].kind == "copy":
            copies.append(dst)
            direct += [net.wires[c].dst[0] for c in net.outs[dst] if net.wires[c].dst[0] != OUTPUT]
        else:
            direct.append(dst)
    return direct, copies


def _fusion_partner(net, nodes):
    """The first kernel fed by k1 (through wires or copies of k1's outputs) that fuses with it convexly,
    with those copies: fusing through a copy keeps the copied value flowing to its other consumers."""
    k1 = nodes["k1"]
    direct, copies = _fed_by(net, k1)
    for k2 in sorted(set(direct), key=net.position.get):
        if k2 == k1 or not _is_plain_kernel(net, net.nodes[k2]):
            continue
        used = [c for c in copies if any(net.wires[w].dst[0] == k2 for w in net.outs[c])]
        extra = {"k2": k2, **{f"copy{j}": c for j, c in enumerate(used)}}
        if is_convex(net, {k1, *extra.values()}):
            return extra
    return None


def _fusion_rhs(m):
    """``Kernel(f ; g)``, then a copy outside it for each absorbed copy that still feeds readers outside: the fused
    kernel saves a value once however many readers outside take it (``f ; copy = copy ; (f ⊗ f)`` read backwards,
    the copy law), as kernel formation saves a value once for all its readers."""
    k1, k2 = m.box("k1"), m.box("k2")
    inner, wires = m.wiring()
    net, n1 = m.net, m.node("k1")
    out1 = inner(strip(k1), *[wires[("k1", p)] for p in range(len(n1.dom))])
    out1 = out1 if isinstance(out1, tuple) else (out1,)
    made = {(m.nodes["k1"], p): w for p, w in enumerate(out1)}
    copies = [v for v in m.nodes if v.startswith("copy")]
    for v in copies:
        (w_in,) = net.ins[m.nodes[v]]
        for j, _ in enumerate(net.outs[m.nodes[v]]):
            made[(m.nodes[v], j)] = made[net.wires[w_in].src]
    args = [made.get(net.wires[w].src, wires.get(("k2", p))) for p, w in enumerate(net.ins[m.nodes["k2"]])]
    out2 = inner(strip(k2), *args)
    out2 = out2 if isinstance(out2, tuple) else (out2,)
    value = {("k1", p): out1[p] for p in range(len(out1))}
    value.update({("k2", p): out2[p] for p in range(len(out2))})
    value.update({(v, j): made[(m.nodes[v], j)] for v in copies for j in range(len(net.outs[m.nodes[v]]))})
    saved = list(dict.fromkeys(value[port] for port in m.outputs))       # each value once, in boundary order
    fused = nc.kernel(inner.build(*saved), k1.params["level"])
    outer, ins = m.wiring()
    got = outer(fused, *(ins[port] for port in m.inputs))
    got = got if isinstance(got, tuple) else (got,)
    by_value = dict(zip(saved, got))
    return m.finish(outer, {port: by_value[value[port]] for port in m.outputs})


def read_thrice() -> nc.Diagram:
    """``T = Q Kᵀ`` read by ``Tᵀ W``, ``Σ_q −T`` and ``max_x T``: fused with one of its readers, ``T`` is still
    saved, once, for the other two.

    >>> [a.names for a in read_thrice().cod.inside]
    [('x', 'e'), ('x',), ('q',)]
    """
    b = nc.Builder(nc.types("q d, x d, q e"))
    Q, K, W = b.inputs
    T = b(nc.einsum("q d, x d -> q x"), Q, K)
    return b.build(b(nc.einsum("q x, q e -> x e"), T, W),
                   b(nc.reduce("sum", "q x -> x"), b(nc.elementwise("neg", "q x"), T)),
                   b(nc.reduce("max", "q x -> q"), T))


def _fusion_instance(rng):
    chains = [lambda: nc.library.attention(), lambda: nc.library.mlp(activation="relu"),
              lambda: nc.elementwise("exp", "q x") >> nc.reduce("sum", "q x -> q"),
              lambda: nc.library.rms_norm(),
              lambda: softmax_contraction_to_unscaled.apply(nc.library.attention()),
              read_thrice]
    return nc.unfused(chains[int(rng.integers(len(chains)))]())


def _fusion_cost(lhs, rhs, m):
    """Fusion removes exactly the round trips inside: k2's loads of what k1 computed (directly or
    through a copy) and k1's saves of outputs no one outside the fused kernel reads."""
    net, k1 = m.net, m.nodes["k1"]
    chosen = set(m.nodes.values())
    loads = sum((numel(net.wires[w].array) for w in net.ins[m.nodes["k2"]]
                 if net.wires[w].src[0] in chosen), sympy.Integer(0))
    saves = sympy.Integer(0)
    for w in net.outs[k1]:
        dst = net.wires[w].dst[0]
        ends = [net.wires[c].dst[0] for c in net.outs[dst]] if dst in chosen and net.nodes[dst].kind == "copy" \
            else [dst]
        if all(e in chosen for e in ends):
            saves += numel(net.wires[w].array)
    lvl = m.box("k1").params["level"]
    got = nc.cost(lhs).H[lvl] - nc.cost(rhs).H[lvl]
    assert sympy.simplify(got - loads - saves) == 0, f"fusion saves {got}, expected {loads + saves}"


kernel_fusion = Rule(
    "kernel_fusion",
    Pattern({"k1": PLAIN_KERNEL}, absorb=_fusion_partner),
    _fusion_rhs,
    conditions=(Condition("same_level", _same_level, "both kernels must run at one level"),),
    obligation=Obligation(_fusion_instance, cost=_fusion_cost),
    doc="""Kernel(f) ; Kernel(g) → Kernel(f ; g): Save ; Load of the intermediates eliminated.

    Paper §1 and Fig. SoftMax_MatMul_algorithm (fusion computes all sequential steps on
    low-level memory).  g may read f's outputs through several wires and through copies (a value
    f computes that others read too is still saved for them, once however many they are: the fused kernel
    saves it and a copy outside hands it to each, as kernel formation saves a value once for all its
    readers).  Cost claim: H drops by exactly g's loads of f's values and f's saves that no one outside
    reads.""")


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
        m.vars[key] = nc.stream(_single(m, "k"), axis, size, sliced=sliced)
    return m.vars[key]


def _streamable(m, sliced: bool = False):
    axis, _ = _stream_axis(m, sliced)
    k = m.box("k")
    if axis is None:
        return ("the kernel can be swept along none of the axes an input and an output carry" if sliced else
                "the kernel is streamable along none of the axes it reduces")
    if not any(axis in a.names for a in k.arg.dom.inside):
        return f"no input of the kernel carries {axis!r}"
    return _refusal(lambda: _streamed(m, sliced))


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
    k = _single(m, "k")
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
        m.vars["_grouped"] = nc.group(_single(m, "k"), axis, size)
    return m.vars["_grouped"]


def _weaved(m):
    axis, size = _group_axis(m)
    if axis is None:
        return "the region is weaved over none of its output axes"
    return _refusal(lambda: _grouped(m))


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
    k = _single(m, "k")
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
