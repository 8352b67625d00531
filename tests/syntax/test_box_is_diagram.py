"""A box is a diagram (discopy: its own one-layer diagram), so ``isinstance(x, Diagram)`` never tells a box from a
diagram (issue: partial_values' memo never hit).  What depends on the two being one:

- ``hash``: discopy calls a box equal to ``Diagram.id(box.dom) >> box``; equal values must hash equal, or a set or
  dict keyed by programs holds one program twice and a lookup of the other form misses.  The independent route is
  discopy's own ``==``, checked first on every box of the library (regions, primitives, structural boxes).
- :func:`~napkin_cat.algorithms.launches.kernel_launches` of a region is that of the diagram of it alone, and
  refuses what is not a diagram (it answered ``[]``: its branch for a bare region was never taken, regions being
  diagrams, and anything else read as a region with no kernel).
- :mod:`napkin_cat.io.serial` writes a bare box as a box and reads it back as that box.
"""
from __future__ import annotations

import pytest
import sympy

import napkin_cat as nc
from napkin_cat.algorithms.bubbles import Grid, Kernel, Region
from napkin_cat.algorithms.launches import kernel_launches
from napkin_cat.errors import ArgumentError, RewriteError
from napkin_cat.io.serial import dumps, loads
from napkin_cat.syntax.adapter import Box, Diagram
from napkin_cat.syntax.flat import layers


def _library() -> dict:
    out = {}
    for name in nc.library.__all__:
        try:
            d = getattr(nc.library, name)()
        except TypeError:           # an algorithm that needs an argument: not drawn here
            continue
        if isinstance(d, Diagram):
            out[name] = d
    return out


LIBRARY = _library()


def _boxes(d) -> list:
    """Every box of ``d``, inside its regions too."""
    out = []
    for _, b in layers(d):
        out.append(b)
        if isinstance(b, Region):
            out += _boxes(b.arg)
    return out


def _alone(box) -> Diagram:
    return Diagram.id(box.dom) >> box


def _programs() -> list:
    """Library algorithms, each also in a kernel and grouped over its first output axis (bare regions)."""
    out = []
    for d in LIBRARY.values():
        k = nc.kernel(d)
        out += [d, k]
        axes = [a.name for a in d.cod.inside[0].axes] if len(d.cod) else []
        for a in axes:
            try:
                out.append(nc.group(k, a, f"g_{a}"))
                break
            except RewriteError:     # the groups along this axis would not be independent: another axis
                continue
    return out


def test_a_box_and_the_diagram_of_it_alone_hash_equal():
    boxes = [b for d in _programs() for b in (*_boxes(d), *([d] if isinstance(d, Box) else []))]
    assert any(isinstance(b, Region) for b in boxes) and any(b.data is not None for b in boxes)
    for b in boxes:
        one = _alone(b)
        assert type(one) is Diagram and one == b and b == one, b      # discopy's equality: the second route
        assert hash(one) == hash(b), b
        assert len({b, one}) == 1 and {b: 1}.get(one) == 1 and {one: 1}.get(b) == 1


def test_diagrams_that_differ_stay_apart():
    for d in LIBRARY.values():
        if len(d.boxes) < 2:
            continue
        first = d.boxes[0]
        assert d != first and d != _alone(first)
        assert len({d, first, _alone(first), Diagram.id(d.dom)}) == 3


def test_kernel_launches_of_a_region_is_that_of_the_diagram_of_it_alone():
    seen = 0
    for d in _programs():
        for r in [x for x in (d, *_boxes(d)) if isinstance(x, Region)]:
            got = kernel_launches(r)
            assert got == kernel_launches(_alone(r))
            if isinstance(r, Kernel):            # by hand: the kernel itself, no Grid around it
                assert [(k.kernel, k.grids) for k in got] == [(r, ())]
                seen += 1
            inner = [b for _, b in layers(r.arg) if isinstance(b, Region)]
            if isinstance(r, Grid) and inner and all(isinstance(b, Kernel) for b in inner):   # by hand: one Grid
                assert [(k.kernel, k.grids) for k in got] == [(b, (r,)) for b in inner]
                assert {k.blocks for k in got} == {sympy.ceiling(sympy.sympify(r.full_size()) / sympy.sympify(r.size))}
                seen += 1
    assert seen > 1.5 * len(LIBRARY)          # every kernel, and most groups of one


@pytest.mark.parametrize("bad", ["attention", 3, None])
def test_kernel_launches_refuses_what_is_not_a_diagram(bad):
    with pytest.raises(ArgumentError, match="kernel_launches takes a napkin_cat Diagram"):
        kernel_launches(bad)


def test_a_bare_box_reads_back_as_that_box():
    for d in _programs()[:12]:
        for b in [x for x in (d, *_boxes(d)) if isinstance(x, Box)][:6]:
            back = loads(dumps(b))
            assert isinstance(back, Box) and type(back) is type(b) and back == b
