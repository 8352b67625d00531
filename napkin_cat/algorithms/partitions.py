"""Functions become algorithms: group and stream partitions of kernels (paper §2.3-2.4).

* ``group(f, a, g_a)``: ``weave_a(F) ≡ split_a ; (F ⊗ … ⊗ F) ; join_a`` drawn as a
  relabelling: ``Grid(a, g_a)`` around each kernel that is weaved over ``a``.
* ``stream(f, b, s_b)``: ``Stream(b, s_b)`` inside each kernel that is streamable along ``b``.

The kernels they partition are :mod:`.kernels`' (``kernel``, ``unfused``, ``map_kernels``, ``single``: re-exported
here, where the algorithm's constructors have always been).

>>> import napkin_cat as nc
>>> flash = group(stream(kernel(nc.library.attention()), "x", "s_x"), "q", "g_q")
>>> [type(b).__name__ for b in flash.boxes]
['Grid']
>>> bool(nc.equivalent(nc.library.attention(), flash))
True
"""
from __future__ import annotations

from napkin_cat.syntax.adapter import Diagram
from napkin_cat.syntax.flat import is_structural, layers
from napkin_cat.syntax.axis import as_size
from napkin_cat.algorithms.bubbles import Grid, Kernel, Region, Stream, check_tile_apart
from napkin_cat.algorithms.inner_streams import nest_reduction
from napkin_cat.algorithms.kernels import (chain_has, innermost, kernel, kernels_of, map_kernels, single,
                                           sole_stream, streams_hold, unfused, wrap_core)
from napkin_cat.algorithms.schedule import schedule_of
from napkin_cat.algorithms.splits import check_splittable
from napkin_cat.errors import RewriteError, SignatureError
from napkin_cat.syntax.relabel import check_relabel, map_arrays, tile_relabel
from napkin_cat.algorithms.streaming import analyse

__all__ = ["kernel", "unfused", "map_kernels", "single", "relabel_axis", "fresh_tile", "weaved_everywhere",
           "group", "grid_of", "stream", "stream_of"]


def relabel_axis(diagram: Diagram, axis: str, size, *, full=None) -> Diagram:
    """Every array's ``axis`` gets ``size`` (the paper's relabelling inside a bubble); with ``full``, only where
    the axis has that size (a tile of it inside, from a partition already there, stays)."""
    fa = tile_relabel(axis, size, full)
    return map_arrays(diagram, fa, key=fa.key)


def fresh_tile(diagram: Diagram, axis: str, size, what: str = "tile"):
    """``size`` as the size of a partition of ``axis`` in ``diagram``, refused (:class:`~napkin_cat.errors.AxisError`)
    when it is a name the diagram already gives another axis's size: a tile named ``b`` on a diagram with an axis
    ``b`` would be that axis's size, one symbol for two sizes, which the cost functor, the optimiser and every
    ``sizes=`` would read as one (``nc.group(mm, "a", "b")`` costed ``a·(b² + 2bc)/b``).  The axis's own full size
    is a legal tile (one group).

    >>> import napkin_cat as nc
    >>> fresh_tile(nc.library.matmul(), "a", "g_a")
    g_a
    >>> fresh_tile(nc.library.matmul(), "a", "b")
    Traceback (most recent call last):
    ...
    napkin_cat.errors.AxisError: the tile of 'a' is named 'b', which is the size of the diagram's axis 'b': ...
    """
    tile = as_size(axis if what == "tile" else f"{what} of {axis}", size)
    check_tile_apart(axis, tile, (*diagram.dom.inside, *diagram.cod.inside), what)
    return tile

def _group_level(diagram: Diagram, axis: str) -> int | None:
    """The level whose kernels a group along ``axis`` partitions: the deepest among the kernels not grouped along
    ``axis`` already (a kernel drawn around a grouped one is grouped next: the algorithm built inside out), else
    the deepest (a group of groups)."""
    kernels, grouped = [], set()

    def visit(d: Diagram, inside: bool):
        for _, box in layers(d):
            if isinstance(box, Kernel):
                kernels.append(box)
                if inside:
                    grouped.add(id(box))
                visit(box.arg, False)
            elif isinstance(box, Region):
                visit(box.arg, inside or (isinstance(box, Grid) and box.axis == axis))
    visit(diagram, False)
    free = [k.params["level"] for k in kernels if id(k) not in grouped]
    return max(free) if free else None


def _ensure_algorithm(diagram: Diagram) -> Diagram:
    if any(isinstance(b, Region) for _, b in layers(diagram)):
        return diagram
    return kernel(diagram, 1)


