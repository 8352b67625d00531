"""Cost-guided fusion past the cap: kernels of a winning split joined while a join lowers H*.

Where a form's kernels are capped in size (its space holds more distinct blocks than the search costs exactly,
:class:`~napkin_cat.search.paths.Space`), the cheapest split is grown: two kernels where one feeds the other
(:func:`grow`), or two that read one value (:func:`join_siblings`), are joined while the joined kernel at its best
partition moves less than the two apart, the join that saves the most first (:func:`best_join`), and only where the
joined split still has an order (:func:`joinable`, :func:`ordered`) and the union is convex (one kernel can hold it).

>>> import napkin_cat as nc
>>> from napkin_cat.search.blocks import OpGraph
>>> g = OpGraph(nc.engine.to_netlist(nc.library.attention()))      # Q·Kᵀ (1) → softmax (2) → ·V (4)
>>> feeds(g, 1, 2), feeds(g, 1, 4), ordered(g, [4, 2, 1])
(True, False, [1, 2, 4])
"""
from __future__ import annotations

import heapq

from napkin_cat.search.bitsets import bits
from napkin_cat.search.choice import Block
from napkin_cat.search.paths import best_option


def feeds(graph, x: int, y: int) -> bool:
    """Some operation of ``x`` feeds one of ``y`` directly (:meth:`~napkin_cat.search.blocks.OpGraph.successors`)."""
    return bool(graph.successors(x) & y)


def is_convex(graph, block: int) -> bool:
    """No path leaves ``block`` and comes back into it (:meth:`~napkin_cat.search.blocks.OpGraph.convex`, kept per
    block on the graph)."""
    return graph.convex(block)


def ordered(graph, blocks, done: int = 0) -> list | None:
    """The blocks in an order where each comes after those it reads (None if their quotient has a cycle, or a block
    reads an operation no block holds and ``done`` does not): of the blocks whose reads are done, the earliest in
    ``blocks`` first.  ``done``: the operations computed before (a sub-range of a split: the kernels before it).

    Kahn's order on the quotient, the ready blocks kept in a heap by their place in ``blocks``: each block's reads
    are gathered once, so the order costs the operations and the quotient's edges, not a scan of every block left
    per block placed (the same order: the scan from the front places the earliest ready block).

    >>> import napkin_cat as nc
    >>> from napkin_cat.search.blocks import OpGraph
    >>> g = OpGraph(nc.engine.to_netlist(nc.library.attention()))      # Q·Kᵀ (1), softmax (2), ·V (4)
    >>> ordered(g, [0b100, 0b001, 0b010]), ordered(g, [0b101, 0b010]), ordered(g, [4, 2]), ordered(g, [4, 2], done=1)
    ([1, 2, 4], None, None, [2, 4])
    """
    owner = {i: n for n, b in enumerate(blocks) for i in bits(b)}
    waiting, readers = [0] * len(blocks), [[] for _ in blocks]
    for n, b in enumerate(blocks):
        need = 0
        for i in bits(b):
            need |= graph.preds[i]
        need &= ~b & ~done
        reads = set()
        for i in bits(need):
            if i not in owner:
                return None                  # (never done: the scan would find no block ready)
            reads.add(owner[i])
        waiting[n] = len(reads)
        for m in reads:
            readers[m].append(n)
    ready = [n for n, w in enumerate(waiting) if w == 0]
    heapq.heapify(ready)
    out = []
    while ready:
        n = heapq.heappop(ready)
        out.append(blocks[n])
        for m in readers[n]:
            waiting[m] -= 1
            if waiting[m] == 0:
                heapq.heappush(ready, m)
    return out if len(out) == len(blocks) else None


