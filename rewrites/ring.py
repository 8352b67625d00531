"""The ring as a rule (issue 37): an input all-gathered (or replicated) in a device region travels round the devices
instead, the inside streamed along its axis with the devices' shards as slices.

=====================  ============================================================================================
rule                   lhs → rhs
=====================  ============================================================================================
``device_ring``        Shard_{a,P; b}(all-gather_b(x) ; F)  →  Shard_{a,P; b}(Ring_{b,P}(F[b ↦ b/P]))
                       (or Shard_{a,P}(F) with x replicated)    F streamable along b; device p folds shard
                                                                (p − t) mod P at trip t, received from p − 1
``device_ring``        the same, both axes cut in the order     device p holds chunks p and 2P − 1 − p of 2P, of
(``order="zigzag"``)   ``zigzag`` (:mod:`napkin_cat.algorithms  a and of b; F woven over a: the function is the
                       .orders`)                                same, a causal mask's folds balanced
=====================  ============================================================================================

Ring attention from context parallelism's all-gather mode: the same per-device link traffic as the all-gather
(``(P − 1)·|x|/P`` each way), overlapped with the trips, and per device one incoming slice held instead of the whole
of ``x`` (:mod:`napkin_cat.algorithms.ring`).  Oriented by its user (``device_ring.using(axis="x")``); its
parameter ``order`` (``device_ring.using(axis="x", order="zigzag")``) orders the shards, offered where every box
that sees the region's axis is woven over it and each axis has at least as many values as the order has chunks
(else the rule is not legal there, its reason said).

>>> import napkin_cat as nc
>>> d = device_ring.using(axis="x").apply(nc.shard(nc.library.attention(), "q", devices=4))
>>> [b.region for b in d.boxes[0].arg.boxes]
['ring']
"""
from __future__ import annotations

import numpy as np
import sympy

import napkin_cat as nc
from napkin_cat.algorithms.orders import order_of
from napkin_cat.algorithms.ring import ring
from napkin_cat.algorithms.schedule import schedule_of
from napkin_cat.cost.numeric import at
from napkin_cat.errors import DeviceError, RewriteError
from napkin_cat.rewriting import Condition, Obligation, Rule
from napkin_cat.rewriting.match import Pattern
from napkin_cat.syntax.sizes import symbols_of
from rewrites.device_matching import DEVICES, as_diagram, built_by, legal_when, same_type
from rewrites.devices import device_gather, random_inputs


def ringed_axis(m):
    """The axis the ring streams: the rule's ``axis``, else the first axis other than the region's that an input
    arriving sharded (co-sharded), then a replicated input, carries."""
    k = m.box("k")
    if m.params.get("axis"):
        return m.params["axis"]
    cuts = k.sharded("dom")
    for cut in cuts:
        if cut is not None and cut != k.axis:
            return cut
    return next((n for a, cut in zip(k.dom.inside, cuts) if cut is None for n in a.names if n != k.axis), None)


def _ringed(m):
    k = m.box("k")
    axis = ringed_axis(m)
    if axis is None:
        raise RewriteError(f"{k.name}: no input carries an axis other than {k.axis!r} to pass round the devices")
    try:
        made = ring(as_diagram(k), axis, order=m.params.get("order"))
    except DeviceError as e:
        raise RewriteError(str(e)) from None
    return same_type(made, k.dom, k.cod, k.name)


# ---------------------------------------------------------------------- obligation
def _ring_instance(rng):
    """A device region whose keys can travel: attention sharded on the queries (K, V replicated, or arriving
    sharded and all-gathered, before attention or before FlashAttention's grid of streamed kernels), causal
    attention (a mask from positions: each piece's own), a chain of products ``A Bᵀ C`` sharded on its rows (B and C
    carry the contracted axis)."""
    s = {k: int(rng.integers(4, 9)) for k in ("q", "x", "d", "n", "k", "h")}
    P = int(rng.integers(2, 5))
    q, x = max(s["q"], 4 * P), max(s["x"], 4 * P)        # every piece (of 2P) at least the inner tiles (2)
    att = nc.shard(nc.library.attention(q=q, x=x, d=s["d"]), "q", P)
    flash = nc.shard(nc.group(nc.stream(nc.kernel(nc.library.attention(q=q, x=x, d=s["d"])), "x", 2), "q", 2), "q",
                     P)
    causal = nc.shard(nc.library.causal_attention(q=q, x=x + int(rng.integers(0, 3)), d=s["d"]), "q", P)
    algos = [lambda: att, lambda: causal,
             lambda: device_gather.using(axis="x").apply(att),
             lambda: device_gather.using(axis="x").apply(flash),
             lambda: nc.shard(nc.einsum("n d, x d, x h -> n h", n=max(s["n"], P), x=s["k"], d=s["d"], h=s["h"]),
                              "n", P)]
    return algos[int(rng.integers(len(algos)))]()


