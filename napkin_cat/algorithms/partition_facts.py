"""A kernel's partitions decided axis by axis, and a candidate's record built only when asked for (issue 35).

For a function ``f`` fused into one kernel ``K = kernel(f, level)``, whether a partition of ``K`` is legal is a
fact of ``K``'s inside and of one axis (two for a stream inside a stream), whatever else is partitioned:

* **a stream** along ``b`` (sliced or not) is legal iff :func:`~.partitions.stream_of` accepts ``K``'s inside
  along ``b``: the streaming analysis and the relabelling of the inside in slices;
* **a stream along** ``c`` **inside** the stream along ``b`` is legal iff the reduction of ``c`` can be cut out of
  ``K``'s inside and streamed (:func:`~.inner_streams.nest_reduction`, the same cut for every ``b``) and the
  stream along ``b`` accepts the inside so cut; a cone that reads a slice along ``b`` and cannot run per trip as
  a map is refused before the cut is made (:func:`~.inner_streams.refused_outer`, a necessary condition);
* **a group** along ``a`` is legal iff :func:`~.partitions.grid_of` accepts ``K``: every output carries ``a``,
  every box that sees it weaves it, the inside can see it in groups.  A partition *record* leaves the inside as it
  was (:attr:`~.bubbles.Partition.relabelled`), and a stream's record holds ``K``'s own boxes, so the group's
  answer is the same under any stream along another axis and any group before it.

:class:`KernelFacts` decides each fact once (an analysis and a relabelling check per axis, one cut per inner axis)
and draws a candidate's record as :func:`~.partitions.stream` and :func:`~.partitions.group` draw it with
``relabelled=False``, box for box, without their walks: the law is

    ``KernelFacts(f, level).record(b, sliced, inner, groups, tiles)
    == group(…group(stream(stream(kernel(f, level), b, …), c, …), a₁, …)…, aₙ, …, relabelled=False)``

and each refuses what the other refuses (``tests/algorithms/test_partition_facts.py``).  Only a function (no
region in it) has one kernel to decide on: :meth:`KernelFacts.applies`.

>>> import napkin_cat as nc
>>> from napkin_cat.algorithms.partitions import group, stream
>>> facts = KernelFacts(nc.library.attention())
>>> tiles = {"x": nc.symbol("s_x"), "q": nc.symbol("g_q")}
>>> facts.streams("x", tiles["x"]), facts.groups("q", tiles["q"]), facts.groups("x", tiles["x"])
(True, True, False)
>>> built = group(stream(nc.kernel(nc.library.attention()), "x", "s_x", relabelled=False), "q", "g_q",
...               relabelled=False)
>>> facts.record("x", False, (), ("q",), tiles) == built
True
"""
from __future__ import annotations

from napkin_cat.algorithms.bubbles import Grid, Kernel, Region, Stream
from napkin_cat.algorithms.inner_streams import cone_boundary, nest_reduction, refused_outer, value_arrays
from napkin_cat.algorithms.kernels import kernel
from napkin_cat.algorithms.partitions import fresh_tile, grid_of, stream_of
from napkin_cat.algorithms.streaming import analyse
from napkin_cat.errors import NapkinError, RewriteError
from napkin_cat.syntax.adapter import Diagram
from napkin_cat.syntax.flat import from_layers, layers
from napkin_cat.syntax.wiring import trace_values


