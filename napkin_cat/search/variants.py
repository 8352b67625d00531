"""The partitions of one kernel, read off its structure: which axis to stream, which axes to group.

For a block of operations fused into one kernel (:func:`napkin_cat.algorithms.partitions.kernel`):

* **stream** along any axis the kernel reads and sums away that the streaming analysis accepts
  (:func:`napkin_cat.algorithms.streaming.analyse`: maps, monoid reducers, registered accumulator
  forms such as online softmax); one variant per such axis, or one unstreamed variant if there is none;
* **sweep** (a sliced stream) along any axis an output carries and an input carries, when the streaming
  analysis accepts it with the outputs written slice by slice (what lacks the axis stays on chip: a
  stationary operand, loaded once);
* **a stream inside the stream** (a 2-D loop, ``inner_stream``) along another axis the kernel sums away, when
  the stream's trip reduces it in a cone that streams on its own (per slice of the outer axis, a loop along the
  inner one builds the slice's tile: fused linear cross-entropy's logits tile over the hidden axis);
* **group** along every axis that every output carries and every box that sees it maps over
  (:func:`napkin_cat.algorithms.partitions.group` accepts it), innermost first.  Grouping an axis
  never costs more: its tile may be the whole axis.

No axis is named: the candidates are the axes on the kernel's own wires.  The partitions are the
ones the rules ``stream_partition``, ``sliced_stream``, ``inner_stream`` and ``group_partition``
make (their right-hand sides call these same functions), so a variant costed here is what the derivation's
trace will build.

A variant is a light record: which axis is streamed (sliced or not, with which streams inside it) and which
are grouped, decided axis by axis on the kernel without placing a partition
(:class:`~napkin_cat.algorithms.partition_facts.KernelFacts`: a stream, a stream inside it and a group are each
decided once per axis and shared by all the kernel's variants).  What the cost functor reads, :attr:`Variant.record`
(``relabelled=False``: the partition bubbles around the kernel's inside as it was, read through the relabelling
they stand for), is drawn on first use, and only a variant whose diagram is asked for (:attr:`Variant.diagram`: the
winner) is built, by the partition functions the rules call.  ``cost(v.record) == cost(v.diagram)``, field by field.

>>> import napkin_cat as nc
>>> [v.describe() for v in variants(nc.library.matmul())]
['group c,a · stream b', 'group c · sweep a', 'group a · sweep c']
>>> [v.describe() for v in variants(nc.library.attention())]
['group q · stream x', 'sweep q']
>>> [v.describe() for v in variants(nc.softmax("q x", over="x"))]
['group q']
>>> [v.describe() for v in variants(nc.library.linear_cross_entropy())][-1]
'group n · stream v · stream e inside'
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from napkin_cat.algorithms.partition_facts import KernelFacts
from napkin_cat.algorithms.partitions import group, kernel, stream
from napkin_cat.algorithms.streaming import analyse
from napkin_cat.errors import NapkinError, RewriteError
from napkin_cat.syntax.adapter import Diagram
from napkin_cat.algorithms.splitting import split


@dataclass(frozen=True)
class Variant:
    """One partition of a kernel, a light record: the ``stream`` axis (or None), the ``groups`` in the order applied,
    the ``tiles`` (``(axis, tile name)``: the stream's first, then the groups'), whether the stream is ``sliced``, a
    split stream's ``parts``, the axes streamed ``inner`` (inside the stream's trip), of the kernel of ``function`` at
    ``level``.  Its :attr:`record` (what the cost functor reads: the partition bubbles around the kernel's inside as
    it was) and its :attr:`diagram` (the partitioned kernel) are built when first asked for, from ``source``: the
    kernel's :class:`~napkin_cat.algorithms.partition_facts.KernelFacts`, or the record itself."""

    stream: str | None
    groups: tuple
    tiles: tuple = ()   # ((axis, tile name), ...): the stream's first, then the groups'
    sliced: bool = False   # the stream writes the outputs that carry its axis slice by slice (a sweep)
    parts: str | None = None   # a split stream: the name of its number of parts (napkin_cat.algorithms.splits)
    inner: tuple = ()      # axes streamed inside the stream's trip (the 2-D loop: ``inner_stream``)
    function: Diagram | None = field(default=None, repr=False)   # None: the record is the diagram, built
    level: int = 1
    source: object = field(default=None, repr=False, compare=False)   # KernelFacts, or the record drawn

    @cached_property
    def record(self) -> Diagram:
        """The partition record (``relabelled=False`` bubbles), drawn from the kernel's facts on first use."""
        if isinstance(self.source, KernelFacts):
            return self.source.record(self.stream, self.sliced, self.inner, self.groups, dict(self.tiles))
        return self.source

    @cached_property
    def diagram(self) -> Diagram:
        """The partitioned kernel, built by the partition functions the rules call, with the record's arguments
        (the stream, the streams inside it, then the groups in order)."""
        if self.function is None:
            return self.record
        names = dict(self.tiles)
        k = kernel(self.function, self.level)
        if self.stream is not None:
            k = stream(k, self.stream, names[self.stream], sliced=self.sliced)
        for a in self.inner:
            k = stream(k, a, names[a])
        for a in self.groups:
            k = group(k, a, names[a])
        return k

    def describe(self) -> str:
        parts = []
        if self.groups:
            parts.append("group " + ",".join(self.groups))
        if self.stream:
            parts.append(("sweep " if self.sliced else "stream ") + self.stream
                         + (f" ×{self.parts}" if self.parts else ""))
        parts += [f"stream {a} inside" for a in self.inner]
        return " · ".join(parts) or "whole"


