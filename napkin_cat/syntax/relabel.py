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

from sympy import Basic, Symbol

from napkin_cat.syntax.array import Array, as_level
from napkin_cat.syntax.adapter import Bubble, Diagram, Ty
from napkin_cat.syntax.flat import from_layers
from napkin_cat.syntax.axis import Axis, as_size, symbol
from napkin_cat.errors import AxisError
from napkin_cat.syntax.primitive import Weave, kind_of
from napkin_cat.syntax.sizes import names_of
from napkin_cat.syntax.weave import build_box
from napkin_cat.syntax.wiring import computes, retype


def map_arrays(diagram: Diagram, fa: Callable[[Array], Array], fname: Callable[[str], str] = None, *,
               fparam: Callable = None, key=None) -> Diagram:
    """Apply ``fa`` to every array, ``fname`` to every weave name, ``fparam`` to every box parameter.

    What the functor leaves as it was stays as it was: a box none of whose arrays, weave names or parameters
    change is kept (not rebuilt), and so is a diagram none of whose layers change (``F(f) is f``).

    ``key``, when given, is a hashable value that determines ``(fa, fname, fparam)`` whole (two calls with equal
    keys map every array, name and parameter alike).  Each box and array then remembers its image under the
    functor named ``key`` (both are immutable values), so a box met again (the same primitive in another block
    of one program, in the next candidate partition of one kernel) is mapped once::

        map_arrays(f, fa, key=k).boxes[i] is map_arrays(g, fa, key=k).boxes[j]   when f.boxes[i] is g.boxes[j]

    >>> import napkin_cat as nc
    >>> f = nc.einsum("q d, x d -> q x") @ nc.elementwise("exp", "y")
    >>> g = map_arrays(f, lambda a: a.replace(level=1) if "y" in a.names else a)
    >>> g.boxes[0] is f.boxes[0], g.boxes[1].cod, map_arrays(f, lambda a: a) is f
    (True, Ty(Array(y@1)), True)
    >>> h = map_arrays(f, lambda a: a.replace(level=2), key=("level", 2))
    >>> map_arrays(f @ f, lambda a: a.replace(level=2), key=("level", 2)).boxes[0] is h.boxes[0]
    True
    """
    fname = fname or _same_name
    if key is not None and getattr(fa, "key", None) != key:
        fa = _remembering(fa, key)
    items, changed = [], False
    for layer in diagram.inside:
        left, box, right = layer.boxes_or_types[:3]
        item = (_map_ty(left, fa), map_box(box, fa, fname, fparam=fparam, key=key), _map_ty(right, fa))
        changed = changed or item[0] is not left or item[1] is not box or item[2] is not right
        items.append(item)
    dom, cod = _map_ty(diagram.dom, fa), _map_ty(diagram.cod, fa)
    if not changed and dom is diagram.dom and cod is diagram.cod:
        return diagram
    return from_layers(dom, cod, items)


def _same_name(name: str) -> str:
    return name


_SAME = object()   # remembered for an object its functor keeps: no reference from an object to itself


def remembered(obj, key, build):
    """``build()``, remembered on the immutable value ``obj`` (a box, an array) under ``key``, a hashable value
    that determines the result whole with ``obj``: the images of a box under a named functor (:func:`map_arrays`),
    what an accumulator form builds at a box it matched (:mod:`napkin_cat.algorithms.accumulators`).  A result
    that is ``obj`` itself is remembered by a marker, so that no object refers to itself (it would wait for the
    cyclic collector).

    >>> from napkin_cat.syntax.adapter import Box, Ty
    >>> box, calls = Box("f", Ty(), Ty()), []
    >>> [remembered(box, ("form", "x"), lambda: calls.append(1) or len(calls)) for _ in range(2)], calls
    ([1, 1], [1])
    >>> remembered(box, ("kept",), lambda: box) is box
    True
    """
    images = obj.__dict__.get("_images")
    if images is None:
        images = obj.__dict__["_images"] = {}
    found = images.get(key)
    if found is None:
        found = build()
        images[key] = _SAME if found is obj else found
        return found
    return obj if found is _SAME else found


