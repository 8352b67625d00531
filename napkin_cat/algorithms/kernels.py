"""Kernels: a function fused into one kernel at a level, the unfused baseline, and walks over an algorithm's kernels.

* ``kernel(f, level=1)``: one fused kernel; inputs are loaded to ``level``, the body runs there, outputs are saved
  back (paper §2.2).  On an algorithm the kernel is nested inside the deepest kernels or drawn around them all.
* ``unfused(f)``: every primitive its own kernel (the "native PyTorch" baseline).
* ``map_kernels(d, fn, level)``: ``fn`` applied to each kernel at a level, inside every region (where the partitions
  of :mod:`.partitions` are placed); ``innermost``, ``sole_stream``, ``wrap_core``: a kernel's inside seen through
  its streams, down to the computation of one slice; ``streams_hold``: a placed partition refused where a stream
  around it can no longer advance.

>>> import napkin_cat as nc
>>> k = kernel(nc.library.matmul())
>>> [type(b).__name__ for b in k.boxes], k.params["level"]
(['Kernel'], 1)
>>> [b.name for b in k.arg.boxes if b.data.kind in ("load", "save")]
['load', 'load', 'save']
"""
from __future__ import annotations

from napkin_cat.syntax.array import Array, as_level
from napkin_cat.syntax.adapter import Diagram, Ty, single
from napkin_cat.syntax.flat import compose_all, from_layers, is_structural, layers
from napkin_cat.algorithms.bubbles import Kernel, Region, Stream
from napkin_cat.algorithms.schedule import schedule_of
from napkin_cat.algorithms.splits import check_splittable
from napkin_cat.syntax.construct import transfer
from napkin_cat.errors import LevelError, RewriteError
from napkin_cat.syntax.relabel import at_level, map_box
from napkin_cat.syntax.builder import Builder, build_values
from napkin_cat.syntax.wiring import trace_values


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
    kernels = kernels_of(diagram)
    if kernels and level < min(k.params["level"] for k in kernels):
        return streams_hold(_around(diagram, int(level)), f"a level-{level} kernel")
    if kernels:
        return _nest_kernel(diagram, kernels, level)
    body = at_level(diagram, level)
    loads = _moves(list(diagram.dom.inside), level, "load")
    saves = _saves_back(body.cod.inside, diagram.cod.inside)
    inner = compose_all(diagram.dom, loads, body, saves)
    return Kernel.around(inner, level)


def kernels_of(diagram: Diagram) -> list:
    """Every Kernel of ``diagram``, looking inside every region."""
    out = []
    for _, box in layers(diagram):
        if isinstance(box, Kernel):
            out.append(box)
        if isinstance(box, Region):
            out += kernels_of(box.arg)
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
        return Kernel.rebuild(innermost(k.arg, lambda d: wrap_core(d, top, lambda core: kernel(core, level))),
                              k.dom, k.cod, k.params)
    out, _ = map_kernels(diagram, fn)
    return streams_hold(out, f"a level-{level} kernel")


def streams_hold(diagram: Diagram, what) -> Diagram:
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


def sole_stream(d: Diagram):
    """The Stream of ``d`` when ``d`` is that Stream and transfers (a streamed kernel's inside), else None
    (remembered on ``d``, which is immutable: every stream tried on a kernel asks it of the kernel's inside, up to
    three times).

    >>> import napkin_cat as nc
    >>> inside = nc.stream(nc.kernel(nc.library.matmul()), "b", "s_b").boxes[0].arg
    >>> sole_stream(inside).axis, sole_stream(inside) is sole_stream(inside)
    ('b', True)
    """
    memo = d.__dict__
    if "_sole_stream" not in memo:
        streams = [b for _, b in layers(d) if isinstance(b, Stream)]
        others = any(is_structural(b) is None and not isinstance(b, Stream)
                     and getattr(getattr(b, "data", None), "kind", None) not in ("load", "save") for _, b in layers(d))
        memo["_sole_stream"] = streams[0] if len(streams) == 1 and not others else None
    return memo["_sole_stream"]


def innermost(d: Diagram, fn) -> Diagram:
    """``fn`` applied to the innermost body of a kernel's inside: through its (sub-)Streams, to the diagram that
    computes one slice."""
    s = sole_stream(d)
    if s is not None:
        return _replace(d, s, Stream.rebuild(innermost(s.arg, fn), s.dom, s.cod, s.params))
    return fn(d)


def _replace(d: Diagram, old, new) -> Diagram:
    items = []
    for layer in d.inside:
        left, box, right = layer.boxes_or_types[:3]
        items.append((left, new if box is old else box, right))
    return from_layers(d.dom, d.cod, items)


def _is_boundary(box, level: int) -> bool:
    """A Load/Save between the kernel's level and a level above it (the kernel's own boundary)."""
    kind = getattr(getattr(box, "data", None), "kind", None)
    if kind not in ("load", "save") or isinstance(box, Region):
        return False
    return min(box.dom.inside[0].level, box.cod.inside[0].level) < level


def wrap_core(d: Diagram, level: int, make) -> Diagram:
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
    region = make(build_values([op for op, b in zip(ops, boundary) if not b], core_in, core_out, arrays))
    outer = Builder(d.dom)
    wire = dict(zip(dom, outer.inputs))
    pending = [(box, ins, outs) for (box, ins, outs), b in zip(ops, boundary) if b]

    def emit(ready):
        while True:
            k = next((k for k, (_, ins, _) in enumerate(pending) if ready(ins)), None)
            if k is None:
                return
            box, ins, outs = pending.pop(k)
            outer.apply(single(box), wire, ins, outs)
    emit(lambda ins: all(v in wire for v in ins) and not any(v in made_core for v in ins))
    outer.apply(region, wire, core_in, core_out)
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


def map_kernels(diagram: Diagram, fn, level: int | None = None) -> tuple[Diagram, int]:
    """Apply ``fn`` to each Kernel at ``level`` (by default the deepest), looking inside every region;
    returns the new diagram and a count."""
    if level is None:
        kernels = kernels_of(diagram)
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

def chain_has(d: Diagram, holds) -> bool:
    """Whether a Stream of the chain that :func:`_innermost` descends satisfies ``holds(stream)``."""
    s = sole_stream(d)
    return s is not None and (holds(s) or chain_has(s.arg, holds))
