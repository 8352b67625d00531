"""An algorithm that fits at ``M`` fits at every larger ``M``: the symbolic answer ``H*(M)`` never rises.

Past the memory ``b`` where a tile of a form reaches its axis the same algorithm with that tile whole is the next
form (:func:`napkin_cat.search.envelope.clamped_candidates`).  Where the two keep different leading memory terms
the next form's ``H`` at ``b`` can exceed the first's (grouped-query attention with ``W_o`` at ``q 20 x 36 d 6 h 2
g 3 e 16``: 5,936 just below ``M = 216``, 7,200 at it), and the lower envelope then rose with ``M``.

**Law.** The algorithm at the end of the lower form, its tiles fixed at their values there, moves ``H_A(b)`` at every
``M ≥ b`` (its memory does not change with ``M``): :class:`HeldOn` is that algorithm as a candidate of the envelope,
a constant ``H`` from ``b`` on, so the answer past ``b`` is at most ``H_A(b)``.  Its tiles and ``H`` are the lower
form's at ``M = b`` (closed forms in the sizes, made where read).

>>> import sympy
>>> from napkin_cat.search.breakpoints import Breakpoint
>>> M, a = sympy.symbols("M a", positive=True)
>>> class Form:                                     # a stand-in for a Candidate: H = a²/M up to M = 4a
...     H, tiles, whole, made, end = a ** 2 / M, {"g": M / a}, [()], None, Breakpoint(16.0, 4 * a)
...     at_ref = staticmethod(lambda m: 16.0 / m)
>>> h = HeldOn(Form(), M)
>>> h.H, h.tiles, h.at_ref(1e9), h.start.at, h.until_at
(a/4, {'g': 4}, 1.0, 16.0, inf)
"""
from __future__ import annotations

import math

import sympy


class HeldOn:
    """The algorithm of the form ``c`` at ``c.end`` (its tiles fixed there), a candidate with a constant ``H`` from
    ``c.end`` on (module docstring): what the envelope reads of a candidate (``H``, ``tiles``, ``at_ref``,
    ``start``, ``end``, ``made``, ``whole``, ``note``)."""

    past, reaching, end, until = False, None, None, sympy.oo

    def __init__(self, c, M, ref=None):
        self._c, self._M, self._ref = c, M, ref or {}
        self.made, self.whole, self.start = c.made, c.whole, c.end
        value = c.at_ref(c.end.at)
        self.at_ref = lambda m: value
        self._H = self._tiles = None
        self._note = None
        self.beyond = ()        # (its tiles held, not solved: the candidate it continues names its own)

    @property
    def note(self) -> str:
        """What this piece is, and where its algorithm needs more than its first memory by the exact columns at the
        reference sizes (the lower form's terms of lower degree, carried on: stated, written where read)."""
        if self._note is None:
            at = self._c.end.at
            self._note = (f"the algorithm of the piece before at M = {at:.6g} (at the reference sizes), its tiles "
                          f"fixed there: it fits at every larger memory, H constant")
            need = exact_need(self._c.made, self._c.tiles, self._M, at, self._ref) if self._ref else None
            if need is not None and need > at * (1 + 1e-9):
                self._note += (f"; by the exact columns its algorithm needs {need:.6g} there (terms of lower degree "
                               f"than M's, {need / at:.3g}× M at the reference sizes)")
        return self._note

    @property
    def H(self):
        if self._H is None:
            self._H = sympy.sympify(self._c.H).xreplace({self._M: self._c.end.expr})
        return self._H

    @property
    def tiles(self):
        if self._tiles is None:
            at = {self._M: self._c.end.expr}
            self._tiles = {k: sympy.sympify(v).xreplace(at) for k, v in self._c.tiles.items()}
        return self._tiles

    @property
    def smallest(self):
        return self.start.expr

    @property
    def until_at(self) -> float:
        return math.inf


def exact_need(made, tiles: dict, M, at: float, ref: dict):
    """The largest exact column of the grouped kernels of ``made`` (``made.parts``: each its curve and the renaming
    of its program's tiles to the algorithm's) at the algorithm's ``tiles`` (forms in ``M``) at ``M = at`` and the
    reference sizes ``ref``, a float; None where a column is not a number there."""
    at_m = {M: sympy.Float(at)}
    ref = {k: sympy.sympify(v) for k, v in ref.items()}
    best = 0.0
    for curve, names in made.parts:
        if not curve.grouped:
            continue
        prog = curve.program
        sub = {}
        for t in prog.tiles:
            v = tiles.get(names.get(t, t) if names else t, 1)
            sub[t] = sympy.sympify(v).xreplace(at_m)
        for col in prog.columns:
            c = sympy.sympify(col).xreplace(sub)
            c = c.xreplace(names) if names else c
            try:
                best = max(best, float(c.xreplace(ref).xreplace(at_m)))
            except TypeError:
                return None
    return best
