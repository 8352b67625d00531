"""A box before a device region moved into it on shards (issue 37, item 3: the first step of sequence parallelism).

=========================  ========================================================================================
rule                       lhs → rhs
=========================  ========================================================================================
``device_local_fusion``    G ; Shard(x read sharded along b ; F) → Shard(G[b ↦ b/P] ; F)
                                                                   G (outside, woven over b) run on each device's
                                                                   shard of b; its inputs that carry b arrive so
=========================  ========================================================================================

The law.  ``shard_b ∘ G = G[b ↦ b/P] ∘ shard_b`` for G woven over b (the group partition's law ``weave_b(G) ≡ split_b ;
(G ⊗ … ⊗ G) ; join_b``): a box before the region whose every output the region reads sharded along ``b`` runs on the
shards inside it, ``1/P`` of its work per device, and its whole inputs are never held.  Its instances are the
left-hand sides the derivation of sequence parallelism starts from (:func:`sharded_mlp`): an MLP made
tensor-parallel on its hidden axis whose input arrives sharded along the tokens (``device_gather``), a norm or a
map before it.

>>> import napkin_cat as nc
>>> from rewrites.devices import device_gather, tensor_parallel
>>> bld = nc.Builder(nc.types("n d, d h, h d"))
>>> x, w1, w2 = bld.inputs
>>> y = bld(nc.elementwise("relu", "n h"), bld(nc.einsum("n d, d h -> n h"), bld(nc.elementwise("exp", "n d"), x), w1))
>>> f = bld.build(bld(nc.einsum("n h, h d -> n d"), y, w2))
>>> d = device_gather.using(axis="n").apply(tensor_parallel(f, "h", devices=2).diagram)
>>> [b.name for b in d.boxes if not b.name.startswith("Swap")]
['exp', 'Shard(axis=h, size=h/2, devices=2)']
>>> (k,) = [b for b in device_local_fusion.apply(d).boxes if isinstance(b, nc.Shard)]
>>> k.sharded("dom"), [b.name for b in k.arg.boxes if not b.name.startswith("Swap")]
(('h', 'h', 'n'), ['exp', 'all-gather', '·', 'relu', '·', 'all-reduce'])
"""
from __future__ import annotations

import numpy as np
import sympy

import napkin_cat as nc
from napkin_cat.algorithms.devices import device_region
from napkin_cat.algorithms.partitions import relabel_axis
from napkin_cat.errors import RewriteError
from napkin_cat.rewriting import Condition, Obligation, Rule
from napkin_cat.rewriting.match import Pattern
from napkin_cat.syntax.adapter import Ty
from napkin_cat.syntax.collectives import shard_size
from napkin_cat.syntax.sizes import symbols_of
from rewrites.device_matching import DEVICES, LEVEL0, as_diagram, built_by, legal_when, same_type
from rewrites.devices import device_gather, random_inputs, tensor_parallel
from rewrites.region_inside import woven


# ---------------------------------------------------------------------- device_local_fusion
def _source(net, w) -> tuple:
    """The ``(node, port)`` that makes the value on wire ``w``, through copies (an input: ``(INPUT, i)``)."""
    src = net.wires[w].src
    while src[0] in net.nodes and net.nodes[src[0]].kind == "copy":
        src = net.wires[net.ins[src[0]][0]].src
    return src


def _reaches_only(net, nid: int, target: int, copies: list) -> bool:
    """Whether every output of node ``nid`` goes to ``target`` alone, through copies (collected in ``copies``)."""
    for w in net.outs[nid]:
        end = net.wires[w].dst[0]
        if end == target:
            continue
        if end not in net.nodes or net.nodes[end].kind != "copy":
            return False
        copies.append(end)
        if not _reaches_only(net, end, target, copies):
            return False
    return True


def _local_reason(net, g, k, b) -> str | None:
    """Why the box ``g`` (its node) cannot move into the region ``k`` on shards of ``b``, or None."""
    reads = {k.box.sharded("dom")[j] for j, w in enumerate(net.ins[k.id]) if _source(net, w)[0] == g.id}
    if reads != {b}:
        return f"{k.box.name} reads the outputs of {g.name} {sorted(map(str, reads))}, not all sharded along {b!r}"
    return woven(g.box, b, k.box.devices)


