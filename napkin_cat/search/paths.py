"""Kernel splits as shortest paths over the down-sets of a data-flow graph, with each block costed once.

For one form, a kernel split is a chain of down-sets (:mod:`.blocks`); :class:`Space` holds the edges between
down-sets (a block of at most ``cap`` operations each), :func:`shortest_splits` the cheapest chain per memory, and
:func:`grow` the cost-guided fusion of a winner whose kernels were capped.  A block's partitions and cost
curves (:class:`Choice`) are costed once per canonical form: the functions here take the derivation's
:class:`~napkin_cat.search.context.Search` and ask it for a block's Choice (``search.choice(graph, block)``), so
equal kernels anywhere share one, in every call that shares the search's kernel cache.

>>> import napkin_cat as nc
>>> from napkin_cat.search.blocks import OpGraph
>>> s = Space(OpGraph(nc.engine.to_netlist(nc.library.attention())))
>>> len(s.downs), s.cap, s.exact
(4, 3, True)
"""
from __future__ import annotations

import heapq
import math

from napkin_cat.errors import RewriteError
from napkin_cat.search.blocks import bits
from napkin_cat.search.choice import Block, Choice, counted  # noqa: F401  (Choice, counted: read from here too)
from napkin_cat.search.least_memory import least_fitting_memory, least_need  # noqa: F401  (read from here too)

_UNREAD = object()    # a partition of a block in shortest_splits' tables whose rows are not read yet


def playable(roles):
    """Whether a partition's curve is one the rule book can build (a sweep needs a rule playing ``sweep``, a
    2-D loop one playing ``nest``, a split stream one playing ``split``, and a sweep too when its outer stream
    is one)."""
    roles = set(roles) | {"stream"}
    return lambda curve: curve.role in roles and ("sweep" in roles or not curve.sliced)


#: Blocks (distinct kernels) a form may cost exactly; beyond, kernels are capped in size and grown greedily.
BUDGET = 100
#: Blocks linked only by a value their parts read (sibling fusion) or a view they hold inside a form may cost
#: besides, smallest first.
SIBLING_BUDGET = 25


