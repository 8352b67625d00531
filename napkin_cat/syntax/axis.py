"""Axes: a name and a size.

A size is a positive-integer sympy ``Symbol`` (symbolic) or a Python ``int``
(concrete).  Every symbol is made by :func:`symbol`, so ``q`` is always the
same ``Symbol("q", positive=True, integer=True)``.

>>> q, x, d = axes("q x d", d=64)
>>> q.size == symbol("q"), d.size
(True, 64)
>>> axes("d", d=64)       # one name gives one axis, as sympy.symbols does
Axis('d', 64)
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

import sympy

from napkin_cat.errors import AxisError

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_']*$")

Size = "sympy.Expr | int"

#: the most axes an array may carry: numpy holds arrays of at most 32 dimensions before numpy 2 (64 from numpy 2
#: on; napkin-cat supports numpy ≥ 1.24), and the numpy functor (``nc.evaluate``, the plan runner) must be able to
#: hold every array of a diagram
MAX_AXES = 32
#: the largest concrete size of an axis or tile: an axis of more values than a 64-bit address space holds cannot
#: be stored or indexed, and the exact tile search factors every size (a number of hundreds of digits would take
#: forever); the largest memory ``nc.optimal`` takes is the same (``LARGEST_MEMORY``)
LARGEST_SIZE = 2 ** 64


@lru_cache(maxsize=None)
def symbol(name: str) -> sympy.Symbol:
    """The one positive-integer symbol called ``name``.

    >>> symbol("q") is symbol("q")
    True
    """
    return sympy.Symbol(name, positive=True, integer=True)


def canonical(expr):
    """``expr`` with each of its symbols the one size symbol of that name (:func:`symbol`): a user's
    ``sympy.Symbol("g")`` (no assumptions) is another symbol to sympy than the sizes' ``g``, so ``sizes={"g": 2}``
    never bound it ("give sizes for ['g']" with ``g`` given).

    >>> canonical(sympy.Symbol("g") * 2) == 2 * symbol("g")
    True
    """
    if not isinstance(expr, sympy.Basic):
        return expr
    if expr.is_Symbol:
        return symbol(expr.name) if _plain(expr) else expr
    foreign = {s: symbol(s.name) for s in expr.free_symbols if _plain(s)}
    return expr.xreplace(foreign) if foreign else expr


def _plain(s) -> bool:
    """A symbol as ``sympy.Symbol(name)`` makes it (no assumptions) with an axis name: a user's spelling of a size
    symbol.  The library's own symbols keep theirs (a count of an empty shard, named in words, stays apart)."""
    return s.is_Symbol and _NAME.match(s.name) is not None and s == sympy.Symbol(s.name)


def check_name(name: str) -> str:
    """``name`` where it is a legal axis name (identifier-like), else an AxisError saying what is legal.

    >>> check_name("d_k")
    'd_k'
    """
    if not isinstance(name, str) or not _NAME.match(name):
        raise AxisError(
            f"axis name {name!r} is not legal: use a Python-identifier-like name "
            "such as 'q', 'd_k' or 'x2'")
    return name


def as_size(name: str, size) -> "sympy.Expr | int":
    """Normalise a size: ints stay ints, strings become symbols, sympy stays sympy."""
    if size is None:
        return symbol(name)
    if isinstance(size, bool):
        raise AxisError(f"size of axis {name!r} must be a positive integer or a symbol, got {size!r}")
    if isinstance(size, int) or (hasattr(size, "__index__") and not isinstance(size, sympy.Basic)):
        size = int(size)
        if size <= 0:
            raise AxisError(f"size of axis {name!r} must be a positive integer, got {size}")
        if size > LARGEST_SIZE:
            raise AxisError(f"size of axis {name!r} must be at most 2^64 (a 64-bit address space), got {size}")
        return size
    if isinstance(size, str):
        return symbol(check_name(size))
    if isinstance(size, sympy.Basic):
        size = canonical(size)
        if size.is_Integer:
            return as_size(name, int(size))
        if size.is_number or size.has(sympy.nan, sympy.zoo, sympy.oo):   # 1/2, 2.0, pi, nan, oo, q + oo
            raise AxisError(f"size of axis {name!r} must be a positive integer or an expression in size symbols "
                            f"(such as 2*q), got {size}")
        if size.is_positive is False:
            raise AxisError(f"size of axis {name!r} must be positive, got {size}")
        return size
    raise AxisError(f"size of axis {name!r} must be an int, a symbol name or a sympy expression, got {size!r}")


@dataclass(frozen=True)
class Axis:
    """An axis: a ``name`` and a ``size`` (sympy expression or int).

    Two axes are equal when both name and size agree; an axis relabelled by
    a Grid or a Stream keeps its name and gets a smaller size.

    >>> Axis("q").relabel("g_q")
    Axis('q', g_q)
    """

    name: str
    size: object = None

    def __post_init__(self):
        check_name(self.name)
        object.__setattr__(self, "size", as_size(self.name, self.size))

    def relabel(self, size) -> "Axis":
        """The same axis with another size (a tile or stream size)."""
        return Axis(self.name, size)

    @property
    def is_concrete(self) -> bool:
        return isinstance(self.size, int)

    def __repr__(self):
        return f"Axis({self.name!r}, {self.size})"

    def __str__(self):
        return self.name if self.size == symbol(self.name) else f"{self.name}={self.size}"


def parse_names(spec) -> tuple[str, ...]:
    """Axis names from ``"q x d"`` (spaces or commas), a list of names or of Axis."""
    if isinstance(spec, Axis):
        return (spec.name,)
    if isinstance(spec, str):
        names = tuple(n for n in re.split(r"[\s,]+", spec.strip()) if n)
    else:
        names = tuple(a.name if isinstance(a, Axis) else a for a in spec)
    for n in names:
        check_name(n)
    return names


def axes(spec, **sizes):
    """Axes from names, with concrete sizes as keywords.

    One name gives one :class:`Axis`; several give a tuple (like ``sympy.symbols``).

    >>> axes("q x", x=128)
    (Axis('q', q), Axis('x', 128))
    """
    names = parse_names(spec)
    unknown = set(sizes) - set(names)
    if unknown:
        raise AxisError(f"sizes given for axes {sorted(unknown)} that are not in {list(names)}")
    seen = set()
    for n in names:
        if n in seen:
            raise AxisError(f"axis {n!r} is named twice in {spec!r}; each axis name may appear once")
        seen.add(n)
    result = tuple(Axis(n, sizes.get(n)) for n in names)
    return result[0] if len(result) == 1 else result


def resolve(spec, sizes: dict | None = None, known: dict | None = None) -> tuple[Axis, ...]:
    """A tuple of Axis from names/Axis objects; ``sizes`` override, ``known`` fill in."""
    sizes = sizes or {}
    known = known or {}
    if isinstance(spec, Axis):
        spec = [spec]
    if isinstance(spec, str):
        spec = parse_names(spec)
    out = []
    for a in spec:
        if isinstance(a, Axis):
            out.append(a)
        else:
            check_name(a)
            out.append(Axis(a, sizes.get(a, known.get(a))))
    return tuple(out)
