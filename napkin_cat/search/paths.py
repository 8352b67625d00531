"""Kernel splits as shortest paths over the down-sets of a data-flow graph, with each block costed once.

For one form, a kernel split is a chain of down-sets (:mod:`.blocks`); :class:`Space` holds the edges between
down-sets (a block of at most ``cap`` operations each), :func:`shortest_splits` the cheapest chain per memory, and
:func:`~napkin_cat.search.growth.grow` the cost-guided fusion of a winner whose kernels were capped.  A block's
partitions and cost curves (:class:`Choice`) are costed once per canonical form: the functions here take the
derivation's :class:`~napkin_cat.search.context.Search` and ask it for a block's Choice (``search.choice(graph,
block)``), so equal kernels anywhere share one, in every call that shares the search's kernel cache.

>>> import napkin_cat as nc
>>> from napkin_cat.search.blocks import OpGraph
>>> s = Space(OpGraph(nc.engine.to_netlist(nc.library.attention())))
>>> len(s.downs), s.cap, s.exact
(4, 3, True)
"""
from __future__ import annotations

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
