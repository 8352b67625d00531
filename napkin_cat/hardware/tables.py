"""Text and JSON renderings shared by the hardware tables (the CLI prints these).

Numbers are exact (``Fraction``, sympy) inside the tables; they become decimals only here.
``KB`` is 1024 bytes, as in the paper's Tables 1-2.

>>> print(text_table(["pool", "M_max"], [["SMEM", kb(232448)]], title="Table 2"))
Table 2
pool  M_max
----  -----
SMEM  227
>>> number(Fraction(179, 48)), number(None)
(3.7291666666666665, None)
"""
from __future__ import annotations

import json
from fractions import Fraction

import sympy

KB = 1024


def exact(v):
    """A sympy number, int or Fraction as a Fraction (None stays None)."""
    if v is None:
        return None
    if isinstance(v, Fraction):
        return v
    if isinstance(v, int):
        return Fraction(v)
    v = sympy.nsimplify(v) if isinstance(v, float) else sympy.sympify(v)
    if v is sympy.oo:
        return None
    p, q = sympy.fraction(sympy.Rational(v))
    return Fraction(int(p), int(q))


def number(v):
    """JSON value: an int when whole, else a float; ``None`` for unbounded."""
    v = exact(v)
    if v is None:
        return None
    return int(v) if v.denominator == 1 else float(v)


def decimal(v, digits: int = 2) -> str:
    """``3.73``, ``16384``, ``∞`` (trailing zeros trimmed)."""
    v = exact(v)
    if v is None:
        return "∞"
    if v.denominator == 1:
        return str(int(v))
    text = f"{float(v):.{digits}f}".rstrip("0").rstrip(".")
    return text


def kb(v, digits: int = 2) -> str:
    """Bytes as KB (1024 B)."""
    v = exact(v)
    return "∞" if v is None else decimal(v / KB, digits)


def text_table(headers, rows, *, title: str | None = None, notes=()) -> str:
    """Left-aligned columns separated by two spaces; a rule under the header."""
    cells = [[str(h) for h in headers]] + [["" if c is None else str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = [title] if title else []
    for k, row in enumerate(cells):
        lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
        if k == 0:
            lines.append("  ".join("-" * w for w in widths))
    lines += [f"note: {n}" for n in notes]
    return "\n".join(lines)


def dumps(data: dict) -> str:
    """A table's data as indented JSON text (non-ASCII kept: the tables' names use Greek letters)."""
    return json.dumps(data, indent=2, ensure_ascii=False)