def simulate_ring(extents: list, rows: list) -> tuple:
    """A ring of ``P = len(extents)`` devices run step by step: each holds a buffer (its own shard first) and, for
    ``P − 1`` steps, sends it to its right neighbour and takes its left neighbour's; ``rows``: the values per
    position of each streamed array.  ``(sent, received, messages, order)`` per device, ``order[p]`` the shards
    device ``p`` held, trip by trip.

    >>> simulate_ring([2, 1, 1], [3])[:2]
    ((9, 9, 6), (6, 9, 9))
    """
    P = len(extents)
    buf, order = list(range(P)), [[p] for p in range(P)]
    sent, received, messages = [0] * P, [0] * P, [0] * P
    for _ in range(P - 1):
        moved = [buf[(p - 1) % P] for p in range(P)]             # device p receives what p − 1 held
        for p in range(P):
            n = extents[buf[p]] * sum(rows)
            sent[p] += n
            received[(p + 1) % P] += n
            messages[p] += len(rows)
        buf = moved
        for p in range(P):
            order[p].append(buf[p])
    return tuple(sent), tuple(received), tuple(messages), order


def allowed_folds(q_pieces: list, x_pieces: list, causal: bool) -> tuple:
    """Per device ``p`` and ring step ``t``, how many (query piece, key piece) pairs hold a pair of positions the
    mask allows: every pair without a mask, under a causal one those whose first key is at most their last query;
    ``q_pieces[p]``/``x_pieces[p]``: device ``p``'s pieces ``((start, stop), …)``, device ``p`` at step ``t``
    holding ``x_pieces[(p − t) mod P]``.

    >>> allowed_folds([((0, 2),), ((2, 4),)], [((0, 2),), ((2, 4),)], True)
    ((1, 0), (1, 1))
    """
    P = len(q_pieces)
    return tuple(tuple(sum(1 for a, b in q_pieces[p] for c, d in x_pieces[(p - t) % P]
                           if b > a and d > c and (not causal or c <= b - 1)) for t in range(P)) for p in range(P))


def _ring_cost(lhs, rhs, m):
    """Per device at the instance's sizes: the link counts those of a ring simulated step by step
    (:func:`simulate_ring`, shards cut in the rule's order), the folds each runs per step those whose pieces the
    mask allows (:func:`allowed_folds`, from the positions alone), and the same contractions' FLOPs as the region
    before where no mask skips a fold (every device folds every shard), no more where one does."""
    k = m.box("k")
    axis = ringed_axis(m)
    rng = np.random.default_rng(len(str(lhs)))
    P = int(k.devices)
    sizes = {str(x): int(rng.integers(P, 3 * P + 2)) for x in symbols_of(lhs, params=True)}
    before, after = at(lhs, sizes), at(rhs, sizes)
    (region,) = [b for b in rhs.boxes if isinstance(b, nc.Shard)]
    (r,) = [b for b in region.arg.boxes if getattr(b, "region", None) == "ring"]
    env = {nc.symbol(n): v for n, v in sizes.items()}

    def value(e):
        return int(sympy.sympify(e).subs(env))
    chunks = order_of(m.params.get("order")).chunks(P)

    def pieces(n):             # the order's chunks, cut by numpy: chunk c to device c and, past P, 2P − 1 − c
        cut = np.array_split(np.arange(n), chunks)
        owner = [c if c < P else chunks - 1 - c for c in range(chunks)]
        return [tuple((int(cut[c][0]), int(cut[c][-1]) + 1) if len(cut[c]) else (0, 0)
                      for c in range(chunks) if owner[c] == p) for p in range(P)]
    xs = pieces(value(r.full_size()))
    extents = [sum(b - a for a, b in ps) for ps in xs]
    rows = [int(np.prod([value(x.size) for x in a.axes if x.name != axis])) for a in r.dom.inside if axis in a.names]
    sent, received, messages, _ = simulate_ring(extents, rows)
    assert after.link.sent == sent and after.link.received == received, \
        f"sent {after.link.sent} vs {sent}, received {after.link.received} vs {received}"
    gathered = before.link.messages if before.link is not None else (0,) * k.devices
    assert after.link.messages == messages, f"messages {after.link.messages} vs {messages} ({gathered} before)"
    masked = schedule_of(r).masks is not None
    qs = pieces(value(region.full_size()))
    folds = allowed_folds(qs, xs, masked)
    assert after.link.trips == folds, f"folds per device and step {after.link.trips} vs {folds}"
    if masked:
        assert after.flops.get("tensor") <= before.flops.get("tensor"), f"{after.flops} vs {before.flops}"
    else:
        assert after.flops.get("tensor") == before.flops.get("tensor"), f"{after.flops} vs {before.flops}"


device_ring = Rule(
    "device_ring",
    Pattern({"k": DEVICES}),
    built_by(_ringed),
    conditions=(Condition("streamable", legal_when(_ringed),
                          "an input carries another axis than the region's, along which the inside streams"),),
    obligation=Obligation(_ring_instance, inputs=random_inputs, cost=_ring_cost),
    doc="""Shard_{a,P; b}(all-gather_b(x) ; F) → Shard_{a,P; b}(Ring_{b,P}(F[b ↦ b/P])).

    The stream theorem one level up: x's shards travel round the devices, trip t on device p folding shard
    (p − t) mod P, F's reducers (online softmax's μ, z, o) carried across the trips.  With order="zigzag" both axes
    are cut in 2P chunks, device p holding chunks p and 2P − 1 − p.  Cost claim, per device at ragged shards: the
    link counts of a ring simulated step by step, the folds per step those whose pieces the mask allows, the
    contractions' FLOPs unchanged where no mask skips a fold.""",
    oriented=False,
)

__all__ = ["device_ring", "ringed_axis", "simulate_ring", "allowed_folds"]
