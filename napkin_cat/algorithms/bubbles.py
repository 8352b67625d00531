"""Regions with control structure: ``Kernel``, ``Grid`` and ``Stream`` bubbles (paper §2.2-2.4).

A region is a discopy bubble around a diagram (its ``arg``) with parameters:

* ``Kernel(level)``: the inside runs as one fused kernel; its boundary is Loads/Saves.
* ``Grid(axis, g)``: group partition; the inside sees ``axis`` with size ``g``
  and runs ``a/g`` times on separate cores; inputs without the axis go to every group.
* ``Stream(axis, s)``: stream partition; the inside sees the streamed inputs
  with ``axis`` of size ``s``; its body (the accumulator) runs ``b/s`` times.

Every region has ``region`` (its kind), ``params`` (a dict of JSON-able or sympy
values) and is rebuilt by ``REGIONS[region].rebuild(arg, dom, cod, params)``.  A
region is syntax: what it computes, costs and looks like is said by the functors of
the layers above (``napkin_cat.semantics``, ``napkin_cat.cost``, ``napkin_cat.render``).

>>> import napkin_cat as nc
>>> k = Kernel.around(nc.at_level(nc.einsum("a b, b c -> a c"), 1), level=1)
>>> k.region, k.params
('kernel', {'level': 1})
"""
from __future__ import annotations

import sympy

from napkin_cat.algorithms.streaming import analyse
from napkin_cat.errors import AxisError
from napkin_cat.syntax.array import Array, as_level
from napkin_cat.syntax.adapter import Bubble, Diagram, Ty
from napkin_cat.syntax.axis import Axis
from napkin_cat.syntax.relabel import Relabelling, map_arrays
from napkin_cat.syntax.weave import insert_at, weave_inside

REGIONS: dict[str, type] = {}


def _register(cls):
    REGIONS[cls.region] = cls
    return cls


class Region(Bubble):
    """Base class of Kernel, Grid and Stream."""

    region = "region"

    def __init__(self, arg: Diagram, dom: Ty, cod: Ty, params: dict):
        self.params = dict(params)
        super().__init__(arg, dom=dom, cod=cod, name=self.title(self.params))

    @classmethod
    def title(cls, params) -> str:
        """``Stream(axis=x, size=s_x)``: the parameters as ``str`` writes them (a size symbol by its name, without
        sympy's printer: every partition the search draws is named).

        >>> Region.title({"axis": "x", "size": sympy.Symbol("s_x"), "parts": 3})
        'Region(axis=x, size=s_x, parts=3)'
        """
        inner = ", ".join(f"{k}={v.name if type(v) is sympy.Symbol else v}" for k, v in params.items())
        return f"{cls.__name__}({inner})"

    @classmethod
    def rebuild(cls, arg: Diagram, dom: Ty, cod: Ty, params: dict) -> "Region":
        return cls(arg, dom, cod, params)

    def __getstate__(self):
        """The region's state without the caches its methods keep on it (each named with a leading ``_``: a
        schedule, a plan, a device's inside; each rebuilt from the state on demand).  A cache need not travel to
        another process (``nc.distributed`` pickles regions), and a cached schedule holds read-only mappings that do
        not pickle: a region that was costed pickles as one that was not.

        >>> import pickle, napkin_cat as nc
        >>> d = nc.ring(nc.shard(nc.library.attention(), "q", devices=2), "x")
        >>> _ = nc.cost(d, sizes={"q": 4, "x": 5, "d": 3})
        >>> pickle.loads(pickle.dumps(d)) == d
        True
        """
        return {k: v for k, v in self.__dict__.items() if not k.startswith("_")}

    def map_arrays(self, fa, fname, *, fparam=None, key=None):
        """The region with ``fa`` applied to every array inside and on its boundary (itself when nothing changes;
        ``key`` as for :func:`~napkin_cat.syntax.relabel.map_arrays`)."""
        arg = map_arrays(self.arg, fa, fname, fparam=fparam, key=key)
        dom, cod = Ty(*map(fa, self.dom.inside)), Ty(*map(fa, self.cod.inside))
        params = self.mapped_params(fa, fname)
        if arg is self.arg and dom == self.dom and cod == self.cod and params == self.params:
            return self
        return type(self).rebuild(arg, dom, cod, params)

    def mapped_params(self, fa, fname) -> dict:
        return dict(self.params)

    def inside_view(self, view: Relabelling) -> Relabelling:
        """How the inside's arrays are seen when the region is seen through ``view``: as drawn (``view`` itself),
        except inside a partition record (:attr:`Partition.relabelled`)."""
        return view

    def woven(self, axis, inputs: dict, position: int) -> "Region":
        """Weave a region: weave its inside; the region keeps its parameters (fusion theorem).  An output that
        depends on no weaved input stays as it was: the weave copies it along the axis after the region
        (:func:`~napkin_cat.syntax.weave.weave_inside`), so that a kernel moves what it computes, no more."""
        inner, flags = weave_inside(self.arg, axis, inputs=inputs, position=position)
        dom = list(self.dom.inside)
        for i, p in inputs.items():
            dom[i] = dom[i].replace(axes=insert_at(dom[i].axes, axis, p, f"input {i} of {self.name}"))
        cod = [a if f is None else a.replace(axes=insert_at(a.axes, axis, position, f"output of {self.name}"))
               for a, f in zip(self.cod.inside, flags)]
        return type(self).rebuild(inner, Ty(*dom), Ty(*cod), self.params)

    def __eq__(self, other):
        if not isinstance(other, Region):
            return NotImplemented
        return (type(self) is type(other) and self.params == other.params
                and self.arg == other.arg and self.dom == other.dom and self.cod == other.cod)

    def __hash__(self):
        return hash((self.region, self.name))

    def __repr__(self):
        return f"{self.name}[{self.dom} → {self.cod}; {len(self.arg.boxes)} boxes]"


