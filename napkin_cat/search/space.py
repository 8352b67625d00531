"""The search of one derivation: the cheapest kernel split per memory over the prepared forms, and the winner.

* **forms**: the function after the book's ``simplify`` rules, and what its ``prepare`` rules make of it
  (:mod:`.forms`);
* **kernel splits** of a form: shortest paths over the down-sets of its data-flow graph (:mod:`.paths`), or
  segment by segment for a large form (:mod:`.segments`);
* **costs**: each block's partitions (:mod:`.variants`) and their ``H*(M)`` (:mod:`.curves`), kept by the
  block's canonical form in the derivation's kernel cache (:mod:`.context`), so equal kernels are costed once;
* **the winner made by the rules** (:mod:`.construct`), its kernels' curves those of its blocks.
"""
from __future__ import annotations

import math
from fractions import Fraction

import sympy

from napkin_cat.cost.exact_arithmetic import value
from napkin_cat.cost.iocost import cost as cost_of
from napkin_cat.errors import AxisError
from napkin_cat.rewriting.trace import Trace
from napkin_cat.search.blocks import bits
from napkin_cat.search.construct import make
from napkin_cat.search.curves import Curve
from napkin_cat.search.least_memory import least_fitting_memory
from napkin_cat.search.growth import grow, join_siblings
from napkin_cat.search.paths import Space, best_option, playable, shortest_splits
from napkin_cat.search.schedule import KernelChoice, Schedule
from napkin_cat.search.segments import segmented_shortest
from napkin_cat.search.variants import axis_names, parts_key
from napkin_cat.syntax.adapter import Diagram
from napkin_cat.syntax.flat import is_structural, layers
from napkin_cat.syntax.axis import symbol
from napkin_cat.syntax.sizes import Sizes, as_sizes


def smallest_memory(form, search, sizes):
    """The least memory at which some kernel split of ``form`` fits (per segment, when it is cut)."""
    if form.cut is None:
        return least_fitting_memory(form.space, search, sizes)
    return max(least_fitting_memory(Space(form.graph, within=s), search, sizes) for s in form.cut[0])


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
    """The winner of a path, made by the rules on first use of its :attr:`diagram` or :attr:`trace` (a symbolic
    derive's candidates that win no interval are never made); its kernels' cost curves are its path's."""

    def __init__(self, start, form, path, book, level):
        taken = set(axis_names(form.diagram))
        names = _tile_names(path, taken)
        plan = [(block, v, nm) for (block, v, _), nm in zip(path, names)]
        self._made, self._making = None, (form, plan, book, level)
        self.variant = Schedule(tuple(KernelChoice(tuple(form.graph.name(i) for i in bits(block)), v.stream,
                                                   v.groups, dict(nm), v.sliced, v.parts and nm[parts_key(v.stream)],
                                                   v.inner)
                                      for block, v, nm in plan), form.prepared)
        # each kernel's curve is its block's, costed by the search on the same partition with the generic tile
        # names: read with this kernel's names (alike kernels of a large function are costed once)
        self.parts = [(curve, {symbol(generic): symbol(nm[axis]) for axis, generic in v.tiles})
                      for (_, v, curve), (_, _, nm) in zip(path, plan)]
        self.level = level
        self._cost = None
        self._kernels = None

    def _make(self):
        if self._made is None:
            form, plan, book, level = self._making
            diagram, steps = make(form.diagram, form.graph, plan, book, level)
            self._made = (diagram, Trace(form.steps + steps, book.rules))
        return self._made

    @property
    def diagram(self):
        """The algorithm made by the rules (:func:`~napkin_cat.search.construct.make`)."""
        return self._make()[0]

    @property
    def trace(self) -> Trace:
        """The rewrites that make :attr:`diagram` from the function."""
        return self._make()[1]

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

    def numeric(self, sizes, memory, memories, tiles="divisors", need=None, count=True):
        total, chosen = 0, {}
        at = memories.index(memory)
        for curve, names in self.parts:
            h, t = need.at(curve, at) if need is not None else curve.at_all(sizes, memories, tiles, count=count)[at]
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


