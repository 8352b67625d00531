"""Partitions written out: split ; map ; join, and a stream's first step with its accumulator (§2.3-2.4).

=================================  ===========================================================================
rule                               lhs → rhs
=================================  ===========================================================================
``group_split_join``               weave_a(F) → split_a ; (F[a↦a₁] ⊗ F[a↦a₂]) ; join_a   (un-weaved inputs copied)
``stream_decomposition``           F(x) → B(F(x₁), F(x₂))  for F reducing a with a monoid accumulator B
                                   (contraction: +, max: max, min: min)
``online_softmax_decomposition``   SoftMax(x)·v → the two-chunk online form of Table 4:
                                   (s₁, μ₁, ·, z₁) = SoftMax₁(x₁, Initialize) ; (s₂, μ₂, δ, z₂) = SoftMax₁(x₂, μ₁, z₁)
                                   ; (δ·(s₁·v₁) + s₂·v₂) / z₂
=================================  ===========================================================================

These are the equations behind ``group_partition`` and ``stream_partition`` (paper Figs.
weaved_algorithm, streaming_condition, streamable_contraction, streamable_softmaxcontraction):
applied recursively they give the ``a/g`` groups and the ``b/s`` trips.  They split a concrete
axis at ``first`` (a rule parameter; default: half).

>>> import napkin_cat as nc
>>> mm = nc.einsum("a b, b c -> a c", a=2, b=6, c=3)
>>> two = stream_decomposition.apply(mm)
>>> [b.name for b in two.boxes if b.name in ("split", "·", "add")]
['split', 'split', '·', '·', 'add']
>>> bool(nc.equivalent(mm, two))
True
"""
from __future__ import annotations

import napkin_cat as nc
from napkin_cat.algorithms.partitions import relabel_axis
from napkin_cat.rewriting.match import Pattern, kind, where
from napkin_cat.rewriting.obligation import shape_of
from napkin_cat.rewriting import Condition, Obligation, Rule, RuleSet
from napkin_cat.syntax.primitive import kind_of
from rewrites.softmax import SAME_FORMAT, SAME_ORDER, SURVIVES, WEAVED, binary, bind_softmax, online_box, initialize

COMBINE = {"sum": "add", "max": "max", "min": "min"}


def _sig(arr) -> str:
    return " ".join(arr.names) or "()"   # () is an array without axes


def _sizes(arr) -> dict:
    return {a.name: a.size for a in arr.axes}


def _split(arr, axis, first):
    rest = arr.axis(axis).size - first
    return nc.split(_sig(arr), along=axis, parts=(first, rest), level=arr.level, dtype=arr.dtype, sizes=_sizes(arr))


def _join(arr, axis, first):
    rest = arr.axis(axis).size - first
    return nc.join(_sig(arr), along=axis, parts=(first, rest), level=arr.level, dtype=arr.dtype, sizes=_sizes(arr))


def _single(box):
    return nc.Diagram.id(box.dom).then(box)


def _first(m, size):
    first = m.params.get("first")
    return size // 2 if first is None else int(first)


def _concrete(axis_of):
    def test(m):
        axis = axis_of(m)
        if axis is None:
            return "no axis to split"
        arrays = [a for a in (*m.node(m.vars["var"]).dom, *m.node(m.vars["var"]).cod) if axis in a.names]
        size = arrays[0].axis(axis).size
        if not isinstance(size, int) or size < 2:
            return f"axis {axis!r} has size {size}; splitting needs a concrete size of at least 2"
        first = _first(m, size)
        return 0 < first < size or f"cannot split {axis!r} = {size} at {first}"
    return test


def _split_inputs(b, ins, node, var, axis, first):
    """Per input port: (part 1, part 2) wires, or the same wire twice when it lacks ``axis``."""
    parts = []
    for p, arr in enumerate(node.dom):
        w = ins[(var, p)]
        parts.append(b(_split(arr, axis, first), w) if axis in arr.names else (w, w))
    return parts


# ---------------------------------------------------------------------- group partition, written out
def _weave_axis(m):
    spec = m.spec("f")
    axis = m.params.get("axis")
    if axis is not None:
        return axis if axis in spec.weave_names else None
    for name in reversed(spec.weave_names):  # outermost first
        sizes = [a.axis(name).size for a in m.node("f").cod if name in a.names]
        if sizes and isinstance(sizes[0], int) and sizes[0] >= 2:
            return name
    return spec.weave_names[-1] if spec.weave_names else None


def _unlocated(m):
    """A box that numbers the weaved axis (a position: its values are the axis's absolute indices) is not split:
    the second part would number its items from 0 again."""
    axis, box = _weave_axis(m), m.box("f")
    locates = kind_of(box.data.kind).locates
    if axis is not None and locates is not None and locates(box) == axis:
        return f"{box.name} numbers {axis!r} by absolute index: its parts would restart at 0"
    return True


