"""``H*(M)`` of one partitioned kernel: exact integers per memory size, or the large-M closed form.

A kernel's tiles are its own and its memory columns are its own (the arrays between kernels live at
the level above), so the transfers of a chain of kernels are the sum of each kernel's ``H*(M)``:

* numeric (``sizes`` and a number ``M``): :func:`napkin_cat.cost.optimum.optimal`'s exact integer
  search over divisor tiles; ``None`` when no tiling fits (below :meth:`Curve.smallest`);
* symbolic: the large-M form of :func:`~napkin_cat.cost.optimum.optimal` (a sum of powers of ``M``),
  valid from the kernel's smallest memory (every tile 1) up.

A kernel with no group partition has no tiles: it moves ``H`` whatever the memory and needs its
largest column.

>>> import napkin_cat as nc
>>> mm = nc.group(nc.group(nc.stream(nc.kernel(nc.library.matmul()), "b", "s_b"), "a", "g_a"), "c", "g_c")
>>> c = Curve(mm)
>>> c.at({"a": 64, "b": 64, "c": 64}, 2 ** 10)
(28672, {g_a: 32, g_c: 16, s_b: 1})
>>> c.smallest({"a": 64, "b": 64, "c": 64}), c.symbolic(nc.symbol("M"))
(3, a*c + 2*a*b*c/sqrt(M))
"""
from __future__ import annotations

import bisect

import sympy

from napkin_cat.cost.exact_arithmetic import value
from napkin_cat.cost.iocost import cost
from napkin_cat.cost.maxima import column_max
from napkin_cat.cost.optimum import optimal
from napkin_cat.cost.sized_optimum import optimum_values, prepared
from napkin_cat.cost.polynomial import POLYNOMIAL, SYMPY, sympified
from napkin_cat.cost.tiling import program, tiled_streams, unexpanded
from napkin_cat.algorithms.partition_facts import KernelFacts
from napkin_cat.errors import NapkinError, NotPolynomialError
from napkin_cat.search.least_memory import least_held
from napkin_cat.search.variants import Variant
from napkin_cat.syntax.sizes import Sizes
from napkin_cat.cost.expanded import expand


def _env(sizes: dict) -> dict:
    return Sizes(sizes).env


