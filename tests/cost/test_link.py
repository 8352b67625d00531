"""The cost at the device level (issue 37, item 3): per device, the values each collective sends and receives over
the link and its messages (``Cost.link``), its level-0 memory (``link.held``), its FLOPs and transfers.

Second routes: an explicit simulation of ``P`` devices exchanging their shards point to point (numpy arrays cut as
``np.array_split`` cuts them), counting what each sends and receives; the formulas from the maths where ``P``
divides the axis; and the cost of the program a device runs, written without a device region."""
from __future__ import annotations

import numpy as np
import pytest
import sympy

import napkin_cat as nc
from napkin_cat.algorithms.devices import device_region


class Devices:
    """``P`` devices that send arrays point to point, counting values and messages per device."""

    def __init__(self, P):
        self.P, self.sent, self.received, self.messages = P, [0] * P, [0] * P, [0] * P

    def send(self, src, dst, block):
        if src != dst:
            self.sent[src] += block.size
            self.received[dst] += block.size
            self.messages[src] += 1

    def all_gather(self, shards):                       # the owner sends its shard to every other device
        for p, s in enumerate(shards):
            for q in range(self.P):
                self.send(p, q, s)

    def reduce_scatter(self, partials, axis):          # device p's chunk q of its partial goes to device q
        for p, x in enumerate(partials):
            for q, chunk in enumerate(np.array_split(x, self.P, axis=axis)):
                self.send(p, q, chunk)

    def all_reduce(self, partials):                     # reduce-scatter then all-gather of the flat values
        flat = [x.reshape(-1) for x in partials]
        self.reduce_scatter(flat, 0)
        self.all_gather(np.array_split(flat[0], self.P))

    def all_to_all(self, blocks, scatter):              # device p's block for device q: shard q along scatter
        for p, x in enumerate(blocks):
            for q, part in enumerate(np.array_split(x, self.P, axis=scatter)):
                self.send(p, q, part)


@pytest.mark.parametrize("P,n,h,e", [(3, 2, 7, 5), (4, 3, 10, 3), (2, 1, 2, 1), (5, 7, 11, 2)])
def test_the_counts_are_what_p_devices_exchanging_shards_move(P, n, h, e):
    rng = np.random.default_rng(P)
    sim = Devices(P)
    X = rng.normal(size=(n, h))
    sim.all_gather(np.array_split(X, P, axis=1))                       # X sharded on h, all-gathered
    sim.all_reduce([rng.normal(size=(n, e)) for _ in range(P)])       # a partial (n, e) all-reduced
    sim.reduce_scatter([rng.normal(size=(h, e)) for _ in range(P)], 0)   # a partial (h, e) reduce-scattered on h
    one = nc.all_gather("n h", axis="h", devices=P, n=n, h=h) @ nc.all_reduce("n e", devices=P, n=n, e=e) \
        @ nc.reduce_scatter("h e", axis="h", devices=P, h=h, e=e)
    link = nc.cost(device_region(one, "h", P, h), sizes={}).link
    assert (link.sent, link.received, link.messages) == (tuple(sim.sent), tuple(sim.received), tuple(sim.messages))
    assert link.H == tuple(s + r for s, r in zip(sim.sent, sim.received))


@pytest.mark.parametrize("P,n,h", [(2, 4, 6), (3, 6, 9), (4, 8, 4)])
def test_all_to_all_counts(P, n, h):
    sim = Devices(P)
    X = np.zeros((n, h))
    sim.all_to_all(np.array_split(X, P, axis=1), 0)
    one = nc.all_to_all("n h", gather="h", scatter="n", devices=P, n=n, h=h)
    link = nc.cost(device_region(one >> nc.all_gather("n h", axis="n", devices=P, n=n, h=h), "h", P, h),
                   sizes={}).link
    gathered = Devices(P)
    gathered.all_gather(np.array_split(X, P, axis=0))
    assert link.sent == tuple(a + b for a, b in zip(sim.sent, gathered.sent))
    assert link.received == tuple(a + b for a, b in zip(sim.received, gathered.received))