class Space:
    """The kernel splits of one form (or of the operations ``within`` it, a segment): edges ``(D, D', block)``
    between down-sets, blocks of at most ``cap`` operations (plus the whole, so that full fusion is always
    tried).  A block is connected by data flow passing no view (:meth:`~napkin_cat.search.blocks.OpGraph.direct`);
    blocks linked otherwise, by a value their parts read (sibling fusion, in a graph built with ``join``) or by a
    view they hold inside (its producer and every reader), are edges too, under a budget of their own
    (:data:`SIBLING_BUDGET`), where the data-flow blocks fit the budget (the space is exact): the data-flow blocks,
    the cap and exactness are what they are without them, and a capped space (grown greedily from its best split,
    whose joins may hold a view inside) is unchanged but for the whole, tried where it is one kernel.

    The edges are grown from each down-set one operation at a time (``D'`` = ``D`` and operations whose inputs
    are computed), size by size, until the kernels of the next size would pass the budget of distinct kernels:
    a long chain costs its length times the cap, not its length squared.  With ``units`` (masks,
    :meth:`~napkin_cat.search.blocks.OpGraph.units`), only the down-sets holding each unit whole or not at all
    are ends of edges (each recomputed copy in its reader's kernel).
    """

    def __init__(self, graph, budget: int | None = None, within: int | None = None, units=None):
        budget = BUDGET if budget is None else budget
        self.graph = graph
        full = self.full = graph.full if within is None else within
        if not full:   # (no block to split: nc.derive refuses such a diagram before it asks for a space)
            raise RewriteError(f"a kernel split needs an operation; {'the form' if within is None else 'within=0'} "
                               f"has none (a rename or a view alone is no operation: there is nothing to derive)")
        self.downs, steps, takes = graph.grown(within, units)
        allowed = None if units is None else set(self.downs)
        rank = {d: k for k, d in enumerate(self.downs)}
        frontier = {d: {0} for d in self.downs if allowed is None or d in allowed}
        edges, keys, self.cap, self.exact, size = [], set(), 0, True, 0
        # blocks linked otherwise than by data flow passing no view (by a value read, or a view held inside): own budget
        joined, joining, linked = set(), any(graph.siblings) or bool(graph.views), []
        connected = {}   # an extension -> whether data flow connects it (graph.connected)
        linking = {}     # an extension data flow does not connect -> whether a value read links it (graph.linked)
        nexts = {}       # a down-set -> the steps it takes next, as masks (read off takes once)
        while frontier:
            size += 1
            grown, layer, siblings = {}, [], []
            more = set(keys)    # the distinct kernels with this size's blocks: past the budget, the size is dropped
            over = False
            for d, exts in frontier.items():
                out = set()
                for e in exts:
                    done = d | e
                    can = nexts.get(done)
                    if can is None:   # (the steps the down-set d | e takes next: one list per down-set, met under
                        can = nexts[done] = [steps[k][0] for k in bits(takes[done])]   # many (d, e))
                    for u in can:
                        out.add(e | u)
                if out:
                    grown[d] = out
                    for e in out:
                        if allowed is not None and not (d in allowed and d | e in allowed):
                            continue
                        flows = connected.get(e)
                        if flows is None:   # (asked under every down-set the extension grows from)
                            flows = connected[e] = graph.direct(e)
                            if flows:
                                more.add(graph.key(e))
                        if flows:
                            layer.append((d, d | e, e))
                        elif joining:
                            links = linking.get(e)
                            if links is None:
                                links = linking[e] = graph.linked(e)
                            if links:
                                siblings.append((d, d | e, e))
                    if len(more) > budget and size > 1:
                        over = True    # (the rest of the size is not grown: it would be dropped whole)
                        break
            if layer:
                if over or len(more) > budget:
                    self.cap, self.exact = max(1, size - 1), False
                    if size == 1:
                        edges += layer
                    break
                keys = more
                edges += layer
                self.cap = size
            if siblings:
                more = joined | {graph.key(e) for _, _, e in siblings}
                joining = len(more) <= SIBLING_BUDGET
                if joining:
                    joined = more
                    linked += siblings
            frontier = grown
        if self.exact:   # a capped space is grown greedily from its best split: kept as it is without siblings
            edges += linked
        if not any(e[2] == full for e in edges) and (graph.linked(full) if self.exact else graph.connected(full)):
            edges.append((0, full, full))
        self.into = {b: [] for b in self.downs}
        for a, b, block in sorted(edges, key=lambda e: (-e[0].bit_count(), rank[e[0]])):
            self.into[b].append((a, block))


