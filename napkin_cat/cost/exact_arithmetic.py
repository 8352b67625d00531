"""Size expressions compiled to exact Python arithmetic: the search's numbers without sympy in the loop.

A cost expression (transfers, a column of live data, a block's compulsory transfers) is a sympy tree of
``Add``, ``Mul``, ``Pow``, ``ceiling``, ``floor``, ``Max``, ``Min`` over integers, rationals and size symbols.
:func:`value` walks it once with Python's own arithmetic, exact on ``int`` and :class:`~fractions.Fraction`::

    value(e, env) == e.subs(env)                   (every symbol of e given a number)

A node it does not know is evaluated by sympy (exactly, as ``subs`` would), so every expression has a value.

The same walk evaluates in any ring whose elements support ``+``, ``*`` and integer powers.  With
:class:`Laurent` (polynomials with integer exponents in a few chosen symbols, the tiles) for the tiles and
numbers for the sizes, the result is the expression as a sum of monomials in the tiles with exact numeric
coefficients, what the integer tile search scores (:func:`monomials_at`), without expanding the symbolic
expression first::

    monomials_at(e, tiles, env) == monomials(e.subs(env), tiles)

>>> import napkin_cat as nc
>>> q, x, d, g = nc.symbol("q"), nc.symbol("x"), nc.symbol("d"), nc.symbol("g_q")
>>> H = 2 * d * q + 2 * d * q * x / g
>>> value(H, {q: 64, x: 48, d: 8, g: 16}), value(H, {q: 3, x: 5, d: 1, g: 2})
(4096, 21)
>>> value(q / g, {q: 3, g: 2}), value(sympy.ceiling(q / g) * d, {q: 3, g: 2, d: 4})
(Fraction(3, 2), 8)
>>> monomials_at(2 * d * q + 2 * d * q * x / g + d * g, (g,), {q: 64, x: 48, d: 8})
((49152, 1024, 8), ((-1,), (0,), (1,)))
>>> value(H, {q: 64})
Traceback (most recent call last):
...
napkin_cat.errors.NapkinError: give sizes for ['d', 'g_q', 'x'] (sizes={'name': …}); the expression is ...
"""
from __future__ import annotations

import functools
import math
from fractions import Fraction

import sympy

from napkin_cat.cost.polynomial import Poly
from napkin_cat.errors import NapkinError


def _exact(v):
    """A number as ``int`` or :class:`Fraction` where it is rational (else the sympy number, kept exact)."""
    if isinstance(v, (int, Fraction)):
        return v.numerator if isinstance(v, Fraction) and v.denominator == 1 else v
    if isinstance(v, sympy.Integer):
        return int(v)
    if isinstance(v, sympy.Rational):
        return Fraction(int(v.p), int(v.q))
    return v


def _rounded(v, exact_round, name):
    if isinstance(v, (int, Fraction)):
        return exact_round(v)
    if isinstance(v, Laurent):
        raise NapkinError(f"{name} of {v}: the tiles are not a sum of monomials inside it")
    return _exact(getattr(sympy, name)(v))


def _by_sympy(node, env):
    """A node the walk does not cover (a root, a Piecewise, …): substituted and evaluated by sympy (exact)."""
    values = {s: env[s] for s in node.free_symbols}
    if any(isinstance(v, Laurent) for v in values.values()):
        raise NapkinError(f"{node} is not a sum of monomials in the tiles")
    return _exact(sympy.sympify(node.xreplace({s: sympy.sympify(v) for s, v in values.items()})))


def walk(node, env):
    if node.is_Symbol:
        return env[node]
    if node.is_Rational:          # Integer included
        return _exact(node)
    if node.is_Add:
        total = 0
        for a in node.args:
            total = total + walk(a, env)
        return total
    if node.is_Mul:
        total = 1
        for a in node.args:
            total = total * walk(a, env)
        return total
    if node.is_Pow and node.exp.is_Integer:
        b, n = walk(node.base, env), int(node.exp)
        if n >= 0:
            return b ** n
        return (Fraction(1, b) if isinstance(b, int) else 1 / b) ** -n
    if isinstance(node, (sympy.ceiling, sympy.floor)):
        return _rounded(walk(node.args[0], env), math.ceil if isinstance(node, sympy.ceiling) else math.floor,
                        type(node).__name__)
    if isinstance(node, (sympy.Max, sympy.Min)):
        return (max if isinstance(node, sympy.Max) else min)(walk(a, env) for a in node.args)
    return _by_sympy(node, env)


