"""The data live on a diagram's wires at concrete sizes: each level's column a running number (issue 35, item 4).

``nc.cost(d, sizes=…)`` reads its memory off the symbolic columns at the sizes.  Evaluating each column's total (a
sum over every live monomial) at the sizes costs the number of wires live, at every column: the square of the
diagram's length where most wires stay live (a deep MLP whose every layer has its own width, a tree of products).
:class:`LiveAt` keeps, per level, the number of values live at the sizes as values come and go, so a column costs
what changed in it, and its total is the symbolic column at the sizes, exactly::

    LiveAt(env).column() == {ℓ: value(Live().column()[ℓ], env)}        after the same puts and takes

:class:`SympyAt` is the arithmetic of the symbolic functor (:class:`~napkin_cat.cost.polynomial.Sympy`) whose live
data is a :class:`LiveAt`: its transfers and FLOPs are the symbolic ones, its columns numbers at the sizes.

>>> import napkin_cat as nc
>>> (a, b) = nc.types("q d, q").inside
>>> live = LiveAt({nc.symbol("q"): 3, nc.symbol("d"): 5})
>>> live.put([(0, a), (1, b), (0, a)])      # value 0 on two wires (a copy): counted once
>>> live.column()
{0: 18}
>>> live.take([(0, a)]); live.column(without=[(0, a)])
{0: 3}
"""
from __future__ import annotations

from fractions import Fraction

from napkin_cat.cost.exact_arithmetic import value
from napkin_cat.cost.live import Wires, numel
from napkin_cat.cost.polynomial import Sympy


def _whole(v):
    return v.numerator if isinstance(v, Fraction) and v.denominator == 1 else v


class LiveAt(Wires):
    """:class:`~napkin_cat.cost.live.Live`'s interface (``put``, ``take``, ``hold``, ``drop``, ``column``) at the
    sizes ``env`` (symbol → number): per level a running total and a count of the values held, updated by the values
    that enter and leave (module docstring).  An array's size at ``env`` is evaluated once per walk."""

    def __init__(self, env: dict):
        self.env = env
        self.wires = {}     # value id -> number of wires carrying it
        self.totals = {}    # level -> [values held, their size at env]
        self._sizes = {}    # id(array) -> (array, its size at env): the array kept, so that its id is not reused
        self._last = None   # the column last read, handed out again while no level changed

    def _size(self, arr):
        found = self._sizes.get(id(arr))
        if found is None:
            found = self._sizes[id(arr)] = (arr, value(numel(arr), self.env))
        return found[1]

    def shift_all(self, arrays, sign: int, totals=None) -> None:
        totals = self.totals if totals is None else totals
        for arr in arrays:
            level = totals.get(arr.level)
            if level is None:
                level = totals[arr.level] = [0, 0]
            level[0] += sign
            level[1] += sign * self._size(arr)

    def column(self, without=()) -> dict:
        """Level → the number of values live at the sizes (a level holding none left out); ``without``: values on
        wires about to be consumed, left out.  The very last column (the same dict) where nothing changed since."""
        if without:
            totals = {l: list(t) for l, t in self.totals.items()}
            on_them = {}
            for vid, arr in without:
                on_them[vid] = on_them.get(vid, 0) + 1
            self.shift_all([arr for vid, arr in dict(without).items() if self.wires[vid] == on_them[vid]], -1, totals)
            return {l: _whole(t[1]) for l, t in totals.items() if t[0]}
        out = {l: _whole(t[1]) for l, t in self.totals.items() if t[0]}
        last = self._last
        if last is not None and last == out:
            return last
        self._last = out
        return out


class SympyAt(Sympy):
    """The symbolic functor's arithmetic (sympy expressions, the same name: the same kept pieces) whose live data
    is counted at the sizes ``env`` (:class:`LiveAt`): its columns numbers, its transfers and FLOPs symbolic.
    ``trip_kinds`` (:meth:`~napkin_cat.cost.trip_kinds.TripKinds.at`, its ``kind(loop)``): which trips each masked
    loop runs at the sizes, which its columns read (:mod:`napkin_cat.cost.columns`); None: every trip as written."""

    def __init__(self, env: dict, trip_kinds=None):
        self.env, self.trip_kinds = env, trip_kinds

    def live(self) -> LiveAt:
        return LiveAt(self.env)

    def expand(self, v):
        return v if isinstance(v, (int, Fraction)) else super().expand(v)