def shortest_splits(space, search, points, evaluate, lower, options=lambda ch: ch.options, tie=None, rows=None,
                    fits=None, whole=False, ceiling=None):
    """Per point k: ``(H, kernels, path)`` with ``path = [(block, variant, curve)]``, or None if nothing fits.

    Each point's answer is the least ``(H, kernels, tie)`` over the space's chains, whatever other points are
    asked with it.  ``evaluate(curve, k)`` is a kernel's H* at point k (None: does not fit); ``lower(choice)`` a
    lower bound of any of the block's partitions: an edge is not costed where its H at that bound, with one more
    kernel, cannot beat the best path known into its end on ``(H, kernels)`` at any point (a block at its bound
    that ties the best H on fewer kernels is costed, as alone it would be);
    ``options(choice)`` the partitions tried (a requirement adds the split ones); ``search`` the derivation's
    :class:`~napkin_cat.search.context.Search` (its level, and the Choice of each block).  ``tie(curve, k)``: what
    breaks a tie of equal H and kernels, summed along the path like H (the estimate of a masked stream's
    transfers where they are counted: what a ranking by the estimate ranks by, so both rankings break a tie of
    counted H alike); without it, the partition tried first.  ``rows(curve)``: ``(evaluate row, tie row)``, the
    lists of ``evaluate(curve, k)`` and ``tie(curve, k)`` over the points, where the caller keeps them as tables (one
    look-up per partition, not one per partition and point); the tie row may be a function returning it, called
    only where the curve fits at a point reached.  ``fits(curve, k)``: False where the partition cannot fit at point k
    (a memory below the least any of its tilings needs, read off the function before it is costed:
    :meth:`~napkin_cat.search.curves.Curve.least`), where ``evaluate`` is None; a partition that fits at none of the
    points an edge's bound leaves open is not costed for that edge (the answer is the same: it sets nothing at those
    points, and at a point the bound closes no partition of the block beats the best, ``lower`` being at most each
    one's H).  ``whole``: ``lower`` is superadditive (the compulsory transfers read off the graph): at a point where a
    partition of the whole meets its bound the answer is that one kernel, and nothing else is searched there
    (:func:`whole_at_bound`, its law).  ``ceiling``: per point, an H no answer of interest exceeds (the best another
    form found, :func:`~napkin_cat.search.space.select`): an edge is not costed at a point where the H into its start
    plus its bound exceeds it.

    **Law (ceiling).** Each point's answer is unchanged wherever some split moves at most ``ceiling[k]``; elsewhere it
    moves more than ``ceiling[k]`` (or is None).  A split ``P`` with ``H_P ≤ ceiling[k]`` keeps every edge open: by
    induction along ``P``, the least H found into an edge's start is at most ``P``'s prefix there, the bound at most
    what ``P``'s kernel moves, and the rest of ``P`` moves at least 0, so the sum is at most ``H_P``.  An edge closed
    at ``k`` lies on no such split, and the least ``(H, kernels, tie)`` into a down-set changes only where every
    split through it moves more than ``ceiling[k]`` (its best prefix and best suffix already do).

    >>> from types import SimpleNamespace as NS
    >>> space = NS(graph=None, downs=[0, 1], into={1: [(0, 1)]}, full=1)
    >>> search = NS(choice=lambda graph, block: NS(options=[("a", "A"), ("b", "B")]))
    >>> H = {"A": 5, "B": 5}
    >>> est = {"A": 7, "B": 6}
    >>> [p[2][0][1] for p in shortest_splits(space, search, [0], lambda c, k: H[c], lambda ch: 0)]
    ['a']
    >>> [p[2][0][1] for p in shortest_splits(space, search, [0], lambda c, k: H[c], lambda ch: 0,
    ...                                      tie=lambda c, k: est[c])]
    ['b']

    Of equal H, fewer kernels: block ``0b11`` at its bound (10) ties the two kernels ``0b01``, ``0b10``:

    >>> space = NS(graph=None, downs=[0, 1, 3], into={1: [(0, 1)], 3: [(1, 2), (0, 3)]}, full=3)
    >>> search = NS(choice=lambda graph, block: NS(options=[(block, block)], bound=10 if block == 3 else 0))
    >>> [p[:2] for p in shortest_splits(space, search, [0], lambda c, k: {1: 5, 2: 5, 3: 10}[c], lambda ch: ch.bound)]
    [(10, 1)]
    """
    graph, n = space.graph, len(points)
    inf = (math.inf, math.inf)
    tie = tie or (lambda curve, k: 0)
    dist, back = {0: [(0, 0, 0)] * n}, {0: [None] * n}
    choices, tables, least = {}, {}, {0: 0}   # least[a]: the least H into a at any point (None: none reached)
    settled = whole_at_bound(space, search, n, evaluate, lower, options, tie, rows, fits, choices, tables) if whole \
        else {}
    todo = [k for k in range(n) if k not in settled]     # (the points the kernel splits are searched at)
    for b in space.downs[1:]:
        dist[b], back[b] = [inf] * n, [None] * n
        order, first = [], [None] * n    # first[k]: the (edge, option) rank of the best candidate found into b
        for e, (a, block) in enumerate(space.into[b]):
            low = least[a]
            if low is None:
                continue
            found = choices.get(block)
            if found is None:    # a block ends edges from many down-sets: its bound read once, its Choice where costed
                ch = Block(search, graph, block)
                found = choices[block] = (ch, lower(ch))
            order.append((low + found[1], e, a, block))
        order.sort()     # best first: the least bound first, so the best found bites early (the answer is the same)
        for _, e, a, block in order:
            da = dist[a]
            ch, lb = choices[block]
            open_ = [k for k in todo if da[k] != inf and (da[k][0] + lb, da[k][1] + 1) <= dist[b][k][:2]
                     and (ceiling is None or da[k][0] + lb <= ceiling[k])]
            if not open_:
                continue    # (H, kernels) at its bound cannot beat the best path anywhere: a tie it could win is kept
            table = tables.get(block)
            if table is None:   # the block's partitions, each one's rows read once for every edge into it
                table = tables[block] = [[v, curve, _UNREAD, None] for v, curve in options(ch)]
            for o, entry in enumerate(table):
                v, curve, hs, ts = entry
                if hs is _UNREAD:
                    if fits is not None and not any(fits(curve, k) for k in open_):
                        continue    # it fits at none of the points its bound leaves open: not costed (here)
                    hs, ts = entry[2], entry[3] = rows(curve) if rows is not None else (None, None)
                for k in open_:     # (a point its bound closes: no candidate of the block beats the best there)
                    h = evaluate(curve, k) if hs is None else hs[k]
                    if h is None:
                        continue
                    if ts is None:
                        t = tie(curve, k)
                    else:
                        if callable(ts):       # the tie row, read once the curve fits at a point reached
                            ts = entry[3] = ts()
                        t = ts[k]
                    cand = (da[k][0] + h, da[k][1] + 1, da[k][2] + t)
                    if cand < dist[b][k] or (cand == dist[b][k] and (e, o) < first[k]):   # of equal, the first
                        dist[b][k], back[b][k], first[k] = cand, (a, block, v, curve), (e, o)   # in the edges' order
        reached = [x[0] for x in dist[b] if x != inf]
        least[b] = min(reached) if reached else None
    out = []
    for k in range(n):
        if k in settled:
            out.append(settled[k])
            continue
        if dist[space.full][k] == inf:
            out.append(None)
            continue
        path, node = [], space.full
        while node:
            a, block, v, curve = back[node][k]
            path.append((block, v, curve))
            node = a
        out.append((dist[space.full][k][0], dist[space.full][k][1], path[::-1]))
    return out