def _remembering(fa, key):
    """``fa`` with each array's image remembered on the array under ``key``."""
    def remembering(arr):
        return remembered(arr, key, lambda: fa(arr))
    remembering.key = key
    return remembering


def _map_ty(ty: Ty, fa) -> Ty:
    """``Ty(*map(fa, ty))``, or ``ty`` itself when ``fa`` keeps every array."""
    arrays = tuple(map(fa, ty.inside))
    return ty if _kept(arrays, ty.inside) else Ty(*arrays)


def _kept(new, old) -> bool:
    """Whether the values ``new`` are the values ``old`` (the same objects, or equal values of the same type)."""
    return len(new) == len(old) and all(x is y or (type(x) is type(y) and x == y) for x, y in zip(new, old))


def map_box(box, fa, fname, *, fparam: Callable = None, key=None):
    """The image of one box under the array functor ``(fa, fname, fparam)``: the box itself when the functor
    changes none of its arrays, weave names or parameters; remembered on the box under ``key`` when one is given
    (see :func:`map_arrays`)."""
    if key is None:
        return _image(box, fa, fname, fparam, None)
    return remembered(box, key, lambda: _image(box, fa, fname, fparam, key))


def _image(box, fa, fname, fparam, key):
    dom = [fa(a) for a in box.dom.inside]
    if not computes(box):      # the same generator on the mapped wires
        return box if _kept(dom, box.dom.inside) else retype(box, dom)
    if isinstance(box, Bubble):
        return box.map_arrays(fa, fname, fparam=fparam, key=key)
    spec = box.data
    cod = [fa(a) for a in box.cod.inside]
    weaves = [Weave(fname(w.name), w.inputs) for w in spec.weaves]
    params = {k: fparam(v) for k, v in spec.params} if fparam else dict(spec.params)
    for k in kind_of(spec.kind).axis_params:        # a collective's axis: renamed like a weave name
        if isinstance(params.get(k), str):
            params[k] = fname(params[k])
    if _kept(dom, box.dom.inside) and _kept(cod, box.cod.inside) and _kept(weaves, spec.weaves) \
            and _kept([params[k] for k, _ in spec.params], [v for _, v in spec.params]):
        return box
    return build_box(spec.kind, dom, cod, weaves, params, name=box.name)


def tile_relabel(axis: str, size, full=None):
    """The array functor of a partition's relabelling: every array's ``axis`` gets ``size`` (a tile or a slice), with
    ``full`` only where the axis has that size (a tile of it from a partition already there stays).  Its ``key``
    names it for :func:`map_arrays` (equal arguments: equal keys), and each array's image is remembered on it.

    >>> import napkin_cat as nc
    >>> fa = tile_relabel("q", nc.symbol("g_q"), full=nc.symbol("q"))
    >>> qd, x = nc.types("q d, x").inside
    >>> fa(qd), fa(x), fa(qd) is fa(qd)
    (Array(q[g_q]×d), Array(x), True)
    """
    tile = Axis(axis, size)

    def fa(arr: Array) -> Array:
        if axis not in arr.names:
            return arr
        return arr.replace(axes=tuple(tile if a.name == axis and (full is None or a.size == full) else a
                                      for a in arr.axes))
    return _remembering(fa, ("relabel_axis", axis, type(size), size, type(full), full))


