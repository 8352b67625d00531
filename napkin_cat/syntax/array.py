"""Arrays: the objects of the category (the paper's wires), and the memory levels they live at.

An array is an ordered tuple of named axes, a memory ``level`` (0: global memory) and a ``dtype``; the item R
is the array with no axes.  Two arrays are equal when their axes (names, sizes, order), level and dtype are.
This module holds discopy's object class (``cat.Ob``); the diagrams over these objects are in
:mod:`napkin_cat.syntax.adapter`.

>>> from napkin_cat.syntax.axis import axes
>>> q, d = axes("q d")
>>> A = Array((q, d)); A
Array(q×d)
>>> A == Array((q, d)) and A != Array((q, d), level=1)
True
>>> Array((q, d)) is A, Array((q, d), dtype="fp16") is A, A.replace(level=1) is Array((q, d), level=1)
(True, False, True)
"""
from __future__ import annotations

import threading
import weakref

from discopy import cat

from napkin_cat.syntax.axis import MAX_AXES, Axis, symbol
from napkin_cat.syntax.dtype import DType, FP32, as_dtype
from napkin_cat.errors import ArgumentError, AxisError, LevelError


#: the deepest memory level an array or a kernel may name.  The deepest hierarchy napkin-cat models has four
#: levels (GMEM, SMEM, registers, tensor-core fragments: ``hardware/hierarchies/hopper.toml``); a kernel at level
#: ``ℓ`` loads its inputs through every level above it, one box per level, so a level of ``10**30`` would build
#: boxes forever.
MAX_LEVEL = 16

def as_level(level, *, least: int = 0, what: str = "level") -> int:
    """``level`` as an int, refused (:class:`~napkin_cat.errors.LevelError`) unless it is a whole number
    ``least … MAX_LEVEL`` (0: global memory, 1: the first level below it, …).

    >>> as_level(2)
    2
    >>> as_level(1.5)
    Traceback (most recent call last):
    ...
    napkin_cat.errors.LevelError: level must be a whole number 0 … 16 (0: global memory, 1: the first level ...
    """
    if isinstance(level, bool) or not hasattr(level, "__index__") or not least <= int(level) <= MAX_LEVEL:
        raise LevelError(f"{what} must be a whole number {least} … {MAX_LEVEL} (0: global memory, 1: the first "
                         f"level below it; no hierarchy is deeper than {MAX_LEVEL}), got {level!r}")
    return int(level)


#: every array alive, by value: ``Array(...)`` of a value met before returns the array already built (weak: an
#: array no diagram, memo or caller holds is dropped with its entry)
_INTERNED: "weakref.WeakValueDictionary" = weakref.WeakValueDictionary()
_LOCK = threading.Lock()


