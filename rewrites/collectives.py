"""Sequence parallelism as rules (issue 37, item 3): the all-reduce split, the all-gathers moved to where they are read.

=========================  ========================================================================================
rule                       lhs → rhs
=========================  ========================================================================================
``device_scatter``         Shard(… ; all-reduce_⊕(y) ; …) → Shard(… ; all-gather_b(reduce-scatter_⊕,b(y)) ; …)
                                                                   every array of the all-reduce carries b
``device_gather_later``    Shard(… all-gather_b(x) ; G ; …) → Shard(… G[b ↦ b/P](x) ; all-gather_b ; …)
                                                                   G woven over b, each input of G that carries b
                                                                   an all-gather along b, each output carries b
``device_gather_output``   Shard(… ; all-gather_b(y)) → Shard(… ; y)   the output leaves sharded along b
=========================  ========================================================================================

The laws.  An all-reduce is a reduce-scatter followed by an all-gather (NCCL's ring all-reduce is exactly that):
device ``p`` reduces shard ``p`` of ``b`` and every device gathers the reduced shards, so
``all-reduce_⊕ = all-gather_b ∘ reduce-scatter_⊕,b``, and it moves the same values: ``(P − 1)·|y|/P`` each way
for each half, ``2·(P − 1)·|y|/P`` in all (at ragged sizes the chunks are the shards of ``b``, not of the flat values).
An all-gather along ``b`` commutes with a box woven over ``b`` (the group partition's law ``weave_b(G) ≡ split_b ;
(G ⊗ … ⊗ G) ; join_b``, the join being the all-gather): ``G ∘ all-gather_b = all-gather_b ∘ G[b ↦ b/P]``, so the box
runs on each device's shard, ``1/P`` of its work, and its whole inputs are never held.  At the region's boundary the
all-gather is the join itself: an output left sharded along ``b`` is the same value outside (the devices' shards
joined).  A box before the region that it reads sharded along ``b`` moves in on the shards by
:mod:`rewrites.local_fusion`'s ``device_local_fusion``, the derivation's first step.

From Megatron's tensor-parallel MLP whose input arrives sharded along the sequence (``device_gather``) they derive
Korthikanti et al.'s sequence parallelism (2022): the boxes local to a token (a norm, the residual) run on a
sequence shard, one all-gather along the sequence before the column-parallel matmul and one reduce-scatter after
the row-parallel one, in place of the all-reduce.  Oriented by their user, ``rule.using(axis="n")`` (without it:
the first axis the match allows).

>>> import napkin_cat as nc
>>> from rewrites.devices import device_gather, tensor_parallel
>>> up = nc.einsum("n d, d h -> n h") >> nc.elementwise("relu", "n h")
>>> mlp = up @ nc.Id("h d") >> nc.einsum("n h, h d -> n d")
>>> d = device_gather.using(axis="n").apply(tensor_parallel(mlp, "h", devices=2).diagram)
>>> d = device_scatter.using(axis="n").apply(d)
>>> d = device_gather_output.apply(d)
>>> [b.name for b in d.boxes[0].arg.boxes if b.name != "Swap(n×d, n×d)"], d.boxes[0].sharded("cod")
(['all-gather', '·', 'relu', '·', 'reduce-scatter'], ('n',))
"""
from __future__ import annotations

import numpy as np

import napkin_cat as nc
from napkin_cat.algorithms.partitions import relabel_axis
from napkin_cat.errors import RewriteError
from napkin_cat.rewriting import Condition, Obligation, Rule
from napkin_cat.rewriting.match import Pattern
from napkin_cat.syntax.collectives import shard_size
from napkin_cat.syntax.wiring import computes
from rewrites.device_matching import DEVICES, as_diagram, built_by, legal_when
from rewrites.devices import random_inputs
from rewrites.local_fusion import as_int, bound, counted, device_local_fusion, sharded_mlp, work_on_shard
from rewrites.region_inside import Values, gather, is_kind, moves_values, one_format, rewrapped, signature, woven


# ---------------------------------------------------------------------- device_scatter
def _scatter_site(k, vals: Values, axis):
    """The first all-reduce inside ``k`` whose arrays all carry ``axis`` (None: any axis they all carry), its op and
    that axis; RewriteError where none does."""
    for i, (box, _, _) in enumerate(vals.ops):
        if not is_kind(box, "all_reduce"):
            continue
        shared = [n for n in box.dom.inside[0].names if all(n in a.names for a in box.dom.inside)]
        pick = axis if axis in shared else (shared[0] if axis is None and shared else None)
        if pick is not None:
            return i, box, pick
    raise RewriteError(f"{k.name}: no all-reduce inside whose arrays all carry "
                       f"{'an axis' if axis is None else repr(axis)} to scatter along")