@_register
class Kernel(Region):
    """One fused kernel: the inside runs at ``level`` between its Loads and Saves."""

    region = "kernel"

    def __init__(self, arg: Diagram, dom: Ty, cod: Ty, params: dict):
        as_level(params.get("level"), what="a Kernel's level")
        super().__init__(arg, dom, cod, params)

    @classmethod
    def around(cls, arg: Diagram, level: int) -> "Kernel":
        return cls(arg, arg.dom, arg.cod, {"level": as_level(level, what="a Kernel's level")})


def _size_param(fa, axis: str, size):
    """Map a tile/stream size through an array functor (sizes live on axes)."""
    mapped = fa(Array((Axis(axis, size),)))
    return mapped.axes[0].size


def check_tile_apart(axis: str, tile, arrays, what: str = "tile") -> None:
    """Refuse (:class:`~napkin_cat.errors.AxisError`) a partition of ``axis`` whose ``tile`` (or number of parts) is
    a symbol that is the size of another axis of ``arrays`` (the partition's or the diagram's boundary): one symbol
    for two sizes, which the cost functor, the optimiser and every ``sizes=`` would read as one (a tile ``b`` of
    ``a`` on a matmul costed ``a·(b² + 2bc)/b``).  The axis's own full size is a legal tile (one group).

    >>> from napkin_cat.syntax.axis import axes
    >>> a, b = axes("a b")
    >>> check_tile_apart("a", sympy.Symbol("g_a", positive=True, integer=True), [Array((a, b))])
    >>> check_tile_apart("a", b.size, [Array((a, b))])
    Traceback (most recent call last):
    ...
    napkin_cat.errors.AxisError: the tile of 'a' is named 'b', which is the size of the diagram's axis 'b': ...
    """
    if not getattr(tile, "is_Symbol", False):
        return
    boundary = [x for arr in arrays for x in arr.axes]
    for x in boundary:
        if x.name != axis and tile in getattr(x.size, "free_symbols", ()):
            example = f"g_{axis}" if what == "tile" else "P"
            raise AxisError(f"the {what} of {axis!r} is named {str(tile)!r}, which is the size of the diagram's "
                            f"axis {x.name!r}: one name for two sizes; name the {what} apart from the axes "
                            f"{sorted({y.name for y in boundary})} (e.g. {example!r})")