def _group_rhs(m):
    axis, box, node = _weave_axis(m), m.box("f"), m.node("f")
    size = next(a.axis(axis).size for a in node.cod)
    first = _first(m, size)
    b, ins = m.wiring()
    parts = _split_inputs(b, ins, node, "f", axis, first)
    outs = []
    for k, n in ((0, first), (1, size - first)):
        y = b(relabel_axis(_single(box), axis, n), *(pp[k] for pp in parts))
        outs.append(y if isinstance(y, tuple) else (y,))
    joined = {("f", j): b(_join(arr, axis, first), outs[0][j], outs[1][j]) for j, arr in enumerate(node.cod)}
    return m.finish(b, joined)


def _weaved_box(net, n):
    return n.kind == "box" and n.spec.kind not in ("load", "save", "split", "join") and bool(n.spec.weave_names)


def _group_instance(rng):
    q, x, d = (int(rng.integers(2, 6)) for _ in range(3))
    choices = [lambda: nc.einsum("q d, x d -> q x", q=q, x=x, d=d), lambda: nc.softmax("q x", over="x", q=q, x=x),
               lambda: nc.elementwise("add", "q d, d -> q d", q=q, d=d), lambda: nc.library.attention(q=q, x=x, d=d),
               lambda: nc.reduce("max", "q x -> q", q=q, x=x)]
    return choices[int(rng.integers(len(choices)))]()


group_split_join = Rule(
    "group_split_join",
    Pattern({"f": where("weaved primitive", _weaved_box)}, bind=lambda m: {"var": "f"}),
    _group_rhs,
    conditions=(Condition("concrete", _concrete(_weave_axis), "the weaved axis must have a concrete size ≥ 2"),
                Condition("unlocated", _unlocated, "the box must not number the weaved axis (a position)")),
    obligation=Obligation(_group_instance),
    doc="""weave_a(F) → split_a ; (F[a↦a₁] ⊗ F[a↦a₂]) ; join_a  (paper Fig. weaved_algorithm).

    A weaved algorithm equals sub-algorithms on partitions of the weaved axis; the
    un-weaved inputs are copied to both.  Recursively applied it is group_partition's Grid.""",
    oriented=False,
)


# ---------------------------------------------------------------------- stream decomposition
def _reduced_axis(m):
    box, node = m.box("f"), m.node("f")
    axis = m.params.get("axis")
    outs = {n for a in node.cod for n in a.names}
    core = [n for a in node.dom for n in a.names if n not in box.data.weave_names and n not in outs]
    if axis is not None:
        return axis if axis in core else None
    for name in core:
        size = next(a.axis(name).size for a in node.dom if name in a.names)
        if isinstance(size, int) and size >= 2:
            return name
    return core[0] if core else None


def _monoid(net, n):
    if n.kind != "box":
        return False
    acc = nc.engine.KINDS[n.spec.kind].accumulator
    return acc is not None and acc.name in COMBINE


def _stream_rhs(m):
    axis, box, node = _reduced_axis(m), m.box("f"), m.node("f")
    size = next(a.axis(axis).size for a in node.dom if axis in a.names)
    first = _first(m, size)
    b, ins = m.wiring()
    parts = _split_inputs(b, ins, node, "f", axis, first)
    y1 = b(relabel_axis(_single(box), axis, first), *(pp[0] for pp in parts))
    y2 = b(relabel_axis(_single(box), axis, size - first), *(pp[1] for pp in parts))
    out = node.cod[0]
    combine = COMBINE[nc.engine.KINDS[box.data.kind].accumulator.name]
    both = nc.elementwise(combine, _sig(out), level=out.level, dtype=out.dtype, sizes=_sizes(out))
    return m.finish(b, {("f", 0): b(both, y1, y2)})


def _stream_instance(rng):
    a, b_, c = (int(rng.integers(2, 6)) for _ in range(3))
    choices = [lambda: nc.einsum("a b, b c -> a c", a=a, b=b_, c=c), lambda: nc.reduce("sum", "a b -> a", a=a, b=b_),
               lambda: nc.reduce("max", "a b -> a", a=a, b=b_), lambda: nc.reduce("min", "a b -> a", a=a, b=b_),
               lambda: nc.einsum("a b, b -> a", a=a, b=b_)]
    return choices[int(rng.integers(len(choices)))]()


