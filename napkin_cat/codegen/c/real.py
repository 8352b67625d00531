"""The C type of the real values a C-family kernel computes and stores: ``float`` or ``double``.

A kernel's real values (its fp32 arrays, its locals, its literals, the libm functions it calls) are of one C
type; C spells them with a suffix: ``1.0f`` and ``tanhf`` are float, ``1.0`` and ``tanh`` double.  The CUDA
kernel is float; the C kernel is float by default and double with ``nc.codegen.c(p, real="double")`` (what a
float64 torch tensor runs on: no value rounds through float).

This record is the one place the type is spelled.  A kind's C form (:mod:`napkin_cat.syntax.printed`) prints in
either type with no work of its own: the C-family dialects fill its helper calls of libm's functions
(``{sqrt}(x)``, ``{log}``, ``{tanh}``, ``{fabs}``, ``{fma}``, …: the names of :data:`LIBM`) in float's spelling
(``FLOAT.helpers``), the spelling of its own text (``0.5f``, and ``sqrtf`` where it names a libm function itself),
and :meth:`Real.spell` respells the filled text in the kernel's type: float's is the text unchanged (a float
kernel's source is byte for byte what the form says), double's drops the suffix of every floating literal and
names libm's double function for each float one (a ``0.1f`` kept in a double kernel rounds 0.1 to float:
0.10000000149; ``sqrtf`` would round its argument and result).

The law: respelling a form filled in float's spelling is filling it with the type's own functions, and float's
respelling is the identity::

    DOUBLE.spell(Template(t).expand(FLOAT.helpers)) == DOUBLE.spell(Template(t).expand(DOUBLE.helpers))
    FLOAT.spell(t) == t

>>> FLOAT.fn("tanh"), DOUBLE.fn("tanh"), FLOAT.one, DOUBLE.zero, DOUBLE.cast("n")
('tanhf', 'tanh', '1.0f', '0.0', '(double)(n)')
>>> form = "({0} < 0.0f ? 0.5f * {b} / (sqrtf({0} * {0} + {b}) - {0}) : 1e-3f * {0})"
>>> DOUBLE.spell(form)
'({0} < 0.0 ? 0.5 * {b} / (sqrt({0} * {0} + {b}) - {0}) : 1e-3 * {0})'
>>> FLOAT.spell(form) == form
True
>>> from napkin_cat.syntax.printed import Template
>>> t = Template("{fma}({log}({0}), 0.5f, {sqrt}(1e-3f + {0}))")
>>> by_float, by_double = (DOUBLE.spell(t.expand(r.helpers)) for r in (FLOAT, DOUBLE))
>>> by_float == by_double, by_float
(True, 'fma(log({0}), 0.5, sqrt(1e-3 + {0}))')
>>> DOUBLE.spell("nc_fmaxf(x1f, 2.f)")            # a name of the kernel's own, an identifier: not libm's, no literal
'nc_fmaxf(x1f, 2.)'

"""
from __future__ import annotations

import re
from dataclasses import dataclass

#: libm's functions of real values (C99 ``<math.h>``, by their double names) that a C form may call as helpers
#: (``{sqrt}(x)``); a float kernel calls ``sqrtf``, a double one ``sqrt``.  ``exp``, ``max`` and ``min`` are the
#: dialects' own helpers (``nc_exp``, ``nc_fmax``: a vectorising polynomial, NaN-propagating selects)
LIBM = ("acos", "acosh", "asin", "asinh", "atan", "atan2", "atanh", "cbrt", "ceil", "copysign", "cos", "cosh",
        "erf", "erfc", "exp2", "expm1", "fabs", "floor", "fma", "fmod", "hypot", "lgamma", "log", "log10", "log1p",
        "log2", "pow", "round", "sin", "sinh", "sqrt", "tan", "tanh", "tgamma", "trunc")
#: the float functions a form may name itself, respelled for another type: libm's, with ``exp``, ``fmax``, ``fmin``
_FLOAT_CALL = re.compile(r"(?<![\w.])(" + "|".join(sorted(LIBM + ("exp", "fmax", "fmin"), key=len, reverse=True))
                         + r")f(?=\s*\()")
#: a floating literal with float's suffix (``1.0f``, ``.5f``, ``2.f``, ``1e-3f``; not ``x1f``, not an integer)
_FLOAT_LITERAL = re.compile(r"(?<![\w.])((?:\d+\.\d*|\.\d+)(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+)[fF](?![\w.])")


@dataclass(frozen=True)
class Real:
    """The C type real values are computed and stored in, and how C spells its values and functions: a literal
    and a libm function take ``suffix`` (``1.0f``, ``tanhf`` for float; ``1.0``, ``tanh`` for double)."""

    ctype: str
    suffix: str
    bytes: int
    gemm: str         # the CBLAS matrix product of this type

    def fn(self, name: str) -> str:
        """libm's function ``name`` of this type (``fn("exp")``: ``expf`` for float, ``exp`` for double)."""
        return name + self.suffix

    @property
    def helpers(self) -> dict:
        """libm's functions of this type by helper name: ``{"sqrt": "sqrtf", …}`` (:data:`LIBM`)."""
        return {name: self.fn(name) for name in LIBM}

    @property
    def zero(self) -> str:
        return "0.0" + self.suffix

    @property
    def one(self) -> str:
        return "1.0" + self.suffix

    def cast(self, value: str) -> str:
        """``value`` converted to this type (an index, a count, a stored value of another format)."""
        return f"({self.ctype})({value})"

    def spell(self, text: str) -> str:
        """C text written in float's spelling, in this type: its floating literals and libm calls respelled
        (float's: unchanged)."""
        if self.suffix == "f":
            return text
        text = _FLOAT_LITERAL.sub(lambda m: m.group(1) + self.suffix, text)
        return _FLOAT_CALL.sub(lambda m: self.fn(m.group(1)), text)


FLOAT = Real("float", "f", 4, "cblas_sgemm")
DOUBLE = Real("double", "", 8, "cblas_dgemm")
#: C type name → :class:`Real`
REALS = {r.ctype: r for r in (FLOAT, DOUBLE)}

__all__ = ["Real", "FLOAT", "DOUBLE", "REALS", "LIBM"]