def weaved_everywhere(d: Diagram, axis: str) -> str | None:
    """None if ``axis`` is a weave of every box that sees it, else the reason."""
    for _, box in layers(d):
        if is_structural(box) is not None:
            continue
        if isinstance(box, Stream):
            if box.axis == axis:
                return f"{axis!r} is streamed inside the kernel"
            why = weaved_everywhere(box.arg, axis)
            if why:
                return why
            continue
        if isinstance(box, Region):
            why = weaved_everywhere(box.arg, axis)
            if why:
                return why
            continue
        arrays = list(box.dom.inside) + list(box.cod.inside)
        if any(axis in a.names for a in arrays) and axis not in box.data.weave_names:
            return (f"{box.name!r} has {axis!r} in its item-level core (it is not weaved over {axis!r}), "
                    "so the groups would not be independent")
    return None


def group(diagram: Diagram, axis: str, size, *, relabelled: bool = True) -> Diagram:
    """Group-partition every kernel weaved over ``axis`` into groups of ``size`` (a ``Grid``).

    ``size`` is a tile name such as ``"g_q"`` (symbolic), a sympy expression or a positive int; a
    size that does not divide the axis leaves a shorter last group (a ragged tile).  A function
    diagram is first made one kernel at level 1.  In a multi-level algorithm the deepest kernels are
    partitioned (a level-2 kernel's groups inside a level-1 tile).

    ``relabelled=False`` draws the partition's *record*: the same checks, the Grid around the kernel as it was
    (:attr:`~napkin_cat.algorithms.bubbles.Partition.relabelled`), what the search costs without building the
    relabelled inside; only the cost functor reads it.
    """
    diagram = _ensure_algorithm(diagram)
    tile = fresh_tile(diagram, axis, size)
    reasons = []

    def fn(k: Kernel):
        try:
            return grid_of(k, axis, tile, relabelled=relabelled)
        except RewriteError as e:
            reasons.append(str(e))
            return None

    level = _group_level(diagram, axis)
    out, n = map_kernels(diagram, fn, level)
    if not n:
        raise RewriteError(f"cannot group along {axis!r}{_which(diagram, level)}: "
                           + ("; ".join(reasons) or "no kernel carries it"))
    return streams_hold(out, lambda: f"a group along {axis!r} of size {tile}")


def grid_of(k: Kernel, axis: str, tile, *, relabelled: bool = True) -> Grid:
    """The Grid grouping the kernel ``k`` along ``axis`` in groups of ``tile`` (what :func:`group` places), or a
    RewriteError saying why ``k`` is not weaved over ``axis``: an output lacks it, a box inside has it in its
    item-level core or the inside cannot see it in groups of ``tile``.

    >>> import napkin_cat as nc
    >>> k = kernel(nc.library.matmul()).boxes[0]
    >>> grid_of(k, "a", nc.symbol("g_a")).name
    'Grid(axis=a, size=g_a)'
    >>> grid_of(k, "b", nc.symbol("g_b"))
    Traceback (most recent call last):
    ...
    napkin_cat.errors.RewriteError: Kernel(level=1): no output carries 'b'
    """
    if not any(axis in a.names for a in k.cod.inside):
        raise RewriteError(f"{k.name}: no output carries {axis!r}")
    missing = [str(a) for a in k.cod.inside if axis not in a.names]
    if missing:
        raise RewriteError(f"{k.name}: outputs {missing} lack {axis!r}, so it is not weaved over the whole region")
    why = weaved_everywhere(k.arg, axis)
    if why:
        raise RewriteError(why)
    full = next(a.axis(axis).size for a in k.cod.inside)
    try:
        inner = relabel_axis(k, axis, tile, full=full) if relabelled else _checked(k, axis, tile, full)
    except SignatureError as e:   # a box inside ties the axis to one that keeps its full size
        raise RewriteError(f"{k.name}: the inside cannot see {axis!r} in groups of {tile}: {e}") from None
    return Grid(inner, k.dom, k.cod, {"axis": axis, "size": tile, **_record(relabelled)})


def _checked(k, axis: str, tile, full):
    """The kernel ``k`` as it was, once relabelling its inside along ``axis`` is known to succeed."""
    check_relabel(k.arg, axis, tile_relabel(axis, tile, full))
    return k


def _record(relabelled: bool) -> dict:
    """The parameter that marks a partition record (:attr:`~napkin_cat.algorithms.bubbles.Partition.relabelled`)."""
    return {} if relabelled else {"relabelled": False}


def _which(diagram: Diagram, level: int | None = None) -> str:
    """`` in the level-ℓ kernels`` for a multi-level algorithm (where partitions go: ``level``, by default the
    deepest), else nothing."""
    levels = {k.params["level"] for k in kernels_of(diagram)}
    level = max(levels) if level is None and levels else level
    return f" in the level-{level} kernels{' (the deepest)' if level == max(levels) else ''}" if len(levels) > 1 \
        else ""


