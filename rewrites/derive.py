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
from napkin_cat.errors import MemoryLimitError, RewriteError
from napkin_cat.rewriting import Derivation, RuleSet, Trace, rewrite
from napkin_cat.search.curves import Curve
from napkin_cat.search.envelope import reference_sizes
from napkin_cat.syntax.sizes import as_sizes
from napkin_cat.syntax.wiring import trace_values
from rewrites.partition import group_partition, kernel_formation, kernel_fusion, stream_partition
from rewrites.softmax import softmax_contraction_to_unscaled


def _chain(start, stages, prefix: Derivation | None = None) -> Derivation:
    """``start`` rewritten by each stage in turn; ``prefix``: a derivation of ``start`` the stages continue."""
    d, steps, rules = (prefix.diagram, list(prefix.trace.steps), list(prefix.trace.rules)) if prefix is not None \
        else (start, [], [])
    for ruleset, strategy in stages:
        r = rewrite(d, ruleset, strategy)
        steps += list(r.trace.steps)
        rules += [rule for rule in r.trace.rules if rule.name not in {x.name for x in rules}]
        d = r.diagram
    return Derivation(start, d, Trace(tuple(steps), RuleSet(tuple(rules))))


def reduced_axes(diagram) -> list:
    """Axes the inputs carry and no output does (summed away inside), in order of first appearance."""
    outs = {n for a in diagram.cod.inside for n in a.names}
    seen = []
    for arr in diagram.dom.inside:
        seen += [n for n in arr.names if n not in outs and n not in seen]
    return seen


def streamable_axes(diagram) -> list:
    """The reduced axes along which the algorithm is streamable (``['x']`` for attention, ``['b']`` for matmul),
    or RewriteError saying why there is none."""
    reasons, found = [], []
    for axis in reduced_axes(diagram):
        try:
            analyse(diagram, axis)
            found.append(axis)
        except RewriteError as e:
            reasons.append(f"{axis!r}: {e}")
    if not found:
        raise RewriteError("the algorithm is streamable along none of the axes it sums away"
                           + (f" ({'; '.join(reasons)})" if reasons else ": it sums no axis away"))
    return found


def streamed_axis(diagram) -> str:
    """The first reduced axis along which the algorithm is streamable (x for attention, b for matmul)."""
    return streamable_axes(diagram)[0]


#: Memories at which a named derivation compares its candidate axes when it is given none: 2^10 … 2^20.
MEMORIES = tuple(2 ** k for k in range(10, 21))


def _by_cost(function, candidates, build, memory, sizes) -> str:
    """The candidate axis whose fused, partitioned kernel moves least (its exact integer optimum), at ``sizes``
    (else reference sizes: 1024, 1088, … per axis) and ``memory`` (else each of 2^10 … 2^20: the axis that wins
    at most of them, or with no memory limit where none fits in those); MemoryLimitError pointing to ``nc.derive``
    when none fits the memory given."""
    given = dict(as_sizes(sizes).of(function)) if sizes is not None else {}
    at = {**reference_sizes(function), **given}
    curves = [Curve(build(axis).diagram) for axis in candidates]

    def winners(memories):
        wins = [0] * len(candidates)
        costs = [[h for h, _ in c.at_all(at, memories)] for c in curves]
        for k in range(len(memories)):
            fits = [(hs[k], i) for i, hs in enumerate(costs) if hs[k] is not None]
            if fits:
                wins[min(fits)[1]] += 1
        return wins
    wins = winners([int(memory)] if memory is not None else list(MEMORIES))
    if not any(wins) and memory is not None:
        raise MemoryLimitError(f"the function streams along {candidates}, and the fused kernel fits memory {memory} "
                               f"along none of them at sizes {at}: nc.derive(f, memory=..., sizes=...) searches "
                               f"every kernel split")
    if not any(wins):
        wins = winners([UNLIMITED])
    return candidates[max(range(len(candidates)), key=lambda i: (wins[i], -i))]


#: A memory no kernel exceeds: the comparison where no candidate fits the memories tried.
UNLIMITED = 2 ** 62