def _scattered(m):
    k = m.box("k")
    vals = Values(k.arg)
    i, box, b = _scatter_site(k, vals, m.params.get("axis"))
    full = box.dom.inside[0].axis(b).size
    P = box.data.param("devices")
    level, dtype = one_format(box.dom.inside, box.name)

    def split(bld, get):
        sizes = {x.name: x.size for a in box.dom.inside for x in a.axes}
        rs = nc.reduce_scatter(signature(box.dom.inside), axis=b, devices=P, merge=box.data.param("merge"), level=level,
                               dtype=dtype, sizes=sizes)
        parts = bld(rs, *[get(v) for v in vals.ops[i][1]])
        parts = parts if isinstance(parts, tuple) else (parts,)
        return bld(gather(rs.cod.inside, b, P, full), *parts)
    return rewrapped(k, vals.rebuild(list(k.arg.dom.inside), {i: split}))


# ---------------------------------------------------------------------- device_gather_later
def same_everywhere(k, vals: Values) -> set:
    """The values of ``k``'s inside that every device holds alike: its replicated inputs, what an all-reduce or an
    all-gather makes, and what a box makes of such values alone."""
    alike = {v for v, cut in zip(vals.dom, k.sharded("dom")) if cut is None}
    for box, ins, outs in vals.ops:
        if is_kind(box, "all_reduce") or is_kind(box, "all_gather") or (
                not moves_values(box) and all(v in alike for v in ins)):
            alike.update(outs)
    return alike


def _later_site(k, vals: Values, axis):
    """The first op G (and the axis b) that reads every input carrying b from an all-gather along b and every other
    input alike on every device, is woven over b and makes outputs that carry b; RewriteError naming why the first
    candidate fails where none qualifies.  (A box that reads a device's own value, a weight's shard, is another
    function on each device: moved before the gather, device q's rows would be computed by device q's function.)"""
    why = None
    alike = same_everywhere(k, vals)
    for i, (box, ins, outs) in enumerate(vals.ops):
        if moves_values(box) or not computes(box):
            continue
        sources = [vals.made_by(v) for v in ins]
        gathered = [vals.ops[s[0]][0] for s in sources if s is not None]
        axes = [g.data.param("axis") for g in gathered if is_kind(g, "all_gather")]
        for b in ([axis] if axis is not None else list(dict.fromkeys(axes))):
            if b not in axes:
                continue
            readers = [(a, s) for a, s in zip(box.dom.inside, sources) if b in a.names]
            if not all(s is not None and is_kind(vals.ops[s[0]][0], "all_gather")
                       and vals.ops[s[0]][0].data.param("axis") == b for _, s in readers):
                why = why or f"{box.name!r} reads {b!r} from a value that is not all-gathered along it"
                continue
            own = [a for a, v in zip(box.dom.inside, ins) if b not in a.names and v not in alike]
            if own:
                why = why or f"{box.name!r} reads {own[0]}, which differs from device to device"
                continue
            if not all(b in c.names for c in box.cod.inside):
                why = why or f"{box.name!r} has an output without {b!r} (it reduces it)"
                continue
            reason = woven(box, b, k.devices)
            if reason is not None:
                why = why or f"{box.name!r} is not woven over {b!r}: {reason}"
                continue
            return i, b
    raise RewriteError(f"{k.name}: no box inside reads values all-gathered along "
                       f"{'an axis' if axis is None else repr(axis)} and runs alike on their shards"
                       + (f" ({why})" if why else ""))


def _later(m):
    k = m.box("k")
    vals = Values(k.arg)
    i, b = _later_site(k, vals, m.params.get("axis"))
    box, ins, _ = vals.ops[i]
    full = next(a.axis(b).size for a in box.dom.inside if b in a.names)
    P = k.devices

    def moved(bld, get):
        args = []
        for a, v in zip(box.dom.inside, ins):
            if b in a.names:
                j, port = vals.made_by(v)
                args.append(get(vals.ops[j][1][port]))        # the all-gather's input: this device's shard
            else:
                args.append(get(v))
        local = relabel_axis(as_diagram(box), b, shard_size(full, P), full=full)
        made = bld(local, *args)
        made = made if isinstance(made, tuple) else (made,)
        out = [bld(gather([c], b, P, full), w) for c, w in zip(box.cod.inside, made)]
        return out
    return rewrapped(k, vals.rebuild(list(k.arg.dom.inside), {i: moved}))


