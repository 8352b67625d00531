"""An expression printed as ``sympy.lambdify(args, e, "math")`` prints it, without sympy's printer walk (issue 35).

:func:`~napkin_cat.search.top_columns.float_functions` compiles the code ``lambdify`` writes for an expression;
sympy's ``PythonCodePrinter`` re-derives, for every ``Add`` it meets, the order of its terms
(``Expr.as_ordered_terms``: each coefficient evaluated through ``evalf``, each term's monomial over the sorted
generators), and for every ``Mul`` the order of its factors and the parentheses of each, every time, even for a
subexpression printed a moment before.

**Law.** ``printed(e) == python_printer().doprint(e)`` for every expression ``e`` (the printer lambdify uses for
``"math"``).  Nodes of the kinds the derive prints (``Add``, ``Mul``, ``Pow`` with a rational exponent, symbols,
integers and rationals) are printed here by sympy 1.14's rules, read off its source: ``StrPrinter._print_Add``
(terms in ``as_ordered_terms``' order: the two-term ``number - c·x`` case first, else by the negated exponent
vector over the generators sorted by ``default_sort_key``, then by the coefficient as a float, ties kept in
``args`` order), ``CodePrinter._print_Mul`` (sign out, factors by ``sort_key``, negative rational powers
below the bar) and ``AbstractPythonCodePrinter._hprint_Pow`` (``sqrt``, ``1/x``); sort keys are
``Expr.sort_key``'s with a sum's terms in that order.  Each node's text depends on the node alone, so it is kept
per node.  Any other node (a float, whose digits follow its depth; a function; a non-commutative symbol; an
imaginary number) sends the whole expression to sympy's printer, and so does every expression under a sympy
other than the one the rules were read off (:data:`READ_OFF`).

>>> import sympy
>>> x, y = sympy.symbols("x y", positive=True)
>>> e = 3 * x / (2 * sympy.sqrt(x + y)) - y ** 2 + 1
>>> printed(e), printed(e) == python_printer().doprint(e)
('(3/2)*x/sqrt(x + y) - y**2 + 1', True)
"""
from __future__ import annotations

import functools

import sympy
from sympy.core.exprtools import decompose_power
from sympy.printing.precedence import PRECEDENCE
from sympy.printing.pycode import PythonCodePrinter

#: sympy's precedences of the nodes printed here (read from its table, not restated)
ADD, MUL, POW, ATOM = (PRECEDENCE[k] for k in ("Add", "Mul", "Pow", "Atom"))
#: at most this many nodes' texts are kept (then the memo starts again)
KEPT = 1 << 16
#: the sympy release whose printer's rules this module follows (any other prints by sympy's printer)
READ_OFF = "1.14"
_S = sympy.S
_Add, _Mul, _Pow, _Rational, _Integer = sympy.Add, sympy.Mul, sympy.Pow, sympy.Rational, sympy.Integer


def python_printer() -> PythonCodePrinter:
    """The printer ``sympy.lambdify(..., "math")`` prints with (its settings for ``"math"``)."""
    return PythonCodePrinter({"fully_qualified_modules": False, "inline": True, "allow_unknown_functions": True,
                              "user_functions": {}})


class _Unsure(Exception):
    """A node this module does not print: the expression goes to sympy's printer whole."""


def printed(e, printer: PythonCodePrinter | None = None) -> str:
    """``e`` (a sympy expression) as ``printer.doprint(e)`` prints it (``printer``: :func:`python_printer`'s
    kind; a fresh one when ``None``); ``math.sqrt`` registered in ``printer.module_imports`` where printed, as
    sympy registers it.

    >>> M = sympy.Symbol("M", positive=True)
    >>> printed(-sympy.sqrt(M) / 2 + 1 / M)
    '-1/2*sqrt(M) + 1/M'
    """
    e = sympy.sympify(e)
    printer = printer if printer is not None else python_printer()
    if not _SAME_SYMPY:
        return printer.doprint(e)
    try:
        if len(_TEXT) > KEPT:
            _TEXT.clear()
        out = _text(e)
    except _Unsure:
        return printer.doprint(e)
    if "sqrt(" in out:
        printer.module_imports["math"].add("sqrt")
    return out