def select(forms, search, sizes, memories, tiles="divisors", roles=("sweep", "nest"), need=None,
           count=True) -> list:
    """Per memory: ``(form, path)`` of the cheapest algorithm at ``sizes``, or None if none fits, searched at
    ``search.level`` (:class:`~napkin_cat.search.context.Search`: the costed kernels it reads, the segments it
    solved).

    Ties go to fewer FLOPs first where a form recomputes a value (recomputation pays only by transfers), else
    to fewer kernels, then to fewer FLOPs (at the kernels' tiles, so with what a fused kernel recomputes: of
    two orders of a contraction chain that move as much, the cheaper one; of a normaliser in one pass and in
    two that move as much, the one pass), then to the finer form (more operations: an accumulator written out
    as boxes, whose trace shows how the kernel streams; operations that compute one value counted once where
    the book plays ``compute_once``, :meth:`~napkin_cat.search.blocks.OpGraph.distinct`), then to fewer rewrites,
    then to the earlier form.
    A form whose kernels are capped in size (its space is not exact) is compared once grown by cost-guided fusion
    and joins of independent kernels that read one value (``join``).  An exact form is searched under the best H
    the forms before it found at each memory (``shortest_splits(ceiling=)``): a split that moves more loses on H
    whatever its kernels and FLOPs, so it is not searched for, and every answer stays what it was.  Only
    partitions the rule book's ``roles`` can build are considered.  ``need``
    (:class:`~napkin_cat.search.parallelism.Requirement`): every kernel launches enough thread blocks, split
    streams included among the partitions (segment by segment too: the requirement is part of a segment's
    problem).  ``count``: where a kernel's transfers are an estimate (a masked stream), its tilings ranked by the
    transfers counted at them (True), or by the estimate (False; :meth:`~napkin_cat.search.curves.Curve.at`); a tie
    of counted transfers between a block's partitions is broken by their estimates, which a ranking by the estimate
    ranks by, so the two rankings keep the same partition where the counts tie.
    """
    given = Sizes(sizes)
    env = given.env
    best = [None] * len(memories)
    ok = playable(roles)
    options = (lambda ch: ch.options + ch.split_options) if need is not None else (lambda ch: ch.options)
    context = (tuple(sorted((str(k), int(v)) for k, v in sizes.items())), tuple(memories), tiles, tuple(roles),
               None if need is None else need.blocks, count)
    points: dict = {}    # each curve's points at every memory, read once per curve in this call
    lows: dict = {}      # each curve's least memory at the sizes (Curve.least), read once per curve in this call
    zeros = [0] * len(memories)

    def least(curve):
        found = lows.get(curve)
        if found is None:
            found = lows[curve] = curve.least(sizes)
        return found
    for rank, form in enumerate(forms):
        def table(curve):      # a curve's H* at every memory (None: unplayable, or no fit), made once per call
            found = points[curve] = (
                [None] * len(memories) if not ok(curve) else need.column(curve) if need is not None
                else [h for h, _ in curve.at_all(sizes, memories, tiles, count=count)])
            return found

        def evaluate(curve, k):    # (a memory below the least its tilings need: None, and the curve not costed)
            found = points.get(curve)
            if found is None:
                if need is None and memories[k] < least(curve):
                    return None
                found = table(curve)
            return found[k]

        def fits(curve, k):    # the partition may fit at memories[k] (playable, Curve.least: read uncosted)
            return ok(curve) and memories[k] >= least(curve)

        def tie(curve, k):     # what both rankings share: the estimate (exact where nothing is masked)
            if need is not None:
                return 0
            if not count or not curve.search_cost.estimated:
                return evaluate(curve, k)
            key = ("estimate", curve)
            found = points.get(key)
            if found is None:
                found = points[key] = curve.at_all(sizes, memories, tiles, count=False)
            return found[k][0] if found[k][0] is not None else evaluate(curve, k)

        def rows(curve):      # evaluate's and tie's rows over the memories (tie's read where the curve fits)
            hs = points.get(curve)
            if hs is None:
                hs = table(curve)
            if need is not None:
                return hs, zeros
            return hs, lambda: (hs if not count or not curve.search_cost.estimated
                                else [tie(curve, k) for k in range(len(memories))])

        def lower(ch):
            return ch.compulsory_at(given)
        whole = _superadditive(form.graph)
        if form.cut is not None:
            parts, joints = form.cut
            shortest = segmented_shortest(form.graph, parts, joints, search, memories, evaluate, lower, context,
                                          options, tie, sizes, rows, fits if need is None else None, whole)
        else:
            # (an exact space's split moving more than the best another form found loses to it: not searched for;
            # a capped space is grown from its best split, whatever that moves, so it is searched whole)
            ceiling = [math.inf if b is None else b[0][0] for b in best] if form.space.exact else None
            shortest = shortest_splits(form.space, search, memories, evaluate, lower, options, tie, rows,
                                       fits if need is None else None, whole, ceiling)
            if not form.space.exact:   # kernels capped in size: grown by cost-guided fusion (and joins of siblings)
                grown = [g and grow(form.graph, search, g, evaluate, k, lower) for k, g in enumerate(shortest)]
                shortest = [join_siblings(form.graph, search, g, evaluate, k, lower)   # (before comparing)
                            for k, g in enumerate(grown)]
        fine = None     # the form's operations (compute_once counting one value once): read once per form
        for k, found in enumerate(shortest):
            if found is None:
                continue
            if fine is None:
                fine = form.graph.distinct() if form.graph.once else len(form.graph) - form.recomputed
            key = [found[0], found[1], None, -fine, len(form.steps), rank]
            now = best[k]
            recomputing = now is not None and key[0] == now[0][0] and bool(form.recomputed or now[1].recomputed)
            if now is not None and (key[:2] == now[0][:2] or recomputing):   # a tie: FLOPs decide (only for ties)
                for ky, path in ((key, found[2]), (now[0], now[2][2])):
                    if ky[2] is None:
                        ky[2] = _flops_at(path, sizes, memories[k], tiles, env,
                                          None if need is None else (lambda c, k=k: need.at(c, k)[1]), count)
            if recomputing and key[2] != now[0][2]:   # recomputation is worth its FLOPs only for transfers
                better = key[2] < now[0][2]
            else:
                better = now is None or key < now[0]
            if better:
                best[k] = (key, form, found, evaluate)
    return [None if b is None else (b[1], b[2][2]) for b in best]


