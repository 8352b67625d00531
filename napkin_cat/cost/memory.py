"""Memory limits: what a level holds, in values, as ``nc.optimal``, ``nc.derive`` and the CLI take it.

A memory is a positive whole number of values (at most :data:`LARGEST_MEMORY`), a size symbol (``"M"``: the
symbolic optimum is a function of it), or an expression of both written as text (``"M/2"``, ``"4*d**2"``).  Text
that spells a number and no size (``"1024"``, ``"2^14"``) is a number only where text is all there is, the command
line (``text=True``); from Python it is refused, naming the int to give, so that a number read from a file and
never converted is not silently taken for one (issue 31).  Text is read by a grammar of integers, names,
``+ - * / ^ **`` and brackets (Python's ``ast`` parses it; nothing is evaluated as code), and a power of numbers
is estimated before it is computed, so that ``"9^99999999"`` is refused at once.  Everything else is a
:class:`~napkin_cat.errors.MemoryLimitError` saying what is legal: zero or below, ``nan``, infinity, a float (a
memory is a count of values), a bool, a list.

>>> memory_limit("M"), memory_limit(4096), memory_limit("2^14", text=True), memory_limit("M/2")
(M, 4096, 16384, M/2)
>>> memory_limit("1024")
Traceback (most recent call last):
...
napkin_cat.errors.MemoryLimitError: memory '1024' is a number written as text: give the int 1024 (text is read as a
number only on the command line), or a size name such as 'M' for the symbolic optimum
>>> memory_limit(-5)
Traceback (most recent call last):
...
napkin_cat.errors.MemoryLimitError: memory must be positive, got -5: give the level's capacity in values ...
>>> memory_limit("__import__('os')")
Traceback (most recent call last):
...
napkin_cat.errors.MemoryLimitError: memory "__import__('os')" is not a number or an expression: ... (a call)
"""
from __future__ import annotations

import ast
import math
import numbers

import sympy

from napkin_cat.errors import MemoryLimitError
from napkin_cat.syntax.axis import check_name, symbol

#: the most values a level may hold (beyond, sizes and trip counts overflow every machine number)
LARGEST_MEMORY = 2 ** 64
#: the longest memory written as text: an expression of a few sizes and numbers, never a program
MAX_MEMORY_CHARS = 200

LEGAL = "give the level's capacity in values (a positive whole number, or a symbol name such as 'M')"
#: names that spell no number (a size symbol may be called anything else): what ``float()`` and sympy read as NaN or ∞
_NOT_NUMBERS = {"nan", "inf", "infinity", "oo", "zoo"}
_OPERATORS = {ast.Add: sympy.Add, ast.Sub: lambda a, b: a - b, ast.Mult: sympy.Mul, ast.Div: lambda a, b: a / b,
              ast.Pow: sympy.Pow, ast.BitXor: sympy.Pow}


def memory_limit(memory, *, text: bool = False) -> sympy.Expr:
    """``memory`` as a sympy expression (see the module docstring); refused with a MemoryLimitError.  ``text``: a
    string that spells a number is that number (the command line's ``--memory``); else it must name a size.

    A plain ``int`` from 1 to :data:`LARGEST_MEMORY` is the integer itself at once (every check below passes it;
    the search reads the memory of every candidate it costs):

    >>> memory_limit(2 ** 64) == memory_limit(sympy.Integer(2 ** 64)) == 2 ** 64
    True
    """
    if type(memory) is int and 0 < memory <= LARGEST_MEMORY:
        return sympy.Integer(memory)
    if isinstance(memory, bool) or not isinstance(memory, (str, numbers.Number, sympy.Expr)):
        raise MemoryLimitError(f"memory {memory!r} is not a number or an expression: {LEGAL}")
    M = _read(memory) if isinstance(memory, str) else sympy.sympify(memory)
    if isinstance(memory, str) and not text and M.is_number and M.is_Integer and M > 0:
        _check_magnitude(M, memory)
        raise MemoryLimitError(f"memory {memory!r} is a number written as text: give the int {int(M)} (text is read "
                               f"as a number only on the command line), or a size name such as 'M' for the symbolic "
                               f"optimum")
    if M.has(sympy.nan):
        raise MemoryLimitError(f"memory {memory!r} is not a number: {LEGAL}")
    if M.is_number and (M.is_extended_real is False or not (M > 0)):
        raise MemoryLimitError(f"memory must be positive, got {memory}: {LEGAL}")
    if M.is_number and M.is_finite is False:
        raise MemoryLimitError(f"memory must be finite, got {memory}: {LEGAL}")
    if not M.is_number and M.is_positive is False:
        raise MemoryLimitError(f"memory must be positive, got {memory}: {LEGAL}")
    if M.is_number:
        _check_magnitude(M, memory)
        if not M.is_Integer and M.is_extended_real and (M - sympy.floor(M)).is_zero:
            raise MemoryLimitError(f"memory {memory!r} is a float: give the int {int(M)} (a level's capacity is a "
                                   f"whole number of values)")
        if not M.is_Integer or isinstance(memory, (float, sympy.Float)):
            raise MemoryLimitError(f"memory {memory!r} is not a whole number of values (an int): {LEGAL}")
    if M.has(sympy.oo, sympy.zoo):
        raise MemoryLimitError(f"memory must be finite, got {memory}: {LEGAL}")
    return M


