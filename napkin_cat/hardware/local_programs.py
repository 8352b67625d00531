"""The programs one device computes in a device program (issue 37): what the cluster's time model
(:mod:`~napkin_cat.hardware.clustered`) gives an algorithm and times.

Per device region, its inside on the largest shard (device 0's, ``⌈a/P⌉``) with its collectives left out (what they
make is an input, what they take an output), apart where the collectives separate it (no algorithm runs across a
collective: its inputs are made before it, its outputs read after), a ring run whole (its P trips) or at its slot;
a computing box outside every region as itself; the whole program where it has no device region.  Every size an
int (:func:`concrete`).

>>> import napkin_cat as nc
>>> d = nc.shard(nc.einsum("n k, k m -> n m") >> nc.elementwise("exp", "n m"), "n", devices=2)
>>> [[b.name for b in p.boxes] for p in local_programs(d, nc.Sizes({"n": 7, "k": 3, "m": 2}).env)]
[['·', 'exp']]
>>> [a.size for a in local_programs(d, nc.Sizes({"n": 7, "k": 3, "m": 2}).env)[0].cod.inside[0].axes]
[4, 2]
"""
from __future__ import annotations

import math

import sympy

from napkin_cat.algorithms.bubbles import Kernel
from napkin_cat.algorithms.devices import Shard
from napkin_cat.algorithms.device_shards import cut_extents, device_inside, device_shards
from napkin_cat.algorithms.partitions import kernel, relabel_axis
from napkin_cat.algorithms.ring import Ring
from napkin_cat.algorithms.schedule import schedule_of
from napkin_cat.cost.devices_at import lanes
from napkin_cat.cost.numeric import at
from napkin_cat.errors import HardwareError
from napkin_cat.hardware.ringcharge import each_box
from napkin_cat.hardware.separable import components
from napkin_cat.search.devices import is_collective
from napkin_cat.syntax.adapter import Bubble, Diagram, Ty, single
from napkin_cat.syntax.flat import is_structural, layers
from napkin_cat.syntax.axis import Axis
from napkin_cat.syntax.builder import Builder
from napkin_cat.syntax.construct import elementwise
from napkin_cat.syntax.primitive import is_view
from napkin_cat.syntax.relabel import at_level, map_arrays
from napkin_cat.syntax.wiring import trace_values


def _int_size(size, env):
    v = sympy.sympify(size).subs(env)
    if not v.is_number:
        raise HardwareError(f"an axis of size {size} is {v} at the sizes given: give every size of the program "
                            f"({sorted(str(s) for s in v.free_symbols)} missing)")
    return max(1, int(math.ceil(v)))


def concrete(d: Diagram, env: dict) -> Diagram:
    """``d`` with every axis at its size in ``env``, rounded up (a shard ``a/P`` at its largest, ``⌈a/P⌉``), and
    every parameter substituted: a program with no symbol left."""
    def fa(arr):
        return arr.replace(axes=tuple(x if isinstance(x.size, int) else Axis(x.name, _int_size(x.size, env))
                                      for x in arr.axes))

    def fparam(value):
        return value.subs(env) if isinstance(value, sympy.Basic) else value
    return map_arrays(d, fa, fparam=fparam)


def _plain(box) -> Diagram:
    """A box as a one-box diagram; a kernel as the function it runs (its loads and saves left out, at level 0:
    the time model derives its own algorithm for it)."""
    if not isinstance(box, Kernel):
        return single(box)
    ops, dom, cod = trace_values(at_level(box.arg, 0))
    bld = Builder(box.dom)
    wires = dict(zip(dom, bld.inputs))
    for b, ins, outs in ops:
        if getattr(getattr(b, "data", None), "kind", None) in ("load", "save"):
            wires[outs[0]] = wires[ins[0]]
            continue
        got = bld(_plain(b), *(wires[v] for v in ins))
        wires.update(zip(outs, got if isinstance(got, tuple) else (got,)))
    return bld.build(*(wires[v] for v in cod))


