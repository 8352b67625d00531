"""An array functor keeps what it leaves unchanged, and a box remembers its image under a named functor (issue 35).

``map_arrays(d, fa, key=k)`` (what the search's partitions run: ``at_level``, ``relabel_axis``) must build the
diagram that rebuilding every box gives: here a reference rebuilds each box from its parts (``build_box``, the
wiring from its arrays, a region from its mapped inside) and the two are compared as values on library programs
and their partitions.  Besides: a box the functor does not touch is the same object, a second functor differing
only in a size gets its own images, and the structural boxes and primitive boxes the adapter builds trusted carry
exactly the attributes discopy's own construction gives them.
"""
from __future__ import annotations

import pytest

import napkin_cat as nc
from napkin_cat.algorithms.partitions import relabel_axis
from napkin_cat.syntax.array import Array
from napkin_cat.syntax.adapter import Box, Bubble, Copy, Diagram, Swap, Ty
from napkin_cat.syntax.flat import copy_box, from_layers, swap_box
from napkin_cat.syntax.axis import Axis, axes
from napkin_cat.syntax.primitive import Spec, Weave
from napkin_cat.syntax.relabel import at_level, map_arrays
from napkin_cat.syntax.weave import build_box
from napkin_cat.syntax.wiring import computes, is_structural


def rebuilt(d: Diagram, fa) -> Diagram:
    """The image of ``d`` under the array functor ``fa``, every box built afresh (no box kept, nothing remembered)."""
    items = []
    for layer in d.inside:
        left, box, right = layer.boxes_or_types[:3]
        dom = [fa(a) for a in box.dom.inside]
        if not computes(box):
            kind = is_structural(box)
            new = swap_box(*dom) if kind == "swap" else copy_box(dom[0], len(box.cod))
        elif isinstance(box, Bubble):
            new = type(box).rebuild(rebuilt(box.arg, fa), Ty(*dom), Ty(*map(fa, box.cod.inside)),
                                    box.mapped_params(fa, lambda n: n))
        else:
            new = build_box(box.data.kind, dom, [fa(a) for a in box.cod.inside],
                            [Weave(w.name, w.inputs) for w in box.data.weaves], dict(box.data.params), name=box.name)
        items.append((Ty(*map(fa, left.inside)), new, Ty(*map(fa, right.inside))))
    return from_layers(Ty(*map(fa, d.dom.inside)), Ty(*map(fa, d.cod.inside)), items)


def tile(axis: str, size):
    def fa(arr: Array) -> Array:
        return arr.replace(axes=tuple(Axis(axis, size) if a.name == axis else a for a in arr.axes))
    return fa


def programs():
    att = nc.library.attention()
    flash = nc.group(nc.stream(nc.kernel(att), "x", "s_x"), "q", "g_q")
    back = nc.kernel(nc.grad(att))
    return {"attention": (att, "x"), "flash": (flash, "d"), "backward": (back, "q"), "mlp": (nc.library.mlp(), "f")}


@pytest.mark.parametrize("name", sorted(programs()))
def test_remembered_image_is_the_rebuilt_one(name):
    d, axis = programs()[name]
    for fa, key in [(lambda a: a.replace(level=2), ("level", 2)), (tile(axis, 4), ("tile", axis, 4)),
                    (tile(axis, "t"), ("tile", axis, "t"))]:
        first = map_arrays(d, fa, key=key)
        assert first == rebuilt(d, fa), (name, key)
        again = map_arrays(d, fa, key=key)     # remembered: the same boxes, not rebuilt ones
        assert again == first and all(x is y for x, y in zip(again.boxes, first.boxes))
    assert at_level(d, 1) == rebuilt(d, lambda a: a.replace(level=1))


def test_a_key_tells_sizes_apart():
    k = nc.kernel(nc.library.attention())
    by_four, by_name = relabel_axis(k, "x", 4), relabel_axis(k, "x", "s_x")
    assert by_four == rebuilt(k, tile("x", 4)) and by_name == rebuilt(k, tile("x", nc.axes("s_x").size))
    assert by_four != by_name
    assert relabel_axis(k, "x", 4, full=nc.axes("x").size) == by_four     # only the full x is tiled: all of it
    assert at_level(nc.library.attention(), 2).dom.inside[0].level == 2


def test_what_the_functor_leaves_is_kept():
    f = nc.einsum("q d, x d -> q x") @ nc.elementwise("exp", "y")
    g = map_arrays(f, tile("y", 3))
    assert g.boxes[0] is f.boxes[0] and g.boxes[1] is not f.boxes[1] and g.boxes[1].cod == nc.types("y", y=3)
    assert map_arrays(f, lambda a: a) is f
    k = nc.kernel(nc.library.attention())
    assert relabel_axis(k, "z", 4) is k                         # no array carries z: the kernel itself
    assert at_level(nc.at_level(f, 1), 1).boxes[0] is not f.boxes[0]


def _discopy_init(cls):
    """The constructor discopy gives ``cls`` (the first discopy class above the adapter's)."""
    return next(c for c in cls.__mro__ if c.__module__.startswith("discopy")).__init__


def _attributes(box) -> dict:
    out = {k: v for k, v in vars(box).items() if not k.startswith("_") and k != "inside"}
    (layer,) = box.inside
    left, inner, right = layer.boxes_or_types[:3]
    return {**out, "layer": (left, inner is box, right)}


def test_trusted_boxes_are_built_as_discopy_builds_them():
    q, d = axes("q d")
    a, b = Array((q, d)), Array((d,), level=1)
    spec = Spec("exp", (), ())
    made = {"swap": (swap_box(a, b), Swap, (Ty(a), Ty(b))), "copy": (copy_box(a, 3), Copy, (Ty(a), 3)),
            "copy2": (copy_box(a), Copy, (Ty(a), 2)), "discard": (copy_box(a, 0), Copy, (Ty(a), 0)),
            "box": (Box("exp", Ty(a), Ty(b), data=spec), Box, ("exp", Ty(a), Ty(b)))}
    for name, (box, cls, args) in made.items():
        ref = cls.__new__(cls, *args[:2]) if cls is Copy else cls.__new__(cls)
        _discopy_init(type(ref))(ref, *args, **({"data": spec} if cls is Box else {}))
        assert type(ref) is type(box) and _attributes(box) == _attributes(ref), name
        assert box == ref
    assert is_structural(copy_box(a, 0)) == "discard" and is_structural(swap_box(a, b)) == "swap"
    with pytest.raises(ValueError, match="length 1"):
        Swap(Ty(a, b), Ty(b))
