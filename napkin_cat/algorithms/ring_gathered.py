"""A ring of a value computed on the shards (issue 37): the all-gather of what each device computes made a ring.

Inside a device region, a value ``v`` each device computes on its shard (K and V projected from its tokens) is
all-gathered along ``g`` (and renamed ``g ↦ b`` any number of times: a block attends its own tokens as keys ``m``)
before a part ``F`` that reads it whole.  Where ``F`` streams ``b``, the gather is a ring: each device keeps its own
slice, renamed, and the slices travel round the devices while ``F`` folds them::

    Shard_{a,P}(E ; all-gather_g(v) ; ρ_{g↦b} ; F ; H)  ≡  Shard_{a,P}(E ; ρ_{g↦b}(v) ; Ring_{b,P}(F[b ↦ b/P]) ; H)

``E``: every box that does not depend on a gathered value (the slices' producers among them), run before the ring on
the device's shard; ``F``: the boxes that read a value carrying ``b`` made from the gathered ones (the stream's
inside: its reducers carried across the trips, online softmax's μ, z, o); ``H``: the boxes after ``F`` that read no
such value.  The law is the stream theorem (the ring's trips are the stream's slices, device ``p`` folding slice
``(p − t) mod P`` at trip ``t``, :mod:`napkin_cat.algorithms.ring`) with the gather's slices cut as the region cuts
``g`` (its order: a zigzag region's slice is its two chunks).  Per device the link moves what the gather moved,
``(P − 1)·|v|/P`` each way, overlapped with the trips; the device holds one incoming slice instead of ``v`` whole.

A box with no inputs whose value carries ``b`` and is read by ``F`` alone (positions of the keys) is computed inside
the ring, per trip at the slice's own positions, so a mask of them is decided per device and step.

>>> import napkin_cat as nc
>>> f = nc.library.transformer_block()
>>> from rewrites.devices import tensor_parallel
>>> part = tensor_parallel(f, "n", 2).diagram
>>> rung = [b for b in part.boxes if isinstance(b, nc.Shard)]
>>> k = next(b for b in rung if gathered_values(b.arg))
>>> sorted({b for _, b in gathered_values(k.arg)})
['m']
"""
from __future__ import annotations

from napkin_cat.algorithms.devices import RENAMED, device_region
from napkin_cat.algorithms.partitions import single
from napkin_cat.algorithms.ring import ring_over, sole_device_region
from napkin_cat.errors import RewriteError
from napkin_cat.syntax.adapter import Bubble, Diagram, Ty
from napkin_cat.syntax.flat import is_structural
from napkin_cat.syntax.builder import Builder, build_values
from napkin_cat.syntax.construct import renaming
from napkin_cat.syntax.wiring import consumers, trace_values


def _kind(box) -> str | None:
    if is_structural(box) is not None or isinstance(box, Bubble) or not hasattr(box, "data"):
        return None
    return box.data.kind


def _renamed(box, axis: str) -> str:
    """The name ``axis`` takes through the rename ``box`` (position by position)."""
    (a,), (b,) = box.dom.inside, box.cod.inside
    return dict(zip(a.names, b.names)).get(axis, axis)


def gathered_values(inside: Diagram) -> list:
    """The all-gathers of ``inside`` (a device region's), each followed by its chain of renames: ``[(chain, b)]``,
    ``chain`` the op indices (the gather first, then the renames its value alone passes through), ``b`` the axis the
    last value carries the gathered one as; only where one of them gathers a value computed inside or is renamed (a
    region whose gathers all read its inputs unrenamed is :func:`~napkin_cat.algorithms.ring.ring`'s)."""
    ops, dom, cod = trace_values(inside)
    uses = consumers(ops, cod)
    out = []
    for i, (box, ins, outs) in enumerate(ops):
        if _kind(box) != "all_gather":
            continue
        chain, axis, value = [i], box.data.param("axis"), outs[0]
        while len(uses.get(value, [])) == 1 and uses[value][0][0] >= 0 and _kind(ops[uses[value][0][0]][0]) == "rename":
            j = uses[value][0][0]
            chain.append(j)
            axis, value = _renamed(ops[j][0], axis), ops[j][2][0]
        out.append((tuple(chain), axis))
    own = {b for c, b in out if len(c) > 1 or ops[c[0]][1][0] not in dom}
    return [(c, b) for c, b in out if b in own]