def best_join(graph, search, pairs, evaluate, k, lower=None, admissible=lambda tag: True):
    """``(saved, tag, (x | y, variant, curve))`` of the pair that saves the most when joined, or None if none saves.

    ``pairs``: ``[(x, y, both, tag)]``, ``both`` the H* of the kernels ``x`` and ``y`` apart; a pair saves
    ``both − H*(x ∪ y)`` (the joined block at its best partition, :func:`best_option`), where that is positive and
    ``admissible(tag)``.  Of equal savings the earliest pair wins.

    ``lower(choice)``, a lower bound of any partition of a block (its compulsory transfers), bounds what a pair can
    save, ``both − lower``, before its joined block is costed: the pairs are costed in decreasing order of that
    bound, and the rest are not once the bound cannot beat the best saving found (nor tie it from an earlier
    pair), so the answer is the one costing every pair gives, and a join that cannot pay is never built.

    >>> import napkin_cat as nc
    >>> from napkin_cat.search.blocks import OpGraph
    >>> from napkin_cat.search.context import Search, KernelCache
    >>> g, search = OpGraph(nc.engine.to_netlist(nc.library.attention())), Search(1, KernelCache())
    >>> sizes = {"q": 64, "x": 64, "d": 16}
    >>> def evaluate(curve, k):
    ...     return curve.at_all(sizes, [2 ** 12])[k][0]
    >>> both = best_option(g, 0b001, search, evaluate, 0)[0] + best_option(g, 0b010, search, evaluate, 0)[0]
    >>> saved, tag, merged = best_join(g, search, [(0b001, 0b010, both, "QK·softmax")], evaluate, 0)
    >>> tag, merged[0], saved == both - best_option(g, 0b011, search, evaluate, 0)[0] > 0
    ('QK·softmax', 3, True)
    >>> best_join(g, search, [(0b001, 0b010, both, "QK·softmax")], evaluate, 0,
    ...           lower=lambda ch: ch.compulsory_at(nc.Sizes(sizes))) == (saved, tag, merged)
    True
    """
    order, floor = range(len(pairs)), [None] * len(pairs)
    if lower is not None:
        floor = [lower(Block(search, graph, x | y)) for x, y, _, _ in pairs]
        bound = [both - f for (_, _, both, _), f in zip(pairs, floor)]
        order = sorted(order, key=lambda n: (-bound[n], n))   # (bound, -n) decreasing: what the best is compared on
    best = None   # (saved, n, tag, merged)
    for n in order:
        x, y, both, tag = pairs[n]
        if lower is not None and (bound[n] <= 0 or (best is not None and (bound[n], -n) < (best[0], -best[1]))):
            break   # neither this pair nor any after it can save more (or as much, earlier)
        got = best_option(graph, x | y, search, evaluate, k, floor[n])
        if got is None:
            continue
        saved = both - got[0]
        if saved > 0 and (best is None or (saved, -n) > (best[0], -best[1])) and admissible(tag):
            best = (saved, n, tag, (x | y, got[1], got[2]))
    return None if best is None else (best[0], best[2], best[3])


def joinable(graph, blocks):
    """``admissible((i, j))``: whether joining ``blocks[i]`` and ``blocks[j]`` (a kernel split, in an order
    :func:`ordered` gives) leaves one that :func:`ordered` can order, read off the quotient's edges made once.

    **Law.** The quotient of the split is acyclic; a cycle after the join passes the joined block, so it was a path
    from one of the two to the other through a third block (from one to itself it was a cycle before).  So the join
    is admissible exactly where neither reaches the other through a third block.  Where a block reads an operation
    no block holds, :func:`ordered` orders nothing, and no join is admissible.

    >>> import napkin_cat as nc
    >>> from napkin_cat.search.blocks import OpGraph
    >>> g = OpGraph(nc.engine.to_netlist(nc.library.attention()))      # Q·Kᵀ (1) → softmax (2) → ·V (4)
    >>> ok = joinable(g, [1, 2, 4])
    >>> ok((0, 1)), ok((1, 2)), ok((0, 2))        # Q·Kᵀ and ·V joined around softmax: a cycle
    (True, True, False)
    """
    owner = {i: n for n, b in enumerate(blocks) for i in bits(b)}
    after = []
    for b in blocks:
        fed = graph.successors(b) & ~b
        after.append({owner[i] for i in bits(fed) if i in owner})
    held = 0
    for b in blocks:
        held |= b
    reads = 0
    for i in bits(held):
        reads |= graph.preds[i]
    if reads & ~held:
        return lambda tag: False

    def through(a, b) -> bool:     # a path a → z → … → b, z a third block
        stack = [z for z in after[a] if z != b]
        seen = set(stack)
        while stack:
            z = stack.pop()
            if b in after[z]:
                return True
            for w in after[z]:
                if w != b and w not in seen:
                    seen.add(w)
                    stack.append(w)
        return False
    return lambda tag: not through(*tag) and not through(tag[1], tag[0])