class Array(cat.Ob):
    """An array type: ordered ``axes``, a memory ``level`` and a ``dtype``.

    The item R is the array with no axes.  Equality and hash include axes
    (names and sizes), level and dtype.

    Arrays are interned by value: two arrays of equal axes (names, sizes, order), level and dtype are one object while
    either lives, ``Array(a, l, t) is Array(a, l, t)`` (so a memo kept on an array, or keyed by its identity, serves
    every equal copy: the search meets the same relabelled array thousands of times).  An array is immutable: its
    attributes are set once, by the constructor; what is cached on it (its hash, label, the images the functors of
    :mod:`napkin_cat.syntax.relabel` remember) is a function of its value.
    """

    def __new__(cls, axes: tuple = (), level: int = 0, dtype: DType | str = FP32):
        """The array of this value: the one already built if one lives, else a new one (interned)."""
        axes = tuple(axes)
        level = as_level(level, what="an array's level")
        dtype = as_dtype(dtype)
        key = (cls, axes, level, dtype)
        try:
            found = _INTERNED.get(key)
        except TypeError:          # an unhashable axis: refused below
            found = None
        if found is not None:
            return found
        new = super().__new__(cls)
        new._check(axes)
        new.axes, new.level, new.dtype = axes, level, dtype
        with _LOCK:
            return _INTERNED.setdefault(key, new)

    def __init__(self, axes: tuple = (), level: int = 0, dtype: DType | str = FP32):
        """Nothing: :meth:`__new__` builds the value once (``Array(...)`` met again returns the same object)."""

    @staticmethod
    def _check(axes: tuple) -> None:
        for a in axes:
            if not isinstance(a, Axis):
                raise ArgumentError(f"Array axes must be Axis objects (nc.Axis('q'), nc.axes('q d')), got {a!r}")
        if len(axes) > MAX_AXES:
            raise AxisError(f"an array carries at most {MAX_AXES} axes (the most dimensions numpy holds before "
                            f"numpy 2), got {len(axes)}: {', '.join(a.name for a in axes[:8])}, …")
        names = [a.name for a in axes]
        if len(set(names)) != len(names):
            twice = sorted({n for n in names if names.count(n) > 1})
            raise AxisError(f"an array carries each axis once, but {twice[0]!r} appears twice in "
                            f"{'×'.join(names)}")

    @property
    def name(self) -> str:
        """The label ``q×d`` (an axis whose size is not its own symbol shows it: ``q[4]``), formatted when
        first asked for: most arrays the search builds are never printed."""
        label = self.__dict__.get("_label")
        if label is None:
            label = self.__dict__["_label"] = "×".join(_axis_label(a) for a in self.axes) or "R"
        return label

    @name.setter
    def name(self, value):  # discopy's Ob assigns it; the label is always derived from the axes
        pass

    @property
    def names(self) -> tuple[str, ...]:
        names = self.__dict__.get("_names")
        if names is None:
            names = self.__dict__["_names"] = tuple(a.name for a in self.axes)
        return names

    @property
    def shape(self) -> tuple:
        return tuple(a.size for a in self.axes)

    @property
    def numel(self):
        n = 1
        for a in self.axes:
            n = n * a.size
        return n

    def axis(self, name: str) -> Axis:
        for a in self.axes:
            if a.name == name:
                return a
        raise KeyError(name)

    def replace(self, axes=None, level=None, dtype=None) -> "Array":
        return Array(self.axes if axes is None else axes,
                     self.level if level is None else level,
                     self.dtype if dtype is None else dtype)

    def _key(self):
        return (self.axes, self.level, self.dtype.name)

    def __eq__(self, other):
        return self is other or (isinstance(other, Array) and hash(self) == hash(other) and self._key() == other._key())

    def __hash__(self):
        """The hash of ``(axes, level, dtype)``, computed once: an array is immutable, and a wire's array is hashed
        at every layer of a diagram it crosses (a read-back of a 32-block transformer hashed 3 million, each
        hashing its axes and their sympy sizes again)."""
        found = self.__dict__.get("_hash")
        if found is None:
            found = self.__dict__["_hash"] = hash(self._key())
        return found

    def __reduce__(self):
        """Pickled as its value and rebuilt by the constructor, so that the receiving process interns it too (and
        recomputes its hash: a string's hash differs from process to process; the memos kept on it are dropped)."""
        return type(self), (self.axes, self.level, self.dtype)

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self

    def __repr__(self):
        extra = ""
        if self.level:
            extra += f"@{self.level}"
        if self.dtype is not FP32 and self.dtype.name != "fp32":
            extra += f":{self.dtype.name}"
        return f"Array({self.name}{extra})"

    def __str__(self):
        return repr(self)[6:-1]


def _axis_label(a: Axis) -> str:
    return a.name if a.size == symbol(a.name) else f"{a.name}[{a.size}]"


def difference(x: Array, y: Array) -> str:
    """What tells two arrays apart: their axes (names, sizes, order), level or dtype (the words every
    composition error quotes).

    >>> from napkin_cat.syntax.axis import axes
    >>> q, d = axes("q d")
    >>> difference(Array((q, d)), Array((d, q), level=1))
    "axes ['q', 'd'] vs ['d', 'q']; level 0 vs 1"
    """
    why = []
    if x.axes != y.axes:
        why.append(f"axes {[str(t) for t in x.axes]} vs {[str(t) for t in y.axes]}")
    if x.level != y.level:
        why.append(f"level {x.level} vs {y.level}")
    if x.dtype != y.dtype:
        why.append(f"dtype {x.dtype.name} vs {y.dtype.name}")
    return "; ".join(why) or "they differ"