def _shard_rename(box, axis: str, size):
    """The rename ``box`` at a shard: ``axis`` (its input's) at ``size``."""
    (a,), (b,) = box.dom.inside, box.cod.inside
    sizes = {x.name: (size if x.name == axis else x.size) for x in a.axes}
    return renaming(f"{' '.join(a.names)} -> {' '.join(b.names)}", level=a.level, dtype=a.dtype, sizes=sizes)


def ring_gathered(diagram: Diagram, axis: str | None = None) -> Diagram:
    """A device region (a one-box diagram) whose inside all-gathers values it computes, read along ``axis`` (the
    gathered axis or its renamed name; None: the first such gather's) by a part that streams it, with those gathers
    made one ring (see the module docstring).  RewriteError where the region has no such gather, the readers of the
    gathered values are not a part that streams the axis (a value carrying it returned, one made whole outside the
    gathered ones read beside them), or the stream's reason.

    >>> import numpy as np, napkin_cat as nc
    >>> from rewrites.devices import tensor_parallel
    >>> b = nc.Builder(nc.types("n e, e d, e d, e d"))
    >>> X, Wq, Wk, Wv = b.inputs
    >>> K, V = (b(nc.renaming("n d -> m d"), b(nc.einsum("n e, e d -> n d"), X, W)) for W in (Wk, Wv))
    >>> Q = b(nc.einsum("n e, e d -> n d"), X, Wq)
    >>> from napkin_cat.syntax.relabel import rename_axis
    >>> att = rename_axis(rename_axis(nc.library.attention(), "q", "n"), "x", "m", nc.symbol("n"))
    >>> f = b.build(b(att, Q, K, V))
    >>> (k,) = [x for x in tensor_parallel(f, "n", 3).diagram.boxes if isinstance(x, nc.Shard)]
    >>> region = nc.Diagram.id(k.dom).then(k)             # K, V projected on each device's tokens, all-gathered
    >>> d = ring_gathered(region)
    >>> [b.name for b in d.boxes[0].arg.boxes if not b.name.startswith("Swap")][-1]
    'Ring(axis=m, size=n/3, devices=3, full=n, slot=n/3)'
    >>> xs = [np.random.default_rng(0).normal(size=s) for s in [(7, 4), (4, 2)] * 3]
    >>> np.allclose(nc.evaluate(d, *xs), nc.evaluate(region, *xs))
    True
    """
    k = sole_device_region(diagram, "ring_gathered")
    found = gathered_values(k.arg)
    names = sorted({b for _, b in found})
    if not found:
        raise RewriteError(f"{k.name}: no all-gather inside reads a value computed on the devices' shards")
    ops, dom, cod = trace_values(k.arg)
    gaxis = {ops[c[0]][0].data.param("axis") for c, _ in found}
    b = axis if axis is not None else found[0][1]
    chains = [c for c, name in found if name == b or (axis is not None and ops[c[0]][0].data.param("axis") == axis
                                                       and name == axis)]
    if not chains:
        raise RewriteError(f"{k.name}: no gathered value is read along {axis!r}; those gathered are read along "
                           f"{names} (gathered along {sorted(gaxis)})")
    P = k.devices
    types = {}
    for v, t in zip(dom, k.arg.dom.inside):
        types[v] = t
    for box, ins, outs in ops:
        for v, t in zip(outs, box.cod.inside):
            types[v] = t
    uses = consumers(ops, cod)
    chained = {i for c in chains for i in c}
    ends = {ops[c[-1]][2][0] for c in chains}
    for c in chains:
        if ops[c[0]][0].data.param("axis") not in types[ops[c[0]][1][0]].names:
            raise RewriteError(f"{k.name}: the gathered value {types[ops[c[0]][1][0]]} does not carry its axis")
    full = types[next(iter(ends))].axis(b).size
    # F: the boxes after the gathers that read a value carrying b made from them, and those feeding such a box;
    # H: the rest of those after the gathers
    hot, dep, reached = set(ends), [], set(ends)
    for i, (box, ins, outs) in enumerate(ops):
        if i not in chained and any(v in reached for v in ins):
            dep.append(i)
            reached.update(outs)
            hot.update(v for v in outs if b in types[v].names)
    bodyset = set()
    for i in reversed(dep):
        outs = ops[i][2]
        if any(v in hot for v in ops[i][1]) or any(j in bodyset for v in outs for j, _ in uses.get(v, [])):
            bodyset.add(i)
    post = [i for i in dep if i not in bodyset]
    if any(v in hot for v in cod):
        raise RewriteError(f"{k.name}: an output carries {b!r} made from the gathered values; a ring's results are "
                           f"its reductions over {b!r}")
    # a box of no input, or whose values carry b, read by F alone moves into it (positions of the queries and keys
    # and a mask of them: each trip's own, so the folds it masks are skipped); what it reads carrying b must then be
    # F's too (checked below)
    pulled = True
    while pulled:
        pulled = False
        for i in reversed(range(len(ops))):
            box, ins, outs = ops[i]
            if i in bodyset or i in chained or i in post:
                continue
            readers = [j for v in outs for j, _ in uses.get(v, [])]
            if readers and all(j in bodyset for j in readers) and (not ins or any(b in types[v].names for v in outs)) \
                    and all(v in hot or b not in types[v].names or v not in dom for v in ins):
                bodyset.add(i)
                hot.update(v for v in outs if b in types[v].names)
                pulled = True
    body = sorted(bodyset)
    pre = [i for i in range(len(ops)) if i not in bodyset and i not in chained and i not in post]
    made_by = {v: i for i, (_, _, outs) in enumerate(ops) for v in outs}
    for i in body:
        for v in ops[i][1]:
            if v in hot or v in ends or made_by.get(v) in bodyset:
                continue
            if b in types[v].names:
                raise RewriteError(f"{k.name}: {ops[i][0].name} reads {types[v]}, a value carrying {b!r} made whole "
                                   f"outside the gathered ones; a ring streams {b!r} in the gathered slices alone")
    # the ring: F at full size, then b relabelled to a shard
    r_ins = list(dict.fromkeys(v for i in body for v in ops[i][1] if made_by.get(v) not in bodyset))
    r_outs = list(dict.fromkeys(v for i in body for v in ops[i][2]
                                if any(j == -1 or j not in bodyset for j, _ in uses.get(v, []))))
    whole = build_values([ops[i] for i in body], r_ins, r_outs, types)
    ring = ring_over(whole, b, P, full, k.order, k.name)
    # the region's new inside: E, each gathered value's renames on its shard, the ring, H
    bld = Builder(Ty(*k.arg.dom.inside))
    wires = dict(zip(dom, bld.inputs))

    def emit(i):
        box, ins, outs = ops[i]
        bld.apply(single(box), wires, ins, outs)
    for i in pre:
        emit(i)
    renames = {}
    for c in chains:
        gather = ops[c[0]][0]
        value, axis_now = wires[ops[c[0]][1][0]], gather.data.param("axis")
        cut = types[ops[c[0]][1][0]].axis(axis_now).size
        for j in c[1:]:
            value = bld(_shard_rename(ops[j][0], axis_now, cut), value)
            renames[_renamed(ops[j][0], axis_now)] = axis_now
            axis_now = _renamed(ops[j][0], axis_now)
        wires[ops[c[-1]][2][0]] = value
    bld.apply(single(ring), wires, r_ins, r_outs)
    for i in post:
        emit(i)
    new = bld.build(*(wires[v] for v in cod))
    also = {a: f for a, (_, f) in k.sharded_axes().items() if a != k.axis}
    renamed = {**dict(k.params.get(RENAMED, ())), **renames}
    return device_region(new, k.axis, P, k.full_size(), also=also, sharded_in=k.sharded("dom"),
                         sharded_out=k.sharded("cod"), order=k.order, renamed=renamed)


__all__ = ["ring_gathered", "gathered_values"]