def test_the_symbolic_counts_are_the_formulas():
    P, n, h, e = (nc.symbol(s) for s in "P n h e".split())
    one = nc.all_gather("n h", axis="h", devices=P) @ nc.all_reduce("n e", devices=P) \
        @ nc.all_to_all("n h", gather="h", scatter="n", devices=P)
    link = nc.cost(device_region(one, "h", P, h)).link
    formula = (P - 1) * n * h / P + 2 * (P - 1) * n * e / P + (P - 1) * n * h / P ** 2
    assert sympy.simplify(link.sent - formula) == 0 and sympy.simplify(link.received - formula) == 0
    assert sympy.expand(link.messages - (P - 1) * 4) == 0
    at = nc.cost(device_region(one, "h", P, h), sizes={"P": 4, "n": 8, "h": 12, "e": 3}).link
    assert set(at.sent) == {formula.subs({P: 4, n: 8, h: 12, e: 3})}


def test_a_device_counts_its_own_work_and_memory():
    """Per device: FLOPs and transfers of its shard, not P times them; ``held`` the level-0 memory of the program it
    runs: the same as the cost of that program written without a device region at its shard's size."""
    flash = nc.group(nc.stream(nc.library.attention(), "x", "s_x"), "q", "g_q")
    d = nc.shard(flash, "q", devices="P")
    c, one = nc.cost(d), nc.cost(flash)
    q, P = nc.symbol("q"), nc.symbol("P")
    assert sympy.simplify(c.flops["tensor"] - one.flops["tensor"] / P) == 0
    assert sympy.simplify(c.H[1] - one.H[1].subs(q, q / P)) == 0
    sizes = {"q": 10, "x": 7, "d": 4, "g_q": 2, "s_x": 3}
    at = nc.cost(d, sizes={**sizes, "P": 4})
    per = [nc.cost(flash, sizes={**sizes, "q": m}) for m in (3, 3, 2, 2)]     # np.array_split(10, 4)
    assert at.H == per[0].H and at.flops == per[0].flops
    assert at.link.held == tuple(p.M[0] for p in per)
    assert at.link.sent == (0, 0, 0, 0)
    symbolic_held = c.link.held.subs({nc.symbol(k): v for k, v in {**sizes, "q": 12, "P": 4}.items()})
    assert symbolic_held == nc.cost(flash, sizes={**sizes, "q": 3}).M[0]


def test_the_link_is_a_monoid_under_composition():
    P = 3
    hs = nc.symbol("h") / P
    a = device_region(nc.einsum("n h, h e -> n e", h=hs) >> nc.all_reduce("n e", devices=P), "h", P, nc.symbol("h"))
    b = nc.shard(nc.elementwise("exp", "n e"), "n", devices=P)
    whole = nc.cost(a >> b)
    assert whole.link == nc.cost(a).then(nc.cost(b)).link
    assert sympy.simplify(whole.link.sent - nc.cost(a).link.sent) == 0
    with pytest.raises(nc.DeviceError, match="3 devices composed with one on 2"):
        nc.cost(a >> nc.shard(nc.elementwise("exp", "n e"), "n", devices=2))


def test_fewer_keys_than_devices_leave_some_devices_without_a_key_shard():
    """K, V (3 keys) arrive sharded over 4 devices that shard 8 queries: device 3 holds no key, sends none, receives
    all; the simulation of the devices' exchanges agrees."""
    from rewrites.devices import device_gather
    d = device_gather.using(axis="x").apply(nc.shard(nc.library.attention(), "q", devices=4))
    rng = np.random.default_rng(0)
    Q, K, V = rng.normal(size=(8, 2)), rng.normal(size=(3, 2)), rng.normal(size=(3, 2))
    s = Q @ K.T / np.sqrt(2)
    e = np.exp(s - s.max(-1, keepdims=True))
    assert np.allclose(nc.evaluate(d, Q, K, V), (e / e.sum(-1, keepdims=True)) @ V)
    sim = Devices(4)
    for X in (K, V):
        sim.all_gather(np.array_split(X, 4, axis=0))
    link = nc.cost(d, sizes={"q": 8, "x": 3, "d": 2}).link
    assert (link.sent, link.received) == (tuple(sim.sent), tuple(sim.received))
    assert link.sent[3] == 0 and link.received[3] == 2 * 3 * 2