def stream(diagram: Diagram, axis: str, size, sliced: bool = False, parts=None, *, relabelled: bool = True) -> Diagram:
    """Stream-partition every kernel that is streamable along ``axis`` in slices of ``size``.

    ``size`` is as for :func:`group`; a size that does not divide the axis leaves a shorter last slice.

    With ``sliced=True`` a kernel whose outputs carry ``axis`` is streamed too: each trip computes and
    writes its slice of those outputs (its other outputs may still be reduced along ``axis``), and what
    does not carry ``axis`` is loaded once and kept (``S = QKᵀ`` with the ``Q`` tile stationary).  The
    Stream records ``sliced: True`` in its parameters.  A sliced stream takes no sub-loop along its axis.

    A kernel already streamed along another axis ``b`` gets the stream **inside** its trip, around the
    computation that reduces ``axis`` (:mod:`.inner_streams`: the 2-D tiled loop, per slice of ``b`` a loop
    along ``axis``).  In a multi-level algorithm the deepest kernels are partitioned.  A kernel already streamed along
    ``axis`` gets a **sub-loop** (paper §5.2): the computation inside its slice (between the slice's
    loads and saves) is streamed again in sub-slices of ``size``, its accumulator carried through.

    With ``parts=P`` (an int or a size name) the stream is **split**: its slices are cut into ``P`` parts run
    by parallel blocks, each writing its state, which a combine merges (:mod:`napkin_cat.algorithms.splits`);
    refused where a reducer has no merge.

    Refuses with a RewriteError saying why when no kernel is streamable along it.  ``relabelled=False`` draws the
    partition's record, as for :func:`group`.
    """
    diagram = _ensure_algorithm(diagram)
    tile = fresh_tile(diagram, axis, size)
    reasons = []

    params = {"axis": axis, "size": tile, **({"sliced": True} if sliced else {}),
              **({"parts": fresh_tile(diagram, axis, parts, "parts")} if parts is not None else {})}

    def wrap(region: Diagram) -> Diagram:
        return stream_of(region, params, relabelled=relabelled)

    def fn(k: Kernel):
        region = k.arg
        if not any(axis in a.names for a in region.dom.inside):
            reasons.append(f"{k.name}: no input carries {axis!r}")
            return None
        try:
            if chain_has(region, lambda s: s.axis == axis):
                if parts is not None or chain_has(region, lambda s: s.params.get("parts") is not None):
                    raise RewriteError(f"{k.name} is already streamed along {axis!r}: split the outer stream, and "
                                       f"give a split stream no sub-loop (its parts merge whole states)")
                if sliced or chain_has(region, lambda s: s.axis == axis and s.sliced):
                    raise RewriteError(f"{k.name} is already streamed along {axis!r}; a sliced stream takes no "
                                       f"sub-loop along its axis (the sub-slices would write the output slice "
                                       f"piecewise), so stream along {axis!r} once")
                inner = innermost(region, lambda d: wrap_core(d, k.params["level"], wrap))
            elif sole_stream(region) is not None and not sliced:
                inner = innermost(region, lambda d: nest_reduction(d, axis, wrap))
            else:
                inner = wrap(region)
        except RewriteError as e:
            reasons.append(str(e))
            return None
        return Kernel.rebuild(inner, k.dom, k.cod, k.params)

    out, n = map_kernels(diagram, fn)
    if not n:
        raise RewriteError(f"cannot stream along {axis!r}{_which(diagram)}: "
                           + ("; ".join(reasons) or "no kernel reads it"))
    return streams_hold(out, lambda: f"a stream along {axis!r} of size {tile}")


def stream_of(region: Diagram, params: dict, *, relabelled: bool = True, plan=None) -> Stream:
    """The Stream of ``region`` (a kernel's inside, or the part of it a stream already there leaves) along
    ``params["axis"]`` in slices of ``params["size"]`` (``sliced``, ``parts``: as for :func:`stream`), or a
    RewriteError saying why not: the streaming analysis refuses it (:func:`~napkin_cat.algorithms.streaming.analyse`),
    the inside cannot see the axis in slices, or a split stream has a reducer without a merge.  ``plan``: the
    analysis of ``region`` along the axis, when already made.

    >>> import napkin_cat as nc
    >>> inside = kernel(nc.library.attention()).boxes[0].arg
    >>> stream_of(inside, {"axis": "x", "size": nc.symbol("s_x")}, relabelled=False).plan.axis
    'x'
    """
    axis, tile, sliced, parts = params["axis"], params["size"], params.get("sliced", False), params.get("parts")
    plan = analyse(region, axis, sliced=sliced) if plan is None else plan
    fa = tile_relabel(axis, tile)
    try:
        if relabelled:
            out = Stream(map_arrays(region, fa, key=fa.key), region.dom, region.cod, params)
        else:
            check_relabel(region, axis, fa)
            out = Stream.record(region, params, plan)
    except SignatureError as e:   # e.g. a rename ties the axis to one that keeps its full size
        raise RewriteError(f"the inside cannot see {axis!r} in slices of {tile}: {e}") from None
    if parts is not None:
        check_splittable(schedule_of(out))
    return out
