"""The search at model scale: one problem per kind of segment, the segments cut where values pass through
global memory anyway.

The kernel splits of a form are chains of down-sets of its data-flow graph (:mod:`.space`); their number
grows with the square of a stack of blocks, so a search over the whole of a 32-block transformer never
ends.  But a transformer's residual stream goes through global memory whatever the split:

* a **seam** is an operation ``p`` with one output that two or more readers take (a value some reader will
  load from global memory unless every reader shares ``p``'s kernel), such that everything downstream of
  ``p`` reads only what is downstream of ``p``, ``p``'s value, or the function's inputs (nothing else
  crosses the cut);
* the seams cut the operations into **segments** (each at least :data:`MIN_SEGMENT` operations); a kernel
  holding ``p`` and all of its readers would hold everything between them, so at scale, where kernels are
  capped anyway (:data:`~napkin_cat.search.paths.BUDGET`), no kernel crosses a seam but by joining the
  kernel that writes the seam's value with one that reads it (**seam fusion**, cost-guided, afterwards);
* isomorphic segments (the same operations wired the same way, :meth:`~.blocks.OpGraph.key`) are **one
  problem**: solved once per derivation (the solutions are its :class:`~napkin_cat.search.context.Search`'s,
  ``search.solved``), the solution moved to every copy by position, so the search is linear in blocks.
* segments that differ only by the names of their axes, every size kept (blocks that name their widths apart, ``f0``,
  ``f1``, …), are one problem as well: cost and optimum commute with a renaming of axes
  (:mod:`~napkin_cat.search.relabelling`), so the solution moves to each renamed copy by position, each kernel at
  its own kernel's partition in the same place, checked there (its H at every point the solved one, else searched).

A form of at most :data:`SEGMENT_AT` operations is searched whole, exactly as before.

>>> import napkin_cat as nc
>>> from napkin_cat.search.blocks import OpGraph
>>> g = OpGraph(nc.engine.to_netlist(nc.library.transformer_block()))
>>> parts, joints = cut(g)
>>> [bin(s).count("1") for s in parts], [g.name(p) for p in joints]     # LN₁ | attention, residual | MLP
([9, 8, 15], ['add', 'add'])
"""
from __future__ import annotations

from napkin_cat.search.blocks import bits
from napkin_cat.search.relabelling import relabelled
from napkin_cat.search.growth import best_join, grow, is_convex, ordered
from napkin_cat.search.paths import Space, shortest_splits

#: forms with more operations than this are searched segment by segment
SEGMENT_AT = 24
#: the fewest operations of a segment (smaller ones join their neighbour)
MIN_SEGMENT = 8
#: blocks (distinct kernels) one segment may cost exactly (as :data:`~napkin_cat.search.paths.BUDGET` for a whole
#: form); beyond, its kernels are capped in size and grown by cost-guided fusion.  Measured on transformer blocks
#: (n = 512, e = 256, f = 1024): one block at 2^12, 2^16, 2^20 gives H = 28.45M, 7.61M, 1.31M at 100 (the whole
#: form searched unsegmented: 28.47M, 7.81M, 1.58M); 60 halves one block's time but costs a stack 4% more H per
#: block (its segments that join one block's MLP to the next one's norm are larger).
SEGMENT_BUDGET = 100


def _descendants(graph) -> tuple[list, list]:
    """Per operation: the operations downstream of it, and every operation those read (bit masks)."""
    n = len(graph)
    down, read = [0] * n, [0] * n
    for i in reversed(range(n)):
        d = r = 0
        for j in bits(graph.succs[i]):
            d |= (1 << j) | down[j]
            r |= graph.preds[j] | read[j]
        down[i], read[i] = d, r
    return down, read


def seams(graph) -> list:
    """The seam operations of ``graph`` (module docstring), in topological order, nested: each downstream of
    the one before."""
    down, read = _descendants(graph)
    out = []
    for p in range(len(graph)):
        nid = graph.nodes[p]
        ws = graph.net.outs[nid]
        if len(ws) != 1 or not down[p]:
            continue
        if len(graph.readers(ws[0])) < 2:
            continue
        if read[p] & ~(down[p] | 1 << p):
            continue
        if out and not down[out[-1]] >> p & 1:
            continue
        out.append(p)
    return out