class KernelFacts:
    """The partitions of ``kernel(function, level)``, each decided once (see the module docstring): ``streams``,
    ``nests`` and ``groups`` answer whether one is legal, ``record`` draws a candidate made of legal ones."""

    def __init__(self, function: Diagram, level: int = 1):
        self.function, self.level = function, level
        self.base = kernel(function, level)      # one Kernel box
        self.box = self.base.boxes[0]
        self._stream, self._group, self._cut, self._nest, self._tiles = {}, {}, {}, {}, {}
        self._cones, self._traced = {}, None

    @staticmethod
    def applies(function: Diagram) -> bool:
        """Whether ``function`` is one kernel's worth to decide on: it holds no region (an algorithm's kernels are
        partitioned where :func:`~.partitions.group` finds them, by walking it)."""
        return not any(isinstance(box, Region) for _, box in layers(function))

    # ------------------------------------------------------------------ the facts
    def _tile(self, axis: str, tile):
        """``tile`` as the size of a partition of ``axis`` (:func:`~.partitions.fresh_tile`: an AxisError where it is
        another axis's size), checked once."""
        found = self._tiles.get((axis, tile))
        if found is None:
            found = self._tiles[(axis, tile)] = fresh_tile(self.base, axis, tile)
        return found

    def _inside_carrying(self, axis: str) -> Diagram:
        """The kernel's inside, where an input carries ``axis`` (else a RewriteError: nothing to partition)."""
        inside = self.box.arg
        if not any(axis in a.names for a in inside.dom.inside):
            raise RewriteError(f"{self.box.name}: no input carries {axis!r}")
        return inside

    def _streamed(self, axis: str, tile, sliced: bool):
        """The Stream record of the kernel's inside along ``axis``, or the NapkinError refusing it."""
        def decide():
            inside, size = self._inside_carrying(axis), self._tile(axis, tile)
            return stream_of(inside, {"axis": axis, "size": size, **({"sliced": True} if sliced else {})},
                             relabelled=False)
        return _decided(self._stream, (axis, tile, sliced), decide)

    def streams(self, axis: str, tile, sliced: bool = False) -> bool:
        """Whether the kernel streams along ``axis`` in slices ``tile`` (:func:`~.partitions.stream`)."""
        return not isinstance(self._streamed(axis, tile, sliced), NapkinError)

    def _cone(self, inner: str):
        """``(ops, dom, cod, arrays, boundary)``: the kernel's inside traced (once) and the boundary of its reduction
        cone of ``inner`` (:func:`~.inner_streams.cone_boundary`), or the NapkinError refusing the cut."""
        def decide():
            if self._traced is None:
                inside = self.box.arg
                ops, dom, cod = trace_values(inside)
                self._traced = (ops, dom, cod, value_arrays(inside, ops, dom))
            ops, dom, cod, arrays = self._traced
            return (ops, dom, cod, arrays, cone_boundary(ops, dom, cod, arrays, inner))
        return _decided(self._cones, inner, decide)

    def _cut_out(self, inner: str, tile):
        """The kernel's inside with the reduction of ``inner`` cut out as a stream record (a stream's trip with the
        stream along ``inner`` inside it), or the NapkinError refusing it: the same for any outer stream."""
        def decide():
            inside, size = self._inside_carrying(inner), self._tile(inner, tile)
            cone = self._cone(inner)
            if isinstance(cone, NapkinError):
                raise cone
            return nest_reduction(inside, inner, lambda d: stream_of(d, {"axis": inner, "size": size},
                                                                     relabelled=False), traced=cone)
        return _decided(self._cut, (inner, tile), decide)

    def _nested(self, axis: str, tile, inner: str, inner_tile):
        """The outer Stream record along ``axis`` around the inside cut along ``inner``, or the refusal: refused
        before the cut where the cone of ``inner`` reads ``axis`` and cannot run per trip as a map
        (:func:`~.inner_streams.refused_outer`, a necessary condition of the analysis below)."""
        def decide():
            outer = self._streamed(axis, tile, False)
            if isinstance(outer, NapkinError):
                return outer
            self._inside_carrying(inner)
            cone = self._cone(inner)
            if not isinstance(cone, NapkinError):
                why = refused_outer(*cone[:2], cone[3], cone[4], inner, axis)
                if why is not None:
                    return RewriteError(why)
            cut = self._cut_out(inner, inner_tile)
            if isinstance(cut, NapkinError):
                return cut
            plan = analyse(cut, axis)    # the outer stream advances through the cut inside
            return Stream.record(cut, {k: v for k, v in outer.params.items() if k != "relabelled"}, plan)
        return _decided(self._nest, (axis, tile, inner, inner_tile), decide)

    def nests(self, axis: str, tile, inner: str, inner_tile) -> bool:
        """Whether the kernel streamed along ``axis`` takes a stream along ``inner`` inside its trip (the 2-D loop
        :func:`~.partitions.stream` draws on a streamed kernel)."""
        return inner != axis and not isinstance(self._nested(axis, tile, inner, inner_tile), NapkinError)

    def groups(self, axis: str, tile) -> bool:
        """Whether the kernel, streamed or not, groups along ``axis`` in groups ``tile`` (:func:`~.partitions.group`;
        not along an axis it is streamed along, which the caller leaves out)."""
        found = _decided(self._group, (axis, tile), lambda: grid_of(self.box, axis, self._tile(axis, tile),
                                                                     relabelled=False))
        return not isinstance(found, NapkinError)

    # ------------------------------------------------------------------ the record
    def record(self, stream: str | None, sliced: bool, inner: tuple, groups: tuple, tiles: dict) -> Diagram:
        """The candidate's record: the kernel streamed along ``stream`` (``sliced``), the streams ``inner`` inside
        it (at most one), then grouped along ``groups`` in order, tiles ``tiles[axis]``; each partition legal
        (else a RewriteError)."""
        k = self.box
        if stream is not None:
            if inner:
                (c,) = inner
                s = self._nested(stream, tiles[stream], c, tiles[c])
                if isinstance(s, NapkinError):
                    raise s
                body = _placed(self._streamed(stream, tiles[stream], False), s)   # (as ``innermost`` rebuilds it)
            else:
                s = self._streamed(stream, tiles[stream], sliced)
                if isinstance(s, NapkinError):
                    raise s
                body = s
            k = Kernel.rebuild(body, k.dom, k.cod, k.params)
        if not groups:
            return _placed(self.base, k) if stream is not None else self.base
        for a in groups:
            if a == stream or not self.groups(a, tiles[a]):
                raise RewriteError(f"cannot group along {a!r}: {self.box.name} does not take it")
        inside = k
        for a in reversed(groups):     # the last group drawn is the innermost Grid, around the kernel itself
            grid = Grid(inside, k.dom, k.cod, {"axis": a, "size": self._tile(a, tiles[a]), "relabelled": False})
            inside = _placed(k, grid)
        return _placed(self.base, grid)


def _decided(table: dict, key, decide):
    """What ``decide()`` gives, or the NapkinError refusing it, decided once per ``key`` (kept in ``table``)."""
    found = table.get(key)
    if found is None:
        try:
            found = decide()
        except NapkinError as e:
            found = e
        table[key] = found
    return found


def _placed(d: Diagram, box) -> Diagram:
    """``d``, a diagram of one box, with ``box`` in its place (as :func:`~.kernels.map_kernels` rebuilds it)."""
    (layer,) = d.inside
    left, _, right = layer.boxes_or_types[:3]
    return from_layers(d.dom, d.cod, [(left, box, right)])


__all__ = ["KernelFacts"]