def _join_greedily(graph, search, found, evaluate, k, may_join, lower=None, partners=None):
    """Join two kernels of a path, the ``i``-th and ``j``-th where ``may_join(i, j, x, y)`` for their blocks and the
    union is convex and one kernel can hold it (:meth:`~napkin_cat.search.blocks.OpGraph.linked`, as the exact space
    asks of its blocks: never both ends of a view, which the construction cannot fuse across), the join that lowers
    H* the most first (the joined block at its best partition, the first pair of equal savings; :func:`best_join`,
    with ``lower``), while one does.

    ``partners(x)``: a mask every ``y`` that ``may_join`` a block ``x`` meets (``may_join`` false elsewhere), so
    only the kernels holding one of its operations are asked, in the order of the path (the pairs, and so the
    first of equal savings, are those asking every ``j`` gives); None: every kernel."""
    H, _, path = found
    path = list(path)
    while True:
        pairs = []
        owner = {o: n for n, p in enumerate(path) for o in bits(p[0])} if partners is not None else None
        every = range(len(path))
        for i in every:
            x = path[i][0]
            js = every if owner is None else sorted({owner[o] for o in bits(partners(x)) if o in owner})
            for j in js:
                y = path[j][0]
                if i == j or not may_join(i, j, x, y) or not is_convex(graph, x | y) or not graph.linked(x | y):
                    continue    # (linked: never both ends of a view in one kernel, OpGraph.apart)
                pairs.append((x, y, evaluate(path[i][2], k) + evaluate(path[j][2], k), (i, j)))

        admissible = joinable(graph, [p[0] for p in path])
        best = best_join(graph, search, pairs, evaluate, k, lower, admissible)
        if best is None:
            return (H, len(path), path)
        saved, (i, j), merged = best
        rest = {p[0]: p for n, p in enumerate(path) if n not in (i, j)}
        rest[merged[0]] = merged
        path = [rest[b] for b in ordered(graph, list(rest))]
        H -= saved


def grow(graph, search, found, evaluate, k, lower=None):
    """Greedy fusion past the cap: join two kernels where one feeds the other and their union is convex, the
    join that lowers H* the most first, while one does (cost-guided ``fuse`` steps).  ``lower``: a lower bound of a
    block's partitions, which spares costing joins that cannot win (:func:`best_join`; the answer is the same)."""
    return _join_greedily(graph, search, found, evaluate, k, lambda i, j, x, y: feeds(graph, x, y), lower,
                          partners=graph.successors)


def join_siblings(graph, search, found, evaluate, k, lower=None):
    """Sibling fusion past the cap: join two kernels of a grown path that no data flow links, directly or through
    other kernels, and that read one value (a graph built with ``join``), where the joined kernel at its best
    partition moves less; the join that saves the most first, while one does (cost-guided ``join`` steps;
    ``lower`` as for :func:`grow`)."""
    if found is None or not any(graph.siblings):
        return found
    return _join_greedily(graph, search, found, evaluate, k, lambda i, j, x, y: i < j and graph.read_together(x, y)
                          and not feeds(graph, x, y) and not feeds(graph, y, x), lower)


__all__ = ["best_join", "feeds", "grow", "is_convex", "join_siblings", "joinable", "ordered"]
