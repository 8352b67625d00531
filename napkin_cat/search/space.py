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
from dataclasses import dataclass

import sympy

from napkin_cat.cost.iocost import cost as cost_of, numel
from napkin_cat.errors import AxisError, NapkinError
from napkin_cat.rewriting.driver import rewrite
from napkin_cat.rewriting.isomorphism import isomorphic
from napkin_cat.rewriting.netlist import to_netlist
from napkin_cat.rewriting.trace import Step, Trace
from napkin_cat.search.blocks import OpGraph, bits
from napkin_cat.search.recomputation import recomputed_forms
from napkin_cat.search.construct import make
from napkin_cat.search.curves import Curve
from napkin_cat.search.schedule import KernelChoice, Schedule
from napkin_cat.search.variants import axis_names, parts_key, split_variants, variants
from napkin_cat.syntax.adapter import Diagram, is_structural, layers
from napkin_cat.syntax.axis import symbol
from napkin_cat.syntax.sizes import Sizes, as_sizes


#: Per canonical block (and level): its partitions and their cost curves (shared by every call).
MEMO: dict = {}
MEMO_LIMIT = 20_000

# ---------------------------------------------------------------------- prepared functions
@dataclass
class Form:
    """A function reached by ``prepare`` rules: its ``steps`` from the start, their rule names."""

    diagram: Diagram
    steps: tuple = ()
    prepared: tuple = ()
    share: bool = False   # a kernel loads a value it reads in several places once (the book plays ``share``)
    recomputed: int = 0   # operations added by recomputation (the book's ``recompute`` rule)
    units: bool = False   # each operation read by one operation alone shares its reader's kernel

    def __post_init__(self):
        self.graph = OpGraph(to_netlist(self.diagram), share=self.share)
        self._space = None

    @property
    def space(self) -> Space:
        if self._space is None:
            self._space = Space(self.graph, units=self.graph.units() if self.units else None)
        return self._space


def _simplified(diagram, book) -> Form:
    """The function with the book's ``simplify`` rules applied to a fixpoint (dead code, identities removed)."""
    share = "share" in book.roles
    if "simplify" not in book.roles:
        return Form(diagram, share=share)
    r = rewrite(diagram, book.role("simplify"), "fixpoint")
    return Form(r.diagram, tuple(r.trace.steps), tuple(s.rule for s in r.trace.steps), share)


def prepared_forms(diagram, book, depth: int = 2, limit: int = 6) -> list:
    """The function and what the ``prepare`` rules make of it (breadth first, up to ``depth`` steps and
    ``limit`` forms, isomorphic ones once)."""
    rules = book.role("prepare") if "prepare" in book.roles else ()
    forms = [_simplified(diagram, book)]
    queue = [forms[0]]
    while queue and len(forms) < limit:
        f = queue.pop(0)
        if len(f.prepared) - len(forms[0].prepared) >= depth:
            continue
        net = to_netlist(f.diagram)
        for rule in rules:
            for m in rule.matches(net):
                after = rule.fill(m)
                new = after.diagram
                if any(isomorphic(new, g.diagram) for g in forms):
                    continue
                step = Step(rule.name, m.key, m.describe(), net, after, fresh=True,
                            params=tuple(sorted(m.params.items())))
                g = Form(new, f.steps + (step,), f.prepared + (rule.name,), f.share)
                forms.append(g)
                queue.append(g)
                if len(forms) >= limit:
                    return forms + recomputed_forms(forms, book, depth, limit)
    return forms + recomputed_forms(forms, book, depth, limit)


# ---------------------------------------------------------------------- blocks and their costs
class Choice:
    """A block's partitions and cost curves (built on first use), and its compulsory transfers."""

    def __init__(self, function, level):
        self.function, self.level = function, level
        self.compulsory = sum((numel(a) for a in (*function.dom.inside, *function.cod.inside)), sympy.Integer(0))
        self._options = None

    @property
    def split_options(self) -> list:
        """The partitions with a split stream (built on first use): costed only under a requirement."""
        if self.__dict__.get("_split") is None:
            self._split = [(v, Curve(v.diagram, self.level)) for v in split_variants(self.function, self.level)]
            for _, curve in self._split:
                curve.role = "split"
        return self._split

    @property
    def options(self) -> list:
        if self._options is None:
            self._options = []
            for v in variants(self.function, self.level):
                curve = Curve(v.diagram, self.level)
                curve.role = "nest" if v.inner else "sweep" if v.sliced else "stream"
                curve.sliced = v.sliced
                self._options.append((v, curve))
        return self._options