def axis_names(diagram: Diagram) -> list:
    seen = []
    for arr in (*diagram.dom.inside, *diagram.cod.inside):
        seen += [n for n in arr.names if n not in seen]
    return seen


def tile_name(prefix: str, axis: str, taken) -> str:
    """``g_q`` for a group of ``q`` (``s_x`` for a stream of ``x``), primed until no axis or tile uses it."""
    name = f"{prefix}_{axis}"
    while name in taken:
        name += "ʹ" if name.isidentifier() and (name + "ʹ").isidentifier() else "_"
    return name


def reduced_axes(diagram: Diagram) -> list:
    """Axes an input carries and no output does (summed away inside), in order of first appearance."""
    outs = {n for a in diagram.cod.inside for n in a.names}
    seen = []
    for arr in diagram.dom.inside:
        seen += [n for n in arr.names if n not in outs and n not in seen]
    return seen


def carried_axes(diagram: Diagram) -> list:
    """Axes every output carries, innermost first (the order in which groups nest best)."""
    outs = [a.names for a in diagram.cod.inside]
    if not outs:
        return []
    common = [n for n in outs[0] if all(n in names for names in outs[1:])]
    return list(reversed(common))


def swept_axes(diagram: Diagram) -> list:
    """Axes some output carries and some input carries (candidates of a sliced stream), in order of appearance.

    An axis every input and every output carries is left out: nothing would stay on chip from trip to trip,
    and the group along it (any tile) does what the sweep does.
    """
    outs = {n for a in diagram.cod.inside for n in a.names}
    arrays = (*diagram.dom.inside, *diagram.cod.inside)
    seen = []
    for arr in diagram.dom.inside:
        seen += [n for n in arr.names if n in outs and n not in seen and not all(n in a.names for a in arrays)]
    return seen


def streamable_axes(function: Diagram) -> list:
    """The reduced axes along which the streaming analysis accepts the function."""
    out = []
    for axis in reduced_axes(function):
        try:
            analyse(function, axis)
        except RewriteError:
            continue
        out.append(axis)
    return out


