"""Functions become algorithms: kernels, group partitions and stream partitions (paper §2.2-2.4).

* ``kernel(f, level=1)``: one fused kernel; inputs are loaded to ``level``, the
  body runs there, outputs are saved back.
* ``unfused(f)``: every primitive its own kernel (the "native PyTorch" baseline).
* ``group(f, a, g_a)``: ``weave_a(F) ≡ split_a ; (F ⊗ … ⊗ F) ; join_a`` drawn as a
  relabelling: ``Grid(a, g_a)`` around each kernel that is weaved over ``a``.
* ``stream(f, b, s_b)``: ``Stream(b, s_b)`` inside each kernel that is streamable along ``b``.

>>> import napkin_cat as nc
>>> flash = group(stream(kernel(nc.library.attention()), "x", "s_x"), "q", "g_q")
>>> [type(b).__name__ for b in flash.boxes]
['Grid']
>>> bool(nc.equivalent(nc.library.attention(), flash))
True
"""
from __future__ import annotations

from napkin_cat.syntax.array import Array, as_level
from napkin_cat.syntax.adapter import Diagram, Ty
from napkin_cat.syntax.flat import compose_all, from_layers, is_structural, layers
from napkin_cat.syntax.axis import as_size
from napkin_cat.algorithms.bubbles import Grid, Kernel, Region, Stream, check_tile_apart
from napkin_cat.algorithms.inner_streams import nest_reduction
from napkin_cat.algorithms.schedule import schedule_of
from napkin_cat.algorithms.splits import check_splittable
from napkin_cat.syntax.construct import transfer
from napkin_cat.errors import LevelError, RewriteError, SignatureError
from napkin_cat.syntax.relabel import at_level, check_relabel, map_arrays, map_box, tile_relabel
from napkin_cat.syntax.builder import Builder
from napkin_cat.syntax.wiring import trace_values
from napkin_cat.algorithms.streaming import analyse


def _moves(arrays, target: int, direction: str):
    """Loads (or saves) taking each array one level at a time to ``target``."""
    parts = []
    for k, arr in enumerate(arrays):
        steps = []
        cur = arr
        while cur.level != target:
            step = transfer(direction, cur)
            steps.append(step)
            cur = step.cod.inside[0]
        parts.append(compose_all(Ty(arr), *steps) if steps else Diagram.id(Ty(arr)))
    if not parts:
        return Diagram.id(Ty())
    out = parts[0]
    for p in parts[1:]:
        out = out @ p
    return out


def kernel(diagram: Diagram, level: int = 1) -> Diagram:
    """Wrap a function diagram into one fused kernel at ``level`` (loads in, saves out).

    On an algorithm (a diagram with kernels already) the new kernel is either

    * nested, when ``level`` is deeper than every kernel's: around the innermost body of every deepest
      kernel (the computation inside its partitions), one level down (paper §3.1 and Fig. multi-level:
      a level-2 kernel inside the Grid/Stream of a level-1 kernel); or
    * drawn around the whole algorithm, when every kernel runs deeper than ``level``: what ran at the
      levels above ``level`` now runs at ``level`` inside the new kernel (their transfers between those
      levels go; the new kernel loads and saves).  Building inside out then gives the algorithm built
      outside in::

          kernel(group(kernel(f, level=2), "a", "t_a"), level=1)
              == kernel(group(kernel(kernel(f, level=1), level=2) ... ), "a", "t_a")   (the same diagram)

    >>> import napkin_cat as nc
    >>> inner = nc.group(kernel(nc.library.matmul(), level=2), "a", "t_a")
    >>> outer = nc.group(kernel(kernel(nc.library.matmul(), level=1), level=2), "a", "t_a")
    >>> kernel(inner, level=1) == outer
    True
    """
    if not isinstance(level, bool) and hasattr(level, "__index__") and int(level) < 1:
        raise LevelError(f"a kernel runs below the global level 0; got level={level}, use 1 or more")
    level = as_level(level, least=1, what="a kernel's level")
    kernels = _kernels(diagram)
    if kernels and level < min(k.params["level"] for k in kernels):
        return _streams_hold(_around(diagram, int(level)), f"a level-{level} kernel")
    if kernels:
        return _nest_kernel(diagram, kernels, level)
    body = at_level(diagram, level)
    loads = _moves(list(diagram.dom.inside), level, "load")
    saves = _saves_back(body.cod.inside, diagram.cod.inside)
    inner = compose_all(diagram.dom, loads, body, saves)
    return Kernel.around(inner, level)


