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

from napkin_cat.syntax.adapter import Array, Diagram, Ty, compose_all, from_layers, is_structural, layers
from napkin_cat.syntax.axis import Axis, as_size
from napkin_cat.algorithms.bubbles import Grid, Kernel, Region, Stream
from napkin_cat.syntax.construct import transfer
from napkin_cat.errors import LevelError, RewriteError
from napkin_cat.syntax.relabel import at_level, map_arrays


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
    out = parts[0]
    for p in parts[1:]:
        out = out @ p
    return out if parts else Diagram.id(Ty())


def kernel(diagram: Diagram, level: int = 1) -> Diagram:
    """Wrap a function diagram into one fused kernel at ``level`` (loads in, saves out)."""
    if level < 1:
        raise LevelError(f"a kernel runs below the global level 0; got level={level}, use 1 or more")
    for _, box in layers(diagram):
        if isinstance(box, Region):
            raise RewriteError(f"cannot form a kernel around {box.name}: the diagram is already an algorithm")
    body = at_level(diagram, level)
    loads = _moves(list(diagram.dom.inside), level, "load")
    saves = _saves_back(body.cod.inside, diagram.cod.inside)
    inner = compose_all(diagram.dom, loads, body, saves)
    return Kernel.around(inner, level)


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


def relabel_axis(diagram: Diagram, axis: str, size) -> Diagram:
    """Every array's ``axis`` gets ``size`` (the paper's relabelling inside a bubble)."""
    def fa(arr: Array) -> Array:
        if axis not in arr.names:
            return arr
        return arr.replace(axes=tuple(Axis(axis, size) if a.name == axis else a for a in arr.axes))
    return map_arrays(diagram, fa)


def _tile(axis: str, size):
    return as_size(axis, size)


def _map_kernels(diagram: Diagram, fn) -> tuple[Diagram, int]:
    """Apply ``fn`` to each Kernel (looking inside Grids); returns the new diagram and a count."""
    count = 0
    items = []
    for layer in diagram.inside:
        left, box, right = layer.boxes_or_types[:3]
        if isinstance(box, Kernel):
            new = fn(box)
            if new is not None:
                box, count = new, count + 1
        elif isinstance(box, Grid):
            inner, n = _map_kernels(box.arg, fn)
            if n:
                box, count = Grid.rebuild(inner, box.dom, box.cod, box.params), count + n
        items.append((left, box, right))
    return from_layers(diagram.dom, diagram.cod, items), count


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


def group(diagram: Diagram, axis: str, size) -> Diagram:
    """Group-partition every kernel weaved over ``axis`` into groups of ``size`` (a ``Grid``).

    ``size`` is a tile name such as ``"g_q"`` (symbolic), a sympy expression or a positive int; a
    size that does not divide the axis leaves a shorter last group (a ragged tile).  A function
    diagram is first made one kernel at level 1.
    """
    diagram = _ensure_algorithm(diagram)
    tile = _tile(axis, size)
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
        inner = relabel_axis(k, axis, tile)
        return Grid(inner, k.dom, k.cod, {"axis": axis, "size": tile})

    out, n = _map_kernels(diagram, fn)
    if not n:
        raise RewriteError(f"cannot group along {axis!r}: " + ("; ".join(reasons) or "no kernel carries it"))
    return out


def stream(diagram: Diagram, axis: str, size) -> Diagram:
    """Stream-partition every kernel that is streamable along ``axis`` in slices of ``size``.

    ``size`` is as for :func:`group`; a size that does not divide the axis leaves a shorter last slice.

    Refuses with a RewriteError saying why when no kernel is streamable along it.
    """
    from napkin_cat.algorithms.streaming import analyse
    diagram = _ensure_algorithm(diagram)
    tile = _tile(axis, size)
    reasons = []

    def fn(k: Kernel):
        region = k.arg
        if not any(axis in a.names for a in region.dom.inside):
            return None
        try:
            analyse(region, axis)
        except RewriteError as e:
            reasons.append(str(e))
            return None
        s = Stream(relabel_axis(region, axis, tile), region.dom, region.cod, {"axis": axis, "size": tile})
        return Kernel.rebuild(s, k.dom, k.cod, k.params)

    out, n = _map_kernels(diagram, fn)
    if not n:
        raise RewriteError(f"cannot stream along {axis!r}: " + ("; ".join(reasons) or "no kernel reads it"))
    return out
