"""The pieces a random program is built of: its values, its operations (a diagram, a numpy meaning, a source)
and the helpers that write an operation's source and align its numpy operands.

A :class:`Value` is a wire with its axes ``(name, size expression, size at run time)`` and its dtype (``fp32``
for numbers, ``int32`` for positions and the integers computed from them, ``bool`` for masks); an
:class:`Op` is one operation of the program.  The numpy meaning of an op reads and gives float64 arrays (a mask
as 0/1, an integer as a whole float), broadcast by names with :func:`align`:

>>> import numpy as np
>>> align(np.arange(3.), ["j"], ["i", "j"], {"i": 2, "j": 3}).tolist()
[[0.0, 1.0, 2.0], [0.0, 1.0, 2.0]]
>>> call_source("elementwise", "exp", "a b", axes=(("a", 3, 3), ("b", "n", 4)))
"nc.elementwise('exp', 'a b', sizes={'a': 3, 'b': nc.symbol('n')})"
>>> call_source("compare", "le", "x, q -> q x", axes=(("q", 2, 2), ("x", 2, 2)), keywords=False)
"nc.compare('le', 'x, q -> q x', **{'q': 2, 'x': 2})"
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from napkin_cat.syntax.adapter import Diagram

#: the dtypes a value of a random program has: numbers, integers (positions), masks; and scores: numbers that hold
#: −∞ where a mask is false, read only by a SoftMax (β > 0).  Any other reader of −∞ is ill-posed in floating point:
#: ``Σ_s a_s·(−∞)`` is −∞ summed one way and NaN another (terms of both signs), ``β = −1`` makes it +∞
NUMBERS, INTEGERS, MASKS, SCORES = "fp32", "int32", "bool", "scores"


@dataclass(frozen=True)
class Value:
    """A wire of the program being built: its axes as ``(name, size expression, size at run time)``, the
    reference's id of it and its dtype."""

    wire: object
    axes: tuple
    ref: int
    dtype: str = NUMBERS

    @property
    def names(self) -> list:
        return [a[0] for a in self.axes]


@dataclass(frozen=True)
class Op:
    """One operation: its diagram, its numpy meaning (arrays in, list of arrays out), its source, and per output
    its axes (as in :class:`Value`) and its dtype."""

    diagram: Diagram
    fn: object
    source: str
    outs: tuple
    dtype: str = NUMBERS


def size_source(size) -> str:
    """The Python source of an axis size: an int, or ``nc.symbol(name)``."""
    return repr(size) if isinstance(size, int) else f"nc.symbol({str(size)!r})"


def sizes_of(axes) -> dict:
    """``{name: size expression}`` of ``axes``."""
    return {name: size for name, size, _ in axes}


def call_source(fn: str, *args, axes=(), keywords: bool = True, **options) -> str:
    """The source ``nc.fn(*args, **options, sizes={...})`` of a constructor; ``keywords=False``: the sizes as
    ``**{...}`` (the constructors of :mod:`napkin_cat.syntax.indices` take them as keywords, and an axis may be
    named ``lambda``)."""
    parts = [repr(a) for a in args] + [f"{k}={v}" for k, v in options.items()]
    items = sizes_of(axes)
    if items:
        body = ", ".join(f"{name!r}: {size_source(s)}" for name, s in items.items())
        parts.append(f"sizes={{{body}}}" if keywords else f"**{{{body}}}")
    return f"nc.{fn}({', '.join(parts)})"


def align(x, names, out, run):
    """``x`` (axes ``names``, each in ``out``) transposed and broadcast to the axes ``out`` (sizes ``run``)."""
    names = list(names)
    present = [n for n in out if n in names]
    y = np.transpose(np.asarray(x), [names.index(n) for n in present])
    y = y.reshape([y.shape[present.index(n)] if n in names else 1 for n in out])
    return np.broadcast_to(y, [run[n] for n in out])


def letters(names) -> dict:
    """A letter per distinct name, for ``np.einsum``."""
    return {n: chr(ord("a") + k) for k, n in enumerate(dict.fromkeys(names))}


__all__ = ["NUMBERS", "INTEGERS", "MASKS", "SCORES", "Value", "Op", "size_source", "sizes_of", "call_source", "align",
           "letters"]