def _local(inside: Diagram, *, whole_rings: bool, split: bool = True) -> list:
    """The programs a device runs: ``inside``'s computing boxes, a collective's output an input and its input an
    output; a ring replaced by its inside (``whole_rings``: at the ring axis's full size, its P trips, and a kernel
    by its function, whose algorithm the time model derives; else at its slot, one trip, a kernel kept: the program
    whose level-0 memory ``held`` counts).  ``split``: one program per piece the collectives separate (boxes joined
    by a value that no collective carries), as a box outside every region is a program of its own: a collective
    waits for what its inputs are made of and its outputs are read after it, so no algorithm runs across it (a norm
    before an all-gather and the matmul after it are two programs, as they are where the norm runs outside the
    region); else one program of them all."""
    return [p for p, _ in _marked(inside, whole_rings=whole_rings, split=split)]


def _marked(inside: Diagram, *, whole_rings: bool, split: bool = True) -> list:
    """:func:`_local`'s programs, each with whether it runs a ring.  Where a region runs a ring beside other boxes
    (the ring of a value it computes: :mod:`~napkin_cat.algorithms.ring_gathered`) and the rings run whole, each ring
    is a program of its own, its inputs and outputs taken as a collective's are: its trips are charged per step,
    the boxes before and after it as the device's own programs."""
    ops, dom, cod = trace_values(inside)
    types = dict(zip(dom, inside.dom.inside))
    for box, ins, outs in ops:
        types.update(zip(outs, box.cod.inside))
    computing = [op for op in ops if not is_collective(op[0])]
    taken = {v for box, ins, _ in ops if is_collective(box) for v in ins}
    rings = [op for op in computing if isinstance(op[0], Ring)]
    if whole_rings and split and rings and len(rings) < len(computing):
        taken |= {v for _, ins, outs in rings for v in (*ins, *outs)}
        pieces = _pieces([op for op in computing if not isinstance(op[0], Ring)]) + [[op] for op in rings]
    else:
        pieces = _pieces(computing) if split else [computing]
    return [(_program(piece, cod, taken, types, whole_rings), any(isinstance(op[0], Ring) for op in piece))
            for piece in pieces]


def _pieces(computing: list) -> list:
    """The ops ``(box, ins, outs)`` in pieces joined by the values one makes and another reads, each in order: the
    connected components of :func:`~napkin_cat.hardware.separable.components`, each value made a "tile" that its
    maker and its readers share."""
    made = {v for _, _, outs in computing for v in outs}
    touched = [{v for v in (*ins, *outs) if v in made} for _, ins, outs in computing]
    return [[computing[i] for i in ks] for ks, _ in components(touched, sorted(made, key=str)) if ks]


def _program(computing: list, cod, taken: set, types: dict, whole_rings: bool) -> Diagram:
    """One device program of the ops ``computing``: the values they read and do not make its inputs, those they make
    that leave the region or a collective takes its outputs."""
    made = {v for _, _, outs in computing for v in outs}
    read = [v for _, ins, _ in computing for v in ins]
    inputs = list(dict.fromkeys(v for v in read if v not in made))
    outputs = list(dict.fromkeys([v for v in cod if v in made] + [v for v in made if v in taken]))
    bld = Builder(Ty(*(types[v] for v in inputs)))
    wires = dict(zip(inputs, bld.inputs))
    rings = []
    for box, ins, outs in computing:
        if isinstance(box, Ring):
            rings.append(box)
            part = box.arg
        elif isinstance(box, Kernel) and not whole_rings:     # its memory: a kernel's intermediates are on chip
            part = single(box)
        else:
            part = _plain(box)
        got = bld(part, *(wires[v] for v in ins))
        wires.update(zip(outs, got if isinstance(got, tuple) else (got,)))
    local = bld.build(*(wires[v] for v in outputs))
    for r in rings if whole_rings else ():
        local = relabel_axis(local, r.axis, r.params["full"], full=r.size)
    return local


def local_parts(d: Diagram, env: dict, *, whole_rings: bool = True, split: bool = True, device: int | None = None
                ) -> list:
    """``(program, ringed)`` per program one device computes in ``d`` at ``env`` (:func:`local_programs`):
    ``ringed`` where it runs a ring (:func:`_marked`; its trips charged per step, the
    slowest device's work: :func:`ring_rate`); ``split``: a region's programs apart where collectives separate them
    (:func:`_local`).  ``device``: device ``p``'s programs instead of the largest shard's (:func:`device_lanes`):
    each region's inside on ``p``'s shard, reading the positions of the region's axis where its pieces lie
    (:func:`at_positions`; under a non-contiguous order one program of its pieces joined, or one per piece:
    :func:`device_lanes`); an idle device runs none."""
    if not any(isinstance(b, Shard) for _, b in layers(d)):
        return [(concrete(d, env), False)]
    out = []
    for _, box in layers(d):
        if isinstance(box, Shard):
            insides = [(box.arg, 0)] if device is None else device_lanes(box, env, device)
            out += [(at_positions(concrete(p, env), box.axis, start), ringed) for inside, start in insides
                    for p, ringed in _marked(inside, whole_rings=whole_rings, split=split)]
        elif is_structural(box) is None and not is_collective(box):
            out.append((concrete(_plain(box), env), False))
    return [(p, ringed) for p, ringed in out if computes(p)]