def _check_magnitude(M, memory):
    """Refuse a memory beyond :data:`LARGEST_MEMORY`: an integer compared exactly (a float rounds 2^64 + 1 down to
    2^64), anything else estimated in floating point, so a huge power is quick.

    >>> memory_limit(2 ** 64 + 1)
    Traceback (most recent call last):
    ...
    napkin_cat.errors.MemoryLimitError: memory 18446744073709551617 is about 1.845E+19 values, more than any level
    holds (at most 2^64): ...
    """
    approx = sympy.N(M, 15)
    if M.is_Integer and abs(int(M)) > LARGEST_MEMORY or (
            not M.is_Integer and approx.is_real and approx.is_finite and abs(approx) > LARGEST_MEMORY):
        raise MemoryLimitError(f"memory {memory!r} is about {sympy.Float(approx, 4)} values, more than any level "
                               f"holds (at most 2^64): {LEGAL}")


def _read(text: str) -> sympy.Expr:
    """The expression ``text`` writes, built node by node from Python's syntax tree of it."""
    def refuse(why: str):
        raise MemoryLimitError(f"memory {text!r} is not a number or an expression: {LEGAL} ({why})")
    if len(text) > MAX_MEMORY_CHARS:
        refuse(f"more than {MAX_MEMORY_CHARS} characters")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        refuse("it does not parse")

    def build(node):
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return sympy.Integer(node.value)
        if isinstance(node, ast.Constant) and type(node.value) is float:
            refuse("a float; a memory is a whole number of values")
        if isinstance(node, ast.Name) and node.id.lower() in _NOT_NUMBERS:
            raise MemoryLimitError(f"memory {text!r} is not a number: {LEGAL}")
        if isinstance(node, ast.Name):
            try:
                return symbol(check_name(node.id))
            except Exception:
                refuse(f"{node.id!r} is not a size name")
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.UAdd, ast.USub)):
            value = build(node.operand)
            return -value if isinstance(node.op, ast.USub) else value
        if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
            left, right = build(node.left), build(node.right)
            if type(node.op) in (ast.Pow, ast.BitXor) and left.is_number and right.is_number:
                _check_power(left, right)
            if isinstance(node.op, ast.Div) and right == 0:
                refuse("a division by zero")
            return _OPERATORS[type(node.op)](left, right)
        refuse("a call" if isinstance(node, ast.Call) else f"{type(node).__name__} is not part of a memory")

    def _check_power(base, exponent):
        bits = abs(float(exponent)) * math.log2(max(abs(float(base)), 2.0))
        if bits > 4 * math.log2(LARGEST_MEMORY):
            raise MemoryLimitError(f"memory {text!r} is about 2^{bits:.4g} values, more than any level holds (at "
                                   f"most 2^64): {LEGAL}")
    try:
        return build(tree.body)
    except RecursionError:
        refuse("nested too deeply")