def value(expr, env):
    """The exact value (``int``, :class:`Fraction`) of ``expr`` at ``env`` (symbol → value), walking the tree once
    with Python's arithmetic; a missing symbol is a :class:`~napkin_cat.errors.NapkinError` naming every one
    that is missing.  Any value that has ``+``, ``*`` and integer powers may stand for a symbol (a
    :class:`Laurent` for a tile, say).  A :class:`~napkin_cat.cost.polynomial.Poly` is evaluated term by term.
    Where every symbol the expression reads is an ``int`` the value is kept per those values (the cost at sizes asks
    a box's transfers at every tiling a search counts, and they read a tile or two of them)."""
    expr = expr if isinstance(expr, Poly) else sympy.sympify(expr)
    if not isinstance(expr, Poly):
        reads = _reads(expr)
        try:
            at = tuple(env[s] for s in reads)
        except KeyError:
            at = None
        if at is not None and all(type(v) is int for v in at):
            return _value_at(expr, reads, at)
    try:
        return _exact(expr.evaluate(env) if isinstance(expr, Poly) else walk(expr, env))
    except KeyError:
        missing = sorted(str(s) for s in expr.free_symbols if s not in env)
        raise NapkinError(f"give sizes for {missing} (sizes={{'name': …}}); the expression is {expr}") from None


@functools.lru_cache(maxsize=1 << 14)
def _reads(expr) -> tuple:
    """The symbols ``expr`` reads, in one order kept for it."""
    return tuple(expr.free_symbols)


@functools.lru_cache(maxsize=1 << 16)
def _value_at(expr, reads: tuple, at: tuple):
    """``expr``'s exact value where the symbols it reads, ``reads``, are the ints ``at``."""
    return _exact(walk(expr, dict(zip(reads, at))))


def rational_at(expr, env):
    """``expr``'s exact value at ``env`` where it is a rational number there (every symbol it reads given a number:
    an ``int`` or :class:`Fraction`), else None: the walk of :func:`value`, without sympy, for a caller that asks
    whether ``expr.subs(env)`` is a number and which (a size's trips, a tile dividing an axis)::

        rational_at(e, env) == e.subs(env)           (where it is not None)

    >>> import napkin_cat as nc
    >>> q, g = nc.symbol("q"), nc.symbol("g_q")
    >>> rational_at(sympy.ceiling(q / g), {q: 10, g: 4}), rational_at(q / g, {q: 10, g: 4})
    (3, Fraction(5, 2))
    >>> rational_at(q / g, {q: 10}), rational_at(sympy.sqrt(q), {q: 2}), rational_at(q / g, {q: 1, g: 0})
    (None, None, None)
    """
    try:
        got = value(expr, env)
    except (NapkinError, ZeroDivisionError):
        return None
    return got if isinstance(got, (int, Fraction)) else None


def _accumulate(terms: dict, exponent: tuple, coefficient) -> None:
    """``terms[exponent] += coefficient``, a term that cancels left out."""
    v = terms.get(exponent, 0) + coefficient
    if v:
        terms[exponent] = v
    else:
        terms.pop(exponent, None)