class Relabelling:
    """Tile relabellings composed, outermost first: how the inside of nested partitions is seen when their bubbles
    were drawn around insides left as they were (partition records:
    :attr:`~napkin_cat.algorithms.bubbles.Partition.relabelled`).

    ``array(a)`` is the image the relabelled diagram holds: each step is :func:`tile_relabel`'s remembered functor,
    so the relabelling that builds the diagram and this one share their images.

    >>> import napkin_cat as nc
    >>> r = Relabelling().then("x", nc.symbol("s_x")).then("q", nc.symbol("g_q"), full=nc.symbol("q"))
    >>> r.array(nc.types("q x d").inside[0]), bool(Relabelling())
    (Array(q[g_q]×x[s_x]×d), False)
    """

    __slots__ = ("steps", "key", "_images")

    def __init__(self, steps: tuple = ()):
        self.steps = tuple(steps)
        self.key = tuple(fa.key for fa in self.steps)   # equal keys, equal relabellings
        self._images = {}    # id(array) -> (array, image): an array met again costs one lookup

    def then(self, axis: str, size, full=None) -> "Relabelling":
        """This relabelling, then ``axis`` seen with ``size`` (where it has ``full``, if given)."""
        return Relabelling(self.steps + (tile_relabel(axis, size, full),))

    def __bool__(self) -> bool:
        return bool(self.steps)

    def array(self, arr: Array) -> Array:
        found = self._images.get(id(arr))
        if found is not None:
            return found[1]
        image = arr
        for fa in self.steps:
            image = fa(image)
        self._images[id(arr)] = (arr, image)    # the array held: its id is not reused while remembered
        return image


#: no relabelling: arrays as drawn
PLAIN = Relabelling()


def check_relabel(diagram: Diagram, axis: str, fa) -> None:
    """Raise what relabelling ``diagram`` along ``axis`` by the remembered functor ``fa`` (:func:`tile_relabel`)
    would raise, without building the relabelled diagram: every primitive box, inside every region too, that has
    ``axis`` in its item-level core (or at two sizes) is mapped (and remembered, for the relabelling that builds
    it later).  A box that weaves ``axis`` at one size takes any size of it (its core is unchanged), and one
    without it is kept.  A box whose signature ties the axis to one that keeps its size refuses with a
    SignatureError."""
    for layer in diagram.inside:
        box = layer.boxes_or_types[1]
        if isinstance(box, Bubble):
            check_relabel(box.arg, axis, fa)
            continue
        if not computes(box):
            continue
        sizes = {a.size for arr in (*box.dom.inside, *box.cod.inside) for a in arr.axes if a.name == axis}
        if sizes and (len(sizes) > 1 or axis not in box.data.weave_names):
            map_box(box, fa, _same_name, key=fa.key)


def rename_axis(diagram: Diagram, old: str, new: str, size=None) -> Diagram:
    """Rename axis ``old`` to ``new`` everywhere, its size symbol with it.

    The symbol ``old`` (the axis's own size) becomes ``size``, by default the symbol ``new``,
    wherever it occurs: in the sizes of every array (``2·old`` too), in box parameters (SoftMax's
    β = old^(-1/2)) and in region parameters (a Grid's group size), as well as in weave names; so
    the result is the diagram built on ``new`` in the first place.  A size not written with the
    symbol ``old`` (a concrete int, a tile ``g_q`` inside a Grid) is kept, and a given ``size``
    must agree with it on the boundary.

    >>> import napkin_cat as nc
    >>> att = rename_axis(nc.library.attention(), "d", "c")
    >>> att.dom, [b.data.params for b in att.boxes][1]
    (Ty(Array(q×c), Array(x×c), Array(x×c)), (('beta', 1/sqrt(c)),))
    """
    present = axis_names(diagram)
    if old not in present and old not in names_of(diagram):
        raise AxisError(f"cannot rename axis {old!r}: the diagram has no axis (or size) called {old!r}; its axes "
                        f"are {sorted(present)}")
    target = symbol(new) if size is None else as_size(new, size)
    subs = {symbol(old): target}
    for arr in (*diagram.dom.inside, *diagram.cod.inside):
        for a in arr.axes:
            if a.name == old and size is not None and symbol(old) not in _symbols(a.size) and a.size != target:
                raise AxisError(f"cannot rename {old!r} to {new!r} with size {target}: axis {old!r} has size "
                                f"{a.size}, which cannot also be {target}; pass size={a.size} or no size")

    renamed = symbol(old)

    def fsize(value):    # sympy's subs takes ~0.2 ms: a size without the symbol is kept, the symbol itself replaced
        if not isinstance(value, Basic) or renamed not in value.free_symbols:
            return value
        return target if value == renamed else value.subs(subs)

    def fa(arr: Array) -> Array:
        if new in arr.names and old in arr.names:
            raise AxisError(f"cannot rename {old!r} to {new!r}: {arr} already has both")
        axes = tuple(_renamed_axis(a, old, new, fsize(a.size)) for a in arr.axes)
        return arr if all(a is b for a, b in zip(axes, arr.axes)) else arr.replace(axes=axes)
    return map_arrays(diagram, fa, lambda n: new if n == old else n, fparam=fsize)


