"""Derivations: FlashAttention and tiled matmul reached from their functions by rules alone (§3).

Each derivation is a replayable :class:`~napkin_cat.rewriting.trace.Derivation` whose trace
lists the rules applied:

0. ``softmax_contraction_to_unscaled`` to a fixpoint: every SoftMax · contraction in its online
   form SoftMax₁(x, Initialize(x)) · v / z (paper Table 4, Appendix "Fusion of SoftMax-Contraction");
1. ``kernel_formation`` to a fixpoint: every primitive its own kernel (the unfused baseline);
2. ``kernel_fusion`` to a fixpoint: one kernel, the intermediates' round trips eliminated;
3. ``stream_partition`` along the reduced axis the kernel is streamable along (fusion theorem);
4. ``group_partition`` along every axis carried to the outputs as a weave (queries, heads, groups).

The axes are read off the diagram's structure, not named per algorithm nor taken by position:
the streamed axis is one the algorithm reads and sums away (absent from every output) along which
the accumulators and accumulator forms make it streamable; the grouped axes are those every output
carries and every box that sees them maps over.

>>> import napkin_cat as nc
>>> r = flash_attention(nc.library.attention())
>>> [s.rule for s in r.trace]  # doctest: +NORMALIZE_WHITESPACE
['softmax_contraction_to_unscaled', 'kernel_formation', 'kernel_formation', 'kernel_formation',
 'kernel_formation', 'kernel_formation', 'kernel_fusion', 'kernel_fusion', 'kernel_fusion', 'kernel_fusion',
 'stream_partition', 'group_partition']
>>> nc.optimal(nc.cost(r.diagram)).H
2*d*q + 4*d**2*q*x/M
>>> streamed_axis(nc.library.attention()), grouped_axes(nc.library.multi_head_attention())
('x', ['q', 'h'])
"""
from __future__ import annotations

from napkin_cat.algorithms.streaming import analyse
from napkin_cat.errors import RewriteError
from napkin_cat.rewriting import Derivation, Trace, rewrite
from napkin_cat.syntax.wiring import trace_values
from rewrites.partition import group_partition, kernel_formation, kernel_fusion, stream_partition
from rewrites.softmax import softmax_contraction_to_unscaled


def _chain(start, stages) -> Derivation:
    d, steps, rules = start, [], []
    for ruleset, strategy in stages:
        r = rewrite(d, ruleset, strategy)
        steps += list(r.trace.steps)
        rules += [rule for rule in r.trace.rules if rule.name not in {x.name for x in rules}]
        d = r.diagram
    from napkin_cat.rewriting import RuleSet
    return Derivation(start, d, Trace(tuple(steps), RuleSet(tuple(rules))))


def reduced_axes(diagram) -> list:
    """Axes the inputs carry and no output does (summed away inside), in order of first appearance."""
    outs = {n for a in diagram.cod.inside for n in a.names}
    seen = []
    for arr in diagram.dom.inside:
        seen += [n for n in arr.names if n not in outs and n not in seen]
    return seen


def streamed_axis(diagram) -> str:
    """A reduced axis along which the algorithm is streamable (x for attention, b for matmul)."""
    reasons = []
    for axis in reduced_axes(diagram):
        try:
            analyse(diagram, axis)
            return axis
        except RewriteError as e:
            reasons.append(f"{axis!r}: {e}")
    raise RewriteError("the algorithm is streamable along none of the axes it sums away"
                       + (f" ({'; '.join(reasons)})" if reasons else ": it sums no axis away"))


def _weaved_where_seen(diagram, axis) -> bool:
    ops, _, _ = trace_values(diagram)
    return all(axis in box.data.weave_names for box, _, _ in ops
               if any(axis in a.names for a in (*box.dom.inside, *box.cod.inside)))


def grouped_axes(diagram) -> list:
    """Axes every output carries and every box that sees them maps over, innermost first."""
    outs = [a.names for a in diagram.cod.inside]
    common = [n for n in outs[0] if all(n in names for names in outs[1:])]
    return [n for n in reversed(common) if _weaved_where_seen(diagram, n)]


def _partition(function, *, level, stream_axis, group_axes, tile_names, online=()) -> Derivation:
    stages = [(list(online), "fixpoint")] if online else []
    stages += [([kernel_formation.using(level=level)], "fixpoint"), ([kernel_fusion], "fixpoint"),
              ([stream_partition.using(axis=stream_axis, size=tile_names(stream_axis, "s"))],
               ["stream_partition"])]
    for a in group_axes:
        stages.append(([group_partition.using(axis=a, size=tile_names(a, "g"))], ["group_partition"]))
    return _chain(function, stages)


def _names(axis, prefix):
    return f"{prefix}_{axis}"


def flash_attention(attention, *, level: int = 1) -> Derivation:
    """FlashAttention from (multi-head, grouped-query) attention by rules alone (§3.2, Figs. mha, gqa).

    The SoftMax-contraction is first put in its online form by ``softmax_contraction_to_unscaled``;
    the stream then folds it with that rule's accumulator (registered in ``rewrites.softmax``).
    """
    online = rewrite(attention, [softmax_contraction_to_unscaled], "fixpoint").diagram
    return _partition(attention, level=level, stream_axis=streamed_axis(online),
                      group_axes=grouped_axes(attention), tile_names=_names,
                      online=[softmax_contraction_to_unscaled])


def tiled_matmul(matmul, *, level: int = 1) -> Derivation:
    """Square-tiled matmul from the matmul function by rules alone (§3.1): stream b, group a and c."""
    return _partition(matmul, level=level, stream_axis=streamed_axis(matmul),
                      group_axes=grouped_axes(matmul), tile_names=_names)
