"""The order a data-flow graph puts on its operations: down-sets, the steps they grow by, convexity.

A down-set of an :class:`~napkin_cat.search.blocks.OpGraph` is a set of operations closed under predecessors (what
has been computed); a kernel split is a chain of down-sets, each kernel the difference of two (:mod:`.paths`).  A
block is convex where no path of data flow leaves it and comes back: the difference of two down-sets always is
(a path that leaves ``D' ∖ D`` and returns passes an operation of ``D'``, so of ``D``, that a block operation
feeds: impossible, ``D`` being closed under predecessors).

:class:`DownSets` holds these methods for :class:`~napkin_cat.search.blocks.OpGraph`, which reads the data flow
(``preds``, ``succs``: per operation, bit masks; ``full``; the tables ``_fed``, ``_convex`` and ``_below`` it makes
empty).  Masks are bit sets (:mod:`.bitsets`).

>>> import napkin_cat as nc
>>> from napkin_cat.search.blocks import OpGraph
>>> g = OpGraph(nc.engine.to_netlist(nc.library.attention()))
>>> g.downsets(), g.convex(0b010), g.convex(0b101)
([0, 1, 3, 7], True, False)
"""
from __future__ import annotations

from napkin_cat.search.bitsets import bits


class DownSets:
    """Down-sets, their steps and convexity of an :class:`~napkin_cat.search.blocks.OpGraph` (module docstring)."""

    def steps(self, within: int | None = None, units=None) -> list:
        """The steps a down-set grows by: ``(mask, needs)``, one operation of ``within`` at a time (its inputs'
        operations inside ``within`` needed first), or with ``units`` (disjoint masks, convex as :meth:`units`
        makes them) a whole unit at a time (a unit not inside ``within`` is never taken; an operation in no unit
        is a step of its own).  Units are in-trees (only the root is read outside), so the units form a DAG
        and every down-set that holds each unit whole or not at all is reached one step at a time, without the
        exponentially many down-sets that split a unit in a wide graph of recomputed copies."""
        inside = self.full if within is None else within
        units, covered = [u for u in units or () if u], 0
        for u in units:
            covered |= u
        out = []
        for u in [u for u in units if u & ~inside == 0] + [1 << i for i in bits(inside & ~covered)]:
            need = 0
            for i in bits(u):
                need |= self.preds[i]
            out.append((u, need & inside & ~u))
        return out

    def downsets(self, within: int | None = None, units=None) -> list:
        """Every down-set (a mask closed under predecessors), by increasing size; ``within`` (a mask): the
        down-sets of the operations it holds, what lies outside counting as computed before; with ``units``,
        only those that hold each unit whole or not at all (grown by :meth:`steps`)."""
        return self.grown(within, units)[0]

    def grown(self, within: int | None = None, units=None) -> tuple:
        """``(downs, steps, takes)``: :meth:`downsets`, :meth:`steps`, and per down-set the steps it can take next
        (a bitmask of indices into ``steps``: those outside it whose needs it holds).

        **Law.** Where ``D`` takes step ``k`` to ``E = D | u_k``, ``takes[E]`` is ``takes[D]`` without ``k``, with
        the steps whose needs meet ``u_k`` and lie in ``E`` (the units are disjoint, so no other step of
        ``takes[D]`` meets ``u_k``; a step not in ``takes[D]`` whose needs lie in ``E`` needs something of
        ``u_k``): each down-set's steps are read off its parent's, not found among all steps.

        >>> import napkin_cat as nc
        >>> from napkin_cat.search.blocks import OpGraph
        >>> g = OpGraph(nc.engine.to_netlist(nc.library.attention()))
        >>> downs, steps, takes = g.grown()
        >>> [(d, [steps[k][0] for k in bits(takes[d])]) for d in downs]
        [(0, [1]), (1, [2]), (3, [4]), (7, [])]
        """
        steps = self.steps(within, units)
        owner = {i: k for k, (u, _) in enumerate(steps) for i in bits(u)}
        waits = [0] * len(steps)     # per step k: the steps whose needs meet u_k
        first = 0
        for j, (_, need) in enumerate(steps):
            if not need:
                first |= 1 << j
            elif all(i in owner for i in bits(need)):     # (else it needs an operation no step takes: never)
                for i in bits(need):
                    waits[owner[i]] |= 1 << j
        takes, frontier = {0: first}, [0]
        while frontier:
            nxt = []
            for d in frontier:
                can = takes[d]
                for k in bits(can):
                    e = d | steps[k][0]
                    if e not in takes:
                        more = can & ~(1 << k)
                        for j in bits(waits[k]):
                            u, need = steps[j]
                            if not u & e and not need & ~e:
                                more |= 1 << j
                        takes[e] = more
                        nxt.append(e)
            frontier = nxt
        return sorted(takes, key=lambda m: (m.bit_count(), m)), steps, takes

    def successors(self, block: int) -> int:
        """The operations an operation of ``block`` feeds directly (its own among them where one feeds another
        inside), kept per block: ``x`` feeds ``y`` where ``successors(x) & y``."""
        found = self._fed.get(block)
        if found is None:
            found = 0
            for i in bits(block):
                found |= self.succs[i]
            self._fed[block] = found
        return found

    def convex(self, block: int) -> bool:
        """No path of data flow leaves ``block`` and comes back into it, kept per block.

        **Law.** A path that leaves ``block`` and returns passes first through an operation ``o`` outside it that
        an operation inside feeds; from ``o`` the path reaches ``block``.  So ``block`` is convex exactly where no
        such ``o`` reaches it: ``below[o] & block == 0`` for every ``o`` in ``successors(block) & ~block``
        (``below[o]``: every operation ``o``'s value reaches, made once per graph in reverse topological order).

        >>> import napkin_cat as nc
        >>> from napkin_cat.search.blocks import OpGraph
        >>> g = OpGraph(nc.engine.to_netlist(nc.library.attention()))
        >>> g.convex(0b101), g.convex(0b011), g.convex(0b111)
        (False, True, True)
        """
        found = self._convex.get(block)
        if found is None:
            below = self._reach()
            found = not any(below[o] & block for o in bits(self.successors(block) & ~block))
            self._convex[block] = found
        return found

    def _reach(self) -> list:
        """Per operation, the operations its value reaches (its successors' and theirs), made once."""
        if self._below is None:
            left = [p.bit_count() for p in self.preds]
            order = [i for i, n in enumerate(left) if n == 0]
            for i in order:                      # (Kahn's order: the list grows as it is read)
                for s in bits(self.succs[i]):
                    left[s] -= 1
                    if left[s] == 0:
                        order.append(s)
            below = [0] * len(self.nodes)
            for i in reversed(order):
                reach = self.succs[i]
                for s in bits(self.succs[i]):
                    reach |= below[s]
                below[i] = reach
            self._below = below
        return self._below


__all__ = ["DownSets"]
