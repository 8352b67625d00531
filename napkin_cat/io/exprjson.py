"""Sympy expressions and box parameters as safe JSON trees (used by :mod:`napkin_cat.io.serial`).

Decoding builds sympy objects node by node from a closed list of node kinds, with
size limits against hostile documents; it never calls eval, exec, sympify or a parser.

>>> import sympy
>>> from napkin_cat.syntax.axis import symbol
>>> tree = expression_to_json(1 / sympy.sqrt(symbol("d")))
>>> tree, expression_from_json(tree) == 1 / sympy.sqrt(symbol("d"))
(['Pow', 'd', ['Rational', -1, 2]], True)
"""
from __future__ import annotations

import json
import math
import numbers
import re

import sympy

from napkin_cat.syntax.axis import symbol
from napkin_cat.errors import SerialisationError

def _answered(name: str) -> bool:
    """Whether sympy's assumption system answers ``name``: a ``Symbol`` made with ``name=True`` says
    ``is_<name>`` is True (sympy stores any keyword it is given, so an unknown one is read back as no answer, and
    one it does not take as an assumption, ``comparable``, as False)."""
    return getattr(sympy.Symbol("x", **{name: True}), "is_" + name, None) is True


#: The assumptions a ``Symbol`` may carry: its ``is_`` properties (the assumption system makes one per fact; the
#: class's constant flags, ``is_Symbol``, ``is_scalar``, are plain attributes) that :func:`_answered` answers.
#:
#: >>> {"positive", "integer"} <= ASSUMPTIONS and not {"evil", "comparable"} & ASSUMPTIONS
#: True
ASSUMPTIONS = frozenset(n[3:] for n in dir(sympy.Symbol) if n.startswith("is_")
                        and isinstance(getattr(sympy.Symbol, n), property) and _answered(n[3:]))

LEGAL_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_']*$")
_MAX_PRECISION = 1024  # bits of a Float
_MAX_NUMERIC_EXPONENT = 1024  # |p|, |q| of an exponent applied to a number (no 10**10**9)
_MAX_INT_BITS = 512  # integers and the numerators/denominators of rationals in a tree
_MAX_NUMBER_BITS = 1 << 16  # what Add, Mul and Pow may combine (see _bits): no huge numbers
#: the most values (nodes, numbers and names) of one expression tree: fifteen times the largest a diagram of the
#: library writes (17, a size in the gradient of ``transformer_block``); an ``Add`` of 10,000 size symbols took 45 s
#: to build, a ``Max`` of 10,000 over 60 s
MAX_EXPRESSION_NODES = 256

_FUNCTIONS = {
    "floor": (sympy.floor, 1, 1),
    "ceiling": (sympy.ceiling, 1, 1),
    "exp": (sympy.exp, 1, 1),
    "log": (sympy.log, 1, 1),
    "Abs": (sympy.Abs, 1, 1),
    "Mod": (sympy.Mod, 2, 2),
    "Max": (sympy.Max, 1, None),
    "Min": (sympy.Min, 1, None),
}
_CONSTANTS = {"pi": sympy.pi, "E": sympy.E, "oo": sympy.oo}
_NODES = ("Symbol", "Rational", "Float", "Add", "Mul", "Pow", *_FUNCTIONS, *_CONSTANTS)
_LEGAL_TREE = ("an integer, an axis-symbol name (a string such as 'q'), or a list "
               f"[node, args...] with node one of {list(_NODES)}")


def fail_at(path: str, message: str):
    """Raise a SerialisationError that names the document ``path`` at fault."""
    raise SerialisationError(f"{path}: {message}")


