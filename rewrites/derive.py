"""Derivations: FlashAttention and tiled matmul reached from their functions by rules alone (§3).

Each derivation is a replayable :class:`~napkin_cat.rewriting.trace.Derivation` whose trace
lists the rules applied:

1. ``kernel_formation`` to a fixpoint: every primitive its own kernel (the unfused baseline);
2. ``kernel_fusion`` to a fixpoint: one kernel, the intermediates' round trips eliminated;
3. ``stream_partition`` along the contracted axis (streamability derived by the fusion theorem);
4. ``group_partition`` along every output axis but the feature axis (queries, heads, groups).

The axes are read off the diagram, not named per algorithm: the streamed axis is the
one the algorithm contracts away; the grouped axes are the output's weaves.

>>> import napkin_cat as nc
>>> r = flash_attention(nc.library.attention())
>>> [s.rule for s in r.trace]  # doctest: +NORMALIZE_WHITESPACE
['kernel_formation', 'kernel_formation', 'kernel_formation', 'kernel_fusion', 'kernel_fusion',
 'stream_partition', 'group_partition']
>>> nc.optimal(nc.cost(r.diagram)).H
2*d*q + 4*d**2*q*x/M
"""
from __future__ import annotations

from napkin_cat.errors import RewriteError
from napkin_cat.rewriting import Derivation, Trace, rewrite
from rewrites.partition import group_partition, kernel_formation, kernel_fusion, stream_partition


def _chain(start, stages) -> Derivation:
    d, steps, rules = start, [], []
    for ruleset, strategy in stages:
        r = rewrite(d, ruleset, strategy)
        steps += list(r.trace.steps)
        rules += [rule for rule in r.trace.rules if rule.name not in {x.name for x in rules}]
        d = r.diagram
    from napkin_cat.rewriting import RuleSet
    return Derivation(start, d, Trace(tuple(steps), RuleSet(tuple(rules))))


def streamed_axis(diagram) -> str:
    """The axis the algorithm contracts away last (x for attention, b for matmul)."""
    out_names = {n for a in diagram.cod.inside for n in a.names}
    for box in reversed(diagram.boxes):
        spec = getattr(box, "data", None)
        if getattr(spec, "kind", None) == "contract":
            gone = [n for a in box.dom.inside for n in a.names if n not in box.cod.inside[0].names]
            gone = [n for n in gone if n not in out_names]
            if gone:
                return gone[0]
    raise RewriteError("the algorithm contracts no axis away, so there is nothing to stream")


def grouped_axes(diagram, keep_last: bool = True) -> list:
    """The output's axes to distribute over groups: all but the trailing feature axis, innermost first."""
    names = list(diagram.cod.inside[0].names)
    return list(reversed(names[:-1] if keep_last else names))


def _partition(function, *, level, stream_axis, group_axes, tile_names) -> Derivation:
    stages = [([kernel_formation.using(level=level)], "fixpoint"), ([kernel_fusion], "fixpoint"),
              ([stream_partition.using(axis=stream_axis, size=tile_names(stream_axis, "s"))],
               ["stream_partition"])]
    for a in group_axes:
        stages.append(([group_partition.using(axis=a, size=tile_names(a, "g"))], ["group_partition"]))
    return _chain(function, stages)


def _names(axis, prefix):
    return f"{prefix}_{axis}"


def flash_attention(attention, *, level: int = 1) -> Derivation:
    """FlashAttention from (multi-head, grouped-query) attention by rules alone (§3.2, Figs. mha, gqa)."""
    return _partition(attention, level=level, stream_axis=streamed_axis(attention),
                      group_axes=grouped_axes(attention), tile_names=_names)


def tiled_matmul(matmul, *, level: int = 1) -> Derivation:
    """Square-tiled matmul from the matmul function by rules alone (§3.1): stream b, group a and c."""
    return _partition(matmul, level=level, stream_axis=streamed_axis(matmul),
                      group_axes=list(reversed(matmul.cod.inside[0].names)), tile_names=_names)
