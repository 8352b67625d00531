"""Numeric forms evaluated as ``sympy.lambdify`` evaluates them, each distinct expression compiled once per process.

A time model evaluates many forms per kernel (bytes moved, FLOPs and seconds per pipeline, bytes per memory
column, …) at many tile assignments; compiling them is most of what making a kernel's forms costs (printing each
expression as Python), and kernels of different structures share most of their forms (the same columns, the same
products).  :class:`Lambdas` compiles each distinct expression once, with its own free symbols as parameters, and
evaluates a list of forms as the list of their compiled functions' values.  The law: for every expression ``e_i``
and every ``env``,

    Lambdas(es, modules).values(env)[i] == lambdify(symbols, es, modules)(*env)[i]      (the same Python value)

because each value is the one the printed expression computes, the printer being lambdify's own and the
expression printed alone as it is printed in the list (a list's elements are printed one by one).

>>> import math, sympy
>>> q, g = sympy.symbols("q g_q")
>>> es = [2 * q * q / g + sympy.ceiling(q / g), sympy.Integer(0), q / sympy.Float(3.5)]
>>> mods = [{"ceiling": math.ceil}, "math"]
>>> Lambdas(es, mods).values({q: 10, g: 4}) == sympy.lambdify([g, q], es, modules=mods)(4, 10)
True
"""
from __future__ import annotations

import sympy

#: (expression, modules' key) → (its free symbols sorted by name, its compiled function, the modules: kept alive,
#: so that no other mapping takes an id the key names); kept for the process
_COMPILED: dict = {}


def _modules_key(modules) -> tuple:
    """A hashable name of lambdify's ``modules`` (strings by name, a mapping by its items' names and ids)."""
    out = []
    for m in modules if isinstance(modules, (list, tuple)) else [modules]:
        out.append(m if isinstance(m, str) else tuple(sorted((k, id(v)) for k, v in m.items())))
    return tuple(out)


class Lambdas:
    """The expressions ``exprs`` compiled for evaluation at numbers (``modules``: lambdify's); ``symbols``: every
    symbol they use, sorted by name."""

    def __init__(self, exprs, modules):
        exprs = [sympy.sympify(e) for e in exprs]
        key = _modules_key(modules)
        self.fns = []
        for e in exprs:
            got = _COMPILED.get((e, key))
            if got is None:
                syms = tuple(sorted(e.free_symbols, key=str))
                got = _COMPILED[(e, key)] = (syms, sympy.lambdify(syms, e, modules=modules, docstring_limit=0),
                                             modules)
            self.fns.append(got[:2])
        self.symbols = sorted(set().union(*(e.free_symbols for e in exprs)), key=str) if exprs else []

    def values(self, env: dict) -> list:
        """Each expression's value at ``env`` (every symbol in :attr:`symbols` there)."""
        return [fn(*[env[s] for s in syms]) for syms, fn in self.fns]


__all__ = ["Lambdas"]