def _kernels(diagram: Diagram) -> list:
    """Every Kernel of ``diagram``, looking inside every region."""
    out = []
    for _, box in layers(diagram):
        if isinstance(box, Kernel):
            out.append(box)
        if isinstance(box, Region):
            out += _kernels(box.arg)
    return out


def _deepest(kernels) -> int:
    return max(k.params["level"] for k in kernels)


def _around(diagram: Diagram, level: int) -> Diagram:
    """A kernel at ``level`` around an algorithm whose kernels all run deeper (see :func:`kernel`)."""
    body = _rebased(diagram, level)
    loads = _moves(list(diagram.dom.inside), level, "load")
    saves = _saves_back(body.cod.inside, diagram.cod.inside)
    return Kernel.around(compose_all(diagram.dom, loads, body, saves), level)


def _rebased(d: Diagram, level: int) -> Diagram:
    """``d`` with what it holds above ``level`` moved to ``level``: every array at a level above it is at
    ``level``, and the Loads/Saves between such levels (now between ``level`` and itself) are gone."""
    def fa(arr: Array) -> Array:
        return arr if arr.level >= level else arr.replace(level=level)
    items = []
    for layer in d.inside:
        left, box, right = layer.boxes_or_types[:3]
        if isinstance(box, Region):
            box = type(box).rebuild(_rebased(box.arg, level), Ty(*map(fa, box.dom.inside)),
                                    Ty(*map(fa, box.cod.inside)), box.params)
        elif _is_transfer(box) and max(box.dom.inside[0].level, box.cod.inside[0].level) <= level:
            continue
        else:
            box = map_box(box, fa, lambda n: n)
        items.append((Ty(*map(fa, left.inside)), box, Ty(*map(fa, right.inside))))
    return from_layers(Ty(*map(fa, d.dom.inside)), Ty(*map(fa, d.cod.inside)), items)


def _is_transfer(box) -> bool:
    return not isinstance(box, Region) and getattr(getattr(box, "data", None), "kind", None) in ("load", "save")


def _nest_kernel(diagram: Diagram, kernels: list, level: int) -> Diagram:
    top = _deepest(kernels)
    if level <= top:
        k = next(k for k in kernels if k.params["level"] >= level)
        low = min(k.params["level"] for k in kernels)
        around = f" (or a level below {low}, to draw it around the whole algorithm)" if low > 1 else ""
        raise LevelError(f"cannot nest a kernel at level {level} inside {k.name} (level {k.params['level']}): a "
                         f"nested kernel runs deeper than every enclosing kernel; use level={top + 1} or more{around}")

    def fn(k: Kernel):
        return Kernel.rebuild(_innermost(k.arg, lambda d: _wrap_core(d, top, lambda core: kernel(core, level))),
                              k.dom, k.cod, k.params)
    out, _ = map_kernels(diagram, fn)
    return _streams_hold(out, f"a level-{level} kernel")


def _streams_hold(diagram: Diagram, what) -> Diagram:
    """``diagram`` once every Stream in it has been analysed: a partition nested inside a stream changes what the
    stream must carry from slice to slice, so a nesting the enclosing stream cannot advance (a region whose tail
    reads a value that is not accumulated, a Grid sharing its state), or a split stream can no longer merge (a
    nested kernel's state: :func:`~napkin_cat.algorithms.splits.check_splittable`), is refused here, when it is
    built, and not later by the cost or the plan.  ``what``: the partition placed, as text or a function that
    writes it (written only for a refusal: the search places thousands that hold)."""
    def named() -> str:
        return what() if callable(what) else what

    def visit(d: Diagram):
        for _, box in layers(d):
            if isinstance(box, Region):
                visit(box.arg)
                if isinstance(box, Stream):
                    try:
                        box.plan
                    except RewriteError as e:
                        raise RewriteError(f"cannot place {named()} here: {e}") from None
                    parts = box.params.get("parts")
                    try:
                        if parts is not None:
                            check_splittable(schedule_of(box))
                    except RewriteError as e:
                        raise RewriteError(f"cannot place {named()} inside the stream along {box.axis!r} split in "
                                           f"{parts} parts: {e}") from None
    visit(diagram)
    return diagram


def _sole_stream(d: Diagram):
    """The Stream of ``d`` when ``d`` is that Stream and transfers (a streamed kernel's inside), else None
    (remembered on ``d``, which is immutable: every stream tried on a kernel asks it of the kernel's inside, up to
    three times).

    >>> import napkin_cat as nc
    >>> inside = nc.stream(nc.kernel(nc.library.matmul()), "b", "s_b").boxes[0].arg
    >>> _sole_stream(inside).axis, _sole_stream(inside) is _sole_stream(inside)
    ('b', True)
    """
    memo = d.__dict__
    if "_sole_stream" not in memo:
        streams = [b for _, b in layers(d) if isinstance(b, Stream)]
        others = any(is_structural(b) is None and not isinstance(b, Stream)
                     and getattr(getattr(b, "data", None), "kind", None) not in ("load", "save") for _, b in layers(d))
        memo["_sole_stream"] = streams[0] if len(streams) == 1 and not others else None
    return memo["_sole_stream"]