def test_bytes_follow_each_array_s_number_format():
    """An fp16 all-gather and an fp32 all-reduce: bytes are values times 2 and 4, per device and symbolically."""
    P, n, h, e = 3, 2, 7, 5
    one = nc.all_gather("n h", axis="h", devices=P, n=n, h=h, dtype=nc.FP16) @ nc.all_reduce("n e", devices=P, n=n,
                                                                                                e=e)
    link = nc.cost(device_region(one, "h", P, h), sizes={}).link
    gathered, reduced = Devices(P), Devices(P)
    gathered.all_gather(np.array_split(np.zeros((n, h)), P, axis=1))
    reduced.all_reduce([np.zeros((n, e))] * P)
    assert link.sent_bytes == tuple(2 * a + 4 * b for a, b in zip(gathered.sent, reduced.sent))
    assert link.received_bytes == tuple(2 * a + 4 * b for a, b in zip(gathered.received, reduced.received))
    Ps = nc.symbol("P")
    sym = nc.cost(device_region(nc.all_gather("n h", axis="h", devices=Ps, dtype=nc.BF16), "h", Ps,
                                nc.symbol("h"))).link
    assert sympy.simplify(sym.sent_bytes - 2 * sym.sent) == 0


def test_an_axis_a_collective_cuts_inside_is_counted_at_each_device_s_shard():
    """n = 7 reduce-scattered over 4 devices, then all-gathered: device 3 holds one row (np.array_split), not
    ⌈7/4⌉ = 2, and sends and receives accordingly; the simulation of the devices' exchanges agrees."""
    P, n, h, e = 4, 7, 9, 3
    one = nc.einsum("n h, h e -> n e", h=3, n=n, e=e) >> nc.reduce_scatter("n e", axis="n", devices=P, n=n, e=e) \
        >> nc.all_gather("n e", axis="n", devices=P, n=n, e=e)
    sim = Devices(P)
    sim.reduce_scatter([np.zeros((n, e))] * P, 0)
    sim.all_gather(np.array_split(np.zeros((n, e)), P, axis=0))
    link = nc.cost(device_region(one, "h", P, h), sizes={}).link
    assert (link.sent, link.received) == (tuple(sim.sent), tuple(sim.received))
    assert link.sent[3] == (n - 1) * e + (P - 1) * e


def test_a_coupled_state_is_all_reduced_by_rows():
    """Online softmax's (μ, z, o) all-reduced: the merged o of a query reads its μ, so each device reduces whole rows
    of the three (q = 5 over 4 devices: rows 2, 1, 1, 1), each array reduce-scattered then all-gathered by rows."""
    P, q, d = 4, 5, 3
    box = nc.all_reduce("q, q, q d", devices=P, merge="softmax_contraction_to_unscaled", q=q, d=d)
    sim = Devices(P)
    for shape in ((q,), (q,), (q, d)):
        sim.reduce_scatter([np.zeros(shape)] * P, 0)
        sim.all_gather(np.array_split(np.zeros(shape), P, axis=0))
    link = nc.cost(device_region(nc.Id("x") @ box, "x", P, 8), sizes={"x": 8}).link
    assert (link.sent, link.received, link.messages) == (tuple(sim.sent), tuple(sim.received), tuple(sim.messages))
    flat = Devices(P)                            # an elementwise merge's cut, each array's flat values: other counts
    for shape in ((q,), (q,), (q, d)):
        flat.all_reduce([np.zeros(shape)] * P)
    assert tuple(flat.sent) != link.sent
