"""The search space of one derivation and its shortest paths: prepared forms, kernel splits, their costs.

* **forms**: the function after the book's ``simplify`` rules, and what its ``prepare`` rules make of it;
* **kernel splits** of a form: chains of down-sets of its data-flow graph (:mod:`.blocks`), one kernel per
  difference, within a budget of distinct kernels (beyond it, kernels are capped in size and the winner is
  grown by cost-guided fusion);
* **costs**: each block's partitions (:mod:`.variants`) and their ``H*(M)`` (:mod:`.curves`), memoised by
  the block's canonical form (:data:`MEMO`), so equal kernels anywhere, in any call, are costed once;
* **the winner made by the rules** (:mod:`.construct`), its kernels re-costed off the made algorithm.
"""
from __future__ import annotations

import math

import sympy

from napkin_cat.cost.iocost import cost as cost_of, numel
from napkin_cat.errors import NapkinError
from napkin_cat.rewriting.trace import Trace
from napkin_cat.search.blocks import bits
from napkin_cat.search.construct import make
from napkin_cat.search.curves import Curve
from napkin_cat.search.schedule import KernelChoice, Schedule
from napkin_cat.search.segments import segmented_shortest
from napkin_cat.search.variants import axis_names, variants
from napkin_cat.syntax.adapter import Diagram, is_structural, layers
from napkin_cat.syntax.axis import symbol


#: Per canonical block (and level): its partitions and their cost curves (shared by every call).
MEMO: dict = {}
MEMO_LIMIT = 20_000

# ---------------------------------------------------------------------- blocks and their costs
class Choice:
    """A block's partitions and cost curves (built on first use), and its compulsory transfers."""

    def __init__(self, function, level):
        self.function, self.level = function, level
        self.compulsory = sum((numel(a) for a in (*function.dom.inside, *function.cod.inside)), sympy.Integer(0))
        self._options = None

    @property
    def options(self) -> list:
        if self._options is None:
            self._options = []
            for v in variants(self.function, self.level):
                curve = Curve(v.diagram, self.level)
                curve.role = "sweep" if v.sliced else "stream"
                self._options.append((v, curve))
        return self._options


def playable(roles):
    """Whether a partition's curve is one the rule book can build (a sweep needs a rule playing ``sweep``)."""
    sweeps = "sweep" in set(roles)
    return lambda curve: sweeps or getattr(curve, "role", "stream") != "sweep"


def _choice(graph, block, level) -> Choice:
    key = (graph.key(block), level)
    found = MEMO.get(key)
    if found is None:
        if len(MEMO) >= MEMO_LIMIT:
            MEMO.clear()
        found = MEMO[key] = Choice(graph.subdiagram(block), level)
    return found


def _number(expr, env) -> float:
    v = sympy.sympify(expr).subs(env)
    if not v.is_number:
        raise NapkinError(f"give sizes for {sorted(map(str, v.free_symbols))} (sizes={{'name': …}})")
    return float(v)


#: Blocks (distinct kernels) a form may cost exactly; beyond, kernels are capped in size and grown greedily.
BUDGET = 100


class Space:
    """The kernel splits of one form (or of the operations ``within`` it, a segment): edges ``(D, D', block)``
    between down-sets, blocks of at most ``cap`` operations (plus the whole, so that full fusion is always
    tried).

    The edges are grown from each down-set one operation at a time (``D'`` = ``D`` and operations whose inputs
    are computed), size by size, until the kernels of the next size would pass the budget of distinct kernels:
    a long chain costs its length times the cap, not its length squared.
    """

    def __init__(self, graph, budget: int | None = None, within: int | None = None):
        budget = BUDGET if budget is None else budget
        self.graph = graph
        full = self.full = graph.full if within is None else within
        self.downs = graph.downsets(within)
        rank = {d: k for k, d in enumerate(self.downs)}
        ready = {d: self._ready(d) for d in self.downs}
        frontier = {d: {0} for d in self.downs}
        edges, keys, self.cap, self.exact, size = [], set(), 0, True, 0
        while frontier:
            size += 1
            grown, layer = {}, []
            for d, exts in frontier.items():
                out = set()
                for e in exts:
                    done = d | e
                    near = ready[d] | _successors(graph, e)
                    for o in bits(near & ~done & full):
                        if graph.preds[o] & full & ~done == 0:
                            out.add(e | 1 << o)
                if out:
                    grown[d] = out
                    layer += [(d, d | e, e) for e in out if graph.connected(e)]
            if layer:
                if len(keys | {graph.key(e) for _, _, e in layer}) > budget:
                    self.cap, self.exact = max(1, size - 1), False
                    if size == 1:
                        edges += layer
                    break
                keys |= {graph.key(e) for _, _, e in layer}
                edges += layer
                self.cap = size
            frontier = grown
        if not any(e[2] == full for e in edges) and graph.connected(full):
            edges.append((0, full, full))
        self.into = {b: [] for b in self.downs}
        for a, b, block in sorted(edges, key=lambda e: (-bin(e[0]).count("1"), rank[e[0]])):
            self.into[b].append((a, block))

    def _ready(self, done: int) -> int:
        """The operations of the space whose inputs ``done`` (a down-set) computes, or that read none inside."""
        return sum(1 << o for o in bits(self.full & ~done) if self.graph.preds[o] & self.full & ~done == 0)


