"""The room a numpy run needs: every array it would hold, measured before anything is allocated.

The numpy functor (``nc.evaluate``, ``nc.equivalent``, a plan's run) holds each array of a diagram at the sizes
of the run, in float64 at most (:data:`BYTES_PER_VALUE`).  An array larger than this machine's memory
(:data:`MACHINE_BYTES`) cannot be held: numpy raises a bare ``MemoryError`` for terabytes, and for less the
operating system kills the process once the pages are touched.  So the run is refused first, with a
:class:`~napkin_cat.errors.MemoryLimitError` naming the array, its values and bytes, and the machine's memory::

    largest_array(env, [d])[0] · BYTES_PER_VALUE ≤ MACHINE_BYTES     (else refused, nothing allocated)

>>> import napkin_cat as nc
>>> largest_array({nc.symbol("q"): 4, nc.symbol("x"): 6}, [nc.library.attention(d=2)])
(24, Array(q×x))
>>> check_room(2 ** 40, "the array q×x")
Traceback (most recent call last):
...
napkin_cat.errors.MemoryLimitError: the run would hold the array q×x: 1099511627776 values, 8796093022208 bytes ...
"""
from __future__ import annotations

import os

from napkin_cat.errors import MemoryLimitError
from napkin_cat.semantics.env import substituted
from napkin_cat.syntax.flat import layers

#: bytes of one value in a numpy run: float64, the widest type the functor computes in
BYTES_PER_VALUE = 8


def _machine_bytes() -> int:
    """This machine's physical memory (``os.sysconf``), or 2^40 bytes where the system does not say."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return 1 << 40


#: the most bytes one array of a numpy run may take: this machine's physical memory
MACHINE_BYTES = _machine_bytes()


def value_at(env: dict, expr):
    """``expr`` as an int when the bindings ``env`` determine it, else None."""
    if isinstance(expr, int):
        return expr
    v = substituted(env, expr)
    if isinstance(v, int):
        return v
    return int(v) if v.is_number and v.is_integer else None


def largest_array(env: dict, diagrams) -> tuple:
    """``(values, array)``: the array with the most entries on the boundary or a box's wires of ``diagrams`` at the
    bindings ``env`` (symbol → int; a size they do not determine counts 1), and its entries."""
    shapes: dict = {}                          # each distinct shape once, with an array of it
    for d in diagrams:
        for shape, arr in _diagram_shapes(d).items():
            shapes.setdefault(shape, arr)
    values, most, which = {}, 0, None          # each distinct size evaluated once
    for shape, arr in shapes.items():
        n = 1
        for size in shape:
            if size not in values:
                values[size] = value_at(env, size)
            v = values[size]
            n *= v if v is not None else 1
        if n > most:
            most, which = n, arr
    return most, which


def _diagram_shapes(d) -> dict:
    """``{shape: array}`` of a diagram's boundary and its boxes' wires, in order, remembered on it (immutable; asked
    at every trial of ``nc.equivalent``)."""
    memo = getattr(d, "__dict__", None)
    got = memo.get("_diagram_shapes") if memo is not None else None
    if got is None:
        got = {}
        for arr in (*d.dom.inside, *d.cod.inside):
            got.setdefault(arr.shape, arr)
        for _, box in layers(d):
            for shape, arr in _box_shapes(box).items():
                got.setdefault(shape, arr)
        if memo is not None:
            memo["_diagram_shapes"] = got
    return got


def _box_shapes(box) -> dict:
    """``{shape: array}`` of a box's wires, remembered on the box (immutable; asked at every trial of
    ``nc.equivalent``)."""
    memo = getattr(box, "__dict__", None)
    got = memo.get("_shapes") if memo is not None else None
    if got is None:
        got = {}
        for arr in (*box.dom.inside, *box.cod.inside):
            got.setdefault(arr.shape, arr)
        if memo is not None:
            memo["_shapes"] = got
    return got


def check_room(values: int, what: str) -> None:
    """Refuse (MemoryLimitError) a run that would hold ``what``, an array of ``values`` entries, when its bytes pass
    :data:`MACHINE_BYTES`."""
    if values * BYTES_PER_VALUE > MACHINE_BYTES:
        raise MemoryLimitError(f"the run would hold {what}: {values} values, {values * BYTES_PER_VALUE} bytes as "
                               f"float64, more than this machine's {MACHINE_BYTES} bytes of memory; run it at "
                               f"smaller sizes (or count its cost with nc.cost(diagram, sizes=...), which "
                               f"allocates nothing)")


def check_diagrams(env: dict, diagrams) -> None:
    """:func:`check_room` for the largest array of ``diagrams`` at ``env``."""
    values, array = largest_array(env, diagrams)
    if array is not None:
        check_room(values, f"the array {array}")
