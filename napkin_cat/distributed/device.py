"""One device's part of a device region: the inside on its shard, the collectives through an exchange.

Device ``p`` of a :class:`~napkin_cat.algorithms.devices.Shard` runs the inside at its shard's sizes
(:func:`~napkin_cat.algorithms.device_shards.device_inside`) by the numpy evaluator, box by box; a collective calls the
exchange (:class:`~napkin_cat.distributed.exchange.Exchange`: torch.distributed's ``all_gather`` and
``all_to_all_single``), each built from the two as a point-to-point runner moves shards (``n_p``: device ``p``'s
shard, cut as ``np.array_split`` cuts)::

    all_gather        every device's shard, joined along the axis              (all_gather of each array)
    reduce_scatter    chunk q of each partial to device q, merged there          (all_to_all of the chunks, then ⊕)
    all_reduce        reduce_scatter of P chunks, then all_gather of them       (chunks: flat values; rows of the
                                                                                 coupled axis for a reducer's merge)
    all_to_all        block q along scatter to device q, joined along gather    (all_to_all of the blocks)

A ring (:class:`~napkin_cat.algorithms.ring.Ring`) is the numpy evaluator's ring fold
(:meth:`~napkin_cat.semantics.regions.Numpy.ring_fold`) with its slices passed from rank to rank: at trip ``t``
device ``p`` folds the slice it holds (shard ``(p − t) mod P``) while it sends that slice to device ``p + 1`` and
receives shard ``(p − t − 1) mod P`` from ``p − 1`` (:meth:`~napkin_cat.distributed.exchange.Exchange.pass_on`; its
extent along the axis from the region's order, :func:`~napkin_cat.algorithms.orders.device_extents`, so ragged shards
and zigzag's pairs of chunks are exact; a shard of pieces travels as one array, its pieces joined)::

    sent_p = Σ_x |x| − |x_{p+1}|      received_p = Σ_x |x| − |x_p|      messages = (P − 1) per streamed input

A device merges the chunks it receives in device order, ``((x₀ ⊕ x₁) ⊕ x₂) …``, by the collective's merge run as a
diagram (:func:`~napkin_cat.algorithms.collective_merges.merge_diagram`; an elementwise merge on the flat chunks as
the same kind on one axis), as the lockstep numpy run folds the whole arrays: each value is computed by the same
operations in the same order, so the outputs equal ``nc.evaluate``'s exactly.

>>> import numpy as np, napkin_cat as nc
>>> class Alone:                       # a single device: every collective hands its blocks to itself
...     size, me, sent, received, messages = 1, 0, 0, 0, 0
...     def all_gather(self, x): return [x]
...     def all_to_all(self, blocks): return blocks
>>> box = nc.all_reduce("n", devices=1, merge="max").boxes[0]
>>> from napkin_cat.semantics.env import Env
>>> run_collective(box, [np.arange(3.0)], Alone(), Env())[0].tolist()
[0.0, 1.0, 2.0]
"""
from __future__ import annotations

import numpy as np

from napkin_cat.algorithms.device_wires import wire_marks
from napkin_cat.algorithms.collective_merges import merge_diagram
from napkin_cat.algorithms.device_shards import collectives_within, cut_spans, shard_keys
from napkin_cat.algorithms.orders import device_extents
from napkin_cat.algorithms.ring import ring_shard
from napkin_cat.algorithms.schedule import schedule_of
from napkin_cat.errors import DeviceError
from napkin_cat.semantics.devices import OnDevice
from napkin_cat.semantics.evaluate import interpret
from napkin_cat.semantics.primitives import run_primitive
from napkin_cat.semantics.regions import Numpy, run_region
from napkin_cat.syntax.adapter import Bubble
from napkin_cat.syntax.collectives import coupled_axis, in_cod_layout, shard_bounds
from napkin_cat.syntax.construct import elementwise
from napkin_cat.syntax.primitive import kind_of
from napkin_cat.syntax.wiring import traverse


def _cut(x, pos, lo, hi):
    idx = [slice(None)] * x.ndim
    idx[pos] = slice(lo, hi)
    return x[tuple(idx)]


def _blocks(x, pos, P):
    b = shard_bounds(x.shape[pos], P)
    return [_cut(x, pos, b[q], b[q + 1]) for q in range(P)]


def _fold(states, merge):
    out = list(states[0])
    for other in states[1:]:
        out = list(merge(out, list(other)))
    return out


def _merger(box, env):
    """``merge(u, v)`` of two states as the collective's merge diagram computes it."""
    d = merge_diagram(box)
    return lambda u, v: interpret(d, list(u) + list(v), env)


def _flat_merger(box, env):
    """The elementwise merge on flat chunks: the same kind on one axis, array by array."""
    merge = box.data.param("merge")
    ds = [elementwise(merge, "v, v -> v", dtype=a.dtype) for a in box.dom.inside]
    return lambda i: (lambda u, v: interpret(ds[i], [u[0], v[0]], env))


def _reduce_scatter(xs, positions, exchange, merge):
    """Device ``p``'s chunk of ``x₀ ⊕ … ⊕ x_{P−1}`` (chunk ``q`` of each array along its position to device ``q``)."""
    got = [exchange.all_to_all(_blocks(x, pos, exchange.size)) for x, pos in zip(xs, positions)]
    return _fold([[g[s] for g in got] for s in range(exchange.size)], merge)