# ---------------------------------------------------------------------- device_gather_output
def _output_site(k, vals: Values, axis):
    for j, v in enumerate(vals.cod):
        src = vals.made_by(v)
        if k.sharded("cod")[j] is not None or src is None:
            continue
        box = vals.ops[src[0]][0]
        if is_kind(box, "all_gather") and axis in (None, box.data.param("axis")):
            return j, src
    raise RewriteError(f"{k.name}: no output it holds whole is made by an all-gather"
                       + ("" if axis is None else f" along {axis!r}"))


def _output(m):
    k = m.box("k")
    vals = Values(k.arg)
    j, (i, port) = _output_site(k, vals, m.params.get("axis"))
    box = vals.ops[i][0]
    b = box.data.param("axis")
    out = list(k.sharded("cod"))
    out[j] = b
    inside = vals.rebuild(list(k.arg.dom.inside), outputs={j: lambda get: get(vals.ops[i][1][port])})
    return rewrapped(k, inside, sharded_out=tuple(out), also={b: box.cod.inside[port].axis(b).size})


# ---------------------------------------------------------------------- obligations
def _exhaust(rule, d):
    while True:
        ms = rule.matches(d)
        if not ms:
            return d
        d = rule.apply(d, ms[0])


def _staged(rng, kinds, stage: int):
    """A program of one of ``kinds`` made tensor-parallel on h over 2 to 4 devices, its input arriving sharded
    along n (:func:`~rewrites.local_fusion.sharded_mlp`), then the first ``stage`` of the derivation's rules applied
    wherever they match: the left-hand sides the derivation of sequence parallelism meets."""
    d = sharded_mlp(rng, kinds)
    for rule in (device_local_fusion, device_scatter.using(axis="n"), device_gather_later.using(axis="n"))[:stage]:
        d = _exhaust(rule, d)
    return d