def _superadditive(graph) -> bool:
    """Whether every block's bound (:meth:`~napkin_cat.search.choice.Block.compulsory_at`) is read off the graph's
    arrays (:meth:`~napkin_cat.search.blocks.OpGraph.moved`: no box reads or makes a mask), so the bounds of a split's
    blocks add up to at least the bound of their union (``shortest_splits(whole=True)``)."""
    moved = getattr(graph, "moved", None)
    return moved is not None and moved(graph.full) is not None


def _flops_at(path, sizes, memory, tiles, env, chosen_of=None, count=True) -> float:
    """The FLOPs of a path's kernels (every pipeline) at their optimal tiles for ``memory`` (``chosen_of(curve)``:
    the tiles under a requirement)."""
    total = 0.0
    for _, _, curve in path:
        chosen = curve.at(sizes, memory, tiles, count)[1] if chosen_of is None else chosen_of(curve)
        at = {**env, **{s: 1 for s in curve.streams}, **{symbol(str(t)): v for t, v in chosen.items()}}
        total += sum(flops_at(f, at) for f in curve.search_cost.flops.values())
    return total


def flops_at(expr, at: dict) -> float:
    """``float(expr.subs(at))`` without sympy in the loop: the exact value (``int`` or ``Fraction``, by
    :func:`~napkin_cat.cost.exact_arithmetic.value`) rounded once to a float, as sympy rounds its exact number; an
    expression whose value is not rational (a root of a size) is substituted by sympy, as before.

    >>> import napkin_cat as nc
    >>> q, g = nc.symbol("q"), nc.symbol("g_q")
    >>> flops_at(2 * q * q / g + q / 3, {q: 10, g: 4}), float((2 * q * q / g + q / 3).subs({q: 10, g: 4}))
    (53.333333333333336, 53.333333333333336)
    """
    exact = value(expr, at)
    return float(exact) if isinstance(exact, (int, Fraction)) else float(sympy.sympify(expr).subs(at))


class Makers(dict):
    """The winners made by the rules, once per (form, path)."""

    def get_made(self, diagram, form, path, book, level) -> _Made:
        key = (id(form), tuple((block, v.stream, v.sliced, v.inner, v.groups, v.parts) for block, v, _ in path))
        if key not in self:
            self[key] = _Made(diagram, form, path, book, level)
        return self[key]


def extremes(forms, search, sizes, memories, tiles="divisors", roles=("sweep", "nest"), count=True) -> dict:
    """``{"unfused": [H per memory], "fully fused": [...]}``: every operation its own kernel, and one kernel
    (each partitioned at its best; the best over the prepared forms; None where it does not fit)."""
    out = {"unfused": [None] * len(memories), "fully fused": [None] * len(memories)}
    ok = playable(roles)
    for form in forms:
        g = form.graph

        def evaluate(curve, k):
            return curve.at_all(sizes, memories, tiles, count=count)[k][0] if ok(curve) else None
        for kind, blocks in (("unfused", [1 << i for i in range(len(g))]), ("fully fused", [g.full])):
            if kind == "fully fused" and (form.cut is not None or not g.linked(g.full)):
                continue   # (a function searched segment by segment is never one kernel: it is too large)
            for k in range(len(memories)):
                parts = [best_option(g, b, search, evaluate, k) for b in blocks]
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