def _successors(graph, block: int) -> int:
    out = 0
    for i in bits(block):
        out |= graph.succs[i]
    return out


def _shortest(space, level, points, evaluate, lower):
    """Per point k: ``(H, kernels, path)`` with ``path = [(block, variant, curve)]``, or None if nothing fits.

    ``evaluate(curve, k)`` is a kernel's H* at point k (None: does not fit); ``lower(choice)`` a lower bound
    of any of the block's partitions (a block that cannot beat the best path known is not costed).
    """
    graph, n = space.graph, len(points)
    inf = (math.inf, math.inf)
    dist, back = {0: [(0, 0)] * n}, {0: [None] * n}
    for b in space.downs[1:]:
        dist[b], back[b] = [inf] * n, [None] * n
        for a, block in space.into[b]:
            da = dist[a]
            if all(x == inf for x in da):
                continue
            ch = _choice(graph, block, level)
            lb = lower(ch)
            if all(da[k][0] + lb >= dist[b][k][0] for k in range(n)):
                continue
            for v, curve in ch.options:
                for k in range(n):
                    if da[k] == inf:
                        continue
                    h = evaluate(curve, k)
                    if h is None:
                        continue
                    cand = (da[k][0] + h, da[k][1] + 1)
                    if cand < dist[b][k]:
                        dist[b][k], back[b][k] = cand, (a, block, v, curve)
    out = []
    for k in range(n):
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


def _best_option(graph, block, level, evaluate, k):
    best = None
    for v, curve in _choice(graph, block, level).options:
        h = evaluate(curve, k)
        if h is not None and (best is None or h < best[0]):
            best = (h, v, curve)
    return best


def _feeds(graph, x: int, y: int) -> bool:
    """Some operation of ``x`` feeds one of ``y`` directly."""
    return any(graph.succs[i] & y for i in bits(x))


def _convex(graph, block: int) -> bool:
    """No path leaves ``block`` and comes back into it."""
    out = 0
    for i in bits(block):
        out |= graph.succs[i] & ~block
    seen = 0
    while out:
        seen |= out
        nxt = 0
        for i in bits(out):
            if graph.succs[i] & block:
                return False
            nxt |= graph.succs[i]
        out = nxt & ~seen & ~block
    return True


def _ordered(graph, blocks) -> list | None:
    """The blocks in an order where each comes after those it reads (None if their quotient has a cycle)."""
    left, out, done = list(blocks), [], 0
    while left:
        for k, b in enumerate(left):
            need = 0
            for i in bits(b):
                need |= graph.preds[i]
            if need & ~b & ~done == 0:
                out.append(b)
                done |= b
                del left[k]
                break
        else:
            return None
    return out