_TEXT: dict = {}
_SAME_SYMPY = sympy.__version__.split(".")[:2] == READ_OFF.split(".")
_SYMBOL = python_printer()


def _text(e) -> str:
    """``e``'s text (kept per node)."""
    try:
        return _TEXT[e]
    except KeyError:
        pass
    if e.is_Add:
        out = _add(e)
    elif e.is_Mul:
        out = _mul(e)
    elif e.is_Pow:
        out = _pow(e)
    elif e.is_Integer:
        out = str(e.p)
    elif e.is_Rational:
        out = f"{e.p}/{e.q}"
    elif e.is_Symbol and e.is_commutative and type(e) in (sympy.Symbol, sympy.Dummy):
        out = _SYMBOL.doprint(e)
    else:
        raise _Unsure(e)
    _TEXT[e] = out
    return out


def _precedence(e) -> int:
    """``sympy.printing.precedence.precedence(e)`` for the nodes printed here."""
    if e.is_Add:
        return ADD
    if e.is_Mul:
        c = e.args[0]
        return ADD if c.is_Number and c.is_extended_negative else MUL      # (could_extract_minus_sign)
    if e.is_Pow:
        return POW
    if e.is_Integer:
        return ADD if e.p < 0 else ATOM
    if e.is_Rational:
        return ADD if e.p < 0 else MUL
    return ATOM


def _paren(e, level: float) -> str:
    """``StrPrinter.parenthesize(e, level)`` (not strict)."""
    return f"({_text(e)})" if _precedence(e) <= level else _text(e)


def _add(e) -> str:
    """``StrPrinter._print_Add``."""
    out = []
    for term in _ordered_terms(e):
        t = _text(term)
        if t.startswith("-") and not term.is_Add:
            out += ["-", t[1:]]
        else:
            out += ["+", t]
        if _precedence(term) < ADD or term.is_Add:
            out[-1] = f"({out[-1]})"
    if out[0] == "+":
        out[0] = ""
        return " ".join(out[1:])
    return "-" + " ".join(out[1:])


def _ordered_terms(e) -> list:
    """``e.as_ordered_terms()`` (``Expr.as_ordered_terms`` and ``as_terms`` with ``order=None``)."""
    args = e.args
    if len(args) == 2:
        nums = [a for a in args if a.is_Number]
        if len(nums) == 1:
            num, other = nums[0], args[1] if args[0] is nums[0] else args[0]
            if other.is_Mul:
                margs = [a for a in other.args if a.is_Number] + [a for a in other.args if not a.is_Number]
                if len(margs) == 2 and margs[0].is_Number and num.is_positive and margs[0].is_negative:
                    return [num, other]
    gens, terms = set(), []
    for term in args:
        coeff, rest = term.as_coeff_Mul()
        c = _float(coeff)
        powers = {}
        if rest is not _S.One:
            for factor in _Mul.make_args(rest):
                if not factor.is_commutative:
                    raise _Unsure(factor)
                if _is_number(factor):
                    try:
                        z = _complex(factor)
                    except (TypeError, ValueError):
                        pass
                    else:
                        if z.imag != 0:
                            raise _Unsure(factor)
                        c *= z.real
                        continue
                base, exp = decompose_power(factor)
                powers[base] = exp
                gens.add(base)
        terms.append((term, c, powers))
    place = {g: k for k, g in enumerate(sorted(gens, key=_sort_key))}
    keyed = []
    for term, c, powers in terms:
        monom = [0] * len(place)
        for base, exp in powers.items():
            monom[place[base]] = -exp
        keyed.append(((tuple(monom), c), term))
    keyed.sort(key=lambda kt: kt[0])
    return [term for _, term in keyed]


def _float(coeff) -> float:
    """``complex(coeff).real`` of a rational (``evalf`` at 53 bits rounds to nearest as Python's division)."""
    if coeff.is_Integer:
        return float(coeff.p)
    if coeff.is_Rational:
        return coeff.p / coeff.q
    raise _Unsure(coeff)