stream_decomposition = Rule(
    "stream_decomposition",
    Pattern({"f": where("box with a monoid accumulator", _monoid)}, bind=lambda m: {"var": "f"}),
    _stream_rhs,
    conditions=(Condition("concrete", _concrete(_reduced_axis), "the reduced axis must have a concrete size ≥ 2"),),
    obligation=Obligation(_stream_instance),
    doc="""F(x) → B(F(x₁), F(x₂)) with x = x₁ ++ x₂ and B the accumulator (paper Figs. streaming_condition,
    streamable_contraction: v·w = Σ_{i<s} vᵢwᵢ + Σ_{i≥s} vᵢwᵢ).  Recursively applied it is
    stream_partition's fold.""",
    oriented=False,
)


# ---------------------------------------------------------------------- online softmax, written out
def _online_rhs(m):
    v = m.vars
    axis = v["over"][0]
    scores, c = v["scores"], m.box("c")
    node_c = m.node("c")
    size = scores.axis(axis).size
    first = _first(m, size)
    b, ins = m.wiring()
    S1, S2 = b(_split(scores, axis, first), ins[("s", 0)])
    parts = {p: (b(_split(arr, axis, first), ins[("c", p)]) if axis in arr.names else (ins[("c", p)],) * 2)
             for p, arr in enumerate(node_c.dom) if p != v["port"]}
    s1_scores, s2_scores = S1.array, S2.array
    mu0, z0 = b(initialize(s1_scores, v["over"]), S1)
    s1, mu1, _d1, z1 = b(online_box("softmax_unscaled", s1_scores, v["over"], v["beta"]), S1, mu0, z0)
    s2, _mu2, delta, z2 = b(online_box("softmax_unscaled", s2_scores, v["over"], v["beta"]), S2, mu1, z1)

    def contract(k, s):
        part = first if k == 0 else size - first
        args = [s if p == v["port"] else parts[p][k] for p in range(len(node_c.dom))]
        return b(relabel_axis(_single(c), axis, part), *args)
    y1, y2 = contract(0, s1), contract(1, s2)
    out = v["out"]
    y = b(nc.elementwise("add", _sig(out), level=out.level, dtype=out.dtype, sizes=_sizes(out)),
          b(binary("mul", out, delta.array), y1, delta), y2)
    return m.finish(b, {("c", 0): b(binary("div", out, z2.array), y, z2)})


def _single_axis(m):
    if len(m.vars["over"]) != 1:
        return f"the SoftMax runs over {list(m.vars['over'])}; this form splits one axis"
    return True


def _sums_the_axis(m):
    """The contraction sums the SoftMax's axis away and reads the SoftMax once (the halves then add up)."""
    axis = m.vars["over"][0]
    if axis in m.vars["out"].names:
        return f"the contraction keeps {axis!r}"
    reads = [p for p, src in enumerate(m.net.producers(m.nodes["c"])) if src[0] == m.nodes["s"]]
    return len(reads) == 1 or f"the contraction reads the SoftMax {len(reads)} times"


def _contracts_axis(net, n):
    return n.kind == "box" and n.spec.kind == "contract"


def _online_instance(rng):
    q, x, d = int(rng.integers(1, 4)), int(rng.integers(2, 7)), int(rng.integers(1, 4))
    if rng.integers(2):
        return nc.library.attention(q=q, x=x, d=d)
    return nc.library.multi_head_attention(q=q, x=x, d=d, h=int(rng.integers(1, 3)))


def _extreme(rng, diagram, sizes):
    xs = [rng.normal(size=shape_of(arr, sizes)) for arr in diagram.dom.inside]
    xs[0] = xs[0] * [1.0, 1e2, 1e4][int(rng.integers(3))]
    return xs


online_softmax_decomposition = Rule(
    "online_softmax_decomposition",
    Pattern({"s": kind("softmax"), "c": where("contraction", _contracts_axis)}, [("s", 0, "c", None)],
            bind=lambda m: {**bind_softmax("s")(m), "var": "s"}),
    _online_rhs,
    conditions=(WEAVED, SAME_ORDER, SURVIVES, SAME_FORMAT,
                Condition("one_axis", _single_axis, "the SoftMax must run over one axis"),
                Condition("sums_the_axis", _sums_the_axis,
                          "the contraction must sum the SoftMax's axis away, reading the SoftMax once"),
                Condition("concrete", _concrete(lambda m: m.vars["over"][0]),
                          "the SoftMax axis must have a concrete size ≥ 2")),
    obligation=Obligation(_online_instance, inputs=_extreme),
    doc="""SoftMax(x)·v → (δ·(s₁·v₁) + s₂·v₂)/z₂ with (s₁, μ₁, ·, z₁) = SoftMax₁(x₁, −∞, 0) and
    (s₂, μ₂, δ, z₂) = SoftMax₁(x₂, μ₁, z₁): the online softmax of paper Table 4 (errata D-08) and
    Appendix "Fusion of SoftMax-Contraction", one step of the stream written out.""",
    oriented=False,
)

RULES = RuleSet((group_split_join, stream_decomposition, online_softmax_decomposition))
