"""Trusted constructions of the syntax adapter (issue 35: the search builds a region per partition it tries, and an
array is hashed at every layer it crosses) are discopy's constructions, state for state.

* a region (Kernel, Grid, Stream) built by the adapter's ``Bubble`` has every attribute discopy's own ``Bubble``
  constructor gives it (its args, name, data, types, its one layer, its drawing flags), and is equal to it;
* an array's hash, computed once, is the hash of its ``(axes, level, dtype)``; equal arrays hash alike and compare
  equal, unequal ones compare unequal, and a pickled array comes back equal without its remembered hash.
"""
from __future__ import annotations

import pickle

import pytest
from discopy import monoidal

import napkin_cat as nc
from napkin_cat.syntax.array import Array
from napkin_cat.syntax.adapter import Bubble
from napkin_cat.syntax.flat import layers


def regions(d):
    for _, b in layers(d):
        if isinstance(b, Bubble):
            yield b
            yield from regions(b.arg)


def by_discopy(region):
    """The same region built by discopy's own bubble constructor."""
    out = type(region).__new__(type(region))
    out.params = dict(region.params)
    monoidal.Bubble.__init__(out, region.arg, dom=region.dom, cod=region.cod, name=type(region).title(out.params))
    return out


ALGORITHMS = {
    "kernel": lambda: nc.kernel(nc.library.attention()),
    "flash": lambda: nc.group(nc.stream(nc.library.attention(), "x", "s_x"), "q", "g_q"),
    "sweep": lambda: nc.stream(nc.library.matmul(), "a", "s_a", sliced=True),
    "unfused block": lambda: nc.unfused(nc.library.transformer_block()),
    "level 2": lambda: nc.kernel(nc.group(nc.stream(nc.library.matmul(), "b", "s_b"), "a", "g_a"), level=2),
}


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
def test_a_trusted_region_is_discopys(name):
    found = list(regions(ALGORITHMS[name]()))
    assert found
    for b in found:
        ref = by_discopy(b)
        mine = {k: v for k, v in b.__dict__.items() if not k.startswith("_")}
        theirs = {k: v for k, v in ref.__dict__.items() if not k.startswith("_")}
        assert mine.keys() == theirs.keys(), (name, mine.keys() ^ theirs.keys())
        for k, v in mine.items():
            if k == "inside":
                assert [type(x) for x in v] == [type(x) for x in theirs[k]]
                assert [x.boxes_or_types for x in v] == [x.boxes_or_types for x in theirs[k]]
            else:
                assert v == theirs[k], (name, k)
        assert b == ref and hash(b) == hash(ref)


def test_a_bubble_of_several_diagrams_is_built_by_discopy():
    f = nc.einsum("a b, b c -> a c")
    b = Bubble(f, f, dom=f.dom, cod=f.cod)
    assert b.args == (f, f) and b.draw_as_frame and not b.draw_as_square


def test_an_arrays_hash_is_its_values():
    q, d = nc.types("q d").inside[0].axes
    a, b, c = Array((q, d)), Array((q, d)), Array((q, d), level=1)
    assert hash(a) == hash((a.axes, a.level, a.dtype.name)) == hash(b)
    assert a == b and a != c and hash(a) != hash(c)
    rebuilt, args = a.__reduce__()        # pickled as its value, without its hash (a str's differs per process)
    assert rebuilt is Array and args == (a.axes, a.level, a.dtype) and "_hash" in a.__dict__
    back = pickle.loads(pickle.dumps(a))
    assert back is a and hash(back) == hash(a)    # interned: rebuilt as the array of that value alive here
