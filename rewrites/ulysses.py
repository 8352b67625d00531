"""DeepSpeed-Ulysses as a rule (issue 37, item 3 (c)): a part woven over the heads that reads the sequence whole runs
on a shard of the heads, between two all-to-alls, inside a device region that shards the sequence.

=====================  ============================================================================================
rule                   lhs → rhs
=====================  ============================================================================================
``device_ulysses``     G (woven over h)  →  Shard_{s,P; s'}(a2a_{s→h}(x) ; G[h ↦ h/P] ; a2a_{h→s}(y))
                                                                        every input x and output y carries h; x
                                                                        arrives sharded along its sequence axis
                                                                        (s, or s' for the keys), y leaves sharded
                                                                        along s
=====================  ============================================================================================

The law: an all-to-all (``nc.all_to_all``, gather ``s``, scatter ``h``) turns device ``p``'s shard ``p`` of the
sequence into shard ``p`` of the heads, whole along the sequence; ``G`` is woven over ``h``, so ``G`` on each head
shard is ``G``'s output restricted to it (the group partition's law over ``h``); the all-to-all back (gather ``h``,
scatter ``s``) returns shard ``p`` of the sequence of every head.  An array's all-to-all keeps the block
``(s_p, h_p)`` and sends the others, ``|x_p| − |x_{p,p}|``: symbolically ``(P − 1)·|x|/P²`` each way per device, so
multi-head attention with ``|Q| = |K| = |V| = |O| = h·n·d`` moves ``4·(P − 1)·h·n·d/P²`` per device where the
all-gather of K and V (:data:`~rewrites.devices.device_gather`) moves ``2·(P − 1)·h·n·d/P``: ``2/P`` of it.

Its neighbours sharded along ``s`` fuse with it by :data:`~rewrites.devices.device_fusion` (its boundary is sharded
along ``s``, as theirs).  Oriented by its user: ``device_ulysses.using(heads="h", devices=P)``; without ``heads``,
the axis every input and output carries and ``G`` is woven over; each array's sequence axis is its first other axis
(``along``: a tuple of sequence axes to pick from instead).

>>> import napkin_cat as nc
>>> d = device_ulysses.using(heads="h", devices=4).apply(nc.kernel(nc.library.multi_head_attention()))
>>> r = d.boxes[0]
>>> r.axis, r.sharded("dom"), r.sharded("cod")
('q', ('q', 'x', 'x'), ('q',))
>>> [b.name for b in r.arg.boxes][:3], r.arg.boxes[-1].name
(['all-to-all', 'all-to-all', 'all-to-all'], 'all-to-all')
"""
from __future__ import annotations

import numpy as np
import sympy

import napkin_cat as nc
from napkin_cat.algorithms.devices import device_region
from napkin_cat.algorithms.partitions import relabel_axis
from napkin_cat.errors import NapkinError, RewriteError
from napkin_cat.rewriting import Condition, Obligation, Rule
from napkin_cat.rewriting.match import Pattern
from napkin_cat.syntax.collectives import as_devices, shard_size
from napkin_cat.syntax.sizes import symbols_of
from rewrites.device_matching import DEVICES_BY_DEFAULT, LEVEL0, as_diagram, built_by, legal_when, same_type, sharded
from rewrites.devices import random_inputs


def heads_axis(box, given=None) -> str:
    """The axis the part runs sharded along: ``given``, else the first axis that every input and output carries and
    that the box can be sharded along (every box that sees it woven over it); RewriteError if none."""
    arrays = [*box.dom.inside, *box.cod.inside]
    if given is not None:
        return given
    for name in arrays[0].names if arrays else ():
        if all(name in a.names for a in arrays):
            try:
                sharded(box, name, 2)
                return name
            except NapkinError:
                continue
    raise RewriteError(f"{box.name}: no axis that every input and output carries is woven over by every box; the "
                       f"arrays are {[' '.join(a.names) for a in arrays]}")


def _holds(size, P) -> bool:
    """Whether an axis of ``size`` values gives each of ``P`` devices a non-empty shard (symbolic sizes: assumed)."""
    return not (isinstance(size, (int, sympy.Integer)) and isinstance(P, int) and int(size) < P)


def sequence_axes(box, heads: str, along=None, devices=DEVICES_BY_DEFAULT) -> tuple:
    """Each input's then each output's sequence axis: the first of ``along`` it carries, else its first axis other
    than ``heads`` with at least one value per device; RewriteError naming an array that does not carry ``heads`` or
    has no such axis.

    >>> sequence_axes(nc.softmax("b s", over="s", b=4, s=7).boxes[0], "b", devices=2)
    ('s', 's')
    """
    out = []
    for a in (*box.dom.inside, *box.cod.inside):
        if heads not in a.names:
            raise RewriteError(f"{box.name}: the array {' '.join(a.names) or '()'} does not carry the heads axis "
                               f"{heads!r}; Ulysses exchanges arrays that carry it (every input and output)")
        names = [n for n in a.names if n != heads and (along is None or n in along) and _holds(a.axis(n).size, devices)]
        if not names:
            raise RewriteError(f"{box.name}: the array {' '.join(a.names)} carries no sequence axis "
                               f"{'other than ' + repr(heads) if along is None else 'among ' + repr(tuple(along))} "
                               f"with a value for each of {devices} devices")
        out.append(names[0])
    return tuple(out)


