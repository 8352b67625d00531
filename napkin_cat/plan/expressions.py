"""Index and size expressions of a plan evaluated at a binding (symbol → int), each compiled once.

A plan's loops, views and conditions are sympy expressions in its sizes and loop indices; the runner evaluates
them on every trip.  :func:`number` and :func:`truth` compile an expression once (exact rationals: a floor
quotient's image on a tile lands where integer arithmetic puts it); :func:`indexer` prints a view's whole index
(a slice per axis) as one Python function, once per ranges.

Law: ``indexer(ranges)(env)[k] == slice(s, min(s + number(r.tile, env), number(r.end, env)))`` with
``s = number(r.start, env)`` for each range ``r = ranges[k]`` (``slice(None)`` where ``r`` is None).
"""
from __future__ import annotations

import functools
import math
from fractions import Fraction

import sympy
from sympy.printing.pycode import PythonCodePrinter


_LAMBDAS: dict = {}
_MINMAX = {"Min": min, "Max": max, "Fraction": Fraction}


class _ExactPrinter(PythonCodePrinter):
    """Rationals as :class:`~fractions.Fraction`: ``floor(4*i/3 + 1/3 - 1/3)`` at ``i = 3`` is 4, where floats give
    3.9999999999999996 and a floor (a floor quotient's image on a tile) lands one below."""

    def _print_Rational(self, e):
        return f"Fraction({e.p}, {e.q})"

    def _print_Half(self, e):
        return self._print_Rational(e)


#: lambdify's own settings (the namespace's names printed as themselves: ``Min``, not a builtin a symbol may shadow)
_EXACT = _ExactPrinter({"fully_qualified_modules": False, "inline": True, "allow_unknown_functions": True,
                        "user_functions": {k: k for k in _MINMAX}})


def _compiled(e):
    """``(symbols, function)`` computing ``e`` from its symbols' values, lambdified once per expression.

    The symbols are the function's parameters by their own names (lambdify replaces a name that is no Python
    identifier, or a keyword, by a dummy itself): replacing every symbol by a dummy first (``dummify=True``)
    rebuilds each ``Min``/``Max`` of the expression, and sympy re-simplifies their arguments on the way.
    """
    f = _LAMBDAS.get(e)
    if f is None:
        syms = tuple(sorted(e.free_symbols, key=str))
        f = _LAMBDAS[e] = (syms, sympy.lambdify(syms, e, modules=[_MINMAX, "math"], dummify=False,
                                                      printer=_EXACT))
    return f


class _NamedPrinter(_ExactPrinter):
    """:class:`_ExactPrinter` with each symbol printed as the local name given it (``v0``, ``v1``, …): a symbol may
    bear a keyword's or a builtin's name."""

    def __init__(self, names: dict):
        super().__init__({"fully_qualified_modules": False, "inline": True, "allow_unknown_functions": True,
                          "user_functions": {k: k for k in _MINMAX}})
        self.names = names

    def _print_Symbol(self, e):
        return self.names[e]


#: the names a printed index reads (``floor``, ``ceil``, … from :mod:`math`, ``Min``, ``Max``, ``Fraction``)
_NAMESPACE = {**{k: getattr(math, k) for k in dir(math) if not k.startswith("_")}, **_MINMAX}


def indexer(ranges):
    """The index of a view as one function of a binding (symbol → int), its Python source printed once per ranges
    (remembered: every run of a plan, and every plan with these ranges, shares it): per axis
    ``slice(start, min(start + tile, end))`` of its :class:`~napkin_cat.plan.ir.Range` (``None``: the whole axis),
    then ``...``; each bound is :func:`number`'s value of its expression.

    >>> i, g, n = sympy.symbols("i g n")
    >>> from napkin_cat.plan.ir import Range
    >>> indexer((Range(g * i, g, n), None))({i: 2, g: 4, n: 10})
    (slice(8, 10, None), slice(None, None, None), Ellipsis)
    """
    return _printed_index(tuple(ranges))


@functools.lru_cache(maxsize=1 << 14)
def _printed_index(ranges: tuple):
    syms = sorted(set().union(*(sympy.sympify(e).free_symbols for r in ranges if r is not None
                                for e in (r.start, r.tile, r.end))), key=str)
    names = {x: f"v{k}" for k, x in enumerate(syms)}
    printed = _NamedPrinter(names).doprint
    lines = ["def index(nominal):"] + [f"    v{k} = nominal[S{k}]" for k in range(len(syms))]
    parts = []
    for j, r in enumerate(ranges):
        if r is None:
            parts.append("slice(None)")
            continue
        lines.append(f"    b{j} = int({printed(r.start)})")
        parts.append(f"slice(b{j}, min(b{j} + int({printed(r.tile)}), int({printed(r.end)})))")
    lines.append(f"    return ({', '.join(parts + ['...'])},)")
    namespace = {**_NAMESPACE, "min": min, "int": int, "slice": slice, **{f"S{k}": x for k, x in enumerate(syms)}}
    exec("\n".join(lines), namespace)     # noqa: S102 -- source printed from the plan's own expressions
    return namespace["index"]


def number(e, env: dict) -> int:
    """An index or size expression evaluated at ``env`` (symbol → int), compiled once per expression; a
    symbol may bear a keyword's or a builtin's name.

    >>> t, g, n, lam, mn = sympy.symbols("t g n lambda min")
    >>> number(sympy.Min(g, n - t * g) + sympy.floor(n / g) + lam * mn, {t: 2, g: 4, n: 10, lam: 3, mn: 5})
    19
    """
    if isinstance(e, int):
        return e
    if isinstance(e, sympy.Symbol):     # (no function printed for a symbol alone, nor for a number)
        return int(env[e])
    if isinstance(e, sympy.Integer):
        return int(e)
    syms, fn = _compiled(e)
    return int(fn(*(env[s] for s in syms)))


def truth(c, env: dict) -> bool:
    """A condition on loop indices and sizes (a trip's ``when``) evaluated at ``env``, compiled once."""
    if isinstance(c, (bool, sympy.logic.boolalg.BooleanTrue, sympy.logic.boolalg.BooleanFalse)):
        return bool(c)
    syms, fn = _compiled(c)
    return bool(fn(*(env[s] for s in syms)))
