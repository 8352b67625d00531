"""A device region's inside as values, for the rules that rewrite it on each device's shard (sequence parallelism:
:mod:`rewrites.collectives`, :mod:`rewrites.local_fusion`).

The inside of ``Shard_{a,P}(F)`` is a diagram; its copies are one value read several times, so these rules read it
as values (:class:`Values`: the ops, which op makes each value) and rebuild it with some ops replaced.  A box runs
alike on each shard of ``b`` when it is woven over ``b`` (the group partition's law ``weave_b(G) ≡ split_b ;
(G ⊗ … ⊗ G) ; join_b``) and computes no positions (:func:`woven`); the all-gather that joins the shards is
:func:`gather`.

>>> import napkin_cat as nc
>>> from rewrites.devices import tensor_parallel
>>> up = nc.einsum("n d, d h -> n h") >> nc.elementwise("relu", "n h")
>>> mlp = up @ nc.Id("h d") >> nc.einsum("n h, h d -> n d")
>>> k = tensor_parallel(mlp, "h", devices=2).diagram.boxes[0]
>>> [box.name for box, _, _ in Values(k.arg).ops if not box.name.startswith("Swap")]
['·', 'relu', '·', 'all-reduce']
>>> [is_kind(box, "all_reduce") for box, _, _ in Values(k.arg).ops][-1], woven(up, "n", 2)
(True, None)
>>> print(woven(mlp, "h", 2))
cannot shard along 'h' over 2 devices: '·' has 'h' in its item-level core (it is not woven over 'h'), ...
"""
from __future__ import annotations

import napkin_cat as nc
from napkin_cat.algorithms.devices import device_region
from napkin_cat.errors import NapkinError, RewriteError
from napkin_cat.syntax.adapter import Bubble, Ty
from napkin_cat.syntax.flat import is_structural, layers
from napkin_cat.syntax.primitive import kind_of
from napkin_cat.syntax.wiring import computes, trace_values
from rewrites.device_matching import as_diagram, same_type, sharded
def is_kind(box, kind: str) -> bool:
    """Whether ``box`` is a primitive of ``kind`` (``"all_gather"``, ``"all_reduce"``, …)."""
    return not isinstance(box, nc.Region) and is_structural(box) is None and box.data.kind == kind


def moves_values(box) -> bool:
    """Whether ``box`` is a collective: it moves values between devices."""
    return not isinstance(box, nc.Region) and is_structural(box) is None and \
        kind_of(box.data.kind).collective is not None


def signature(arrays) -> str:
    """The signature of one box over ``arrays`` (``"n d, d h"``)."""
    return ", ".join(" ".join(a.names) or "()" for a in arrays)


def one_format(arrays, what: str):
    """The one (level, number format) of ``arrays``; RewriteError naming them where they have several."""
    formats = {(a.level, a.dtype) for a in arrays}
    if len(formats) != 1:
        raise RewriteError(f"{what}: its arrays {[str(a) for a in arrays]} are at several levels or number formats; "
                           f"one collective box moves arrays of one")
    return formats.pop()


def gather(arrays, axis: str, devices, full):
    """One all-gather along ``axis`` of ``arrays`` (whole: ``axis`` at ``full``) over ``devices``."""
    level, dtype = one_format(arrays, "all-gather")
    sizes = {x.name: x.size for a in arrays for x in a.axes}
    return nc.all_gather(signature(arrays), axis=axis, devices=devices, level=level, dtype=dtype,
                         sizes={**sizes, axis: full})


def positions_inside(box) -> str | None:
    """The name of a box in ``box`` (itself or inside it) that computes positions, or None: on a shard such a box would
    count from 0, not from the shard's start."""
    inner = box.arg if isinstance(box, Bubble) else as_diagram(box)
    return next((b.name for _, b in layers(inner) if not isinstance(b, Bubble) and computes(b)
                 and b.data.kind == "position"), None) or next(
        (positions_inside(b) for _, b in layers(inner) if isinstance(b, Bubble) and positions_inside(b)), None)


def woven(box, axis: str, devices) -> str | None:
    """None where ``box`` runs alike on each shard of ``axis`` (every box inside woven over it, no positions), else
    why not."""
    where = positions_inside(box)
    if where is not None:
        return f"{where!r} computes positions, which a shard would count from its own start"
    try:
        sharded(box, axis, devices)
    except NapkinError as e:
        return str(e).splitlines()[0]
    return None


# ---------------------------------------------------------------------- the inside as values
class Values:
    """A region's inside as values (:func:`~napkin_cat.syntax.wiring.trace_values`: copies are one value read
    several times): ``ops[i] = (box, input ids, output ids)``, ``producer[v] = (op, port)``, and a rebuild that
    replaces some ops and outputs and drops what no output reads."""

    def __init__(self, inside):
        self.inside = inside
        self.ops, self.dom, self.cod = trace_values(inside)
        self.producer = {v: (i, p) for i, (_, _, outs) in enumerate(self.ops) for p, v in enumerate(outs)}

    def made_by(self, v):
        """The op that makes value ``v`` and its port, or None (an input)."""
        return self.producer.get(v)

    def rebuild(self, dom_types, replace: dict | None = None, outputs: dict | None = None):
        """The inside on inputs ``dom_types``; ``replace[i](bld, get)`` gives op ``i``'s outputs, ``outputs[j](get)``
        output ``j``'s wire (``get(v)``: value ``v``'s wire in the new diagram)."""
        replace, outputs = replace or {}, outputs or {}
        bld = nc.Builder(Ty(*dom_types))
        wires = dict(zip(self.dom, bld.inputs))
        done = {}

        def run(i):
            if i not in done:
                box, ins, _ = self.ops[i]
                made = replace[i](bld, get) if i in replace else bld(as_diagram(box), *[get(v) for v in ins])
                done[i] = list(made) if isinstance(made, (tuple, list)) else [made]
            return done[i]

        def get(v):
            if v in wires:
                return wires[v]
            i, port = self.producer[v]
            return run(i)[port]
        return bld.build(*[outputs[j](get) if j in outputs else get(v) for j, v in enumerate(self.cod)])


def rewrapped(k, inside, *, sharded_out=None, also: dict | None = None):
    """``inside`` in a device region like ``k`` (its axis, devices, record; ``sharded_out`` and ``also`` changed)."""
    co = {x: f for x, (_, f) in k.sharded_axes().items() if x != k.axis}
    co.update({x: f for x, f in (also or {}).items() if x != k.axis})
    return same_type(device_region(inside, k.axis, k.devices, k.full_size(), also=co, sharded_in=k.sharded("dom"),
                                   sharded_out=sharded_out or k.sharded("cod")), k.dom, k.cod, k.name)


__all__ = ["Values", "gather", "woven", "positions_inside", "is_kind", "moves_values", "signature", "one_format",
           "rewrapped"]
