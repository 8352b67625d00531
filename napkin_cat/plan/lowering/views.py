"""The variables a lowering pass makes, and the views of them that the loops it adds see.

A pass that adds loops (a unit's tiles of the scaling axis, a split's tiles) keeps a :class:`Scope`: the
loops around the statement it is writing, outermost first, and whether it writes a stream's tail.  A
variable made inside some of them (its *birth*: how many were open) holds one tile of each loop opened
since; a statement sees the part of it that the current trips of the loops opened since select::

    view(v, loops)   = v[… Σ_{ℓ ∈ loops since birth(v), ℓ.axis = a} i_ℓ · tile_ℓ : +tile_innermost …]
    shape_in(v, loops) = v's shape with each axis the loops cut at the innermost tile

>>> import sympy
>>> from napkin_cat.plan.ir import Variable
>>> from napkin_cat.syntax.axis import symbol
>>> i, g, w = sympy.Symbol("i_q'", integer=True), symbol("g_q"), symbol("w_q")
>>> vs = Variables({"o": Variable("o", (("q", g), ("d", symbol("d"))), "fp32", 2, "state")}, {}, {}, set())
>>> vs.born("o", 0, in_tail=False)
>>> vs.view("o", (Loop("q", w, i),))
Ref(var='o', index=(('q', Range(start=i_q'*w_q, tile=w_q, end=g_q)),))
"""
from __future__ import annotations

from dataclasses import dataclass

import sympy

from napkin_cat.plan.ir import Range, Ref, Variable, loop_index
from napkin_cat.plan.lowering.state import LoweringError
from napkin_cat.syntax.axis import symbol


@dataclass(frozen=True)
class Loop:
    """A loop a pass adds: ``axis`` in tiles of ``tile`` (index ``index``), on the block or a unit."""

    axis: str
    tile: sympy.Expr
    index: sympy.Symbol


@dataclass(frozen=True)
class Scope:
    """Where a statement is written: the added ``loops`` around it (outermost first), and whether it is in a
    stream's tail (what the tail makes reuses the loop's storage: it is not the steady state)."""

    loops: tuple = ()
    in_tail: bool = False

    def inside(self, loop: Loop) -> "Scope":
        return Scope(self.loops + (loop,), self.in_tail)

    def tail(self) -> "Scope":
        return Scope(self.loops, True)

    @property
    def depth(self) -> int:
        return len(self.loops)


class Variables:
    """The variables under construction: ``vars`` (in order), their ``births``, descriptions (``what``),
    the ``tail`` ones, and the ``sizes`` (tiles added as a pass asks for them, from ``given``)."""

    def __init__(self, variables: dict, sizes: dict, given: dict, taken: set, what: dict | None = None,
                 tail: set | None = None):
        self.vars, self.sizes, self.given, self.taken = dict(variables), dict(sizes), given, taken
        self.births: dict = {}
        self.what = dict(what or {})
        self.tail = set(tail or ())

    def __getitem__(self, name) -> Variable:
        return self.vars[name]

    def new(self, base: str, shape, dtype, level, role, origin, depth) -> str:
        """A fresh variable ``base`` (``base_2``, … if taken) born at ``depth``."""
        name, k = base, 1
        while name in self.vars:
            k += 1
            name = f"{base}_{k}"
        self.vars[name] = Variable(name, tuple(shape), dtype, level, role, origin)
        self.births[name] = depth
        return name

    def born(self, name, depth, *, in_tail):
        self.births.setdefault(name, depth)
        if in_tail:
            self.tail.add(name)

    def tile(self, name: str, why: str) -> sympy.Symbol:
        """The symbol of a tile the pass adds, its size taken from the given sizes."""
        s = symbol(name)
        if s not in self.sizes:
            if name not in self.given:
                raise LoweringError(f"the configuration needs the size of {name} ({why}); pass sizes={{{name!r}: …}}")
            v = self.given[name]
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise LoweringError(f"the size of {name} must be a positive int, got {v!r}")
            self.sizes[s] = v
        return s

    def loop(self, axis, tile) -> Loop:
        return Loop(axis, tile, loop_index(axis, self.taken))

    # ------------------------------------------------------------------ views
    def view(self, name, loops, orig: Ref | None = None) -> Ref:
        """The part of ``name`` that the current trips of ``loops`` (those opened since its birth) see, inside
        the slice ``orig`` of the two-level plan (a sub-loop's slice) when given."""
        v = self.vars[name]
        since = self.births.get(name, 0)
        base = dict(orig.index) if orig is not None else {}
        index = []
        for a, e in v.shape:
            mine = [lp for lp in loops[since:] if lp.axis == a]
            r0 = base.get(a)
            if not mine:
                if r0 is not None:
                    index.append((a, r0))
                continue
            origin = r0.start if r0 is not None else sympy.Integer(0)
            start = origin + sum((lp.index * lp.tile for lp in mine), sympy.Integer(0))
            if len(mine) > 1:
                end = origin + sum((lp.index * lp.tile for lp in mine[:-1]), sympy.Integer(0)) + mine[-2].tile
            else:
                end = r0.end if r0 is not None else e
            index.append((a, Range(start, mine[-1].tile, end)))
        return Ref(name, tuple(index))

    def view_shape(self, name, loops, orig: Ref | None = None) -> tuple:
        """The shape of :meth:`view`: each sliced axis at its innermost tile."""
        v = self.vars[name]
        since = self.births.get(name, 0)
        base = dict(orig.index) if orig is not None else {}
        out = []
        for a, e in v.shape:
            tiles = [lp.tile for lp in loops[since:] if lp.axis == a]
            out.append((a, tiles[-1] if tiles else base[a].tile if a in base else e))
        return tuple(out)


def shape_in(shape, loops, since=0) -> tuple:
    """A shape with each axis that the loops ``loops[since:]`` partition cut to the innermost tile."""
    out = []
    for a, e in shape:
        tiles = [lp.tile for lp in loops[since:] if lp.axis == a]
        out.append((a, tiles[-1] if tiles else e))
    return tuple(out)