def whole_at_bound(space, search, n, evaluate, lower, options=lambda ch: ch.options, tie=None, rows=None, fits=None,
                   choices=None, tables=None) -> dict:
    """``{k: (H, 1, path)}``: the points ``k`` (of ``n``) where a partition of the whole (``space.full`` as one kernel,
    an edge of the space) moves no more than the whole's bound ``lower``, and the one-kernel split there:
    :func:`shortest_splits`' answer at those points when the bound is superadditive (``whole``).

    **Law.** Let ``lower`` be at most the H of each partition of a block, and superadditive: the bounds of the blocks
    of a split add up to at least the bound of their union (the compulsory transfers,
    :meth:`~napkin_cat.search.choice.Block.compulsory_at`, read off the graph: an array the union reads from outside,
    or writes for outside, is read or written so by one of its blocks, so it is counted there).  Then every split's
    ``(H, kernels)`` is at least ``(lower(whole), 1)``, and only the one-kernel split has one kernel: where a
    partition of the whole meets the bound, the least ``(H, kernels, tie)`` is the whole at the partition of least
    tie among those at the bound, the first of equal ties (the search's order, as :func:`shortest_splits` keeps it).
    Nothing else is searched there.

    ``choices``, ``tables``: :func:`shortest_splits`' stores (the whole's bound and rows read into them).  Every
    partition of the whole that fits at some point is costed either way: the edge from nothing into the whole is
    open at every point until a one-kernel split is found.

    >>> from types import SimpleNamespace as NS
    >>> space = NS(graph=None, downs=[0, 1, 3], into={1: [(0, 1)], 3: [(1, 2), (0, 3)]}, full=3)
    >>> search = NS(choice=lambda graph, block: NS(options=[(block, block)], bound=10 if block == 3 else 5))
    >>> H = {1: [5, 5], 2: [5, 5], 3: [12, 10]}           # the whole at point 1 moves its bound
    >>> whole_at_bound(space, search, 2, lambda c, k: H[c][k], lambda ch: ch.bound)
    {1: (10, 1, [(3, 3, 3)])}
    >>> [p[:2] for p in shortest_splits(space, search, [0, 1], lambda c, k: H[c][k], lambda ch: ch.bound, whole=True)]
    [(10, 2), (10, 1)]
    """
    full = space.full
    tie = tie or (lambda curve, k: 0)
    choices = {} if choices is None else choices
    tables = {} if tables is None else tables
    if not any(a == 0 and block == full for a, block in space.into.get(full, ())):
        return {}
    found = choices.get(full)
    if found is None:
        ch = Block(search, space.graph, full)
        found = choices[full] = (ch, lower(ch))
    ch, lb = found
    table = tables.get(full)
    if table is None:
        table = tables[full] = [[v, curve, _UNREAD, None] for v, curve in options(ch)]
    best = {}
    for entry in table:
        v, curve, hs, ts = entry
        if hs is _UNREAD:
            if fits is not None and not any(fits(curve, k) for k in range(n)):
                continue     # (shortest_splits leaves it uncosted alike)
            hs, ts = entry[2], entry[3] = rows(curve) if rows is not None else (None, None)
        for k in range(n):
            h = evaluate(curve, k) if hs is None else hs[k]
            if h is None or h != lb:
                continue
            if ts is None:
                t = tie(curve, k)
            else:
                if callable(ts):       # the tie row, read once the curve meets the bound at a point
                    ts = entry[3] = ts()
                t = ts[k]
            if k not in best or t < best[k][0]:      # (of equal ties, the first partition)
                best[k] = (t, v, curve)
    return {k: (lb, 1, [(full, v, curve)]) for k, (t, v, curve) in sorted(best.items())}