def playable(roles):
    """Whether a partition's curve is one the rule book can build (a sweep needs a rule playing ``sweep``, a
    2-D loop one playing ``nest``, a split stream one playing ``split``, and a sweep too when its outer stream
    is one)."""
    roles = set(roles)
    return lambda curve: getattr(curve, "role", "stream") in roles | {"stream"} and \
        ("sweep" in roles or not getattr(curve, "sliced", False))

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
    """The kernel splits of one form: edges ``(D, D', block)`` between down-sets, blocks of at most ``cap``
    operations (plus the whole function, so that full fusion is always tried)."""

    def __init__(self, graph, budget: int | None = None, units=None):
        budget = BUDGET if budget is None else budget
        self.graph = graph
        self.downs = graph.downsets(units)
        edges = [(a, b, b & ~a) for a in self.downs for b in self.downs
                 if b != a and a & ~b == 0 and graph.connected(b & ~a)]
        sizes = sorted({bin(e[2]).count("1") for e in edges})
        self.cap = sizes[-1] if sizes else 0
        for k in sizes:
            distinct = {graph.key(e[2]) for e in edges if bin(e[2]).count("1") <= k}
            if len(distinct) > budget:
                self.cap = max(1, k - 1)
                break
        self.exact = self.cap == (sizes[-1] if sizes else 0)
        keep = [e for e in edges if bin(e[2]).count("1") <= self.cap or e[2] == graph.full]
        self.into = {b: [] for b in self.downs}
        for a, b, block in sorted(keep, key=lambda e: -bin(e[0]).count("1")):
            self.into[b].append((a, block))


def _shortest(space, level, points, evaluate, lower, options=lambda ch: ch.options):
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
            for v, curve in options(ch):
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
        if dist[graph.full][k] == inf:
            out.append(None)
            continue
        path, node = [], graph.full
        while node:
            a, block, v, curve = back[node][k]
            path.append((block, v, curve))
            node = a
        out.append((dist[graph.full][k][0], dist[graph.full][k][1], path[::-1]))
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
    return best[space.graph.full]


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
                                                   v.groups, dict(nm), v.sliced, v.parts and nm[parts_key(v.stream)],
                                                   v.inner)
                                      for block, v, nm in plan), form.prepared)
        self.kernels = [Curve(Diagram.id(box.dom).then(box), level) for _, box in layers(self.diagram)
                        if is_structural(box) is None]
        self.level = level
        self._cost = None

    @property
    def cost(self):
        if self._cost is None:
            self._cost = cost_of(self.diagram)
        return self._cost

    def numeric(self, sizes, memory, memories, tiles="divisors", need=None):
        total, chosen = 0, {}
        for k in self.kernels:
            at = memories.index(memory)
            h, t = need.at(k, at) if need is not None else k.at_all(sizes, memories, tiles)[at]
            if h is None:
                return None, {}
            total += h
            chosen.update(t)
        return total, chosen

    def symbolic(self, M):
        return sympy.Add(*[k.symbolic(M) for k in self.kernels])