class Laurent:
    """A Laurent polynomial in ``n`` variables: ``{exponents: coefficient}``, exact numeric coefficients.

    The ring the tiles are evaluated in (:func:`monomials_at`).  Powers are integer; the inverse of a sum of
    several terms is not a Laurent polynomial, and is refused (the expression is not a sum of monomials).

    >>> g = Laurent.variable(0, 2); h = Laurent.variable(1, 2)
    >>> (3 * g * h + g ** -1 + 2 + g).terms
    {(1, 1): 3, (-1, 0): 1, (0, 0): 2, (1, 0): 1}
    """

    __slots__ = ("terms", "n")

    def __init__(self, terms: dict, n: int):
        self.terms, self.n = terms, n

    @classmethod
    def variable(cls, i: int, n: int) -> "Laurent":
        return cls({tuple(int(k == i) for k in range(n)): 1}, n)

    def _lift(self, other):
        if isinstance(other, Laurent):
            return other
        if isinstance(other, (int, Fraction)):
            return Laurent({(0,) * self.n: other} if other else {}, self.n)
        return NotImplemented

    def __add__(self, other):
        other = self._lift(other)
        if other is NotImplemented:
            return other
        out = dict(self.terms)
        for e, c in other.terms.items():
            _accumulate(out, e, c)
        return Laurent(out, self.n)

    __radd__ = __add__

    def __mul__(self, other):
        if isinstance(other, (int, Fraction)):
            return Laurent({e: c * other for e, c in self.terms.items()} if other else {}, self.n)
        other = self._lift(other)
        if other is NotImplemented:
            return other
        out: dict = {}
        for e1, c1 in self.terms.items():
            for e2, c2 in other.terms.items():
                _accumulate(out, tuple(a + b for a, b in zip(e1, e2)), c1 * c2)
        return Laurent(out, self.n)

    __rmul__ = __mul__

    def __pow__(self, k: int):
        if k >= 0:
            out = Laurent({(0,) * self.n: 1}, self.n)
            for _ in range(k):
                out = out * self
            return out
        if len(self.terms) != 1:
            raise NapkinError(f"1/({self}) is not a sum of monomials in the tiles")
        ((e, c),) = self.terms.items()
        return Laurent({tuple(-a for a in e): _exact(Fraction(1, c) if isinstance(c, int) else 1 / c)}, self.n) ** -k

    def __rtruediv__(self, other):
        return other * self ** -1

    def __repr__(self):
        return " + ".join(f"{c}·g^{e}" for e, c in self.terms.items()) or "0"


def monomials_at(expr, tiles, env) -> tuple:
    """``(coefficients, exponents)`` of ``expr`` at the sizes ``env`` as a sum of monomials in ``tiles``
    (integer exponents in increasing order, exact numeric coefficients, terms that cancel left out), or a
    :class:`~napkin_cat.errors.NapkinError` where it is not one (a tile under a ceiling, a root, …)."""
    n = len(tiles)
    if isinstance(expr, Poly):
        return _poly_monomials(expr, tiles, env)
    try:
        v = value(expr, {**env, **{t: Laurent.variable(i, n) for i, t in enumerate(tiles)}})
        v = v if isinstance(v, Laurent) else Laurent({}, n) + v
    except TypeError:   # a sympy number beside a tile, a tile inside a Max
        v = None
    if not isinstance(v, Laurent):
        raise NapkinError(f"{expr} at the sizes is not a sum of monomials in the tiles {tiles}")
    terms = sorted((e, _exact(c)) for e, c in v.terms.items())
    return tuple(c for _, c in terms), tuple(e for e, _ in terms)


def _poly_monomials(p: Poly, tiles, env) -> tuple:
    """:func:`monomials_at` of a polynomial: each term's tiles read off its monomial, its other symbols valued at
    ``env`` (no Laurent product)."""
    index = {t: i for i, t in enumerate(tiles)}
    terms: dict = {}
    try:
        for m, c in p.terms.items():
            e, v = [0] * len(tiles), c
            for s, k in m:
                i = index.get(s)
                if i is not None:
                    e[i] += k
                    continue
                x = env[s]
                if k < 0:
                    x, k = (Fraction(1, x) if isinstance(x, int) else 1 / x), -k
                v = v * (x if k == 1 else x ** k)
            _accumulate(terms, tuple(e), _exact(v))
    except KeyError:
        missing = sorted(str(s) for s in p.free_symbols if s not in env and s not in index)
        raise NapkinError(f"give sizes for {missing} (sizes={{'name': …}}); the expression is {p.as_expr()}") from None
    ordered = sorted(terms.items())
    return tuple(c for _, c in ordered), tuple(e for e, _ in ordered)