def best_option(graph, block, search, evaluate, k, floor=None):
    """``(H, variant, curve)`` of ``block``'s cheapest partition at point ``k`` (the first of equal H), or None if none
    fits.  ``floor``: at most the H of every partition of the block (its compulsory transfers): a partition that
    moves only that is the answer, and the partitions after it are not read (none moves less).

    >>> from types import SimpleNamespace as NS
    >>> read = []
    >>> search = NS(choice=lambda graph, block: NS(options=[("a", 7), ("b", 5), ("c", 5)]))
    >>> best_option(None, 1, search, lambda c, k: read.append(c) or c, 0, floor=5), read
    ((5, 'b', 5), [7, 5])
    """
    best = None
    for v, curve in search.choice(graph, block).options:
        h = evaluate(curve, k)
        if h is not None and (best is None or h < best[0]):
            best = (h, v, curve)
            if h == floor:
                break
    return best


def feeds(graph, x: int, y: int) -> bool:
    """Some operation of ``x`` feeds one of ``y`` directly (:meth:`~napkin_cat.search.blocks.OpGraph.successors`)."""
    return bool(graph.successors(x) & y)


def is_convex(graph, block: int) -> bool:
    """No path leaves ``block`` and comes back into it (:meth:`~napkin_cat.search.blocks.OpGraph.convex`, kept per
    block on the graph)."""
    return graph.convex(block)


def ordered(graph, blocks) -> list | None:
    """The blocks in an order where each comes after those it reads (None if their quotient has a cycle, or a block
    reads an operation no block holds): of the blocks whose reads are done, the earliest in ``blocks`` first.

    Kahn's order on the quotient, the ready blocks kept in a heap by their place in ``blocks``: each block's reads
    are gathered once, so the order costs the operations and the quotient's edges, not a scan of every block left
    per block placed (the same order: the scan from the front places the earliest ready block).

    >>> import napkin_cat as nc
    >>> from napkin_cat.search.blocks import OpGraph
    >>> g = OpGraph(nc.engine.to_netlist(nc.library.attention()))      # Q·Kᵀ (1), softmax (2), ·V (4)
    >>> ordered(g, [0b100, 0b001, 0b010]), ordered(g, [0b101, 0b010])
    ([1, 2, 4], None)
    """
    owner = {i: n for n, b in enumerate(blocks) for i in bits(b)}
    waiting, readers = [0] * len(blocks), [[] for _ in blocks]
    for n, b in enumerate(blocks):
        need = 0
        for i in bits(b):
            need |= graph.preds[i]
        need &= ~b
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

        def admissible(tag):
            i, j = tag
            rest = [p[0] for n, p in enumerate(path) if n not in (i, j)] + [path[i][0] | path[j][0]]
            return ordered(graph, rest) is not None
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