def _grow(graph, level, found, evaluate, k):
    """Greedy fusion past the cap: join two kernels where one feeds the other and their union is convex, the
    join that lowers H* the most first, while one does (cost-guided ``fuse`` steps)."""
    H, _, path = found
    path = list(path)
    while True:
        best = None
        for i in range(len(path)):
            for j in range(len(path)):
                x, y = path[i][0], path[j][0]
                if i == j or not _feeds(graph, x, y) or not _convex(graph, x | y):
                    continue
                got = _best_option(graph, x | y, level, evaluate, k)
                if got is None:
                    continue
                saved = evaluate(path[i][2], k) + evaluate(path[j][2], k) - got[0]
                if saved > 0 and (best is None or saved > best[0]):
                    rest = [p[0] for n, p in enumerate(path) if n not in (i, j)] + [x | y]
                    if _ordered(graph, rest) is not None:
                        best = (saved, i, j, (x | y, got[1], got[2]))
        if best is None:
            return (H, len(path), path)
        saved, i, j, merged = best
        rest = {p[0]: p for n, p in enumerate(path) if n not in (i, j)}
        rest[merged[0]] = merged
        path = [rest[b] for b in _ordered(graph, list(rest))]
        H -= saved


def smallest_memory(form, level, sizes):
    """The least memory at which some kernel split of ``form`` fits (per segment, when it is cut)."""
    if form.cut is None:
        return _smallest_memory(form.space, level, sizes)
    return max(_smallest_memory(Space(form.graph, within=s), level, sizes) for s in form.cut[0])


def _smallest_memory(space, level, sizes):
    """The least memory at which some kernel split fits (a bottleneck shortest path over the down-sets)."""
    best = {0: 0}
    for b in space.downs[1:]:
        best[b] = math.inf
        for a, block in space.into[b]:
            if best.get(a, math.inf) == math.inf:
                continue
            need = min((int(c.smallest(sizes)) for _, c in _choice(space.graph, block, level).options),
                       default=math.inf)
            best[b] = min(best[b], max(best[a], need))
    return best[space.full]


# ---------------------------------------------------------------------- making the winner
def _tile_names(path, taken):
    """Tile names per kernel: ``g_q``, ``s_x`` for the first kernel that uses them, then ``g_q_2``, …"""
    used, out = set(taken), []
    for _, v, _ in path:
        names = {}
        for axis, generic in v.tiles:
            name, k = generic, 1
            while name in used:
                k += 1
                name = f"{generic}_{k}"
            used.add(name)
            names[axis] = name
        out.append(names)
    return out


class _Made:
    """The winner of a path, made by the rules; its kernels' cost curves read off the made algorithm."""

    def __init__(self, start, form, path, book, level):
        taken = set(axis_names(form.diagram))
        names = _tile_names(path, taken)
        plan = [(block, v, nm) for (block, v, _), nm in zip(path, names)]
        self.diagram, steps = make(form.diagram, form.graph, plan, book, level)
        self.trace = Trace(form.steps + steps, book.rules)
        self.variant = Schedule(tuple(KernelChoice(tuple(form.graph.name(i) for i in bits(block)), v.stream,
                                                   v.groups, dict(nm), v.sliced) for block, v, nm in plan),
                                form.prepared)
        # each kernel's curve is its block's, costed by the search on the same partition with the generic tile
        # names: read with this kernel's names (alike kernels of a large function are costed once)
        self.parts = [(curve, {symbol(generic): symbol(nm[axis]) for axis, generic in v.tiles})
                      for (_, v, curve), (_, _, nm) in zip(path, plan)]
        self.level = level
        self._cost = None
        self._kernels = None

    @property
    def kernels(self) -> list:
        """The cost curve of each kernel of the made algorithm, read off it."""
        if self._kernels is None:
            self._kernels = [Curve(Diagram.id(box.dom).then(box), self.level) for _, box in layers(self.diagram)
                             if is_structural(box) is None]
        return self._kernels

    @property
    def cost(self):
        if self._cost is None:
            self._cost = cost_of(self.diagram)
        return self._cost

    def numeric(self, sizes, memory, memories, tiles="divisors"):
        total, chosen = 0, {}
        for curve, names in self.parts:
            h, t = curve.at_all(sizes, memories, tiles)[memories.index(memory)]
            if h is None:
                return None, {}
            total += h
            chosen.update({names.get(k, k): v for k, v in t.items()})
        return total, chosen

    def symbolic_parts(self, M) -> list:
        """Per kernel ``(H*, tiles)`` in the large-M form, tiles under this algorithm's names."""
        out = []
        for curve, names in self.parts:
            h, t = curve.symbolic_optimum(M)
            out.append((h.xreplace(names) if names else h,
                        {names.get(k, k): (sympy.sympify(v).xreplace(names) if names else v) for k, v in t.items()}))
        return out

    def smallest(self, sizes) -> list:
        return [curve.smallest(sizes) for curve, _ in self.parts]

    def symbolic(self, M):
        return sympy.Add(*[h for h, _ in self.symbolic_parts(M)])