def segments(graph, least: int | None = None) -> list:
    """The segments of ``graph`` (bit masks, upstream first) cut at its seams, each of at least ``least``
    operations; one segment (the whole) when there is no cut."""
    return cut(graph, least)[0]


def cut(graph, least: int | None = None) -> tuple[list, list]:
    """``(segments, seams)``: :func:`segments` and the seam operation at each boundary between them."""
    least = MIN_SEGMENT if least is None else least
    down, _ = _descendants(graph)
    parts, at, rest = [], [], graph.full
    for p in seams(graph):
        parts.append(rest & ~down[p])
        at.append(p)
        rest = down[p]
    parts.append(rest)
    merged, kept = [parts[0]], []
    for p, s in zip(at, parts[1:]):
        if bin(merged[-1]).count("1") < least:
            merged[-1] |= s
        else:
            merged.append(s)
            kept.append(p)
    if len(merged) > 1 and bin(merged[-1]).count("1") < least:
        last = merged.pop()
        merged[-1] |= last
        kept.pop()
    return merged, kept


def _relative(path, segment) -> tuple:
    """A path's blocks as masks over the segment's operations by rank (bit j: the j-th operation of it)."""
    rank = {i: k for k, i in enumerate(bits(segment))}
    return tuple((sum(1 << rank[i] for i in bits(block)), v, curve) for block, v, curve in path)


def _mask(block, segment) -> int:
    """A block given by rank within ``segment`` as a mask over the graph's operations."""
    ops = bits(segment)
    return sum(1 << ops[j] for j in bits(block))


def _absolute(rel, segment) -> list:
    ops = bits(segment)
    return [(sum(1 << ops[j] for j in bits(block)), v, curve) for block, v, curve in rel]


def solve_segment(graph, segment, search, points, evaluate, lower, context, options=lambda ch: ch.options,
                  tie=None, sizes=None, rows=None, fits=None, whole=False) -> list:
    """Per point: ``(H, kernels, path)`` of the cheapest kernel split of ``segment`` alone, or None; solved once
    per kind of segment in a derivation (kept in ``search.solved``, :class:`~napkin_cat.search.context.Search`;
    ``context``: what else the costs depend on, e.g. the book's roles, sizes, memories and a requirement;
    ``options``, ``tie``, ``rows``, ``fits``: the partitions tried, what breaks a tie, the tables of both and where a
    block may fit, as :func:`~napkin_cat.search.paths.shortest_splits`).

    With numeric ``sizes``, a segment that differs from one solved only by the names of its axes (sizes kept,
    :func:`~napkin_cat.search.relabelling.relabelled`) is not searched again: cost and optimum commute with a
    renaming of axes, so the solved split is moved to it by position, each kernel at the partition of its own
    kernel's :class:`~napkin_cat.search.choice.Choice` in the same place, and kept only where its H at every point
    is the solved one (else the segment is searched)."""
    key = (graph.key(segment), context)
    found = search.solved.get(key)
    if found is None:
        alike = None if sizes is None else relabelled(graph, segment, sizes)
        alike = None if alike is None else (alike, context)
        moved = search.solved.get(alike) if alike is not None else None
        if moved is not None:
            found = _renamed(graph, segment, search, moved, evaluate, options)
            search.renamed += found is not None
        if found is None:
            found = _solve(graph, segment, search, points, evaluate, lower, options, tie, rows, fits, whole)
            search.searched += 1
            if alike is not None and alike not in search.solved:
                search.solved[alike] = [None if f is None else (f[0], f[1], _placed(graph, segment, search, f[2],
                                                                                      options))
                                        for f in found]
        search.solved[key] = found
    return [None if f is None else (f[0], f[1], _absolute(f[2], segment)) for f in found]