@functools.lru_cache(maxsize=KEPT)
def _is_number(e) -> bool:
    """``e.is_number`` (no symbol in it) for the nodes printed here."""
    return not e.free_symbols


@functools.lru_cache(maxsize=KEPT)
def _sort_key(e):
    """``default_sort_key(e)``: ``Expr.sort_key`` with a sum's terms in :func:`_ordered_terms`' order."""
    if not (e.is_Add or e.is_Mul or e.is_Pow) or not e.is_commutative:
        return e.sort_key()
    coeff, expr = e.as_coeff_Mul()
    if expr.is_Pow:
        expr, exp = expr.as_base_exp()
        if expr is _S.Exp1:
            return e.sort_key()
    else:
        exp = _S.One
    if expr.is_Dummy:
        args = (expr.sort_key(),)
    elif expr.is_Atom:
        args = (str(expr),)
    else:
        if expr.is_Add:
            try:
                args = _ordered_terms(expr)
            except _Unsure:
                return e.sort_key()
        elif expr.is_Mul:
            args = sorted(expr.args, key=_sort_key)
        else:
            args = expr.args
        args = tuple([_sort_key(a) for a in args])
    return expr.class_key(), (len(args), args), exp.sort_key(), coeff


@functools.lru_cache(maxsize=KEPT)
def _complex(e) -> complex:
    """``complex(e)`` (kept per number)."""
    return complex(e)


def _kept(coeff, rest) -> tuple:
    """The factors of ``sympy.core.mul._keep_coeff(coeff, rest)`` (``coeff`` a positive rational, ``rest`` the
    Mul's part without its coefficient), read off its source."""
    if rest is _S.One:
        return (coeff,)
    if coeff is _S.One:
        return _Mul.make_args(rest)
    if rest.is_Add:
        return (coeff, rest)
    if rest.is_Mul:
        if rest.args[0].is_Number:
            raise _Unsure(rest)
        return (coeff,) + rest.args
    m = coeff * rest
    if m.is_Number and not rest.is_Number:
        return (coeff, rest)
    return _Mul.make_args(m)


def _mul(e) -> str:
    """``CodePrinter._print_Mul`` (order ``None``)."""
    prec = _precedence(e)
    c, rest = e.as_coeff_Mul()
    if not c.is_Rational:
        raise _Unsure(c)
    if c.p < 0:
        args, sign = _kept(-c, rest), "-"
    else:
        args, sign = e.args, ""
    args = sorted(args, key=_sort_key)
    num, den, bare = [], [], []
    for item in args:
        if not item.is_commutative:
            raise _Unsure(item)
        if item.is_Pow and item.exp.is_Rational and item.exp.is_negative:
            if item.exp is not _S.NegativeOne:
                den.append(_Pow(item.base, -item.exp, evaluate=False))
            else:
                if len(item.args[0].args) != 1 and isinstance(item.base, _Mul):
                    bare.append(item.base)
                den.append(_Pow(item.base, -item.exp))
        else:
            num.append(item)
    num = num or [_S.One]
    if len(num) == 1 and sign == "-":
        a = [_paren(num[0], 0.5 * (POW + MUL))]
    else:
        a = [_paren(x, prec) for x in num]
    b = [_paren(x, prec) for x in den]
    for base in bare:
        if base in den:
            k = den.index(base)
            b[k] = f"({b[k]})"
    if not den:
        return sign + "*".join(a)
    if len(den) == 1:
        return sign + "*".join(a) + "/" + b[0]
    return sign + "*".join(a) + "/(%s)" % "*".join(b)


def _pow(e) -> str:
    """``AbstractPythonCodePrinter._hprint_Pow`` (``rational=False``, ``sqrt`` from ``math``)."""
    base, exp = e.args
    if not exp.is_Rational:
        raise _Unsure(e)
    if exp is _S.Half:
        return f"sqrt({_text(base)})"
    if e.is_commutative:
        if exp == -_S.Half:
            return f"1/sqrt({_text(base)})"
        if exp is _S.NegativeOne:
            return "1/" + _paren(base, POW)
    return f"{_paren(base, POW)}**{_paren(exp, POW)}"