def reads_whole(box, axis: str) -> bool:
    """Whether some box of the part reads ``axis`` whole (is not woven over it, so the part cannot run on shards of it
    without exchanges): Ulysses' reason to re-shard.

    >>> reads_whole(nc.softmax("b s", over="s").boxes[0], "s"), reads_whole(nc.softmax("b s", over="s").boxes[0], "b")
    (True, False)
    """
    try:
        sharded(box, axis, 2)
    except NapkinError:
        return True
    return False


def _sizes(a) -> dict:
    return {x.name: x.size for x in a.axes}


def _exchange(a, gather, scatter, P):
    return nc.all_to_all(" ".join(a.names), gather=gather, scatter=scatter, devices=P, level=a.level, dtype=a.dtype,
                         sizes=_sizes(a))


def ulysses(diagram_box, heads: str | None = None, devices=DEVICES_BY_DEFAULT, along=None):
    """``box`` (woven over ``heads``) run on ``devices`` devices as Ulysses: each input arrives sharded along its
    sequence axis, an all-to-all makes it sharded along the heads, the box runs on each device's head shard, and an
    all-to-all returns each output sharded along its sequence axis (the region's axis: the first output's)."""
    box = diagram_box
    h = heads_axis(box, heads)
    P = as_devices(devices)
    try:
        sharded(box, h, P)
    except NapkinError as e:
        raise RewriteError(f"Ulysses runs {box.name} on a shard of {h!r}: {e}") from None
    if not box.dom.inside:
        raise RewriteError(f"{box.name} reads no input: nothing arrives sharded for Ulysses to exchange")
    if not _holds(next((a.axis(h).size for a in (*box.dom.inside, *box.cod.inside) if h in a.names), 0), P):
        raise RewriteError(f"{box.name}: the heads axis {h!r} has fewer values than the {P} devices")
    seq = sequence_axes(box, h, along, P)
    for a, s in zip((*box.dom.inside, *box.cod.inside), seq):
        other = [t for t in set(seq) - {s} if t in a.names]
        if other:
            raise RewriteError(f"{box.name}: the array {' '.join(a.names)} is sharded along {s!r} but carries "
                               f"{other[0]!r}, another array's sequence axis, whole; a device region holds an axis "
                               f"sharded in every array that carries it")
    if not any(reads_whole(box, t) for t in dict.fromkeys(seq)):
        raise RewriteError(f"{box.name}: every box is woven over its sequence axes {sorted(set(seq))}, so the "
                           f"devices' sequence shards are independent: device_partition shards it without exchanges")
    ins, outs = seq[:len(box.dom)], seq[len(box.dom):]
    full_h = box.dom.inside[0].axis(h).size
    part = relabel_axis(as_diagram(box), h, shard_size(full_h, P), full=full_h)

    def cut(a, axis):
        return a.replace(axes=tuple(x.relabel(shard_size(x.size, P)) if x.name == axis else x for x in a.axes))
    bld = nc.Builder(nc.Ty(*[cut(a, s) for a, s in zip(box.dom.inside, ins)]))
    wires = [bld(_exchange(a, s, h, P), w) for a, s, w in zip(box.dom.inside, ins, bld.inputs)]
    made = bld(part, *wires)
    made = made if isinstance(made, tuple) else (made,)
    back = [bld(_exchange(c, h, s, P), w) for c, s, w in zip(box.cod.inside, outs, made)]
    inside = bld.build(*back)
    wholes = {}
    for a, s in zip((*box.dom.inside, *box.cod.inside), seq):
        wholes.setdefault(s, a.axis(s).size)
    region = outs[0]
    also = {s: f for s, f in wholes.items() if s != region}
    return same_type(device_region(inside, region, P, wholes[region], also=also, sharded_in=ins, sharded_out=outs),
                     box.dom, box.cod, box.name)


def _built(m):
    return ulysses(m.box("k"), m.params.get("heads"), m.params.get("devices", DEVICES_BY_DEFAULT),
                   m.params.get("along"))