def select(forms, level, sizes, memories, tiles="divisors", roles=("sweep",)) -> list:
    """Per memory: ``(form, path)`` of the cheapest algorithm at ``sizes``, or None if none fits.

    Ties go to fewer kernels, then to the finer form (more operations: an accumulator written out as
    boxes, whose trace shows how the kernel streams), then to fewer rewrites, then to the earlier form.
    Only partitions the rule book's ``roles`` can build are considered.
    """
    env = {symbol(str(k)): int(v) for k, v in sizes.items()}
    best = [None] * len(memories)
    ok = playable(roles)
    context = (tuple(sorted((str(k), int(v)) for k, v in sizes.items())), tuple(memories), tiles, tuple(roles))
    for rank, form in enumerate(forms):
        def evaluate(curve, k):
            return curve.at_all(sizes, memories, tiles)[k][0] if ok(curve) else None

        def lower(ch):
            return _number(ch.compulsory, env)
        if form.cut is not None:
            parts, joints = form.cut
            shortest = segmented_shortest(form.graph, parts, joints, level, memories, evaluate, lower, context)
        else:
            shortest = _shortest(form.space, level, memories, evaluate, lower)
        for k, found in enumerate(shortest):
            if found is None:
                continue
            key = (found[0], found[1], -len(form.graph), len(form.steps), rank)
            if best[k] is None or key < best[k][0]:
                best[k] = (key, form, found, evaluate)
    for k, b in enumerate(best):   # kernels capped in size: grow the winner by cost-guided fusion
        if b is not None and b[1].cut is None and not b[1].space.exact:
            best[k] = (None, b[1], _grow(b[1].graph, level, b[2], b[3], k), None)
    return [None if b is None else (b[1], b[2][2]) for b in best]


class Makers(dict):
    """The winners made by the rules, once per (form, path)."""

    def get_made(self, diagram, form, path, book, level) -> _Made:
        key = (id(form), tuple((block, v.stream, v.sliced, v.groups) for block, v, _ in path))
        if key not in self:
            self[key] = _Made(diagram, form, path, book, level)
        return self[key]


def _extremes(forms, level, sizes, memories, tiles="divisors", roles=("sweep",)) -> dict:
    """``{"unfused": [H per memory], "fully fused": [...]}``: every operation its own kernel, and one kernel
    (each partitioned at its best; the best over the prepared forms; None where it does not fit)."""
    out = {"unfused": [None] * len(memories), "fully fused": [None] * len(memories)}
    ok = playable(roles)
    for form in forms:
        g = form.graph

        def evaluate(curve, k):
            return curve.at_all(sizes, memories, tiles)[k][0] if ok(curve) else None
        for kind, blocks in (("unfused", [1 << i for i in range(len(g))]), ("fully fused", [g.full])):
            if kind == "fully fused" and (form.cut is not None or not g.connected(g.full)):
                continue   # (a function searched segment by segment is never one kernel: it is too large)
            for k in range(len(memories)):
                parts = [_best_option(g, b, level, evaluate, k) for b in blocks]
                if None in parts:
                    continue
                h = sum(p[0] for p in parts)
                if out[kind][k] is None or h < out[kind][k]:
                    out[kind][k] = h
    return out




def check_sizes(diagram, sizes):
    """The sizes as a sympy environment; NapkinError naming a missing axis or a bad size."""
    env = {symbol(str(k)): int(v) for k, v in sizes.items() if isinstance(v, int)}
    missing = sorted({str(s) for arr in (*diagram.dom.inside, *diagram.cod.inside) for a in arr.axes
                      for s in sympy.sympify(a.size).free_symbols if s not in env})
    if missing:
        raise NapkinError(f"numeric derivation needs the size of every axis: add {missing} to sizes= "
                          f"(e.g. sizes={{{', '.join(repr(m) + ': …' for m in missing)}}})")
    bad = {k: v for k, v in sizes.items() if not isinstance(v, int) or isinstance(v, bool) or v < 1}
    if bad:
        raise NapkinError(f"sizes must be positive integers, got {bad}")
    return env