def computes(d: Diagram) -> bool:
    """Whether ``d`` computes anything: a box that is neither wiring nor a view (a rename of axes, nothing computed
    nor moved: :func:`~napkin_cat.syntax.primitive.is_view`), or a region whose inside computes.  A program that
    does not is no program a device runs (its time is none; the search has no operation in it to derive).

    >>> import napkin_cat as nc
    >>> computes(nc.renaming("h n -> h m")), computes(nc.elementwise("exp", "n"))
    (False, True)
    """
    return any(computes(b.arg) if isinstance(b, Bubble) else is_structural(b) is None and not is_view(b)
               for _, b in layers(d))


def device_lanes(box: Shard, env: dict, device: int) -> list:
    """``(inside, start)`` per program of device ``device``'s shard of the region ``box`` at ``env``: the inside at
    its extents (:func:`~napkin_cat.algorithms.device_shards.device_inside`, the cost's own cut) and where it lies on
    the region's axis (:func:`at_positions`'s ``start``).  One program of the whole shard where the inside reads no
    position of the axis, or its pieces (:func:`~napkin_cat.cost.devices_at.lanes`) are of one size (the last at
    most that) and evenly spaced (:func:`gap`: a zigzag pair of chunks, ragged or not, ``start`` the pieces, its
    positions an affine range per piece, so a mask skips blocks as on the device and the fewest-transfers search
    counts it in closed form where a tile divides a piece); else one per piece, ``start`` where it begins; none for
    an idle device.  HardwareError where there is no such device."""
    node = schedule_of(box)
    value = lambda e: _int_size(e, env)  # noqa: E731
    shards = device_shards(node, value)
    if not 0 <= device < len(shards):
        raise HardwareError(f"device={device}: the region {box.name} runs on devices 0 … {len(shards) - 1}")
    mine = shards[device]
    if mine is None:
        return []
    cuts = cut_extents(node, value, device, sum(m is not None for m in shards))
    if not reads_positions(box.arg, box.axis):     # its pieces differ by their positions alone: one program
        return [(device_inside(node, mine, cuts), 0)]
    parts = lanes(node, mine)
    pieces = tuple((part[box.axis][0], part[box.axis][1] - part[box.axis][0]) for part in parts)
    if len(parts) > 1 and gap(pieces) is not None:         # one program over its pieces, each at its positions
        return [(device_inside(node, mine, cuts), pieces)]
    return [(device_inside(node, part, cuts), part[box.axis][0]) for part in parts]


def gap(pieces) -> int | None:
    """``k`` where the pieces ``((start, size), …)`` are of one size ``n`` but the last (at most ``n``: a ragged
    chunk, as ``np.array_split`` gives the longer chunks first) and evenly spaced, each starting ``n + k`` after the
    one before (``k ≥ 0``): the position of value ``i`` of them joined is then ``start₀ + i + ⌊i/n⌋·k``, an affine
    range per piece (the last's values ``i < (m − 1)·n + n``: its floor is ``m − 1``); None otherwise.

    >>> gap(((0, 4), (28, 4))), gap(((0, 4), (4, 4))), gap(((0, 4), (28, 3))), gap(((0, 3), (28, 4))), gap(((8, 4),))
    (24, 0, 24, None, 0)
    """
    n = pieces[0][1]
    steps = {b[0] - a[0] - n for a, b in zip(pieces, pieces[1:])}
    if any(size != n for _, size in pieces[:-1]) or pieces[-1][1] > n or len(steps) > 1 or min(steps, default=0) < 0:
        return None
    return steps.pop() if steps else 0