def _renamed_axis(a: Axis, old: str, new: str, size) -> Axis:
    """``a`` named ``new`` where it was ``old``, with ``size``: ``a`` itself where neither changes."""
    if a.name != old and size is a.size:
        return a
    return Axis(new if a.name == old else a.name, size)


def axis_names(diagram: Diagram) -> set:
    """The names of every axis of the diagram's arrays, inside its regions too.

    >>> import napkin_cat as nc
    >>> sorted(axis_names(nc.library.attention()))
    ['d', 'q', 'x']
    """
    found = {a.name for arr in (*diagram.dom.inside, *diagram.cod.inside) for a in arr.axes}
    for layer in diagram.inside:
        box = layer.boxes_or_types[1]
        found |= {a.name for arr in (*box.dom.inside, *box.cod.inside) for a in arr.axes}
        if isinstance(box, Bubble):
            found |= axis_names(box.arg)
    return found


def _symbols(size) -> set:
    return size.free_symbols if isinstance(size, Basic) else set()


def substitute(diagram: Diagram, mapping: dict | None = None, **sizes) -> Diagram:
    """Substitute sizes (``d=64`` or ``{symbol: value}``) in every array and box parameter.

    Parameters such as SoftMax's ``β = d^(-1/2)`` follow the sizes, so the result
    is the diagram built with those sizes in the first place.  A size is what an axis may have
    (:func:`~napkin_cat.syntax.axis.as_size`: a positive int, a symbol name, an expression in size
    symbols); a name the diagram does not have is refused, listing the ones it has.

    >>> import napkin_cat as nc
    >>> substitute(nc.einsum("q d -> q"), e=4)
    Traceback (most recent call last):
    ...
    napkin_cat.errors.AxisError: cannot substitute 'e': the diagram has no axis or size called 'e'; its ...
    """
    if mapping is not None and not isinstance(mapping, dict):
        raise AxisError(f"substitute takes a dict of sizes (name or symbol → size), got {type(mapping).__name__}")
    legal = names_of(diagram)
    subs = {}
    for key, value in [*(mapping or {}).items(), *sizes.items()]:
        if not isinstance(key, (str, Symbol)):
            raise AxisError(f"cannot substitute {key!r}: a size is named by an axis or tile name (a str) or its "
                            f"symbol, got a {type(key).__name__}")
        name = key if isinstance(key, str) else key.name
        if name not in legal:
            raise AxisError(f"cannot substitute {name!r}: the diagram has no axis or size called {name!r}; its "
                            f"axes and sizes are {sorted(legal)}")
        subs[symbol(name) if isinstance(key, str) else key] = as_size(name, value)

    def fa(arr: Array) -> Array:
        return arr.replace(axes=tuple(
            a if isinstance(a.size, int) else Axis(a.name, a.size.subs(subs)) for a in arr.axes))

    def fparam(value):
        return value.subs(subs) if isinstance(value, Basic) else value
    return map_arrays(diagram, fa, fparam=fparam)


def at_level(diagram: Diagram, level: int) -> Diagram:
    """Recolor every array to ``level`` (a function diagram placed at one level)."""
    level = as_level(level, what="an array's level")
    return map_arrays(diagram, lambda a: a if a.level == level else a.replace(level=level), key=("at_level", level))