# =========================================================================== expressions
def expression_to_json(expr, path: str = "expression"):
    """The JSON tree of a sympy expression (see the module docstring)."""
    if isinstance(expr, bool):
        fail_at(path, f"cannot serialise the boolean {expr!r} as an expression")
    if isinstance(expr, numbers.Integral) and not isinstance(expr, sympy.Basic):
        return _small(int(expr), path)
    if not isinstance(expr, sympy.Basic):
        fail_at(path, f"cannot serialise {type(expr).__name__} {expr!r} as an expression")
    if expr.is_Integer:
        return _small(int(expr), path)
    if expr.is_Rational:
        return ["Rational", _small(int(expr.p), f"{path}[1]"), _small(int(expr.q), f"{path}[2]")]
    if expr.is_Float:
        sign, man, exp, _bc = expr._mpf_
        if man == 0 and exp != 0:  # inf / nan encodings of mpmath
            fail_at(path, f"cannot serialise the non-finite Float {expr}")
        return ["Float", -int(man) if sign else int(man), int(exp), int(expr._prec)]
    if isinstance(expr, sympy.Dummy) or isinstance(expr, sympy.Wild):
        fail_at(path, f"cannot serialise the dummy symbol {expr}")
    if expr.is_Symbol:
        if not LEGAL_NAME.match(expr.name):
            fail_at(path, f"symbol name {expr.name!r} is not identifier-like")
        if expr == symbol(expr.name):
            return expr.name
        assumptions = getattr(expr, "_assumptions_orig", None)
        if assumptions is None or sympy.Symbol(expr.name, **assumptions) != expr:
            assumptions = expr.assumptions0
        return ["Symbol", expr.name, {k: bool(v) for k, v in sorted(assumptions.items())
                                      if v is not None}]
    for name, const in _CONSTANTS.items():
        if expr == const:
            return [name]
    if expr == -sympy.oo:
        return ["Mul", -1, ["oo"]]
    if expr.is_Add:
        return ["Add", *(expression_to_json(a, f"{path}[{i + 1}]") for i, a in enumerate(expr.args))]
    if expr.is_Mul:
        return ["Mul", *(expression_to_json(a, f"{path}[{i + 1}]") for i, a in enumerate(expr.args))]
    if expr.is_Pow:
        return ["Pow", expression_to_json(expr.base, f"{path}[1]"),
                expression_to_json(expr.exp, f"{path}[2]")]
    name = type(expr).__name__
    if name in _FUNCTIONS and type(expr) is _FUNCTIONS[name][0]:
        return [name, *(expression_to_json(a, f"{path}[{i + 1}]") for i, a in enumerate(expr.args))]
    fail_at(path, f"cannot serialise the sympy {name} {expr}; serialisable nodes are {list(_NODES)}")


def _small(value: int, path: str) -> int:
    if value.bit_length() > _MAX_INT_BITS:
        fail_at(path, f"integers in expressions are limited to {_MAX_INT_BITS} bits, got one of "
                      f"{value.bit_length()} bits")
    return value


def _bits(expr) -> int:
    """A bound on the size of the numbers in ``expr`` (what evaluating a product could build)."""
    return sum(r.p.bit_length() + r.q.bit_length() for r in expr.atoms(sympy.Rational)) + \
        sum(f._prec for f in expr.atoms(sympy.Float))


def checked_int(value, path: str, what: str = "an integer") -> int:
    """``value`` if it is an int (not a bool); else a SerialisationError at ``path`` expecting ``what``."""
    if isinstance(value, bool) or not isinstance(value, int):
        fail_at(path, f"expected {what}, got {show_value(value)}")
    return value


def show_value(value) -> str:
    """``value`` as JSON (or its repr), cut to 80 characters, for an error message."""
    text = json.dumps(value, ensure_ascii=False) if _jsonable(value) else repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _jsonable(value) -> bool:
    try:
        json.dumps(value)
        return True
    except (TypeError, ValueError):
        return False


def _symbol_name(name, path: str) -> str:
    if not isinstance(name, str) or not LEGAL_NAME.match(name):
        fail_at(path, f"symbol name {show_value(name)} is not legal: a symbol name is identifier-like "
                      "(letters, digits, _ and ', not starting with a digit)")
    return name


def count_values(obj, most: int) -> int:
    """The number of JSON values in ``obj`` (a list or an object counts with everything in it), counted up to
    ``most + 1`` and no further (a Python object that shares a list between many places is counted as written out,
    without walking it more than that).

    >>> count_values(["Add", "q", ["Mul", 2, "d"]], 100), count_values(list(range(10**6)), 10)
    (7, 11)
    """
    n, stack = 0, [obj]
    while stack and n <= most:
        value = stack.pop()
        n += 1
        if isinstance(value, list):
            stack.extend(value)
        elif isinstance(value, dict):
            stack.extend(value.values())
    return n