def _innermost(d: Diagram, fn) -> Diagram:
    """``fn`` applied to the innermost body of a kernel's inside: through its (sub-)Streams, to the diagram that
    computes one slice."""
    s = _sole_stream(d)
    if s is not None:
        return _replace(d, s, Stream.rebuild(_innermost(s.arg, fn), s.dom, s.cod, s.params))
    return fn(d)


def _replace(d: Diagram, old, new) -> Diagram:
    items = []
    for layer in d.inside:
        left, box, right = layer.boxes_or_types[:3]
        items.append((left, new if box is old else box, right))
    return from_layers(d.dom, d.cod, items)


def single(box) -> Diagram:
    """A box as a one-box diagram."""
    return Diagram.id(box.dom).then(box)


def _is_boundary(box, level: int) -> bool:
    """A Load/Save between the kernel's level and a level above it (the kernel's own boundary)."""
    kind = getattr(getattr(box, "data", None), "kind", None)
    if kind not in ("load", "save") or isinstance(box, Region):
        return False
    return min(box.dom.inside[0].level, box.cod.inside[0].level) < level


def _wrap_core(d: Diagram, level: int, make) -> Diagram:
    """``d`` = loads ; core ; saves at ``level`` rebuilt as loads ; ``make(core)`` ; saves (one region)."""
    ops, dom, cod = trace_values(d)
    boundary = [_is_boundary(box, level) for box, _, _ in ops]
    if all(boundary):
        raise RewriteError(f"the kernel body {d} computes nothing at level {level} to wrap")
    made_core = {v for (box, _, outs), b in zip(ops, boundary) if not b for v in outs}
    arrays = {v: a for v, a in zip(dom, d.dom.inside)}
    for box, _, outs in ops:
        arrays.update(zip(outs, box.cod.inside))
    core_in, core_out = [], []
    for (box, ins, _), b in zip(ops, boundary):
        if not b:
            core_in += [v for v in ins if v not in made_core and v not in core_in]
    for (box, ins, _), b in zip(ops, boundary):
        if b:
            core_out += [v for v in ins if v in made_core and v not in core_out]
    core_out += [v for v in cod if v in made_core and v not in core_out]
    for (box, ins, outs), b in zip(ops, boundary):
        if b and any(v in made_core for v in ins) and any(v in core_in for v in outs):
            raise RewriteError(f"{box.name!r} moves a value out of level {level} that the computation reads back, "
                               "so the body is not loads ; computation ; saves")
    inner = Builder(Ty(*(arrays[v] for v in core_in)))
    wire = dict(zip(core_in, inner.inputs))
    for (box, ins, outs), b in zip(ops, boundary):
        if not b:
            res = inner(single(box), *(wire[v] for v in ins))
            wire.update(zip(outs, res if isinstance(res, tuple) else (res,)))
    region = make(inner.build(*(wire[v] for v in core_out)))
    outer = Builder(d.dom)
    wire = dict(zip(dom, outer.inputs))
    pending = [(box, ins, outs) for (box, ins, outs), b in zip(ops, boundary) if b]

    def emit(ready):
        while True:
            k = next((k for k, (_, ins, _) in enumerate(pending) if ready(ins)), None)
            if k is None:
                return
            box, ins, outs = pending.pop(k)
            res = outer(single(box), *(wire[v] for v in ins))
            wire.update(zip(outs, res if isinstance(res, tuple) else (res,)))
    emit(lambda ins: all(v in wire for v in ins) and not any(v in made_core for v in ins))
    res = outer(region, *(wire[v] for v in core_in))
    wire.update(zip(core_out, res if isinstance(res, tuple) else (res,)))
    emit(lambda ins: all(v in wire for v in ins))
    return outer.build(*(wire[v] for v in cod))


def _saves_back(arrays, targets):
    parts = []
    for arr, tgt in zip(arrays, targets):
        steps, cur = [], arr
        while cur.level > tgt.level:
            step = transfer("save", cur)
            steps.append(step)
            cur = step.cod.inside[0]
        parts.append(compose_all(Ty(arr), *steps))
    out = Diagram.id(Ty())
    for p in parts:
        out = out @ p
    return out


