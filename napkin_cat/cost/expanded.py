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
from sympy.core.cache import cacheit
from sympy.core.expr import Expr

__all__ = ["expanded", "HINTS", "expand", "laurent", "ACTING", "walked_once"]

#: ``sympy.expand``'s default hints (``deep``, no ``modulus``): the only expansion :func:`expanded` makes
HINTS = dict(power_base=True, power_exp=True, mul=True, log=True, multinomial=True, basic=True)


def expanded(expr):
    """``sympy.expand(expr)`` (its default hints), each distinct subexpression expanded once per hint (module
    docstring), only the hints that can act on it walked (:func:`expand`'s law: a :func:`laurent` form, the
    :data:`ACTING` ones); an expression whose class has an ``expand`` of its own is given to ``sympy.expand``.

    >>> import sympy
    >>> a, b = sympy.symbols("a b")
    >>> expanded((a + b) ** 2 / (a + b + 1) + (a + b) ** 2)
    a**2 + a**2/(a + b + 1) + 2*a*b + 2*a*b/(a + b + 1) + b**2 + b**2/(a + b + 1)
    """
    expr = sympy.sympify(expr)
    if not isinstance(expr, Expr) or type(expr).expand is not Expr.expand:
        return sympy.expand(expr)
    return walked_once(expr, ACTING if laurent(expr) else HINTS)


def walked_once(expr, hints: dict):
    """sympy's expansion of ``expr`` by the hints on in ``hints`` (in sympy's order, to its fixed point), each
    ``(subexpression, hint)`` walked once: ``walked_once(e, HINTS) == sympy.expand(e)`` (the same tree), and
    ``walked_once(e, ACTING)`` too where :func:`laurent` holds (:func:`expand`).

    >>> import sympy
    >>> a, b = sympy.symbols("a b", positive=True)
    >>> q = (a + b) / sympy.sqrt(a + 1)
    >>> walked_once(q * (a + q), ACTING) == sympy.expand(q * (a + q))
    True
    """
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

    acting = [h for h, on in hints.items() if on]   # (the others act on no node)
    for hint in sorted(acting, key=lambda h: "mulz" if h == "mul" else h):    # (sympy's order: multinomial first)
        expr = walked(expr, "_eval_expand_" + hint)[0]
    while True:
        was = expr
        for hint in ("multinomial", "mul", "log"):
            if hint in acting:
                expr = walked(expr, "_eval_expand_" + hint)[0]
        if expr == was:
            return expr


#: the hints of ``sympy.expand`` that can act on a :func:`laurent` form: ``log`` (``log._eval_expand_log``),
#: ``power_exp`` (``Pow._eval_expand_power_exp`` rewrites only an ``Add`` exponent or ``E`` to a ``Sum``;
#: ``ExpBase``'s) and ``basic`` (``ExprWithLimits._eval_expand_basic``: ``Sum``, ``Product``, ``Integral``) act on none
ACTING = dict(power_base=True, mul=True, multinomial=True, log=False, power_exp=False, basic=False)


def laurent(expr) -> bool:
    """Whether ``expr`` is built of ``Symbol``\\ s and numbers (``Integer``, ``Rational``, ``Float``) by ``Add``,
    ``Mul`` and ``Pow`` with a number exponent: a Laurent polynomial in symbols with rational powers of sums (the
    cost and KKT forms of a search).  The class is closed under ``multinomial``, ``mul`` and ``power_base`` (they
    rebuild ``Add``, ``Mul`` and ``Pow`` of its subexpressions with products and sums of its exponents), and holds
    no ``log``, no ``exp`` (nor ``E``, which ``E**r`` makes one), no ``Sum`` and no ``Add`` exponent.

    >>> import sympy
    >>> a, b = sympy.symbols("a b", positive=True)
    >>> laurent(sympy.sqrt(a + b) / a - 2.5 * b ** -3), laurent(a ** b), laurent(sympy.log(a)), laurent(sympy.E * a)
    (True, False, False, False)
    """
    return _shape(expr)[0]


def _shape(expr) -> tuple:
    """``(laurent(expr), whether a subexpression that is no atom is an argument twice)``, by one walk."""
    seen, todo, repeats = set(), [expr], False
    while todo:
        e = todo.pop()
        if e.is_Atom:
            if not (e.is_Symbol or e.is_Number):
                return False, repeats
        elif e.is_Pow:
            if not e.exp.is_Number:
                return False, repeats
            todo.append(e.base)
        elif e.is_Add or e.is_Mul:
            for a in e.args:
                if a not in seen:
                    seen.add(a)
                    todo.append(a)
                elif not a.is_Atom:
                    repeats = True
        else:
            return False, repeats
    return True, repeats


@cacheit
def expand(expr):
    """``sympy.expand(expr)``, without the hints that act on no node of a :func:`laurent` form::

        expand(e) == sympy.expand(e)                       (the same tree: srepr equal)
        expand(e) is sympy.expand(e, **ACTING)             when laurent(e), no subexpression repeated
        expand(e) is expanded(e)                           when laurent(e), a subexpression repeated

    A hint that acts on no node returns the same tree (``Expr._expand_hint`` rebuilds a node only when a method
    changed one below it), and each kept hint's method reads only ``force``, ``exact`` and ``deep`` of the hints, so
    dropping ``log``, ``power_exp`` and ``basic`` changes no step of the others: each of sympy's walks (six, then
    three per round until nothing changes) costs one walk of the tree; three and one per round are saved, for one
    walk of :func:`laurent`.  That walk also sees whether a subexpression that is no atom is an argument twice; such
    a form is expanded by :func:`expanded`'s walk, each repeated subexpression once per hint (the same tree, module
    docstring): a transformer block's cross-term KKT points repeat a quotient of radicals in ``M``, and their
    expansion in ``kept_form`` took 0.17 s of sympy's walks, 0.05 s so (kept-35).  Any other expression is given to
    ``sympy.expand`` whole.  Answers are kept in sympy's
    cache (as ``Expr.expand``'s are), so an expression expanded again is not walked again.

    >>> import sympy
    >>> M, d = sympy.symbols("M d", positive=True)
    >>> e = (M + d) ** 2 / sympy.sqrt(M * d + 1) + (M - d) * (M + 2) / d ** 2
    >>> expand(e) == sympy.expand(e), expand(sympy.log(M * d) * (M + 1)) == sympy.expand(sympy.log(M * d) * (M + 1))
    (True, True)
    """
    expr = sympy.sympify(expr)
    if isinstance(expr, Expr):
        lau, repeats = _shape(expr)
        if lau and repeats:
            return walked_once(expr, ACTING)
        if lau:
            return expr.expand(**ACTING)
    return sympy.expand(expr)