def select(forms, level, sizes, memories, tiles="divisors", roles=("sweep", "nest"), need=None) -> list:
    """Per memory: ``(form, path)`` of the cheapest algorithm at ``sizes``, or None if none fits.

    Ties go to fewer FLOPs first where a form recomputes a value (recomputation pays only by transfers), else
    to fewer kernels, then to fewer FLOPs (at the kernels' tiles, so with what a fused kernel recomputes: of
    two orders of a contraction chain that move as much, the cheaper one; of a normaliser in one pass and in
    two that move as much, the one pass), then to the finer form (more operations: an accumulator written out
    as boxes, whose trace shows how the kernel streams), then to fewer rewrites, then to the earlier form.
    Only partitions the rule book's ``roles`` can build are considered.  ``need``
    (:class:`~napkin_cat.search.parallelism.Requirement`): every kernel launches enough thread blocks, split
    streams included among the partitions.    """
    env = Sizes(sizes).env
    best = [None] * len(memories)
    ok = playable(roles)
    options = (lambda ch: ch.options + ch.split_options) if need is not None else (lambda ch: ch.options)
    for rank, form in enumerate(forms):
        def evaluate(curve, k):
            if not ok(curve):
                return None
            return need.at(curve, k)[0] if need is not None else curve.at_all(sizes, memories, tiles)[k][0]

        def lower(ch):
            return _number(ch.compulsory, env)
        space = form.space
        for k, found in enumerate(_shortest(space, level, memories, evaluate, lower, options)):
            if found is None:
                continue
            key = [found[0], found[1], None, -(len(form.graph) - form.recomputed), len(form.steps), rank]
            now = best[k]
            recomputing = now is not None and key[0] == now[0][0] and (form.recomputed or now[1].recomputed)
            if now is not None and (key[:2] == now[0][:2] or recomputing):   # a tie: FLOPs decide (only for ties)
                for ky, path in ((key, found[2]), (now[0], now[2][2])):
                    if ky[2] is None:
                        ky[2] = _flops_at(path, sizes, memories[k], tiles, env,
                                          None if need is None else (lambda c, k=k: need.at(c, k)[1]))
            if recomputing and key[2] != now[0][2]:   # recomputation is worth its FLOPs only for transfers
                better = key[2] < now[0][2]
            else:
                better = now is None or key < now[0]
            if better:
                best[k] = (key, form, found, evaluate)
    for k, b in enumerate(best):   # kernels capped in size: grow the winner by cost-guided fusion
        if b is not None and not b[1].space.exact:
            best[k] = (None, b[1], _grow(b[1].graph, level, b[2], b[3], k), None)
    return [None if b is None else (b[1], b[2][2]) for b in best]


def _flops_at(path, sizes, memory, tiles, env, chosen_of=None) -> float:
    """The FLOPs of a path's kernels (every pipeline) at their optimal tiles for ``memory``."""
    total = 0.0
    for _, _, curve in path:
        chosen = curve.at(sizes, memory, tiles)[1] if chosen_of is None else chosen_of(curve)
        at = {**env, **{s: 1 for s in curve.streams}, **{symbol(str(t)): v for t, v in chosen.items()}}
        total += sum(float(sympy.sympify(f).subs(at)) for f in curve.cost.flops.values())
    return total


class Makers(dict):
    """The winners made by the rules, once per (form, path)."""

    def get_made(self, diagram, form, path, book, level) -> _Made:
        key = (id(form), tuple((block, v.stream, v.sliced, v.inner, v.groups, v.parts) for block, v, _ in path))
        if key not in self:
            self[key] = _Made(diagram, form, path, book, level)
        return self[key]


def _extremes(forms, level, sizes, memories, tiles="divisors", roles=("sweep", "nest")) -> dict:
    """``{"unfused": [H per memory], "fully fused": [...]}``: every operation its own kernel, and one kernel
    (each partitioned at its best; the best over the prepared forms; None where it does not fit)."""
    out = {"unfused": [None] * len(memories), "fully fused": [None] * len(memories)}
    ok = playable(roles)
    for form in forms:
        g = form.graph

        def evaluate(curve, k):
            return curve.at_all(sizes, memories, tiles)[k][0] if ok(curve) else None
        for kind, blocks in (("unfused", [1 << i for i in range(len(g))]), ("fully fused", [g.full])):
            if kind == "fully fused" and not g.connected(g.full):
                continue
            for k in range(len(memories)):
                parts = [_best_option(g, b, level, evaluate, k) for b in blocks]
                if None in parts:
                    continue
                h = sum(p[0] for p in parts)
                if out[kind][k] is None or h < out[kind][k]:
                    out[kind][k] = h
    return out




def check_sizes(diagram, sizes):
    """The sizes as a sympy environment, checked (:class:`~napkin_cat.syntax.sizes.Sizes`); an AxisError naming
    a size that is not a positive int, a name the diagram does not have, or a missing axis."""
    given = as_sizes(sizes).of(diagram)
    env = given.env
    missing = sorted({str(s) for arr in (*diagram.dom.inside, *diagram.cod.inside) for a in arr.axes
                      for s in sympy.sympify(a.size).free_symbols if s not in env})
    if missing:
        raise AxisError(f"numeric derivation needs the size of every axis: add {missing} to sizes= "
                        f"(e.g. sizes={{{', '.join(repr(m) + ': …' for m in missing)}}})")
    return env