def variants(function: Diagram, level: int = 1, names=None) -> list:
    """Every partition of ``kernel(function, level)`` the search considers (see module docstring), each decided
    axis by axis on the kernel (:class:`~napkin_cat.algorithms.partition_facts.KernelFacts`), none built.

    ``names(prefix, axis)`` gives tile names (default ``g_<axis>``, ``s_<axis>``, primed past the axes).
    """
    taken = set(axis_names(function))
    if names is None:
        def names(prefix, axis):
            return tile_name(prefix, axis, taken)
    if not KernelFacts.applies(function):
        return walked_variants(function, level, names)
    facts = KernelFacts(function, level)
    reduced = reduced_axes(function)
    streamed = [(a, False, ()) for a in reduced if facts.streams(a, names("s", a))]
    swept = [(a, True, ()) for a in swept_axes(function) if facts.streams(a, names("s", a), sliced=True)]
    nested = [(a, False, (b,)) for a, _, _ in streamed for b in reduced   # a stream inside the trip: a 2-D loop
              if b != a and facts.nests(a, names("s", a), b, names("s", b))]
    out = []
    for axis, sliced, inner in (streamed or [(None, False, ())]) + swept + nested:
        tiles = [(a, names("s", a)) for a in ((axis,) if axis is not None else ()) + inner]
        groups = tuple(a for a in carried_axes(function) if a != axis and facts.groups(a, names("g", a)))
        tiles += [(a, names("g", a)) for a in groups]
        out.append(Variant(axis, groups, tuple(tiles), sliced, None, inner, function, level, facts))
    return out


def walked_variants(function: Diagram, level: int = 1, names=None) -> list:
    """:func:`variants` of a diagram holding regions already (an algorithm: its kernels found by walking it), each
    drawn as a record by the partition functions (``relabelled=False``), the stream's record grouped in turn."""
    if names is None:
        taken = set(axis_names(function))

        def names(prefix, axis):
            return tile_name(prefix, axis, taken)
    base = kernel(function, level)
    streamed = []
    for axis in reduced_axes(function):   # the streaming analysis decides (stream() refuses with its reason)
        try:
            streamed.append((axis, stream(base, axis, names("s", axis), relabelled=False), False, ()))
        except NapkinError:   # not streamable, or e.g. a rename ties the axis to one that is not streamed
            continue
    swept = []
    for axis in swept_axes(function):
        try:
            swept.append((axis, stream(base, axis, names("s", axis), sliced=True, relabelled=False), True, ()))
        except NapkinError:
            continue
    nested = []
    for axis, k, sliced, _ in streamed:   # a stream inside the trip along another reduced axis: a 2-D loop
        for inner in reduced_axes(function):
            if inner == axis:
                continue
            try:
                nested.append((axis, stream(k, inner, names("s", inner), relabelled=False), sliced, (inner,)))
            except NapkinError:
                continue
    out = []
    for axis, k, sliced, inner in (streamed or [(None, base, False, ())]) + swept + nested:
        tiles = [(axis, names("s", axis))] if axis is not None else []
        tiles += [(a, names("s", a)) for a in inner]
        out.append(_grouped(function, axis, k, tiles, names, sliced, inner=inner, level=level))
    return out


def _grouped(function, axis, k, tiles, names, sliced=False, parts=None, inner=(), level=None) -> Variant:
    """The partitioned kernel ``k`` grouped along every axis its outputs carry that the grouping accepts: as a
    record built from ``function`` at ``level`` when its diagram is asked for, or built (``level`` None)."""
    grouped, tiles = [], list(tiles)
    for a in carried_axes(function):
        if a == axis:
            continue
        try:
            k2 = group(k, a, names("g", a), relabelled=level is None)
        except NapkinError:
            continue
        k = k2
        grouped.append(a)
        tiles.append((a, names("g", a)))
    return Variant(axis, tuple(grouped), tuple(tiles), sliced, parts, tuple(inner),
                   function if level is not None else None, 1 if level is None else level, k)


def parts_key(axis: str) -> str:
    """The key of a split stream's number of parts among a variant's tiles (``{key: name}``)."""
    return f"{axis}/parts"


def split_variants(function: Diagram, level: int = 1, names=None) -> list:
    """The streamed variants with their stream split into parts run by parallel blocks (``p_<axis>`` parts,
    :mod:`napkin_cat.algorithms.splits`): costed only under a parallelism requirement (:mod:`.parallelism`)."""
    taken = set(axis_names(function))
    if names is None:
        def names(prefix, axis):
            return tile_name(prefix, axis, taken)
    base = kernel(function, level)
    out = []
    for axis in reduced_axes(function):
        try:
            k = split(stream(base, axis, names("s", axis)), axis, names("p", axis))
        except NapkinError:
            continue
        tiles = [(axis, names("s", axis)), (parts_key(axis), names("p", axis))]
        out.append(_grouped(function, axis, k, tiles, names, parts=names("p", axis)))
    return out