def expression_from_json(tree, path: str = "expression"):
    """Build the sympy expression of a JSON tree (never parses or evaluates strings).

    A tree of more than :data:`MAX_EXPRESSION_NODES` values is refused before anything is built.
    """
    if count_values(tree, MAX_EXPRESSION_NODES) > MAX_EXPRESSION_NODES:
        fail_at(path, f"an expression has at most {MAX_EXPRESSION_NODES} nodes, numbers and names (a limit of "
                      "this reader)")
    try:
        return _expr(tree, path)
    except RecursionError:
        fail_at(path, "expression nested too deeply")


def _expr(tree, path: str):
    if isinstance(tree, bool):
        fail_at(path, f"a boolean is not an expression; an expression is {_LEGAL_TREE}")
    if isinstance(tree, int):
        return sympy.Integer(_small(tree, path))
    if isinstance(tree, str):
        return symbol(_symbol_name(tree, path))
    if not isinstance(tree, list) or not tree or not isinstance(tree[0], str):
        fail_at(path, f"expected an expression, got {show_value(tree)}; an expression is {_LEGAL_TREE}")
    node, args = tree[0], tree[1:]
    if node not in _NODES:
        fail_at(f"{path}[0]", f"expression node {show_value(node)} is not allowed; "
                              f"allowed nodes are {list(_NODES)}")

    def arity(lo, hi):
        if len(args) < lo or (hi is not None and len(args) > hi):
            want = f"{lo}" if lo == hi else (f"at least {lo}" if hi is None else f"{lo} to {hi}")
            fail_at(path, f"node {node!r} takes {want} argument(s), got {len(args)}")

    def sub():
        return [_expr(a, f"{path}[{i + 1}]") for i, a in enumerate(args)]

    if node == "Symbol":
        arity(2, 2)
        name = _symbol_name(args[0], f"{path}[1]")
        assumptions = args[1]
        if not isinstance(assumptions, dict):
            fail_at(f"{path}[2]", f"expected an object of assumptions, got {show_value(assumptions)}")
        for k, v in assumptions.items():
            if k not in ASSUMPTIONS:
                fail_at(f"{path}[2].{k}",
                        f"unknown assumption; legal assumptions are {sorted(ASSUMPTIONS)}")
            if not isinstance(v, bool):
                fail_at(f"{path}[2].{k}", f"an assumption is true or false, got {show_value(v)}")
        try:
            return sympy.Symbol(name, **assumptions)
        except Exception as e:  # inconsistent assumptions
            fail_at(f"{path}[2]", f"inconsistent assumptions: {e}")
    if node == "Rational":
        arity(2, 2)
        p = _small(checked_int(args[0], f"{path}[1]"), f"{path}[1]")
        q = _small(checked_int(args[1], f"{path}[2]"), f"{path}[2]")
        if q == 0:
            fail_at(f"{path}[2]", "the denominator of a Rational must not be 0")
        return sympy.Rational(p, q)
    if node == "Float":
        arity(3, 3)
        man = checked_int(args[0], f"{path}[1]", "an integer mantissa")
        exp = checked_int(args[1], f"{path}[2]", "an integer exponent")
        prec = checked_int(args[2], f"{path}[3]", "an integer precision in bits")
        if not 2 <= prec <= _MAX_PRECISION:
            fail_at(f"{path}[3]", f"a Float's precision is 2..{_MAX_PRECISION} bits, got {prec}")
        if man and man.bit_length() > prec:
            fail_at(f"{path}[1]", f"mantissa has more than {prec} bits")
        if abs(exp) > 100_000:
            fail_at(f"{path}[2]", "a Float's binary exponent must be within ±100000")
        value = sympy.Integer(man) * (sympy.Integer(2) ** exp if exp >= 0
                                      else sympy.Rational(1, 2 ** (-exp)))
        return sympy.Float(value, precision=prec)
    if node in _CONSTANTS:
        arity(0, 0)
        return _CONSTANTS[node]
    if node in ("Add", "Mul"):
        arity(1, None)
        terms = sub()
        if sum(_bits(t) for t in terms) > _MAX_NUMBER_BITS:
            fail_at(path, f"the numbers of this {node} exceed {_MAX_NUMBER_BITS} bits together")
        try:
            return (sympy.Add if node == "Add" else sympy.Mul)(*terms)
        except (ArithmeticError, ValueError, TypeError) as e:
            fail_at(path, f"this {node} has no value ({type(e).__name__}: {e})")
    if node == "Pow":
        arity(2, 2)
        base, exp = sub()
        if base.is_number and exp.is_Rational:
            if max(abs(exp.p), exp.q) > _MAX_NUMERIC_EXPONENT:
                fail_at(f"{path}[2]", f"an exponent of a number is limited to ±{_MAX_NUMERIC_EXPONENT} "
                                      "(numerator and denominator)")
            if _bits(base) * abs(exp.p) > _MAX_NUMBER_BITS:
                fail_at(path, f"the power of a number is limited to about {_MAX_NUMBER_BITS} bits")
        try:
            return sympy.Pow(base, exp)
        except (ArithmeticError, ValueError, TypeError) as e:   # 0 ** -1
            fail_at(path, f"this Pow has no value ({type(e).__name__}: {e})")
    fn, lo, hi = _FUNCTIONS[node]
    arity(lo, hi)
    args = sub()
    try:
        return fn(*args)
    except (ArithmeticError, ValueError, TypeError) as e:   # Mod(1, 0), log(0) ... : no value
        fail_at(path, f"{node}{tuple(args)} has no value ({type(e).__name__}: {e})")


