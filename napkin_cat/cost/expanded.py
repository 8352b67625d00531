"""``sympy.expand`` with each distinct subexpression expanded once per hint: the same expression, in a fraction of the
time on forms that repeat a subexpression.

sympy expands an expression hint by hint (``power_base``, ``power_exp``, ``log``, ``multinomial``, ``mul``, then
``multinomial``, ``mul`` and ``log`` again until nothing changes), each a walk of the whole tree
(``Expr._expand_hint``): a subexpression met in twenty places is expanded twenty times.  A symbolic derive's large-M
forms do that: a transformer block's candidate past a clamp repeats one quotient of radicals in ``M`` as the
denominator of over twenty terms, and ``sympy.expand`` of it took 0.2 s of a 0.6 s crossing search
(:mod:`napkin_cat.search.crossings`).  A hint's walk is a function of the subexpression alone (sympy expressions are
values; each ``_eval_expand_<hint>`` reads only its own expression and the hints), so :func:`expanded` walks the same
steps, in the same order, keeping each subexpression's answer for the rest of the call::

    expanded(e) == sympy.expand(e)        (the same tree: srepr equal, ``tests/cost/test_expanded.py``)

>>> import sympy
>>> M, d, n = sympy.symbols("M d n", positive=True)
>>> q = 1 / (M - d * n + sympy.sqrt(M + d * n) * (M + n))
>>> e = (d + n) ** 2 * q + n * (M + d) * q ** 2 + sympy.log(M * d)
>>> expanded(e) == sympy.expand(e)
True
"""
from __future__ import annotations

import sympy
from sympy.core.expr import Expr

__all__ = ["expanded", "HINTS"]

#: ``sympy.expand``'s default hints (``deep``, no ``modulus``): the only expansion :func:`expanded` makes
HINTS = dict(power_base=True, power_exp=True, mul=True, log=True, multinomial=True, basic=True)


def expanded(expr):
    """``sympy.expand(expr)`` (its default hints), each distinct subexpression expanded once per hint (module
    docstring); an expression whose class has an ``expand`` of its own is given to ``sympy.expand``.

    >>> import sympy
    >>> a, b = sympy.symbols("a b")
    >>> expanded((a + b) ** 2 / (a + b + 1) + (a + b) ** 2)
    a**2 + a**2/(a + b + 1) + 2*a*b + 2*a*b/(a + b + 1) + b**2 + b**2/(a + b + 1)
    """
    expr = sympy.sympify(expr)
    if not isinstance(expr, Expr) or type(expr).expand is not Expr.expand:
        return sympy.expand(expr)
    memo: dict = {}

    def walked(e, hint):
        """``Expr._expand_hint(e, hint)``: ``(expanded e, whether it changed)``, each ``(e, hint)`` once."""
        found = memo.get((e, hint))
        if found is not None:
            return found
        hit, out = False, e
        if getattr(e, "args", ()) and not e.is_Atom:
            args = []
            for arg in e.args:
                arg, changed = walked(arg, hint)
                hit |= changed
                args.append(arg)
            if hit:
                out = e.func(*args)
        found = (out, hit)
        if hasattr(out, hint):
            new = getattr(out, hint)(**HINTS)
            if new != out:
                found = (new, True)
        memo[(e, hint)] = found
        return found

    for hint in sorted(HINTS, key=lambda h: "mulz" if h == "mul" else h):     # (sympy's order: multinomial first)
        expr = walked(expr, "_eval_expand_" + hint)[0]
    while True:
        was = expr
        for hint in ("multinomial", "mul", "log"):
            expr = walked(expr, "_eval_expand_" + hint)[0]
        if expr == was:
            return expr
