"""Where a large-M form stops describing an algorithm: the memory at which one of its tiles reaches its axis.

A candidate's large-M form chooses each tile as a function ``t(M)`` of the memory (``g_c = √M``,
``g_e = (√(2M + d²) − d)/2``); the form holds while ``t(M) ≤ n`` (``n`` the tile's axis), up to the root of
``t(M) = n`` (``M = c²``, ``M = 2e(d + e)``).  The symbolic envelope (:mod:`napkin_cat.search.envelope`) orders its
candidates at the *reference sizes*, so what it needs of most roots is their value there; only the few that end a
piece of the answer are needed in closed form.  So a root is a :class:`Breakpoint`: its value at the reference
sizes, found first, and its closed form, solved on first read.

* ``t = α M^β + c`` (a monomial in ``M`` and a constant: the paper's square-root and linear tiles): the root
  ``((n − c)/α)^(1/β)`` in closed form at once.
* any other ``t`` (a radical of a sum, a quotient, the tiles of a binding column with lower-order terms): the
  value by bracketing ``t(M) − n`` at the reference sizes over memories ``2^-64 … 2^256`` (one sign change of a
  monotone difference: one positive root, which is where ``t`` meets ``n``); the closed form is sympy's root of
  ``t = n`` that takes that value there (:func:`solved_root`), solved only when read.  Where the difference is
  not monotone on the grid, or changes sign more than once, sympy's roots are solved at once and the first
  positive root at which ``t`` meets ``n`` is taken, as they always were.
* **a monotone tile with no crossing in the scanned range never reaches its axis** (:func:`no_crossing`):
  ``t(M) − n`` real, finite, monotone and of one strict sign at every memory ``2^-64 … 2^256`` at the reference
  sizes has no root at any memory the scan covers, so no breakpoint is returned and sympy is not asked (what it
  answered there: no positive root, as for a tile that tends to its axis from below, or one past its axis from
  the first memory on; a root beyond the scan, below ``2^-64`` or above ``2^256`` values, is no memory a model
  holds).

>>> import napkin_cat as nc
>>> M, d, e = nc.symbol("M"), nc.symbol("d"), nc.symbol("e")
>>> b = reaching((-d + sympy.sqrt(2 * M + d ** 2)) / 2, e, M, {d: 64, e: 256})
>>> b.at, b.expr                      # the value first; the closed form on first read
(163840.0, 2*e*(d + e))
"""
from __future__ import annotations

import functools
import math

import sympy

from napkin_cat.cost.optimum import power_terms
from napkin_cat.cost.seeded import solve as seeded_solve
from napkin_cat.errors import NapkinError

#: the memories scanned for a sign change of ``t(M) − n``: ``2^k`` for k in this range
SCAN = range(-64, 257)


class Breakpoint:
    """A memory where a form stops holding: ``at``, its value at the reference sizes (a float), and ``expr``, its
    closed form in the sizes, solved on first read (``solve()`` called once) when not given.

    >>> Breakpoint(4.0, sympy.Integer(4)).expr, Breakpoint(9.0, solve=lambda: sympy.Integer(9)).expr
    (4, 9)
    """

    __slots__ = ("at", "_expr", "_solve")

    def __init__(self, at: float, expr=None, solve=None):
        self.at, self._expr, self._solve = at, expr, solve

    @property
    def expr(self):
        if self._expr is None:
            self._expr, self._solve = self._solve(), None
        return self._expr

    def __repr__(self):
        return f"Breakpoint({self.at!r})"


def reaching(t, n, M, ref):
    """The :class:`Breakpoint` where the tile ``t(M)`` first meets its axis ``n`` at the reference sizes ``ref``
    (symbols → numbers), or None where it never does (module docstring)."""
    return _reaching(t, n, M, tuple(sorted(ref.items(), key=lambda kv: str(kv[0]))))