def _solve(graph, segment, search, points, evaluate, lower, options, tie, rows=None, fits=None, whole=False) -> list:
    space = graph.segment_spaces.get((segment, SEGMENT_BUDGET))
    if space is None:     # a segment's space depends on the graph, the segment and the budget alone
        space = graph.segment_spaces[(segment, SEGMENT_BUDGET)] = Space(graph, budget=SEGMENT_BUDGET, within=segment)
    got = shortest_splits(space, search, points, evaluate, lower, options, tie, rows, fits, whole)
    if not space.exact:     # kernels capped in size inside the segment: grown by cost-guided fusion
        got = [g if g is None else grow(graph, search, g, evaluate, k, lower) for k, g in enumerate(got)]
    return [None if g is None else (g[0], g[1], _relative(g[2], segment)) for g in got]


def _placed(graph, segment, search, rel, options):
    """A solved relative path with each curve replaced by its place among its block's options (None: not found)."""
    out = []
    for block, _, curve in rel:
        listed = options(search.choice(graph, _mask(block, segment)))
        place = next((i for i, (_, c) in enumerate(listed) if c is curve), None)
        if place is None:
            return None
        out.append((block, place))
    return tuple(out)


def _renamed(graph, segment, search, moved, evaluate, options):
    """The solved split ``moved`` (blocks by rank, partitions by place) on ``segment``: its own kernels' partitions
    at those places, or None where a point's H differs from the solved one (the law did not hold: search)."""
    out = []
    for k, f in enumerate(moved):
        if f is None:
            out.append(None)
            continue
        H, kernels, placed = f
        if placed is None:
            return None
        rel = []
        for block, place in placed:
            listed = options(search.choice(graph, _mask(block, segment)))
            if place >= len(listed):
                return None
            rel.append((block, *listed[place]))
        at = [evaluate(c, k) for _, _, c in rel]
        if any(h is None for h in at) or sum(at) != H:
            return None
        out.append((H, kernels, tuple(rel)))
    return out


def segmented_shortest(graph, parts, joints, search, points, evaluate, lower, context,
                       options=lambda ch: ch.options, tie=None, sizes=None, rows=None, fits=None, whole=False) -> list:
    """Per point: ``(H, kernels, path)`` over the segments ``parts``, joined at the seams ``joints`` (the seam
    operation between each two) where that saves; ``sizes``, ``rows``, ``fits``: as :func:`solve_segment`."""
    per = [solve_segment(graph, s, search, points, evaluate, lower, context, options, tie, sizes, rows, fits, whole)
           for s in parts]
    out = []
    for k in range(len(points)):
        if any(sol[k] is None for sol in per):
            out.append(None)
            continue
        H = sum(sol[k][0] for sol in per)
        path = [entry for sol in per for entry in sol[k][2]]
        out.append(_join_seams(graph, joints, search, (H, len(path), path), evaluate, k, lower))
    return out


def _join_seams(graph, joints, search, found, evaluate, k, lower=None):
    """Seam fusion: join the kernel that writes a seam's value with a kernel that reads it, where the joined
    kernel (convex, one kernel can hold it: :meth:`~napkin_cat.search.blocks.OpGraph.linked`, never a reader
    through a view; costed at its best partition) moves less; repeated while one does.  Only the kernels at
    each seam are looked at, so this is linear in the seams; ``lower`` spares costing joins that cannot win
    (:func:`~napkin_cat.search.growth.best_join`)."""
    H, _, path = found
    path = list(path)
    for p in joints:
        while True:
            entry = {i: n for n, (block, _, _) in enumerate(path) for i in bits(block)}
            i = entry[p]
            x, _, cx = path[i]
            readers = {entry[r] for r in bits(graph.succs[p])} - {i}
            pairs = [(x, path[j][0], evaluate(cx, k) + evaluate(path[j][2], k), j) for j in sorted(readers)
                     if is_convex(graph, x | path[j][0]) and graph.linked(x | path[j][0])]   # (no view inside)
            best = best_join(graph, search, pairs, evaluate, k, lower)
            if best is None:
                break
            saved, j, merged = best
            lo, hi = min(i, j), max(i, j)
            by = {q[0]: q for n, q in enumerate(path[lo:hi + 1], lo) if n not in (i, j)}
            by[merged[0]] = merged
            before = 0     # (the kernels before the range are computed before it)
            for q in path[:lo]:
                before |= q[0]
            order = ordered(graph, list(by), before)
            if order is None:
                break
            path[lo:hi + 1] = [by[b] for b in order]
            H -= saved
    return H, len(path), path
