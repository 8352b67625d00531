"""sympy's ``count_ops`` as a count: the same walk over the expression, each operation added to an integer.

``sympy.count_ops(e)`` walks ``e`` once and appends a symbol per operation (``ADD``, ``MUL``, ``DIV``, ``SUB``,
``NEG``, ``POW``, a function's name, …), then sums the symbols as a sympy ``Add`` and reads their coefficients back:
the count is the number of symbols appended (an ``Add`` led by a negative term appends ``SUB − ADD``: one of each
taken back, so nothing).  :func:`count_ops` takes the same steps (the same negations, ``fraction`` and argument
order) and adds one per symbol, without building the symbols or their sum (about half of sympy's time on the
closed forms of :mod:`~napkin_cat.cost.lagrange`: a tidied tile, an expanded KKT point's ``H``); and it keeps the
counts of the last expressions it read (a pure function of the expression: :func:`~napkin_cat.cost.lagrange.tidy`
counts a form that :func:`~napkin_cat.search.top_columns.kept_form` counts again).  **Law:**
``count_ops(e) == sympy.count_ops(e)`` for every expression (``tests/cost/test_op_count.py``); anything that is not
a sympy ``Expr`` (a relation, a boolean, a container) is sympy's to count.

>>> import sympy
>>> x, y = sympy.symbols("x y", positive=True)
>>> e = (-x + 2 * y) / (x + 1) - sympy.sqrt(x) * sympy.exp(y)
>>> count_ops(e), sympy.count_ops(e)
(9, 9)
"""
from __future__ import annotations

import functools

import sympy
from sympy.core.operations import LatticeOp
from sympy.simplify.radsimp import fraction

_ONE, _MINUS_ONE, _E = sympy.S.One, sympy.S.NegativeOne, sympy.S.Exp1
#: the kinds whose head sympy counts once where the expression has arguments (besides powers and functions)
_COUNTED = (sympy.Derivative, sympy.Integral, sympy.Sum)


def leading_negative(a) -> bool:
    """Whether the leading number of ``a`` is negative (a product's first factor, a matrix product's first): the test
    sympy's ``count_ops`` applies (its ``_coeff_isneg``, a private name, written here so no private name is read).

    >>> import sympy
    >>> x = sympy.Symbol("x")
    >>> leading_negative(-2 * x), leading_negative(2 * x), leading_negative(sympy.Integer(-1)), leading_negative(-x + 1)
    (True, False, True, False)
    """
    if a.is_MatMul:
        a = a.args[0]
    if a.is_Mul:
        a = a.args[0]
    return bool(a.is_Number and a.is_extended_negative)


def count_ops(expr) -> int:
    """``sympy.count_ops(expr)`` (module docstring), an ``int``; kept per expression (bounded)."""
    expr = sympy.sympify(expr)
    if not isinstance(expr, sympy.Expr) or expr.is_Relational:
        return sympy.count_ops(expr)
    return _counted(expr)


@functools.lru_cache(maxsize=4096)
def _counted(expr) -> int:
    """The walk of ``sympy.count_ops`` over an ``Expr``, each appended symbol counted 1 (in its order of steps)."""
    n = 0
    args = [expr]
    while args:
        a = args.pop()
        if a.is_Rational:
            if a is not _ONE:
                n += (a.p < 0) + (a.q != 1)     # NEG, DIV
                continue
        elif a.is_Mul or a.is_MatMul:
            if leading_negative(a):
                n += 1                          # NEG
                a = a.as_two_terms()[1] if a.args[0] is _MINUS_ONE else -a
            num, den = fraction(a)
            if num.is_Integer:
                n += 1 + bool(num < 0)          # DIV (and NEG)
                args.append(den)
                continue
            elif den is not _ONE:
                if not den.is_Integer:
                    args.append(den)
                n += 1                          # DIV
                args.append(num)
                continue
        elif a.is_Add or a.is_MatAdd:
            terms = list(a.args)
            negs = 0
            for i, t in enumerate(terms):
                if leading_negative(t):
                    negs += 1
                    args.append(-t)
                else:
                    args.append(t)
                n += i > 0                      # SUB or ADD (a first negative term: SUB − ADD, nothing)
            if negs == len(terms):
                n += 1                          # NEG
            continue
        if a.is_Pow and a.exp is _MINUS_ONE:
            n += 1                              # DIV
            args.append(a.base)
            continue
        if a == _E:
            n += 1                              # EXP
            continue
        if a.is_Pow and a.base == _E:
            n += 1                              # EXP
            args.append(a.exp)
            continue
        if a.is_Mul or isinstance(a, LatticeOp):
            n += len(a.args) - 1                # MUL (MAX, MIN, …) per argument past the first
        elif a.args and (a.is_Pow or a.is_Function or isinstance(a, _COUNTED)):
            n += 1                              # POW, the function's name
        if not a.is_Symbol:
            args.extend(a.args)
    return n