@functools.lru_cache(maxsize=1024)
def _reaching(t, n, M, pairs: tuple):
    """:func:`reaching` of the sorted ``(symbol, number)`` pairs ``pairs``: a pure function of its key (the same
    tile recurs in the candidates that share a kernel), its breakpoint shared (solved once where read)."""
    ref = {k: sympy.sympify(v) for k, v in pairs}     # (xreplace puts a value in as it is: a sympy number)
    try:
        terms = power_terms(t, M)
    except NapkinError:
        terms = None
    if terms is not None:
        growing = [(a, b) for a, b in terms if b != 0]
        if len(growing) == 1 and growing[0][1] < 0:      # t = α M^-β + c: one root (checked below)
            (alpha, beta), c = growing[0], sum((a for a, b in terms if b == 0), sympy.Integer(0))
            return _first_meeting([((n - c) / alpha) ** (1 / -beta)], t, n, M, ref)
    at = bracketed(t, n, M, pairs)
    if at is None and no_crossing(t, n, M, pairs):
        return None
    if at is None:
        return _first_meeting(sympy_roots(t, n, M), t, n, M, ref)
    return Breakpoint(at, solve=lambda: solved_root(t, n, M, ref, at))


def _first_meeting(roots, t, n, M, ref):
    """The first of ``roots`` that is real and positive at ``ref`` and where ``t`` equals ``n`` there."""
    for r in roots:
        try:
            v = complex(sympy.sympify(r).xreplace(ref).evalf())
        except (TypeError, ValueError):
            continue
        if abs(v.imag) <= 1e-9 * max(1.0, abs(v.real)) and v.real > 0 and meets(t, n, M, v.real, ref):
            return Breakpoint(v.real, r)
    return None


def meets(t, n, M, m: float, ref) -> bool:
    """Whether the tile ``t`` equals its axis ``n`` at ``M = m`` at the reference sizes (a root of
    ``α M^-β + c = n`` taken through a power is one only where ``n − c`` has α's sign)."""
    try:
        tv, nv = complex(sympy.sympify(t).xreplace(ref).subs(M, m)), complex(sympy.sympify(n).xreplace(ref))
    except (TypeError, ValueError):
        return False
    return abs(tv - nv) <= 1e-6 * max(1.0, abs(nv))


def solved_root(t, n, M, ref, at: float):
    """sympy's root of ``t = n`` in ``M`` whose value at ``ref`` is ``at`` (the bracketed one): the first of
    sympy's roots, in its order, that is real, positive and where ``t`` meets ``n``, as
    :func:`reaching` takes it where it does not bracket; ``at`` as a number where sympy finds no such root.

    >>> import napkin_cat as nc
    >>> M, n = nc.symbol("M"), nc.symbol("n")
    >>> solved_root(sympy.sqrt(M + n) - 1, n, M, {n: sympy.Integer(3)}, 13.0)
    -n + (n + 1)**2
    """
    try:
        roots = sympy_roots(t, n, M)
    except (NotImplementedError, ValueError, TypeError):     # beyond sympy's solvers: the number is the answer
        roots = ()
    found = _first_meeting(roots, t, n, M, ref)
    if found is None or abs(found.at - at) > 1e-6 * at:
        return sympy.Float(at, 15)
    return found.expr


@functools.lru_cache(maxsize=1024)
def sympy_roots(t, n, M) -> tuple:
    """sympy's roots of ``t = n`` in ``M`` (sympy expressions are values: the same equation is met once per kernel
    shape that recurs across candidates).  Unchecked by sympy (``check=False``: its ``checksol`` simplifies every
    root, 30 of 35 s profiled in a gelu MLP's symbolic derive): a root is kept only where it meets the bracketed
    value at the reference sizes (:func:`_first_meeting`).  Its factorisations' points seeded
    (:func:`napkin_cat.cost.seeded.solve`): the same time in every process."""
    return tuple(seeded_solve(sympy.Eq(t, n), M, check=False))


@functools.lru_cache(maxsize=1024)
def _scanned(t, n, M, ref: tuple):
    """``(f, ys)``: ``t(M) − n`` at the reference sizes ``ref`` as a float function of ``M``, and its values at the
    memories of :data:`SCAN`; ``(None, None)`` where it cannot be evaluated as real floats (a pure function of its
    key: the process's memo, bounded)."""
    env = {k: sympy.sympify(v) for k, v in ref}
    try:
        f = sympy.lambdify(M, sympy.sympify(t).xreplace(env) - sympy.sympify(n).xreplace(env), "math")
    except (TypeError, ValueError, SyntaxError):
        return None, None

    def at(m: float) -> float:
        try:
            v = f(m)
        except (ValueError, ZeroDivisionError, OverflowError, TypeError):
            return math.nan
        return float(v) if isinstance(v, (int, float)) else math.nan

    ys = [at(2.0 ** k) for k in SCAN]
    if any(math.isnan(y) or math.isinf(y) for y in ys):
        return None, None
    return at, tuple(ys)