def _local_producer(net, nodes):
    """The node the region reads a value of first that can move inside (every output read by the region alone,
    sharded along an axis it is woven over) and the copies between them; None where none can."""
    k = net.nodes[nodes["k"]]
    for j, w in enumerate(net.ins[k.id]):
        src, b = _source(net, w), k.box.sharded("dom")[j]
        if src[0] not in net.nodes or b is None or not LEVEL0(net, net.nodes[src[0]]):
            continue
        copies = []
        if _reaches_only(net, src[0], k.id, copies) and _local_reason(net, net.nodes[src[0]], k, b) is None:
            return {"g": src[0], **{f"copy{i}": c for i, c in enumerate(dict.fromkeys(copies))}}
    return None


def _local(m):
    net, g, k = m.net, m.box("g"), m.box("k")
    sources = [_source(net, w) for w in net.ins[m.nodes["k"]]]
    (b,) = {k.sharded("dom")[j] for j, s in enumerate(sources) if s[0] == m.nodes["g"]}
    why = _local_reason(net, m.node("g"), m.node("k"), b)
    if m.params.get("axis") not in (None, b):
        why = f"it is read sharded along {b!r}, not {m.params['axis']!r}"
    if why is not None:
        raise RewriteError(f"{g.name} does not run alike on each shard of {b!r}: {why}")
    P = k.devices
    full = next(a.axis(b).size for a in (*g.dom.inside, *g.cod.inside) if b in a.names)
    part = shard_size(full, P)

    def cut(a):
        return a.replace(axes=tuple(x.relabel(part) if x.name == b else x for x in a.axes))
    inner = [(cut(g.dom.inside[p]) if b in g.dom.inside[p].names else g.dom.inside[p]) if v == "g"
             else k.arg.dom.inside[p] for v, p in m.inputs]
    bld = nc.Builder(Ty(*inner))
    wires = dict(zip(m.inputs, bld.inputs))
    made = bld(relabel_axis(as_diagram(g), b, part, full=full), *[wires["g", p] for p in range(len(g.dom))])
    made = made if isinstance(made, tuple) else (made,)
    args = [made[s[1]] if s[0] == m.nodes["g"] else wires["k", j] for j, s in enumerate(sources)]
    out = bld(k.arg, *args)
    body = bld.build(*(out if isinstance(out, tuple) else (out,)))
    record = tuple((b if b in g.dom.inside[p].names else None) if v == "g" else k.sharded("dom")[p]
                   for v, p in m.inputs)
    co = {x: f for x, (_, f) in k.sharded_axes().items() if x != k.axis}
    if b != k.axis:
        co[b] = full
    fused = same_type(device_region(body, k.axis, P, k.full_size(), also=co, sharded_in=record,
                                    sharded_out=k.sharded("cod")), m.dom, m.cod, f"{g.name} ; {k.name}")
    return m.filled(fused)


def mlp_program(rng, kind: int):
    """A two-layer MLP at concrete sizes (the hidden axis h, tokens n, features d), by ``kind``: plain; with the
    residual; pre-normed (LayerNorm, its γ and β inputs after x) with the residual; with a map after it; with a map
    before it."""
    n, d, h = (int(rng.integers(4, 10)) for _ in range(3))
    sized = {"n": n, "d": d, "h": h}
    bld = nc.Builder(nc.types("n d, d, d, d h, h d" if kind == 2 else "n d, d h, h d", **sized))
    x, *rest = bld.inputs
    w1, w2 = rest[-2:]
    y = x
    if kind == 2:
        y = bld(nc.library.layer_norm(n=n, d=d), x, *rest[:2])
    if kind == 4:
        y = bld(nc.elementwise("exp", "n d", n=n, d=d), y)
    y = bld(nc.elementwise("relu", "n h", n=n, h=h), bld(nc.einsum("n d, d h -> n h", **sized), y, w1))
    y = bld(nc.einsum("n h, h d -> n d", **sized), y, w2)
    if kind in (1, 2):
        y = bld(nc.elementwise("add", "n d, n d -> n d", n=n, d=d), x, y)
    if kind == 3:
        y = bld(nc.elementwise("exp", "n d", n=n, d=d), y)
    return bld.build(y)