class Curve:
    """The optimum transfers of one partitioned kernel at one level, as a function of the memory.

    ``partition``: the partitioned kernel's diagram, or a :class:`~napkin_cat.search.variants.Variant`, whose record
    is costed (its diagram is built only when asked for, :attr:`diagram`: the record's cost is the diagram's).
    ``role``: the part of the rule book that builds the partition (``"stream"``, ``"sweep"``, ``"nest"``,
    ``"split"``: :func:`~napkin_cat.search.paths.playable`), ``sliced``: whether its stream is a sweep.  Its points
    are remembered under their whole keys (sizes, memory, tile grid, caps), each kept once computed, so a curve may
    be shared between calls and threads.  ``density``: the fraction of a stream's trips a mask from data lets run
    (bound in its cost, :meth:`~napkin_cat.cost.record.Cost.at_density`; 1: dense, the worst case).

    Its points at numeric sizes read :attr:`search_cost`, the record computed in polynomials of Python numbers
    (:mod:`napkin_cat.cost.polynomial`) and evaluated without sympy (where a value is no polynomial, a masked
    stream's ceiling say, sympy's record); the large-M form reads :attr:`cost`, the record in sympy expressions
    (``nc.cost``'s).  Each is built on first use: a numeric search builds no sympy record, a symbolic one no
    polynomial record (their groups, streams and tiles are the same)."""

    def __init__(self, partition, level: int = 1, *, role: str = "stream", sliced: bool = False, density=1):
        self.partition, self.level, self.role, self.sliced = partition, level, role, sliced
        self.density = density
        self._search = self._sympy = self._streams = None
        self._smallest, self._symbolic, self._capped, self._all = {}, {}, {}, {}
        self._grouped = self._symbols = self._program = None
        self._least = {}
        self._flat, self._prepared = {}, {}   # per sizes: a kernel's transfers without tiles; its prepared search
        self.between = 0    # memories answered between two searched alike (:meth:`at_all`), not searched
        self._points = {}   # (sizes, tiles, count) -> {memory: (H*, tiles)}: the points answered

    def least(self, sizes: dict) -> int:
        """A lower bound of the memory every tiling of the partition needs at ``sizes``, read off the function
        before the candidate is costed (:func:`~napkin_cat.search.least_memory.least_held`: its inputs' tiles with
        every partitioned axis at 1); 0 where nothing is claimed (a partition of an algorithm, or at another level
        than its kernel's).  A memory below it fits no tiling: :meth:`at` and :meth:`at_all` answer so uncosted."""
        key = tuple(sorted(sizes.items()))
        found = self._least.get(key)
        if found is None:
            v = self.partition
            if isinstance(v, Variant) and isinstance(v.source, KernelFacts) and v.level == self.level:
                axes = ((v.stream,) if v.stream is not None else ()) + tuple(v.inner) + tuple(v.groups)
                found = least_held(v.function, axes, sizes, v.level)
            else:
                found = 0
            self._least[key] = found
        return found

    def _costed(self, arithmetic):
        """The partition's cost record in ``arithmetic`` (:mod:`napkin_cat.cost.polynomial`), its density bound."""
        recorded = isinstance(self.partition, Variant)
        out = cost(self.partition.record if recorded else self.partition, arithmetic=arithmetic,
                   ops=arithmetic is SYMPY)     # the search's record: transfers, memory, FLOPs; no per-box records
        out = out.at_density(self.density)
        if recorded:   # a masked stream's transfers are counted at sizes on the algorithm itself: the built one
            out.source = self.partition.diagram if out.estimated else None
        return out

    @property
    def cost(self):
        """The cost record in sympy expressions (built on first use)."""
        if self._sympy is None:
            self._sympy = self._costed(SYMPY)
        return self._sympy

    @property
    def search_cost(self):
        """The cost record in polynomials of Python numbers, or :attr:`cost` where a value is none (built on first
        use)."""
        if self._search is None:
            try:
                self._search = self._costed(POLYNOMIAL)
            except NotPolynomialError:
                self._search = self.cost
        return self._search

    @property
    def costed(self) -> bool:
        """Whether a cost record of the candidate has been built (the search's or sympy's): the skips that
        answer without costing (:meth:`least`) leave it False."""
        return self._search is not None or self._sympy is not None

    def _built(self):
        """A record already built (the search's first), else the search's: what the structure is read off (the
        groups, streams, tiles and the columns' symbols are the same in both)."""
        return self._search if self._search is not None else self._sympy if self._sympy is not None \
            else self.search_cost

    @property
    def streams(self) -> tuple:
        """The kernel's stream sizes (symbols), in name order: the tiles each is answered with (1) come in one order
        whatever the hash seed (tests/search/test_tile_order.py)."""
        if self._streams is None:
            self._streams = tuple(sorted({s for _, s, _ in self._built().streams if isinstance(s, sympy.Symbol)},
                                         key=str))
        return self._streams

    @property
    def diagram(self):
        """The partitioned kernel (built on first use where the curve was made from a variant's record)."""
        return self.partition.diagram if isinstance(self.partition, Variant) else self.partition

    @property
    def bubbles(self):
        """The kernel's bubbles without building it: a variant's record, whose ``Kernel``, ``Grid`` and ``Stream``
        bubbles (axes, tiles, parts) are the built partition's (only the insides are left as they were), or the
        partition itself.  What its launches and split parts are read off (:mod:`.parallelism`)."""
        return self.partition.record if isinstance(self.partition, Variant) else self.partition

    @property
    def program(self):
        """The tiling program of :attr:`cost` at the curve's level (:func:`~napkin_cat.cost.tiling.program`), made
        once: the symbolic envelope reads it for each candidate that holds this kernel, and for each tile."""
        if self._program is None:
            self._program = program(self.cost, self.level)
        return self._program

    @property
    def H(self):
        return sympified(self.search_cost.H.get(self.level, 0))

    @property
    def grouped(self) -> bool:
        """Whether the kernel has tiles to optimise: group partitions, or a stream whose trips re-read data."""
        if self._grouped is None:
            built = self._built()
            self._grouped = bool(built.groups) or bool(tiled_streams(built, self.level))
        return self._grouped

    def _fixed(self) -> dict:
        return {s: 1 for s in self.streams}

    def _ones(self) -> dict:
        """Every stream and tile 1: the kernel at its least memory."""
        ones = self._fixed()
        if self.grouped:
            ones.update({t: 1 for t in unexpanded(self._built(), self.level).tiles})
        return ones

    def smallest(self, sizes: dict):
        """The least memory that fits the kernel (every tile and stream 1), at ``sizes`` (or symbolic: ``{}``).

        At concrete sizes each column is evaluated in exact arithmetic (:mod:`napkin_cat.cost.exact_arithmetic`)."""
        key = tuple(sorted(sizes.items()))
        if key not in self._smallest:
            env = {**self._ones(), **_env(sizes)}
            if self._symbols is None:
                self._symbols = set().union(*(sympified(c).free_symbols
                                              for c in self._built().columns.get(self.level, [])))
            if self._symbols <= env.keys():
                cols = self.search_cost.columns.get(self.level, [])
                self._smallest[key] = sympy.sympify(max((value(c, env) for c in cols), default=0))
            else:
                cols = self.cost.columns.get(self.level, [])
                at = {k: sympy.sympify(v) for k, v in env.items()}      # (symbols to numbers: xreplace, as subs)
                vals = [expand(sympy.sympify(c).xreplace(at)) for c in cols]
                self._smallest[key] = (max(vals) if all(v.is_number for v in vals) else
                                       column_max(vals, exact=False)) if vals else sympy.Integer(0)
        return self._smallest[key]

    def at(self, sizes: dict, memory: int, tiles: str = "divisors", count: bool = True):
        """``(H*, tiles)`` at ``sizes`` with ``memory`` values at the level, or ``(None, {})`` if nothing fits.

        ``tiles``: ``"divisors"`` (each tile divides its axis) or ``"any"`` (a shorter last tile).  ``count``: where
        the transfers are an estimate (a masked stream), each tiling ranked by the transfers counted at it (True),
        or by the estimate (False: :func:`~napkin_cat.cost.optimum.optima`'s ``count``); part of the point's key.
        """
        points = self._points_of(tuple(sorted(sizes.items())), tiles, count)
        found = points.get(int(memory))
        if found is None:
            found = points[int(memory)] = self._solve(sizes, memory, tiles, count)
        return found

    def _points_of(self, skey, tiles, count) -> dict:
        """``{memory: (H*, tiles)}`` answered at the sizes ``skey`` (sorted pairs), tile grid and ``count``."""
        found = self._points.get((skey, tiles, count))
        if found is None:
            found = self._points[(skey, tiles, count)] = {}
        return found

    def at_all(self, sizes: dict, memories, tiles: str = "divisors", caps=(), count: bool = True) -> list:
        """:meth:`at` for every memory of ``memories`` (one pass over the tile candidates; the list is kept, as
        the search asks it once per memory).  ``caps``: expressions in the tiles that must stay at most 1 (a
        requirement, :mod:`.parallelism`); only for a grouped kernel.  ``count``: as :meth:`at`'s.  A memory between
        two this curve answered alike (or below one with no tiling) is read off them, not searched
        (:meth:`_between`): the symbolic mode's probes ask between the memories its grid searched."""
        skey = tuple(sorted(sizes.items()))
        if caps:
            key = (skey, tuple(int(m) for m in memories), tiles, tuple(caps), count)   # (sympy: structural equality)
            if key not in self._capped:
                found = optimum_values(self.search_cost, list(memories), self.level, sizes=sizes, tiles=tiles,
                                       caps=caps, count=count)
                self._capped[key] = [(None, {}) if o is None else (int(o[0]), o[1]) for o in found]
            return self._capped[key]
        whole = (skey, tuple(memories), tiles, count)
        found = self._all.get(whole)
        if found is not None:
            return found
        points = self._points_of(skey, tiles, count)
        todo = [m for m in memories if int(m) not in points]
        if todo:     # a memory below the least any tiling needs: no fit, and nothing costed for it
            least = self.least(sizes)
            for m in todo:
                if least > m:
                    points[int(m)] = (None, {})
            todo = [m for m in todo if least <= m]
        if todo and self.grouped:     # a memory between two answered alike: their answer, unsearched (between)
            todo = self._between(points, todo)
        if todo and self.grouped:
            for m, o in zip(todo, self._values(sizes, skey, todo, tiles, count)):
                points[int(m)] = (None, {}) if o is None else (int(o[0]), o[1])
        found = self._all[whole] = [points.get(int(m)) or self.at(sizes, m, tiles, count) for m in memories]
        return found

    def _between(self, points, todo) -> list:
        """The memories of ``todo`` still to search: each answered already at the nearest memories searched on
        either side is given their answer (a copy), without a search (the curve's :attr:`between` counts them).

        **Law.** The integer search answers at ``m`` the least tiling, by a key that does not read ``m``
        (:func:`~napkin_cat.cost.integer_search.best_many`: the transfers, then the peak, then the later tiles),
        among the tilings whose every column is within ``m``: a set that only grows with ``m``.  So for
        ``lo < m < hi``: where ``hi`` has no tiling, neither has ``m``; where ``lo`` and ``hi`` answer the same
        tiling ``T``, ``T`` fits at ``m`` (it fits at ``lo``) and no tiling that fits at ``m`` beats it (it fits
        at ``hi``, where ``T`` is the least): ``m``'s answer is ``T``.  ``points``: the curve's answers at the sizes,
        tile grid and count asked (:meth:`_points_of`), where the answers found are put."""
        if not points:
            return todo
        at = sorted(points)
        left, found = [], []
        for m in todo:
            i = bisect.bisect_left(at, int(m))
            hi = points[at[i]] if i < len(at) else None
            lo = points[at[i - 1]] if i > 0 else None
            if hi is not None and (hi[0] is None or (lo is not None and lo[0] == hi[0] and lo[1] == hi[1])):
                found.append((m, hi))
            else:
                left.append(m)
        for m, hi in found:    # (kept after the walk: each answer read off the memories searched)
            points[int(m)] = (hi[0], dict(hi[1]))
            self.between += 1
        return left

    def _solve(self, sizes, memory, tiles="divisors", count=True):
        if self.least(sizes) > memory:      # no tiling fits (:meth:`least`): not costed
            return None, {}
        skey = tuple(sorted(sizes.items()))
        if not self.grouped:
            if self.smallest(sizes) > memory:
                return None, {}
            found = self._flat.get(skey)     # (the transfers of a kernel without tiles: the same at every memory)
            if found is None:
                found = self._flat[skey] = int(value(self.H, {**self._fixed(), **_env(sizes)}))
            return found, {s: sympy.Integer(1) for s in self.streams}
        (o,) = self._values(sizes, skey, [memory], tiles, count)
        return (None, {}) if o is None else (int(o[0]), o[1])

    def _values(self, sizes, skey, memories, tiles, count) -> list:
        """:func:`~napkin_cat.cost.sized_optimum.optimum_values` of the search record at ``memories``: through the
        search prepared once per sizes, tile grid and ``count`` (:func:`~napkin_cat.cost.sized_optimum.prepared`),
        kept, where it can be (int memories, transfers not counted per tiling)."""
        key = (skey, tiles, count)
        found = self._prepared.get(key, self)
        if found is self:
            found = self._prepared[key] = prepared(self.search_cost, self.level, sizes=sizes, tiles=tiles,
                                                   count=count)
        if found is None or not all(type(m) is int for m in memories):
            return optimum_values(self.search_cost, list(memories), self.level, sizes=sizes, tiles=tiles, count=count)
        return found.values_at(memories)

    def symbolic(self, M):
        """The large-M form of ``H*`` (a sum of powers of ``M``), or ``H`` itself for a kernel without tiles."""
        return self.symbolic_optimum(M)[0]

    def symbolic_optimum(self, M):
        """``(H*, tiles)`` in the large-M form (tiles as expressions in ``M``; streams 1)."""
        if M not in self._symbolic:
            symbolic = self.cost
            if not self.grouped:
                self._symbolic[M] = (expand(sympy.sympify(symbolic.H.get(self.level, 0)).subs(self._fixed())),
                                     {s: sympy.Integer(1) for s in self.streams})
            else:
                o = optimal(symbolic, memory=M, level=self.level, exact=False)
                if o.H is None:
                    raise NapkinError(f"no closed form for the large-M optimum of {self.diagram}: {o.notes}")
                self._symbolic[M] = (o.H, dict(o.sizes))
        return self._symbolic[M]