class Partition(Region):
    """A relabelling bubble: ``axis`` seen inside with ``size`` (shared by Grid and Stream)."""

    carrier = "cod"  # where the full axis is read: a Grid's outputs, a Stream's inputs

    def __init__(self, arg: Diagram, dom: Ty, cod: Ty, params: dict):
        axis, size = params.get("axis"), params.get("size")
        if not isinstance(axis, str) or size is None or isinstance(size, bool) or \
                not isinstance(size, (int, sympy.Basic)) or (isinstance(size, int) and size < 1):
            raise AxisError(f"a {type(self).__name__} needs params axis (an axis name) and size (a positive int or "
                            f"a size symbol); got {dict(params)}")
        check_tile_apart(axis, size, (*dom.inside, *cod.inside))
        if "parts" in params:
            check_tile_apart(axis, params["parts"], (*dom.inside, *cod.inside), "parts")
        super().__init__(arg, dom, cod, params)

    @property
    def axis(self) -> str:
        return self.params["axis"]

    @property
    def size(self):
        return self.params["size"]

    def full_size(self):
        for arr in getattr(self, self.carrier).inside:
            if self.axis in arr.names:
                return arr.axis(self.axis).size
        side = "output" if self.carrier == "cod" else "input"
        raise ValueError(f"{self.name}: no {side} carries {self.axis!r}")

    @property
    def trips(self):
        """How many times the inside runs: ``a/g`` (Grid) or ``b/s`` (Stream)."""
        return sympy.sympify(self.full_size()) / sympy.sympify(self.size)

    def size_parts(self) -> tuple:
        return (self.size,), (self.arg,)

    @property
    def relabelled(self) -> bool:
        """Whether the inside is drawn relabelled (the partition built).  False for a partition *record*
        (``params["relabelled"] is False``: ``nc.group(..., relabelled=False)``): the bubble around the inside as
        it was, which only the cost functor reads, seeing the inside through the relabelling it stands for
        (:meth:`inside_view`); the built partition's cost is the record's."""
        return self.params.get("relabelled", True)

    def seen(self, view: Relabelling) -> tuple:
        """``(size, full size)`` as the relabelled diagram holds them where this region is seen through ``view``:
        its size as drawn (a partition drawn inside another one was drawn after it, in its terms: a sub-loop's
        ``u_b`` inside the slices ``s_b``), the full size as its carrier's axis is seen."""
        seen = self.__dict__.setdefault("_seen_by", {})    # a region is immutable: kept per relabelling
        found = seen.get(view.key)
        if found is None:
            found = seen[view.key] = self._seen(view)
        return found

    def _seen(self, view: Relabelling) -> tuple:
        if not view:
            return self.size, self.full_size()
        for arr in getattr(self, self.carrier).inside:
            if self.axis in arr.names:
                return self.size, view.array(arr).axis(self.axis).size
        return self.size, self.full_size()      # raises, naming the side that lacks the axis

    def inside_view(self, view: Relabelling) -> Relabelling:
        """``view``, then, for a record, the partition's own relabelling: its axis seen with its size (a Grid's
        only where the axis has the full size its outputs carry, as :func:`~napkin_cat.algorithms.partitions.group`
        relabels).

        >>> import napkin_cat as nc
        >>> g = nc.group(nc.kernel(nc.library.matmul()), "a", "g_a", relabelled=False).boxes[0]
        >>> g.relabelled, g.inside_view(Relabelling()).array(g.arg.dom.inside[0])
        (False, Array(a[g_a]×b))
        """
        if self.relabelled:
            return view
        inside = self.__dict__.setdefault("_inside_views", {})   # kept per relabelling: its images with it
        found = inside.get(view.key)
        if found is None:
            size, full = self.seen(view)
            found = inside[view.key] = view.then(self.axis, size, full if self.carrier == "cod" else None)
        return found

    #: the parameters that are sizes of the partitioned axis (a Ring adds its whole size and its slot): mapped by an
    #: array functor as the axis's size is (a renamed size symbol renames them all)
    size_params = ("size",)

    def mapped_params(self, fa, fname):
        sizes = {k: _size_param(fa, self.axis, self.params[k]) for k in self.size_params if k in self.params}
        extra = {k: v for k, v in self.params.items() if k != "axis" and k not in sizes}
        return {"axis": fname(self.axis), **sizes, **extra}


@_register
class Grid(Partition):
    """Group partition of ``axis`` into groups of ``size`` (paper Fig. group_partitioning).

    The inside sees ``axis`` with size ``size``; it runs ``a/size`` times.  Every
    output carries the axis; inputs without it are sent to every group.
    """

    region = "grid"
    carrier = "cod"


@_register
class Stream(Partition):
    """Stream partition of ``axis`` in slices of ``size`` (paper Fig. streaming_relabeling).

    The inside is the region with the streamed axis relabelled to ``size``; its
    head runs once, its body (chunk boxes and accumulators) ``b/size`` times, its tail once.
    With ``params["sliced"]`` (a *sliced* stream) outputs that carry ``axis`` are written slice by
    slice, one slice per trip.
    """

    region = "stream"
    carrier = "dom"

    @property
    def sliced(self) -> bool:
        """Whether outputs that carry the axis are written slice by slice (``stream(..., sliced=True)``)."""
        return bool(self.params.get("sliced", False))

    def size_parts(self) -> tuple:
        """The tile, the inside, and each reducer's step and finish (what a trip and the end of the stream run)."""
        steps = tuple(d for r in self.plan.reducers for d in (getattr(r, "step", None), getattr(r, "finish", None))
                      if d is not None)
        parts = self.params.get("parts")
        return (self.size,) + ((parts,) if parts is not None else ()), (self.arg, *steps)

    @classmethod
    def record(cls, arg: Diagram, params: dict, plan) -> "Stream":
        """The record of a stream partition of the region ``arg`` (not relabelled: :attr:`Partition.relabelled`),
        with ``plan``, the streaming analysis just made on this same inside, kept."""
        out = cls(arg, arg.dom, arg.cod, {**params, "relabelled": False})
        out.__dict__["_plan"] = plan
        return out

    @property
    def plan(self):
        """The streaming analysis of the inside (head / body with its reducers / tail), computed once."""
        cached = self.__dict__.get("_plan")
        if cached is None:
            cached = analyse(self.arg, self.axis, sliced=self.sliced)
            self.__dict__["_plan"] = cached
        return cached
