"""A stream inside a stream's trip along another axis: the 2-D tiled loop (issue 22, item 1).

=================  ==========================================================================================
rule               lhs → rhs
=================  ==========================================================================================
``inner_stream``   Kernel(Stream_b(load X ; load Y ; R(X, Y) ; F)) → Kernel(Stream_b(Stream_a(load X ; load Y ;
                   R(X, Y)) ; F))   if R (the reduction cone of a: what reduces a away and what it reads along
                   a) is streamable along a, and the inner stream maps over b
=================  ==========================================================================================

Per slice of ``b`` a loop along ``a`` accumulates the slice's tile (the recursive decomposition of the
reduction along ``a``, paper Fig. recursive_decomposition, run inside the trip along ``b``); the trip's maps
and reducers then read the tile as before.  Fused linear cross-entropy streamed along the vocabulary ``v``
then builds each logits tile by a loop over the hidden axis ``e`` (the 2-D schedule), instead of holding a
whole hidden row of the weight's slice.

Cost claim: an input of ``R`` that lacks ``b`` is read once per ``b``-trip instead of once:
``H(rhs) − H(lhs) = (b/s_b − 1) · Σ numel`` of those inputs, at the level the stream runs.

>>> import napkin_cat as nc
>>> from rewrites.partition import stream_partition
>>> k = stream_partition.using(axis="v", size="s_v").apply(nc.kernel(nc.library.linear_cross_entropy()))
>>> two = inner_stream.using(axis="e", size="s_e").apply(k)
>>> import sympy
>>> n, e, v, s_v = (nc.symbol(a) for a in ("n", "e", "v", "s_v"))
>>> sympy.simplify(nc.cost(two).H[1] - nc.cost(k).H[1] - n * e * (v / s_v - 1))
0
"""
from __future__ import annotations

import sympy

import napkin_cat as nc
from napkin_cat.cost.iocost import numel
from napkin_cat.errors import RewriteError
from napkin_cat.rewriting import Condition, Obligation, Rule, RuleSet
from napkin_cat.rewriting.match import Pattern, where
from napkin_cat.syntax.flat import layers


def _stream_of(kernel):
    """The Stream a kernel's inside is (with its transfers), or None."""
    streams = [b for _, b in layers(kernel.arg) if isinstance(b, nc.Stream)]
    others = [b for _, b in layers(kernel.arg) if isinstance(b, nc.Region) and not isinstance(b, nc.Stream)]
    return streams[0] if len(streams) == 1 and not others else None


def _is_streamed_kernel(net, n) -> bool:
    return n.kind == "region" and isinstance(n.box, nc.Kernel) and _stream_of(n.box) is not None


STREAMED_KERNEL = where("Kernel streamed along one axis", _is_streamed_kernel, nodes=("region",))


def _single(m):
    box = m.box("k")
    return nc.Diagram.id(box.dom).then(box)


def _candidates(m):
    """The axes the kernel's inputs carry other than the one its stream runs along (one its trip may reduce)."""
    k, s = m.box("k"), _stream_of(m.box("k"))
    seen = []
    for arr in k.dom.inside:
        seen += [n for n in arr.names if n != s.axis and n not in seen]
    return seen


def _axis(m):
    """The rule's axis, or else the first candidate along which the inner stream is legal."""
    if "axis" in m.params:
        return m.params["axis"], m.params.get("size", f"s_{m.params['axis']}")
    for a in _candidates(m):
        try:
            nc.stream(_single(m), a, f"s_{a}")
            return a, m.params.get("size", f"s_{a}")
        except RewriteError:
            continue
    return None, None


def _nested(m):
    """``nc.stream`` of the matched kernel along the rule's axis (inside its stream), built once per match."""
    if "_nested" not in m.vars:
        axis, size = _axis(m)
        m.vars["_nested"] = nc.stream(_single(m), axis, size)
    return m.vars["_nested"]


def _legal(m):
    axis, _ = _axis(m)
    if axis is None:
        return "the kernel's trip reduces none of the other axes it reads in a way a stream inside it can"
    if axis == _stream_of(m.box("k")).axis:
        return f"the kernel already streams along {axis!r}: that is a sub-loop (stream_partition), not a 2-D loop"
    try:
        out = _nested(m)
    except RewriteError as e:
        return str(e)
    inner = [b for _, b in layers(_stream_of(out.boxes[0]).arg) if isinstance(b, nc.Stream)]
    return True if inner else f"no stream along {axis!r} was placed inside the trip"


def _instance(rng):
    """A kernel streamed along one axis whose trip reduces another; sizes symbolic or concrete."""
    concrete = bool(rng.integers(2))
    k = (lambda **kw: kw) if concrete else (lambda **kw: {})
    cases = [(lambda: nc.einsum("n e, v e -> n v", **k(n=3, e=5, v=7)) >> nc.reduce("logsumexp", "n v -> n",
                                                                                 **k(n=3, v=7)), "v"),
             (lambda: nc.library.attention(**k(q=4, x=6, d=3)), "x"),
             (lambda: nc.library.mlp(activation="relu", **k(n=3, i=4, f=6, o=2)), "f")]
    build, axis = cases[int(rng.integers(len(cases)))]
    return nc.stream(nc.kernel(build()), axis, f"s_{axis}")


def _moved_again(lhs, rhs, m) -> sympy.Expr:
    """``(b/s_b − 1) · Σ numel`` of the inner stream's inputs that lack ``b`` (the claim)."""
    outer = _stream_of(rhs.boxes[0] if isinstance(rhs.boxes[0], nc.Kernel) else m.box("k"))
    inner = [b for _, b in layers(outer.arg) if isinstance(b, nc.Stream)][0]
    extra = sympy.Integer(0)
    for a in inner.dom.inside:
        if outer.axis not in a.names:
            extra += numel(a)
    return (outer.trips - 1) * extra


def _cost(lhs, rhs, m):
    level = m.box("k").params["level"]
    got = sympy.sympify(nc.cost(rhs).H.get(level, 0)) - sympy.sympify(nc.cost(lhs).H.get(level, 0))
    want = _moved_again(lhs, rhs, m)
    assert sympy.simplify(got - want) == 0, f"the inner stream moves {got} more, expected {want}"


inner_stream = Rule(
    "inner_stream",
    Pattern({"k": STREAMED_KERNEL}),
    _nested,
    conditions=(Condition("inner_reduction", _legal,
                          "the stream's trip must reduce the axis in a cone a stream inside it can run"),),
    obligation=Obligation(_instance, cost=_cost),
    doc="""Kernel(Stream_b(R ; F)) → Kernel(Stream_b(Stream_a(R) ; F)): the reduction cone R of a, with the loads
    of what it reads along a, streamed along a inside each trip along b (the 2-D tiled loop).

    The recursive decomposition (paper Fig. recursive_decomposition) of R along a, inside the trip along b; R
    maps over b, so the trip's slice of its result is made from the trip's slices.  Cost claim: the inputs of R
    that lack b are read once per trip along b: H grows by (b/s_b − 1) times their size.""",
    oriented=False,
)


RULES = RuleSet((inner_stream,))

__all__ = ["inner_stream", "RULES", "STREAMED_KERNEL"]