def _weaved_where_seen(diagram, axis) -> bool:
    ops, _, _ = trace_values(diagram)
    return all(axis in box.data.weave_names for box, _, _ in ops
               if any(axis in a.names for a in (*box.dom.inside, *box.cod.inside)))


def grouped_axes(diagram) -> list:
    """Axes every output carries and every box that sees them maps over, innermost first."""
    outs = [a.names for a in diagram.cod.inside]
    common = [n for n in outs[0] if all(n in names for names in outs[1:])]
    return [n for n in reversed(common) if _weaved_where_seen(diagram, n)]


def _fused(function, *, level, online=()) -> Derivation:
    """``function`` in one kernel: the ``online`` rules, then kernel formation and fusion, each to a fixpoint."""
    stages = [(list(online), "fixpoint")] if online else []
    stages += [([kernel_formation.using(level=level)], "fixpoint"), ([kernel_fusion], "fixpoint")]
    return _chain(function, stages)


def _partition(function, *, level, stream_axis, group_axes, tile_names, online=(), fused=None) -> Derivation:
    """The fused kernel (``fused``, else :func:`_fused`) streamed along ``stream_axis`` and grouped along
    ``group_axes``."""
    stages = [([stream_partition.using(axis=stream_axis, size=tile_names(stream_axis, "s"))], ["stream_partition"])]
    for a in group_axes:
        stages.append(([group_partition.using(axis=a, size=tile_names(a, "g"))], ["group_partition"]))
    return _chain(function, stages, prefix=fused if fused is not None else _fused(function, level=level,
                                                                                 online=online))


def _builder(function, *, level, online=()):
    """``build(axis)``: :func:`_partition` along ``axis`` and every grouped axis, each axis's built once, from one
    fused kernel (the candidates of :func:`_by_cost` and the chosen one share it: the fusion is most of a build)."""
    fused, built = [], {}

    def build(axis):
        if axis not in built:
            if not fused:
                fused.append(_fused(function, level=level, online=online))
            built[axis] = _partition(function, level=level, stream_axis=axis, group_axes=grouped_axes(function),
                                     tile_names=_names, online=online, fused=fused[0])
        return built[axis]
    return build


def _names(axis, prefix):
    return f"{prefix}_{axis}"


def _chosen_axis(function, prepared, build, memory, sizes) -> str:
    """The one axis the fused kernel streams along; with several, the one that moves least (:func:`_by_cost`)."""
    candidates = streamable_axes(prepared)
    if len(candidates) == 1:
        return candidates[0]
    return _by_cost(function, candidates, build, memory, sizes)


def flash_attention(attention, *, level: int = 1, memory=None, sizes=None) -> Derivation:
    """FlashAttention from (multi-head, grouped-query) attention by rules alone (§3.2, Figs. mha, gqa).

    The SoftMax-contraction is first put in its online form by ``softmax_contraction_to_unscaled``;
    the stream then folds it with that rule's accumulator (registered in ``rewrites.softmax``).

    Outside its case (a function streamable along several of the axes it sums away, such as an MLP's input
    and hidden axes) the streamed axis is chosen by cost: the one whose fused kernel moves least at ``sizes``
    and ``memory`` (reference sizes and 2^10 … 2^20 when not given); when it fits along none, a
    MemoryLimitError points to ``nc.derive``, which also splits the function into kernels.
    """
    online = rewrite(attention, [softmax_contraction_to_unscaled], "fixpoint").diagram
    build = _builder(attention, level=level, online=[softmax_contraction_to_unscaled])
    return build(_chosen_axis(attention, online, build, memory, sizes))


def tiled_matmul(matmul, *, level: int = 1, memory=None, sizes=None) -> Derivation:
    """Square-tiled matmul from the matmul function by rules alone (§3.1): stream b, group a and c (the
    streamed axis chosen by cost where there are several, as :func:`flash_attention` chooses it)."""
    build = _builder(matmul, level=level)
    return build(_chosen_axis(matmul, matmul, build, memory, sizes))