def reads_positions(d: Diagram, axis: str) -> bool:
    """Whether a position box of ``axis`` is in ``d`` (or a region nested in it): where a piece of the axis lies
    matters to what ``d`` computes (a mask of positions) only then.

    >>> import napkin_cat as nc
    >>> reads_positions(nc.library.causal_attention(), "q"), reads_positions(nc.library.attention(), "q")
    (True, False)
    """
    for _, box in layers(d):
        if isinstance(box, Bubble) and reads_positions(box.arg, axis):
            return True
        if getattr(getattr(box, "data", None), "kind", None) == "position" and \
                any(a.names == (axis,) for a in box.cod.inside):
            return True
    return False


def at_positions(program: Diagram, axis: str, start) -> Diagram:
    """``program`` with every position box of ``axis`` read from ``start``: ``position ; shift(start)`` (a device's
    piece of the axis, whose positions begin there; the shift's interval image lets a mask skip blocks as on the
    device); ``program`` itself where ``start`` is 0.  ``start`` may be pieces ``((start, size), …)`` of one size
    ``n`` (the last at most ``n``), evenly spaced (:func:`gap` ``k``): the axis is them joined, value ``i`` at
    ``start₀ + i + ⌊i/n⌋·k`` (``position ; + (position // n)·k ; shift(start₀)``: on a tile of the axis the floor's
    interval image is the pieces it meets, and a tile within one piece has that piece's positions, an affine
    range).

    >>> import napkin_cat as nc
    >>> f = at_positions(nc.position("q", q=3), "q", 5)
    >>> [b.name for b in f.boxes], nc.evaluate(f).tolist()
    (['pos', 'shift'], [5, 6, 7])
    >>> nc.evaluate(at_positions(nc.position("q", q=4), "q", ((1, 2), (6, 2)))).tolist()
    [1, 2, 6, 7]
    """
    if not isinstance(start, tuple):
        return _at_positions(program, axis, start, None)
    k = gap(start)
    if k is None:
        raise HardwareError(f"pieces {start}: the positions of pieces of one size (the last at most that), evenly "
                            f"spaced, are read as one program; time these apart")
    return _at_positions(program, axis, start[0][0], (start[0][1], k) if k else None)


def _at_positions(program: Diagram, axis: str, start: int, step) -> Diagram:
    if not start and step is None:
        return program
    ops, dom, cod = trace_values(program)
    bld = Builder(program.dom)
    wires = dict(zip(dom, bld.inputs))
    for box, ins, outs in ops:
        got = bld(single(box), *(wires[v] for v in ins))
        a = box.cod.inside[0] if len(box.cod.inside) == 1 else None
        if getattr(getattr(box, "data", None), "kind", None) == "position" and a is not None and a.names == (axis,):
            at = dict(dtype=a.dtype, level=a.level, **{axis: a.axis(axis).size})
            if step is not None:                  # i + ⌊i/n⌋·k: the pieces before value i, each k further on
                n, k = step
                before = bld(elementwise("floordiv_by", axis, const=int(n), **at), got)
                got = bld(elementwise("add", f"{axis}, {axis} -> {axis}", **at), got,
                          bld(elementwise("scale", axis, const=int(k), **at), before))
            if start:
                got = bld(elementwise("shift", axis, const=int(start), **at), got)
        wires.update(zip(outs, got if isinstance(got, tuple) else (got,)))
    return bld.build(*(wires[v] for v in cod))


def local_programs(d: Diagram, env: dict, *, whole_rings: bool = True, split: bool = True) -> list:
    """The programs one device computes in the device program ``d`` at ``env`` (device 0's, the largest shards),
    each with every size an int: per device region :func:`_local` of its inside (a program per piece its
    collectives separate); a computing box outside every region as itself; ``d`` itself where it has no device
    region (one device runs it all).

    >>> import napkin_cat as nc
    >>> from rewrites.devices import device_gather, tensor_parallel
    >>> up = nc.einsum("n d, d h -> n h") >> nc.elementwise("relu", "n h")
    >>> mlp = up @ nc.Id("h d") >> nc.einsum("n h, h d -> n d") >> nc.elementwise("exp", "n d")
    >>> d = device_gather.using(axis="n").apply(tensor_parallel(mlp, "h", devices=2).diagram)
    >>> [b.name for b in d.boxes[0].arg.boxes if not b.name.startswith("Swap")]
    ['all-gather', '·', 'relu', '·', 'all-reduce', 'exp']
    >>> [[b.name for b in p.boxes] for p in local_programs(d, nc.Sizes({"n": 8, "d": 4, "h": 6}).env)]
    [['·', 'relu', '·'], ['exp']]
    """
    return [p for p, _ in local_parts(d, env, whole_rings=whole_rings, split=split)]