def _rows(a, b: str, P: int, sizes: dict) -> list:
    """The values of each device's shard of the array ``a`` (at ``sizes``) cut along ``b`` as np.array_split cuts."""
    n = as_int(a.axis(b).size, sizes)
    return [_numel(a, sizes) // n * len(c) for c in np.array_split(np.arange(n), P)]


def _numel(a, sizes: dict) -> int:
    return int(np.prod([as_int(x.size, sizes) for x in a.axes]))


def _links(lhs, rhs, sizes: dict):
    return counted(lhs, sizes).link, counted(rhs, sizes).link


def _scatter_cost(lhs, rhs, m):
    """Per device p (P devices, every one holding a shard here): the all-reduce of ``y`` sent and received
    ``|y| − c_p + (P − 1)·c_p`` (``c_p``: its chunk of the flat values); the reduce-scatter and all-gather along b
    send ``|y| − |y_p|`` and ``(P − 1)·|y_p|`` and receive the same (``y_p``: its rows of b), counted here with
    numpy's cuts; the messages do not change."""
    k = m.box("k")
    P = int(k.devices)
    _, box, b = _scatter_site(k, Values(k.arg), m.params.get("axis"))
    sizes = bound(lhs, rhs)
    before, after = _links(lhs, rhs, sizes)
    for p in range(P):
        ar = sum(_numel(a, sizes) - len(c) + (P - 1) * len(c) for a in box.dom.inside
                 for c in [np.array_split(np.arange(_numel(a, sizes)), P)[p]])
        rsag = sum(_numel(a, sizes) - r + (P - 1) * r for a in box.dom.inside for r in [_rows(a, b, P, sizes)[p]])
        assert after.sent[p] - before.sent[p] == rsag - ar, f"device {p}: sent {before.sent[p]} → {after.sent[p]}"
        assert after.received[p] - before.received[p] == rsag - ar, f"device {p}: received"
    assert after.messages == before.messages, f"messages {before.messages} → {after.messages}"


def _later_cost(lhs, rhs, m):
    """The moved box's work is its shard's; per device p the link sends ``(P − 1)·|z_p|`` for each output z of the
    box instead of ``(P − 1)·|x_p|`` for each input x whose all-gather it alone read, and receives ``|z| − |z_p|``
    instead of ``|x| − |x_p|`` (numpy's cuts)."""
    k = m.box("k")
    P = int(k.devices)
    vals = Values(k.arg)
    i, b = _later_site(k, vals, m.params.get("axis"))
    box, ins, _ = vals.ops[i]
    sizes = bound(lhs, rhs)
    work_on_shard(lhs, rhs, box, b, P, sizes)
    readers = [v for _, vs, _ in vals.ops for v in vs] + list(vals.cod)
    dropped = [vals.ops[vals.made_by(v)[0]][0].cod.inside[vals.made_by(v)[1]] for a, v in zip(box.dom.inside, ins)
               if b in a.names and readers.count(v) == 1 and
               sum(readers.count(o) for o in vals.ops[vals.made_by(v)[0]][2]) == 1]
    before, after = _links(lhs, rhs, sizes)
    for p in range(P):
        sent = sum((P - 1) * _rows(c, b, P, sizes)[p] for c in box.cod.inside) - \
            sum((P - 1) * _rows(a, b, P, sizes)[p] for a in dropped)
        got = sum(_numel(c, sizes) - _rows(c, b, P, sizes)[p] for c in box.cod.inside) - \
            sum(_numel(a, sizes) - _rows(a, b, P, sizes)[p] for a in dropped)
        assert after.sent[p] - before.sent[p] == sent, f"device {p}: sent {before.sent[p]} → {after.sent[p]}"
        assert after.received[p] - before.received[p] == got, f"device {p}: received"


def _output_cost(lhs, rhs, m):
    """Per device p the all-gather left out: ``(P − 1)·|y_p|`` fewer values sent, ``|y| − |y_p|`` fewer received."""
    k = m.box("k")
    P = int(k.devices)
    vals = Values(k.arg)
    j, (i, port) = _output_site(k, vals, m.params.get("axis"))
    box = vals.ops[i][0]
    y, b = box.cod.inside[port], box.data.param("axis")
    sizes = bound(lhs, rhs)
    before, after = _links(lhs, rhs, sizes)
    for p in range(P):
        mine = _rows(y, b, P, sizes)[p]
        assert before.sent[p] - after.sent[p] == (P - 1) * mine, f"device {p}: sent {before.sent[p]} → {after.sent[p]}"
        assert before.received[p] - after.received[p] == _numel(y, sizes) - mine, f"device {p}: received"


device_scatter = Rule(
    "device_scatter",
    Pattern({"k": DEVICES}),
    built_by(_scattered),
    conditions=(Condition("an all-reduce inside", legal_when(_scattered),
                          "an all-reduce inside whose arrays carry the axis"),),
    obligation=Obligation(lambda rng: _staged(rng, range(5), 1), inputs=random_inputs, cost=_scatter_cost),
    doc="""Shard(all-reduce_⊕(y)) → Shard(all-gather_b(reduce-scatter_⊕,b(y))): the all-reduce split in its halves.

    ``all-reduce_⊕ = all-gather_b ∘ reduce-scatter_⊕,b``.  Cost claim: the same values on the link, each half
    ``(P − 1)·|y|/P`` each way (device ``p``: ``|y| − |y_p|`` sent and ``(P − 1)·|y_p|`` received, then the
    reverse, ``y_p`` its shard of b), ``2·(P − 1)`` messages per array as before.""",
    oriented=False,
)

device_gather_later = Rule(
    "device_gather_later",
    Pattern({"k": DEVICES}),
    built_by(_later),
    conditions=(Condition("woven after a gather", legal_when(_later),
                          "a box woven over b reads only all-gathered values of b"),),
    obligation=Obligation(lambda rng: _staged(rng, (1, 2, 3), 2), inputs=random_inputs, cost=_later_cost),
    doc="""Shard(all-gather_b(x) ; G) → Shard(G[b ↦ b/P](x) ; all-gather_b): the gather moved past a box local to b.

    ``G ∘ all-gather_b = all-gather_b ∘ G[b ↦ b/P]`` for G woven over b.  Cost claim: G's work per device that of
    its shard, the link moving G's outputs' shards in place of its inputs'.""",
    oriented=False,
)

device_gather_output = Rule(
    "device_gather_output",
    Pattern({"k": DEVICES}),
    built_by(_output),
    conditions=(Condition("gathered output", legal_when(_output),
                          "an output held whole is made by an all-gather"),),
    obligation=Obligation(lambda rng: _staged(rng, range(5), 3), inputs=random_inputs, cost=_output_cost),
    doc="""Shard(… ; all-gather_b(y)) → Shard(… ; y) with the output sharded along b: the gather is the join.

    The devices' shards joined are the value outside.  Cost claim: the link loses that all-gather's traffic and
    nothing else; each device holds the output's shard, not the whole.""",
    oriented=False,
)


__all__ = ["device_scatter", "device_gather_later", "device_gather_output", "same_everywhere"]