def run_collective(box, xs: list, exchange, env) -> list:
    """The outputs of the collective ``box`` on this device's inputs ``xs``, through ``exchange``, in the layout of
    its output arrays (:func:`~napkin_cat.syntax.collectives.in_cod_layout`)."""
    return in_cod_layout(box, _collective(box, xs, exchange, env))


def _collective(box, xs: list, exchange, env) -> list:
    kind, names = box.data.kind, [a.names for a in box.dom.inside]
    xs = [np.asarray(x) for x in xs]
    if kind == "all_gather":
        axis = box.data.param("axis")
        return [np.concatenate(exchange.all_gather(x), axis=n.index(axis)) for x, n in zip(xs, names)]
    if kind == "all_to_all":
        gather, scatter = box.data.param("gather"), box.data.param("scatter")
        return [np.concatenate(exchange.all_to_all(_blocks(x, n.index(scatter), exchange.size)), axis=n.index(gather))
                for x, n in zip(xs, names)]
    if kind == "reducescatter":
        axis = box.data.param("axis")
        return _reduce_scatter(xs, [n.index(axis) for n in names], exchange, _merger(box, env))
    if kind == "all_reduce":
        axis = coupled_axis(box)
        if axis is None:                            # each array apart, its flat values cut in P chunks
            merge = _flat_merger(box, env)
            out = []
            for i, x in enumerate(xs):
                (mine,) = _reduce_scatter([x.reshape(-1)], [0], exchange, merge(i))
                out.append(np.concatenate(exchange.all_gather(mine)).reshape(x.shape))
            return out
        if axis == "":                              # no axis shared: the state whole on device 0
            xs, positions = [x[None] for x in xs], [0] * len(xs)
        else:
            positions = [n.index(axis) for n in names]
        mine = _reduce_scatter(xs, positions, exchange, _merger(box, env))
        out = [np.concatenate(exchange.all_gather(m), axis=pos) for m, pos in zip(mine, positions)]
        return [o[0] for o in out] if axis == "" else out
    raise DeviceError(f"{box.name}: the collective kind {kind!r} has no runner on torch.distributed; those known: "
                      f"all_gather, reducescatter, all_reduce, all_to_all")


def passed(mine: list, cuts: list, full: int, exchange, order=None):
    """The slices device ``exchange.me`` folds at trips ``0 … P − 1`` of a ring: ``mine`` (its own shard of each
    streamed input, cut along position ``cuts[i]``; ``full`` the axis's whole size; ``order`` the shards' order, whose
    pieces a shard holds joined), then at each trip the slices received from the previous device while those in hand
    are folded and sent on (nothing moves after the last)."""
    P, p = exchange.size, exchange.me
    extents = device_extents(full, P, order)
    held = [np.asarray(x) for x in mine]
    for t in range(P):
        passing = None
        if t < P - 1:
            q = ring_shard(p, t + 1, P)
            shapes = [x.shape[:c] + (extents[q],) + x.shape[c + 1:] for x, c in zip(held, cuts)]
            passing = exchange.pass_on(held, shapes)
        yield held
        if passing is not None:
            held = passing.wait()


def run_ring(box, xs: list, env, exchange) -> list:
    """Device ``exchange.me``'s outputs of the ring ``box`` on its inputs ``xs`` (``env``: its sizes), the slices
    passed round the ranks (:func:`passed`); a DeviceError where the ranks are not the ring's devices."""
    P = env.size(box.devices, f"the devices of {box.name}")
    if exchange.size != P:
        raise DeviceError(f"{box.name}: the ring passes shards through every one of its {P} devices, but "
                          f"{exchange.size} ranks hold a shard; shard an axis of at least as many values as devices")
    node = schedule_of(box)
    where = [node.dom.index(v) for v in node.streamed]
    full = env.size(box.full_size(), f"the axis {box.axis!r} of {box.name}")
    arriving = passed([xs[k] for k in where], [node.position(v) for v in node.streamed], full, exchange, box.order)
    return Numpy(interpret).ring_fold(box, exchange.me, P, xs, env, arriving)


def run_device(node, mine: dict, xs: list, env, exchange) -> list:
    """Device ``exchange.me``'s outputs of the device region of schedule ``node``: its inside on its shards ``mine``
    (``{axis: (start, stop)}``) and its inputs ``xs`` (its shards; replicated inputs whole), ``env`` the sizes."""
    box = node.region
    nested = collectives_within(node.inside)
    if nested:
        raise DeviceError(f"{box.name}: the collective {nested[0].name!r} sits in a region nested in the device "
                          f"region; a device runs the device region's own collectives only: place it there")
    value = lambda x: env.size(x, f"a size of {box.name}")      # noqa: E731
    on = OnDevice(node, env, mine, cut_spans(node, value, exchange.me, exchange.size),
                  wire_marks(box, shard_keys(node)))

    def on_box(step):
        b, e = step.box, on.env(step.index)
        if getattr(b, "region", None) == "ring":
            return run_ring(b, step.ins, e, exchange)
        if not isinstance(b, Bubble) and kind_of(b.data.kind).collective is not None:
            return run_collective(b, step.ins, exchange, env)
        if on.idles(step.index):
            return on.idle(step.index, e)
        if isinstance(b, Bubble):
            return run_region(b, step.ins, e, interpret)
        return run_primitive(b, step.ins, e)
    return [np.asarray(y) for y in traverse(on.inside, xs, on_box)]


__all__ = ["run_collective", "run_device", "run_ring", "passed"]