def boundary(d: Diagram) -> int:
    """The level-0 memory of ``d`` run as one kernel (its intermediates on chip): its inputs and outputs as the
    cost's liveness holds them."""
    return int(at(kernel(d), {}).M.get(0, 0))


def kept_on_chip(d: Diagram, env: dict) -> int:
    """Values the device program's function boxes hold at level 0 beyond what one kernel of them holds
    (intermediates the derived algorithm keeps on chip), at the ring's slot: what ``held`` counts and the
    algorithm does not."""
    out = 0
    for p in local_programs(d, env, whole_rings=False, split=False):
        if any(isinstance(b, Kernel) for b in p.boxes):     # a kernel's intermediates are not in held already
            continue
        out = max(out, int(at(p, {}).M.get(0, 0)) - boundary(p))
    return max(out, 0)


def trip_kernel(ring) -> Diagram:
    """The inside of the stream ``ring`` (a Ring) with what its trips run as one kernel: its head and body (the
    values folded along its axis) in a Kernel, the tail (what runs once on the accumulated values, reading them and
    the region's inputs) after it, outside the kernel, as the stream runs it once after its last trip::

        inside = head ; body ; tail    →    Kernel(head ; body) ; tail

    (the whole inside in one Kernel where there is no tail).  A kernel nested in a stream advances slice by slice
    only where every value after its fold is accumulated; a tail reading an input whole (a residual) is not, so it
    stays outside.

    >>> import napkin_cat as nc
    >>> from napkin_cat.algorithms.ring import ring
    >>> mm = nc.einsum("n e, e f, f e -> n e") >> nc.elementwise("exp", "n e")
    >>> r = ring(nc.shard(mm, "n", devices=2), "f").boxes[0].arg.boxes[0]
    >>> [b.name for b in trip_kernel(r).boxes]
    ['Kernel(level=1)', 'exp']
    """
    plan = ring.plan
    tail = set(plan.indices("tail"))
    if not tail:
        return kernel(ring.arg)
    first = [i for i in range(len(plan.ops)) if i not in tail]
    made = {v for i in first for v in plan.ops[i][2]}
    needed = list(dict.fromkeys([v for i in sorted(tail) for v in plan.ops[i][1] if v in made] +
                                [v for v in plan.cod if v in made]))
    read = list(dict.fromkeys(v for i in first for v in plan.ops[i][1] if v in plan.dom))
    inner = Builder(Ty(*(plan.arrays[v] for v in read)))
    wire = dict(zip(read, inner.inputs))
    for i in first:
        box, ins, outs = plan.ops[i]
        res = inner(box, *(wire[v] for v in ins))
        wire.update(zip(outs, res if isinstance(res, tuple) else (res,)))
    part = kernel(inner.build(*(wire[v] for v in needed)))
    outer = Builder(Ty(*(plan.arrays[v] for v in plan.dom)))
    wire = dict(zip(plan.dom, outer.inputs))
    res = outer(part, *(wire[v] for v in read))
    wire.update(zip(needed, res if isinstance(res, tuple) else (res,)))
    for i in sorted(tail):
        box, ins, outs = plan.ops[i]
        res = outer(box, *(wire[v] for v in ins))
        wire.update(zip(outs, res if isinstance(res, tuple) else (res,)))
    return outer.build(*(wire[v] for v in plan.cod))


def rings_as_kernels(d: Diagram) -> Diagram:
    """``d`` with each ring's trip one kernel (:func:`trip_kernel`): a trip's intermediates on chip, as the
    per-device algorithm keeps them (its state and slots stay at level 0): the device program whose ``held`` the
    ring's memory is."""
    def mapped(box):
        if isinstance(box, Ring):
            return Ring.rebuild(trip_kernel(box), box.dom, box.cod, box.params)
        if isinstance(box, Shard):
            return Shard.rebuild(each_box(box.arg, mapped), box.dom, box.cod, box.params)
        return box
    return each_box(d, mapped)


__all__ = ["concrete", "local_parts", "device_lanes", "gap", "reads_positions", "at_positions", "local_programs",
           "boundary", "kept_on_chip", "rings_as_kernels", "trip_kernel", "computes"]