def sharded_mlp(rng, kinds):
    """A program of one of ``kinds`` (:func:`mlp_program`) made tensor-parallel on h over 2 to 4 devices, its input
    arriving sharded along n: the left-hand side the derivation of sequence parallelism starts from."""
    P = int(rng.integers(2, 5))
    d = tensor_parallel(mlp_program(rng, kinds[int(rng.integers(len(kinds)))]), "h", P).diagram
    return device_gather.using(axis="n").apply(d)


def bound(*diagrams) -> dict:
    """Sizes for every symbol of ``diagrams``, each 2 … 5 (the instances are concrete; a variant of one may be woven
    over an axis of symbolic size): the sizes a cost claim counts at."""
    names = sorted({str(x) for d in diagrams for x in symbols_of(d, params=True)})
    rng = np.random.default_rng(len(names))
    return {n: int(rng.integers(2, 6)) for n in names}


def counted(d, sizes: dict):
    """``nc.cost(d)`` at ``sizes`` (those of its own symbols)."""
    return nc.cost(d, sizes=nc.Sizes(sizes).restrict(d))


def as_int(size, sizes: dict) -> int:
    """A size (an int, or an expression of symbols) at ``sizes``."""
    return int(sympy.sympify(size).subs({nc.symbol(k): v for k, v in sizes.items()}))


def work_on_shard(lhs, rhs, box, b, P, sizes: dict):
    """The cost claim of a box moved onto shards of ``b``: its work, counted whole on one device in ``lhs``, is that
    on the first (largest) shard of b in ``rhs``, every other unit's FLOPs unchanged (at ``sizes``)."""
    full = next(a.axis(b).size for a in box.dom.inside if b in a.names)
    whole = counted(as_diagram(box), sizes).flops
    mine = counted(relabel_axis(as_diagram(box), b, -(-as_int(full, sizes) // P), full=full), sizes).flops
    before, after = counted(lhs, sizes).flops, counted(rhs, sizes).flops
    for u in {*before, *after, *whole}:
        assert after.get(u, 0) == before.get(u, 0) - whole.get(u, 0) + mine.get(u, 0), \
            f"{u} FLOPs {before.get(u, 0)} → {after.get(u, 0)}; the box's {whole.get(u, 0)} → {mine.get(u, 0)}"


def _local_cost(lhs, rhs, m):
    """The link unchanged; the box's work, whole outside, is its first shard's inside."""
    k, g = m.box("k"), m.box("g")
    sources = [_source(m.net, w) for w in m.net.ins[m.nodes["k"]]]
    (b,) = {k.sharded("dom")[j] for j, s in enumerate(sources) if s[0] == m.nodes["g"]}
    sizes = bound(lhs, rhs)
    before, after = counted(lhs, sizes).link, counted(rhs, sizes).link
    assert (after.sent, after.received, after.messages) == (before.sent, before.received, before.messages)
    work_on_shard(lhs, rhs, g, b, int(k.devices), sizes)


device_local_fusion = Rule(
    "device_local_fusion",
    Pattern({"k": DEVICES}, absorb=_local_producer),
    built_by(_local),
    conditions=(Condition("read sharded", legal_when(_local),
                          "the region reads every output of G sharded along one axis G is woven over"),),
    obligation=Obligation(lambda rng: sharded_mlp(rng, (2, 4)), inputs=random_inputs, cost=_local_cost),
    doc="""G ; Shard(F) → Shard(G[b ↦ b/P] ; F) where F reads G's outputs sharded along b: G runs on the shards.

    ``shard_b ∘ G = G[b ↦ b/P] ∘ shard_b`` for G woven over b (its inputs carrying b arrive sharded).  Cost claim:
    the link unchanged; G's work, counted once outside, is each device's on its shard.""",
    oriented=False,
)


__all__ = ["device_local_fusion", "mlp_program", "sharded_mlp", "work_on_shard", "bound", "counted", "as_int"]