# =========================================================================== parameter values
def value_to_json(value, path: str):
    """A box parameter as JSON: None, bools, numbers, strings, sympy expressions, tuples, lists, dicts."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, sympy.Basic):
        return {"expr": expression_to_json(value, f"{path}.expr")}
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, float):
        if math.isfinite(value):
            return float(value)
        return {"float": "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")}
    if isinstance(value, tuple):
        return {"tuple": [value_to_json(v, f"{path}.tuple[{i}]") for i, v in enumerate(value)]}
    if isinstance(value, list):
        return [value_to_json(v, f"{path}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, dict):
        for k in value:
            if not isinstance(k, str):
                fail_at(path, f"a dict parameter needs string keys, got {k!r}")
        return {"dict": {k: value_to_json(v, f"{path}.dict.{k}") for k, v in value.items()}}
    fail_at(path, f"cannot serialise a parameter of type {type(value).__name__} ({value!r}); "
                  "parameters are None, bools, numbers, strings, sympy expressions, tuples, lists or dicts")


_VALUE_TAGS = ("expr", "tuple", "dict", "float")


def value_from_json(obj, path: str):
    """The parameter that :func:`value_to_json` wrote (its inverse); a SerialisationError at ``path`` otherwise."""
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    if isinstance(obj, list):
        return [value_from_json(v, f"{path}[{i}]") for i, v in enumerate(obj)]
    if isinstance(obj, dict):
        if len(obj) != 1 or next(iter(obj)) not in _VALUE_TAGS:
            fail_at(path, f"a tagged parameter value is an object with exactly one key among "
                          f"{list(_VALUE_TAGS)}, got keys {sorted(obj)}")
        (tag, inner), = obj.items()
        where = f"{path}.{tag}"
        if tag == "expr":
            return expression_from_json(inner, where)
        if tag == "tuple":
            if not isinstance(inner, list):
                fail_at(where, f"expected a list, got {show_value(inner)}")
            return tuple(value_from_json(v, f"{where}[{i}]") for i, v in enumerate(inner))
        if tag == "dict":
            if not isinstance(inner, dict):
                fail_at(where, f"expected an object, got {show_value(inner)}")
            return {k: value_from_json(v, f"{where}.{k}") for k, v in inner.items()}
        if inner not in ("inf", "-inf", "nan"):
            fail_at(where, f"a tagged float is 'inf', '-inf' or 'nan', got {show_value(inner)}")
        return float(inner)
    fail_at(path, f"unsupported parameter value {show_value(obj)}")  # pragma: no cover (json gives no other types)