#: a step of the scanned difference against its trend this small, relative to the values, is the float's rounding
ROUNDING = 1e-12


def monotone(ys) -> bool:
    """Whether the scanned values ``ys`` never rise or never fall, up to rounding: a step against the trend of at most
    :data:`ROUNDING` of the larger value counts as level (``√(M + h²) − h`` at ``M = 2^-33`` is ``h`` to the last
    bit, and ``t(M) − n`` there steps down one unit in the last place of ``n`` before it rises: the difference is
    monotone, its float is not).

    >>> monotone([-1088.0, -1088.0000000000002, -1087.5, 3.0]), monotone([1.0, 0.5, 1.0])
    (True, False)
    """
    def level(a, b) -> bool:
        return abs(a - b) <= ROUNDING * max(abs(a), abs(b))
    return (all(a <= b or level(a, b) for a, b in zip(ys, ys[1:]))
            or all(a >= b or level(a, b) for a, b in zip(ys, ys[1:])))


def no_crossing(t, n, M, ref: tuple) -> bool:
    """Whether ``t(M) − n`` is real, finite, monotone and of one strict sign at every memory of :data:`SCAN` at the
    reference sizes ``ref`` (sorted ``(symbol, number)`` pairs): then the tile ``t`` meets its axis ``n`` at no
    memory the scan covers (the module's law).

    >>> import napkin_cat as nc
    >>> M, n, d = nc.symbol("M"), nc.symbol("n"), nc.symbol("d")
    >>> no_crossing(n * M / (2 * M + 1), n, M, ((n, 3),)), no_crossing(sympy.sqrt(M + d ** 2), n, M, ((d, 5), (n, 3)))
    (True, True)
    >>> no_crossing(sympy.sqrt(M), n, M, ((n, 3),)), no_crossing(sympy.sin(M), n, M, ((n, 3),))
    (False, False)
    """
    _, ys = _scanned(t, n, M, ref)
    return ys is not None and monotone(ys) and (all(y < 0 for y in ys) or all(y > 0 for y in ys))


def bisected(holds, lo: float, hi: float, steps: int = 80) -> float:
    """Where ``holds`` stops holding between ``lo`` (where it holds) and ``hi`` (where it does not): bisection to
    the float's precision or ``steps`` halvings; the upper end of the last bracket (a memory where it no longer
    holds).  What a scan reads where the choice it made at a memory changes (:mod:`.top_columns`, :mod:`.faces`).

    >>> bisected(lambda m: m * m < 2, 1.0, 2.0)
    1.4142135623730951
    """
    for _ in range(steps):
        mid = 0.5 * (lo + hi)
        if not lo < mid < hi:
            break
        if holds(mid):
            lo = mid
        else:
            hi = mid
    return hi


@functools.lru_cache(maxsize=1024)
def bracketed(t, n, M, ref: tuple):
    """The one ``M > 0`` where ``t(M) = n`` at the reference sizes ``ref`` (sorted ``(symbol, number)`` pairs), to
    the float's precision, or None where the difference is not real and monotone over :data:`SCAN` with exactly
    one sign change (a pure function of its key: the process's memo, bounded).

    >>> import napkin_cat as nc
    >>> M, n = nc.symbol("M"), nc.symbol("n")
    >>> bracketed(sympy.sqrt(M + n) - 1, n, M, ((n, 3),)), bracketed(1 / (M + 1), n, M, ((n, 3),))
    (13.0, None)
    """
    at, ys = _scanned(t, n, M, ref)
    if ys is None or not monotone(ys):
        return None
    zeros = [k for k, y in zip(SCAN, ys) if y == 0]
    if zeros:
        return 2.0 ** zeros[0] if len(zeros) == 1 else None
    changes = [i for i in range(len(ys) - 1) if (ys[i] < 0) != (ys[i + 1] < 0)]
    if len(changes) != 1:
        return None
    lo, hi = 2.0 ** SCAN[changes[0]], 2.0 ** SCAN[changes[0] + 1]
    below = ys[changes[0]] < 0
    while True:
        mid = 0.5 * (lo + hi)
        if not lo < mid < hi:
            break
        y = at(mid)
        if math.isnan(y):
            return None
        if y == 0:
            return mid
        if (y < 0) == below:
            lo = mid
        else:
            hi = mid
    return lo if abs(at(lo)) <= abs(at(hi)) else hi
