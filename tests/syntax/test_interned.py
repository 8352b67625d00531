"""Arrays interned by value (issue 35): equal arrays are one object, different arrays never are.

The search relabels the same arrays thousands of times (a transformer block's derive built 3,583 relabelled arrays
for 279 values), so every memo kept on an array, or keyed by its identity, missed on each fresh copy.  ``Array(...)``
now returns the array of that value already alive (:mod:`napkin_cat.syntax.array`), weakly held.

Second route: the value each array is built from, written down here as plain tuples (names, sizes with their
types, level, dtype name) from the arguments, never read back from the array; two arrays are one object exactly
when those tuples are equal.

Mutations caught: the intern key without the dtype, without the level, or with the axes' names only (not their
sizes): ``test_arrays_are_one_object_exactly_when_their_values_are_equal`` fails; a strong dict instead of the weak
table: ``test_an_array_nobody_holds_is_dropped`` fails; ``__reduce__`` removed (pickled by its ``__dict__`` onto a
fresh object): ``test_a_pickled_or_copied_array_is_the_array_of_its_value`` fails."""
from __future__ import annotations

import copy
import itertools
import pickle
import random
import weakref

import sympy

import napkin_cat as nc
from napkin_cat.syntax.array import Array
from napkin_cat.syntax.axis import Axis
from napkin_cat.syntax.relabel import rename_axis, substitute, tile_relabel, map_arrays

NAMES = ("q", "x", "d")
SIZES = (None, 4, 8, "g_q", sympy.Symbol("x") * 2)
LEVELS = (0, 1)
DTYPES = ("fp32", "fp16", "int32")


def _value(names, sizes, level, dtype) -> tuple:
    """The value the arguments describe, independent of :class:`Array`: a size's type with it (4 and a symbol)."""
    written = tuple(str(sympy.Symbol(n)) if s is None else str(s) for n, s in zip(names, sizes))
    return names, written, tuple(type(s).__name__ for s in sizes), level, dtype


def test_arrays_are_one_object_exactly_when_their_values_are_equal():
    rng = random.Random(35)
    built = []
    for _ in range(400):
        names = tuple(rng.sample(NAMES, rng.randint(0, 3)))
        sizes = tuple(rng.choice(SIZES) for _ in names)
        level, dtype = rng.choice(LEVELS), rng.choice(DTYPES)
        arr = Array(tuple(Axis(n, s) for n, s in zip(names, sizes)), level=level, dtype=dtype)
        built.append((_value(names, sizes, level, dtype), arr))
    values = {v for v, _ in built}
    assert 40 < len(values) < 400          # values met many times, and many values
    for (v, a), (w, b) in itertools.combinations(built, 2):
        assert (a is b) == (v == w) == (a == b), (v, w)


def test_one_axis_a_size_a_level_or_a_dtype_apart_never_share():
    q, d = Axis("q"), Axis("d")
    base = Array((q, d))
    apart = [Array((q, Axis("x"))), Array((q, Axis("d", 64))), Array((q, Axis("d", 2 * sympy.Symbol("d")))),
             Array((d, q)), Array((q,)), Array((q, d), level=1), Array((q, d), dtype="fp16"),
             base.replace(dtype="bf16"), base.replace(level=2), base.replace(axes=(q, Axis("d", 4)))]
    assert all(a is not base and a != base for a in apart)
    assert len({id(a) for a in apart}) == len(apart)
    assert Array((Axis("q"), Axis("d"))) is base and base.replace() is base and base.replace(level=0) is base


def test_equal_relabellings_give_one_object():
    f, g = nc.einsum("q d, x d -> q x"), nc.einsum("q d, x d -> q x")     # two diagrams built apart
    assert rename_axis(f, "x", "k").cod.inside[0] is rename_axis(g, "x", "k").cod.inside[0]
    assert substitute(f, d=64).dom.inside == substitute(g, d=64).dom.inside
    assert all(a is b for a, b in zip(substitute(f, d=64).dom.inside, substitute(g, d=64).dom.inside))
    tile = nc.symbol("g_q")
    one = map_arrays(f, tile_relabel("q", tile)).dom.inside[0]
    two = map_arrays(g, lambda a: a.replace(axes=(Axis("q", tile), *a.axes[1:])) if "q" in a.names else a)
    assert one is two.dom.inside[0] and one.shape == (tile, nc.symbol("d"))
    assert map_arrays(f, tile_relabel("q", 16)).dom.inside[0] is not one      # another tile: another array


def test_an_array_nobody_holds_is_dropped():
    arr = Array((Axis("interned_once", 3),), level=1)
    gone = weakref.ref(arr)
    del arr                 # by reference counting alone (a gc.collect() over a test worker's heap took 9 s)
    assert gone() is None


def test_a_pickled_or_copied_array_is_the_array_of_its_value():
    arr = Array((Axis("q", 4), Axis("d")), level=1, dtype="fp16")
    assert pickle.loads(pickle.dumps(arr)) is arr and copy.copy(arr) is arr and copy.deepcopy(arr) is arr
    assert arr.axes == (Axis("q", 4), Axis("d")) and arr.level == 1 and arr.dtype.name == "fp16"