# ---------------------------------------------------------------------- obligation
def _ulysses_instance(rng):
    """A part woven over a heads axis that reads its sequence whole, at sizes that P (2 to 4) need not divide, every
    shard non-empty: multi-head attention (queries and keys of different lengths), a softmax over the sequence
    woven over a batch, multi-head attention with its log-sum-exp (two outputs)."""
    n = {k: int(rng.integers(4, 11)) for k in ("q", "x", "d", "h", "b", "s")}
    algos = [lambda: nc.kernel(nc.library.multi_head_attention(q=n["q"], x=n["x"], d=n["d"], h=n["h"])),
             lambda: nc.softmax("b s", over="s", b=n["b"], s=n["s"]),
             lambda: nc.kernel(nc.library.multi_head_attention(q=n["q"], x=n["x"], d=n["d"], h=n["h"], lse=True))]
    return algos[int(rng.integers(len(algos)))]()


def exchanged(blocks: list, scatter: int) -> tuple:
    """``P = len(blocks)`` devices exchanging by all-to-all: device ``p`` holds ``blocks[p]`` and sends its shard
    ``q`` along axis ``scatter`` (cut as ``np.array_split`` cuts) to device ``q``; ``(sent, received)`` per device.

    >>> exchanged([np.zeros((2, 4)), np.zeros((1, 4))], 1)
    ([4, 2], [2, 4])
    """
    P = len(blocks)
    sent, received = [0] * P, [0] * P
    for p, x in enumerate(blocks):
        for q, part in enumerate(np.array_split(x, P, axis=scatter)):
            if q != p:
                sent[p] += part.size
                received[q] += part.size
    return sent, received


def _ulysses_cost(lhs, rhs, m):
    """Per device, the values sent and received are those of ``P`` devices exchanging blocks (:func:`exchanged`):
    each input's sequence shards cut along the heads, then each output's head shards cut along its sequence; no other
    link traffic; and the FLOPs per device those of the part on the largest head shard."""
    box = m.box("k")
    h = heads_axis(box, m.params.get("heads"))
    P = int(m.params.get("devices", DEVICES_BY_DEFAULT))
    seq = sequence_axes(box, h, m.params.get("along"), P)
    sizes = {str(x): int(v) for x, v in zip(sorted(symbols_of(lhs, params=True), key=str),
                                            np.random.default_rng(P).integers(P, 3 * P + 2, size=64))}

    def value(size):
        return int(sympy.sympify(size).subs({nc.symbol(k): v for k, v in sizes.items()}))
    sent, received = [0] * P, [0] * P
    arrays = [(a, s, h) for a, s in zip(box.dom.inside, seq)] + [(c, h, s) for c, s in zip(box.cod.inside,
                                                                                            seq[len(box.dom):])]
    for a, held, scatter in arrays:
        whole = np.zeros(tuple(value(x.size) for x in a.axes))
        mine = np.array_split(whole, P, axis=a.names.index(held))
        s, r = exchanged(mine, a.names.index(scatter))
        sent, received = [x + y for x, y in zip(sent, s)], [x + y for x, y in zip(received, r)]
    link = nc.cost(rhs, sizes=sizes).link
    assert (link.sent, link.received) == (tuple(sent), tuple(received)), \
        f"link {link.sent}, {link.received}; {P} devices exchanging blocks: {sent}, {received}"
    full = box.dom.inside[0].axis(h).size
    one = nc.cost(relabel_axis(as_diagram(box), h, -(-value(full) // P), full=full),
                  sizes=sizes)
    before, after, whole = nc.cost(lhs, sizes=sizes).flops, nc.cost(rhs, sizes=sizes).flops, \
        nc.cost(as_diagram(box), sizes=sizes).flops
    for unit in {*before, *after}:       # the part's FLOPs on one device: those on the largest head shard
        assert after.get(unit, 0) == before.get(unit, 0) - whole.get(unit, 0) + one.flops.get(unit, 0), \
            f"{unit} FLOPs per device {after.get(unit, 0)}; the program's {before.get(unit, 0)} with the part's " \
            f"{whole.get(unit, 0)} on one head shard: {one.flops.get(unit, 0)}"


device_ulysses = Rule(
    "device_ulysses",
    Pattern({"k": LEVEL0}),
    built_by(_built),
    conditions=(Condition("woven over the heads", legal_when(_built),
                          "every input and output carries the heads axis, which every box is woven over"),),
    obligation=Obligation(_ulysses_instance, inputs=random_inputs, cost=_ulysses_cost),
    doc="""G (woven over h) → Shard_{s,P; s'}(all-to-all_{s→h} ; G[h ↦ h/P] ; all-to-all_{h→s}).

    DeepSpeed-Ulysses: the sequence-sharded inputs re-sharded along the heads, the part run on each head shard, its
    outputs re-sharded along the sequence.  Cost claim: per device the link traffic of P devices exchanging blocks,
    ``(P − 1)·|x|/P²`` each way per array (symbolically), nothing else.""",
    oriented=False,
)

__all__ = ["device_ulysses", "ulysses", "heads_axis", "sequence_axes", "exchanged"]
