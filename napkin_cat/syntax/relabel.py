"""Functors on types: rename axes, substitute sizes, recolor levels.

Each is the identity on the diagram's shape and maps every array (and the
weave lists that name axes), so it commutes with ``>>`` and ``@``::

    F(f >> g) == F(f) >> F(g)      F(f @ g) == F(f) @ F(g)

>>> import napkin_cat as nc
>>> d = rename_axis(nc.einsum("q d, x d -> q x"), "x", "k")
>>> d.cod
Ty(Array(q×k))
>>> substitute(nc.einsum("q d, x d -> q x"), d=64).dom
Ty(Array(q×d[64]), Array(x×d[64]))
"""
from __future__ import annotations

from typing import Callable

from sympy import Basic

from napkin_cat.syntax.adapter import Array, Bubble, Diagram, Ty, from_layers, is_structural
from napkin_cat.syntax.axis import Axis, symbol
from napkin_cat.errors import AxisError
from napkin_cat.syntax.primitive import Weave
from napkin_cat.syntax.weave import build_box


def map_arrays(diagram: Diagram, fa: Callable[[Array], Array], fname: Callable[[str], str] = None, *,
               fparam: Callable = None) -> Diagram:
    """Apply ``fa`` to every array, ``fname`` to every weave name, ``fparam`` to every box parameter."""
    fname = fname or (lambda n: n)
    items = []
    for layer in diagram.inside:
        left, box, right = layer.boxes_or_types[:3]
        items.append((Ty(*map(fa, left.inside)), map_box(box, fa, fname, fparam=fparam),
                      Ty(*map(fa, right.inside))))
    return from_layers(Ty(*map(fa, diagram.dom.inside)), Ty(*map(fa, diagram.cod.inside)), items)


def map_box(box, fa, fname, *, fparam: Callable = None):
    kind = is_structural(box)
    dom = [fa(a) for a in box.dom.inside]
    if kind == "swap":
        n = len(box.left)
        return Diagram.swap(Ty(*dom[:n]), Ty(*dom[n:])).boxes[0]
    if kind == "copy":
        return Diagram.copy(Ty(*dom), len(box.cod)).boxes[0]
    if kind == "discard":
        return Diagram.copy(Ty(*dom), 0).boxes[0]
    if isinstance(box, Bubble):
        return box.map_arrays(fa, fname, fparam=fparam)
    spec = box.data
    weaves = [Weave(fname(w.name), w.inputs) for w in spec.weaves]
    params = {k: fparam(v) for k, v in spec.params} if fparam else dict(spec.params)
    return build_box(spec.kind, dom, [fa(a) for a in box.cod.inside], weaves, params, name=box.name)


def _renamed_size(axis: Axis, new: str, size):
    if size is not None:
        return size
    return symbol(new) if axis.size == symbol(axis.name) else axis.size


def rename_axis(diagram: Diagram, old: str, new: str, size=None) -> Diagram:
    """Rename axis ``old`` to ``new`` everywhere.

    A symbolic size named after the axis is renamed with it (``x`` becomes ``k``);
    any other size is kept unless ``size`` is given.
    """
    def fa(arr: Array) -> Array:
        if new in arr.names and old in arr.names:
            raise AxisError(f"cannot rename {old!r} to {new!r}: {arr} already has both")
        return arr.replace(axes=tuple(Axis(new, _renamed_size(a, new, size)) if a.name == old else a
                                      for a in arr.axes))
    return map_arrays(diagram, fa, lambda n: new if n == old else n)


def substitute(diagram: Diagram, mapping: dict | None = None, **sizes) -> Diagram:
    """Substitute sizes (``d=64`` or ``{symbol: value}``) in every array and box parameter.

    Parameters such as SoftMax's ``β = d^(-1/2)`` follow the sizes, so the result
    is the diagram built with those sizes in the first place.
    """
    subs = {symbol(k): v for k, v in sizes.items()}
    subs.update({(symbol(k) if isinstance(k, str) else k): v for k, v in (mapping or {}).items()})

    def fa(arr: Array) -> Array:
        return arr.replace(axes=tuple(
            a if isinstance(a.size, int) else Axis(a.name, a.size.subs(subs)) for a in arr.axes))

    def fparam(value):
        return value.subs(subs) if isinstance(value, Basic) else value
    return map_arrays(diagram, fa, fparam=fparam)


def at_level(diagram: Diagram, level: int) -> Diagram:
    """Recolor every array to ``level`` (a function diagram placed at one level)."""
    return map_arrays(diagram, lambda a: a.replace(level=level))