def unfused(diagram: Diagram, level: int = 1) -> Diagram:
    """Every primitive box becomes its own kernel: the unfused baseline."""
    items = []
    for layer in diagram.inside:
        left, box, right = layer.boxes_or_types[:3]
        if is_structural(box) is None and not isinstance(box, Region):
            box = kernel(box, level).boxes[0]
        items.append((left, box, right))
    return from_layers(diagram.dom, diagram.cod, items)


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


def map_kernels(diagram: Diagram, fn, level: int | None = None) -> tuple[Diagram, int]:
    """Apply ``fn`` to each Kernel at ``level`` (by default the deepest), looking inside every region;
    returns the new diagram and a count."""
    if level is None:
        kernels = _kernels(diagram)
        level = _deepest(kernels) if kernels else 1
    count = 0
    items = []
    for layer in diagram.inside:
        left, box, right = layer.boxes_or_types[:3]
        if isinstance(box, Kernel) and box.params["level"] == level:
            new = fn(box)
            if new is not None:
                box, count = new, count + 1
        elif isinstance(box, Region):
            inner, n = map_kernels(box.arg, fn, level)
            if n:
                box, count = type(box).rebuild(inner, box.dom, box.cod, box.params), count + n
        items.append((left, box, right))
    return from_layers(diagram.dom, diagram.cod, items), count


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


def _weaved_everywhere(d: Diagram, axis: str) -> str | None:
    """None if ``axis`` is a weave of every box that sees it, else the reason."""
    for _, box in layers(d):
        if is_structural(box) is not None:
            continue
        if isinstance(box, Stream):
            if box.axis == axis:
                return f"{axis!r} is streamed inside the kernel"
            why = _weaved_everywhere(box.arg, axis)
            if why:
                return why
            continue
        if isinstance(box, Region):
            why = _weaved_everywhere(box.arg, axis)
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
        if not any(axis in a.names for a in k.cod.inside):
            reasons.append(f"{k.name}: no output carries {axis!r}")
            return None
        missing = [str(a) for a in k.cod.inside if axis not in a.names]
        if missing:
            reasons.append(f"{k.name}: outputs {missing} lack {axis!r}, so it is not weaved over the whole region")
            return None
        why = _weaved_everywhere(k.arg, axis)
        if why:
            reasons.append(why)
            return None
        full = next(a.axis(axis).size for a in k.cod.inside)
        try:
            inner = relabel_axis(k, axis, tile, full=full) if relabelled else _checked(k, axis, tile, full)
        except SignatureError as e:   # a box inside ties the axis to one that keeps its full size
            reasons.append(f"{k.name}: the inside cannot see {axis!r} in groups of {tile}: {e}")
            return None
        return Grid(inner, k.dom, k.cod, {"axis": axis, "size": tile, **_record(relabelled)})

    level = _group_level(diagram, axis)
    out, n = map_kernels(diagram, fn, level)
    if not n:
        raise RewriteError(f"cannot group along {axis!r}{_which(diagram, level)}: "
                           + ("; ".join(reasons) or "no kernel carries it"))
    return _streams_hold(out, lambda: f"a group along {axis!r} of size {tile}")


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
    levels = {k.params["level"] for k in _kernels(diagram)}
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
        plan = analyse(region, axis, sliced=sliced)
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

    def fn(k: Kernel):
        region = k.arg
        if not any(axis in a.names for a in region.dom.inside):
            reasons.append(f"{k.name}: no input carries {axis!r}")
            return None
        try:
            if _chain_has(region, lambda s: s.axis == axis):
                if parts is not None or _chain_has(region, lambda s: s.params.get("parts") is not None):
                    raise RewriteError(f"{k.name} is already streamed along {axis!r}: split the outer stream, and "
                                       f"give a split stream no sub-loop (its parts merge whole states)")
                if sliced or _chain_has(region, lambda s: s.axis == axis and s.sliced):
                    raise RewriteError(f"{k.name} is already streamed along {axis!r}; a sliced stream takes no "
                                       f"sub-loop along its axis (the sub-slices would write the output slice "
                                       f"piecewise), so stream along {axis!r} once")
                inner = _innermost(region, lambda d: _wrap_core(d, k.params["level"], wrap))
            elif _sole_stream(region) is not None and not sliced:
                inner = _innermost(region, lambda d: nest_reduction(d, axis, wrap))
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
    return _streams_hold(out, lambda: f"a stream along {axis!r} of size {tile}")


def _chain_has(d: Diagram, holds) -> bool:
    """Whether a Stream of the chain that :func:`_innermost` descends satisfies ``holds(stream)``."""
    s = _sole_stream(d)
    return s is not None and (holds(s) or _chain_has(s.arg, holds))
