"""``nc.distributed.run`` (issue 37, item 4): device regions run on torch.distributed (gloo, one process per device,
loopback), at P = 2 and P = 4, one world per P running every program.

Each program is checked three ways: its outputs equal ``nc.evaluate``'s on one device exactly (the same numpy
operations in the same order), and numpy written here from the maths; the values each rank sent and received,
counted from the arrays it handed to torch.distributed, equal ``nc.cost(d, sizes=...).link`` per device (the cost
functor's formulas: a second route to the runner's actual tensor sizes).  The axes are ragged (not multiples of P),
so shards differ in size and some devices are idle where P exceeds an axis."""
from __future__ import annotations

import os

import numpy as np
import pytest
import sympy

torch = pytest.importorskip("torch", reason="torch is the `kernels` extra (pip install 'napkin-cat[kernels]')")

import napkin_cat as nc  # noqa: E402
from napkin_cat.testing.devices import sharded_softmax as softmax_on_devices  # noqa: E402
from napkin_cat.algorithms.devices import device_region  # noqa: E402
from napkin_cat.distributed.launch import bound_devices  # noqa: E402
from napkin_cat.distributed.world import start_method  # noqa: E402
from napkin_cat.syntax.sizes import symbols_of  # noqa: E402
from napkin_cat.syntax.weave import weave  # noqa: E402
from rewrites.devices import device_gather, tensor_parallel  # noqa: E402
from rewrites.ulysses import device_ulysses  # noqa: E402

pytestmark = pytest.mark.skipif(not torch.distributed.is_available() or not torch.distributed.is_gloo_available(),
                                reason="torch.distributed with gloo is needed")


def softmax(s, axis=-1):
    e = np.exp(s - s.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def flash_on_symbolic_devices(P, rng):
    """FlashAttention (queries grouped, keys streamed) sharded on the queries over a symbolic P, bound to the world's
    ranks; q = 3: at P = 4 one device holds no query and sits out."""
    flash = nc.group(nc.stream(nc.library.attention(), "x", "s_x"), "q", "g_q")
    d = nc.shard(flash, "q", devices="P")
    Q, K, V = rng.normal(size=(3, 4)), rng.normal(size=(5, 4)), rng.normal(size=(5, 4))
    return d, (Q, K, V), softmax(Q @ K.T / 2.0) @ V, {"g_q": 1, "s_x": 2}


def mlp(P, rng):
    """Megatron's MLP derived by the rules: column- then row-parallel, one all-reduce (h = 7: ragged shards)."""
    up = nc.einsum("n d, d h -> n h") >> nc.elementwise("relu", "n h")
    d = tensor_parallel(up @ nc.Id("h e") >> nc.einsum("n h, h e -> n e"), "h", devices=P)   # run takes a derivation
    x, w1, w2 = rng.normal(size=(3, 4)), rng.normal(size=(4, 7)), rng.normal(size=(7, 5))
    return d, (x, w1, w2), np.maximum(x @ w1, 0) @ w2, {"n": 3, "d": 4, "h": 7, "e": 5}


def gathered_attention(P, rng):
    """Attention with the queries sharded and K, V arriving sharded, all-gathered (by the rule device_gather)."""
    d = device_gather.using(axis="x").apply(nc.shard(nc.library.attention(), "q", devices=P))
    Q, K, V = rng.normal(size=(6, 4)), rng.normal(size=(3, 4)), rng.normal(size=(3, 4))   # P = 4: a device holds no key
    return d, (Q, K, V), softmax(Q @ K.T / 2.0) @ V, {"q": 6, "x": 3, "d": 4}


def sharded_softmax(P, rng):
    """softmax over the sharded axis: the row max all-reduced by max, then the row sum by add."""
    d = softmax_on_devices(P)
    S = rng.normal(size=(5, 11)) * 30
    return d, (S,), softmax(S), {"q": 5, "x": 11}


def partial_attention(P, rng):
    """Attention sharded on the keys: each device's online-softmax state (μ, z, o) all-reduced by the reducer's own
    merge (FlashDecoding's combine), then o / z; q = 5 rows cut over P (a coupled state is cut by rows)."""
    xs = nc.symbol("x") / P
    b = nc.Builder(nc.types("q d") @ nc.types("x d, x d", x=xs))
    Q, K, V = b.inputs
    S = b(nc.einsum("q d, x d -> q x", x=xs), Q, K)
    mu = b(nc.reduce("max", "q x -> q", x=xs), S)
    E = b(nc.elementwise("exp", "q x", x=xs), b(nc.elementwise("sub", "q x, q -> q x", x=xs), S, mu))
    z, o = b(nc.reduce("sum", "q x -> q", x=xs), E), b(nc.einsum("q x, x d -> q d", x=xs), E, V)
    mu, z, o = b(nc.all_reduce("q, q, q d", devices=P, merge="softmax_contraction_to_unscaled"), mu, z, o)
    d = device_region(b.build(b(nc.elementwise("div", "q d, q -> q d"), o, z)), "x", P, nc.symbol("x"))
    Q, K, V = rng.normal(size=(5, 3)) * 10, rng.normal(size=(9, 3)), rng.normal(size=(9, 3))
    return d, (Q, K, V), softmax(Q @ K.T) @ V, {"q": 5, "x": 9, "d": 3}


def scatter_then_gather(P, rng):
    """Sequence parallelism: partial products reduce-scattered along n, a map on n's shards, all-gathered back."""
    n, h, e = 7, 9, 3
    hs, ns = -(-h // P), -(-n // P)
    one = nc.einsum("n h, h e -> n e", h=hs, n=n, e=e) >> nc.reduce_scatter("n e", axis="n", devices=P, n=n, e=e) \
        >> nc.elementwise("exp", "n e", n=ns, e=e) >> nc.all_gather("n e", axis="n", devices=P, n=n, e=e)
    X, W = rng.normal(size=(n, h)), rng.normal(size=(h, e)) / 3
    return device_region(one, "h", P, h), (X, W), np.exp(X @ W), {}


def all_to_all_round_trip(P, rng):
    """Ulysses' exchange: sharded on h, all-to-all to sharded on n, a map, all-to-all back."""
    n, h = 7, 10
    there = nc.all_to_all("n h", gather="h", scatter="n", devices=P, n=n, h=h)
    back = nc.all_to_all("n h", gather="n", scatter="h", devices=P, n=n, h=h)
    d = device_region(there >> nc.elementwise("exp", "n h", n=-(-n // P), h=h) >> back, "h", P, h)
    X = rng.normal(size=(n, h))
    return d, (X,), np.exp(X), {}


def woven_all_to_all(P, rng):
    """That exchange woven over a batch axis placed first in the input and last in the output: each all-to-all reads
    and writes it at different positions, its values laid out as its output arrays say."""
    d, (X,), expected, sizes = all_to_all_round_trip(P, rng)
    Y = np.stack([X, -X])
    return weave(d, "b", inputs={0: 0}, position=-1, b=2), (Y,), np.exp(Y).transpose(1, 2, 0), sizes


def two_regions(P, rng):
    """A row-parallel product, then a region sharded along n, then a box on the launcher: the links add."""
    hs = nc.symbol("h") / P
    a = device_region(nc.einsum("n h, h e -> n e", h=hs) >> nc.all_reduce("n e", devices=P), "h", P, nc.symbol("h"))
    d = a >> nc.shard(nc.elementwise("exp", "n e"), "n", devices=P) >> nc.reduce("sum", "n e -> e")
    X, W = rng.normal(size=(3, 6)), rng.normal(size=(6, 2)) / 3
    return d, (X, W), np.exp(X @ W).sum(0), {"n": 3, "h": 6, "e": 2}


def ulysses_attention(P, rng):
    """Multi-head attention by Ulysses (the rule device_ulysses): Q, K, V sharded on the sequence, all-to-all to the
    heads, attention on each rank's heads, all-to-all back; h = 5, q = 7, x = 6: ragged at P = 2 and 4."""
    d = device_ulysses.using(heads="h", devices=P).apply(nc.kernel(nc.library.multi_head_attention(h=5, q=7, x=6,
                                                                                                     d=4)))
    Q, K, V = rng.normal(size=(5, 7, 4)), rng.normal(size=(5, 6, 4)), rng.normal(size=(5, 6, 4))
    return d, (Q, K, V), np.einsum("hqx,hxd->hqd", softmax(np.einsum("hqd,hxd->hqx", Q, K) / 2.0), V), {}


def gathered_causal_attention(P, rng):
    """Causal attention with the queries sharded and K, V all-gathered (device_gather): each rank's mask reads the
    queries at its shard's positions and the gathered keys at theirs from 0; n = 9 (ragged)."""
    d = device_gather.using(axis="x").apply(nc.shard(nc.library.causal_attention(), "q", devices=P))
    Q, K, V = rng.normal(size=(9, 4)), rng.normal(size=(9, 4)), rng.normal(size=(9, 4))
    s = Q @ K.T / 2.0
    s[np.triu_indices(9, 1)] = -np.inf
    return d, (Q, K, V), softmax(s) @ V, {}


def ulysses_with_fewer_heads_than_devices(P, rng):
    """Ulysses on a symbolic program run with P − 1 heads: the rank holding no head idles between the all-to-alls
    (it sends its sequence shard, receives its rows of every head); q = 5, x = 7."""
    d = device_ulysses.using(heads="h", devices=P).apply(nc.kernel(nc.library.multi_head_attention()))
    h = P - 1
    Q, K, V = rng.normal(size=(h, 5, 4)), rng.normal(size=(h, 7, 4)), rng.normal(size=(h, 7, 4))
    return d, (Q, K, V), np.einsum("hqx,hxd->hqd", softmax(np.einsum("hqd,hxd->hqx", Q, K) / 2.0), V), {}


def ring_attention(P, rng):
    """Ring attention: the queries sharded, K and V passed round the ranks trip by trip; x = 7 keys cut ragged
    (2, 2, 2, 1 over 4 devices; 4, 3 over 2)."""
    d = nc.ring(nc.shard(nc.library.attention(), "q", devices=P), "x")
    Q, K, V = rng.normal(size=(6, 4)), rng.normal(size=(7, 4)), rng.normal(size=(7, 4))
    return d, (Q, K, V), softmax(Q @ K.T / 2.0) @ V, {}


def causal_ring_attention(P, rng):
    """Causal ring attention: each trip masks the keys that arrived at their own positions (shard (p − t) mod P's
    place), so a slice handed on in the wrong direction is masked at another place; n = 9 (ragged)."""
    d = nc.ring(nc.shard(nc.library.causal_attention(), "q", devices=P), "x")
    Q, K, V = rng.normal(size=(9, 4)), rng.normal(size=(9, 4)), rng.normal(size=(9, 4))
    s = Q @ K.T / 2.0
    s[np.triu_indices(9, 1)] = -np.inf
    return d, (Q, K, V), softmax(s) @ V, {}


def ring_of_fewer_keys_than_devices(P, rng):
    """x = 3 keys: over 4 devices one shard is empty (it travels as an empty message, folded by no one)."""
    d = nc.ring(nc.shard(nc.library.attention(), "q", devices=P), "x")
    Q, K, V = rng.normal(size=(5, 4)), rng.normal(size=(3, 4)), rng.normal(size=(3, 4))
    return d, (Q, K, V), softmax(Q @ K.T / 2.0) @ V, {}


def ring_flash_attention(P, rng):
    """ring-flash-attention on a symbolic P: each trip runs FlashAttention (queries in groups of 2, keys streamed in
    a kernel by 2) on the shard that arrived, (μ, z, o) carried across the trips; 10 keys, 9 queries (ragged)."""
    flash = nc.group(nc.stream(nc.kernel(nc.library.attention()), "x", "s_x"), "q", "g_q")
    d = nc.ring(nc.shard(flash, "q", devices="P"), "x")
    Q, K, V = rng.normal(size=(9, 4)), rng.normal(size=(10, 4)), rng.normal(size=(10, 4))
    return d, (Q, K, V), softmax(Q @ K.T / 2.0) @ V, {"s_x": 2, "g_q": 2}


def ring_order(P, rng):
    """One query and one key per device, ``Σ_x k_x`` folded in float64 (1e16 + 1 − 1e16 is 0, 1e16 − 1e16 + 1 is 1):
    device p's sum in the ring's order, from the law: at trip t it holds shard (p − t) mod P."""
    keys = np.array([1e16, 1.0, -1e16, 3.0, -7.0][:P])
    d = nc.ring(nc.shard(nc.einsum("q d, x d -> q", q=P, x=P, d=1), "q", devices=P), "x")
    expected = []
    for p in range(P):
        acc = 0.0
        for t in range(P):
            acc = acc + keys[(p - t) % P]
        expected.append(acc)
    return d, (np.ones((P, 1)), keys[:, None]), np.array(expected), {}


def zigzag_causal_ring_attention(P, rng):
    """Causal ring attention in the zigzag order: device p holds chunks p and 2P − 1 − p of the queries and of the
    keys (n = 11: chunks 3, 3, 3, 2 over 2 devices, 2, 2, 2, 1, 1, 1, 1, 1 over 4), each shard's two pieces sent as
    one message and masked at their own positions."""
    d = nc.ring(nc.shard(nc.library.causal_attention(), "q", devices=P, order="zigzag"), "x")
    Q, K, V = rng.normal(size=(11, 4)), rng.normal(size=(11, 4)), rng.normal(size=(11, 4))
    s = Q @ K.T / 2.0
    s[np.triu_indices(11, 1)] = -np.inf
    return d, (Q, K, V), softmax(s) @ V, {}


def zigzag_ring_flash_attention(P, rng):
    """FlashAttention (queries in groups of 2, keys streamed by 2, the causal tiles skipped) at each step of a zigzag
    ring: each group of a device's two query chunks at its own positions; n = 18."""
    flash = nc.group(nc.stream(nc.kernel(nc.library.causal_attention()), "x", "s_x"), "q", "g_q")
    d = nc.ring(nc.shard(flash, "q", devices=P, order="zigzag"), "x")
    Q, K, V = rng.normal(size=(18, 4)), rng.normal(size=(18, 4)), rng.normal(size=(18, 4))
    s = Q @ K.T / 2.0
    s[np.triu_indices(18, 1)] = -np.inf
    return d, (Q, K, V), softmax(s) @ V, {"s_x": 2, "g_q": 2}


RINGS = [ring_attention, causal_ring_attention, ring_of_fewer_keys_than_devices, ring_flash_attention, ring_order,
         zigzag_causal_ring_attention, zigzag_ring_flash_attention]
PROGRAMS = [flash_on_symbolic_devices, mlp, gathered_attention, sharded_softmax, partial_attention, scatter_then_gather,
            all_to_all_round_trip, woven_all_to_all, two_regions, ulysses_attention, gathered_causal_attention,
            ulysses_with_fewer_heads_than_devices] + RINGS


# the fixtures `four` (one world of four ranks for the session) and `world` (P = 2 and 4 on it): conftest.py


def test_programs_run_on_torch_distributed_as_on_one_device(world):
    P, rng = world.size, np.random.default_rng(world.size)
    for make in PROGRAMS:
        program, xs, expected, sizes = make(P, rng)
        r = nc.distributed.run(program, *xs, world_size=P, world=world, sizes=sizes)
        d = getattr(program, "diagram", program)
        bound = {**sizes, "P": P} if "P" in map(str, symbols_of(d)) else sizes
        one = nc.evaluate(d, *xs, sizes=bound)
        one = one if isinstance(one, tuple) else (one,)
        assert len(r.outputs) == len(one) and all(np.array_equal(a, b) for a, b in zip(r.outputs, one)), make.__name__
        assert np.allclose(r.outputs[0], expected), make.__name__
        shown = {a.name: n for arr, x in zip(d.dom.inside, xs) for a, n in zip(arr.axes, x.shape)
                 if isinstance(a.size, sympy.Symbol)}
        c = nc.cost(d, sizes={**shown, **bound}).link
        assert (r.link.sent, r.link.received, r.link.messages) == (c.sent, c.received, c.messages), make.__name__
        assert len(r.link.sent) == P


def test_a_ring_moves_each_shard_but_the_next_ones_own(world):
    """The ring's counts from its law, at the shards ``np.array_split`` cuts: device p sends every shard of K and V
    but device p + 1's, receives every one but its own, in P − 1 messages per array (and the exact sum order)."""
    P, rng = world.size, np.random.default_rng(7)
    for make in (ring_attention, ring_order):
        d, xs, expected, _ = make(P, rng)
        r = nc.distributed.run(d, *xs, world_size=P, world=world)
        exact = make is ring_order                 # the order-sensitive sum: bitwise the law's order
        assert np.array_equal(r.outputs[0], expected) if exact else np.allclose(r.outputs[0], expected)
        streamed = xs[1:] if make is ring_attention else xs[1:2]
        n = [[len(c) * x.shape[1] for c in np.array_split(x, P)] for x in streamed]
        assert r.link.sent == tuple(sum(x.size - m[(p + 1) % P] for x, m in zip(streamed, n)) for p in range(P))
        assert r.link.received == tuple(sum(x.size - m[p] for x, m in zip(streamed, n)) for p in range(P))
        assert r.link.messages == (len(streamed) * (P - 1),) * P


def test_a_ring_with_an_idle_device_is_refused_and_the_world_stays_up(world):
    P = world.size
    d = nc.ring(nc.shard(nc.library.attention(), "q", devices=P), "x")
    Q, K, V = np.ones((P - 1, 2)), np.ones((5, 2)), np.ones((5, 2))          # P − 1 queries: one device holds none
    with pytest.raises(nc.DeviceError, match=f"only {P - 1} of {P} hold a shard of 'q'"):
        nc.distributed.run(d, Q, K, V, world_size=P, world=world)
    Q = np.ones((P, 2))
    assert np.allclose(nc.distributed.run(d, Q, K, V, world_size=P, world=world).outputs[0], 1.0)


def test_a_partial_left_unreduced_is_refused_by_name(world):
    P = world.size
    one = nc.einsum("n h, h e -> n e", h=nc.symbol("h") / P)              # no all-reduce: every rank a partial
    d = device_region(one, "h", P, nc.symbol("h"))
    with pytest.raises(nc.DeviceError, match="output 0 .*replicated.*device 1"):
        nc.distributed.run(d, np.ones((2, 4)), np.arange(12.0).reshape(4, 3), world_size=P, world=world)


def parent_of(pid: int) -> int:
    """The parent process of ``pid``, read from /proc (Linux)."""
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="reads parent processes from /proc (Linux)")
def test_the_ranks_are_forked_from_one_server_that_imported_the_packages(four):
    """Every rank of a world, and of the next world started, is forked from one server process, not started by the
    launcher itself (a spawned rank imports torch and napkin_cat again: about 5 s of CPU apiece)."""
    assert start_method() == "forkserver"                  # Linux has it
    (server,) = {parent_of(pid) for pid in four.pids}
    assert server != os.getpid() and parent_of(server) == os.getpid()
    with nc.distributed.World(2) as other:
        assert {parent_of(pid) for pid in other.pids} == {server}
        r = nc.distributed.run(nc.shard(nc.elementwise("exp", "n e"), "n", devices=2), np.zeros((3, 2)),
                               world_size=2, world=other)
        assert np.array_equal(r.outputs[0], np.ones((3, 2)))
    assert other.pids == ()


def test_refused_before_a_process_starts():
    d = nc.shard(nc.library.attention(), "q", devices=2)
    xs = [np.ones((3, 2))] * 3
    with pytest.raises(nc.DeviceError, match="runs on 2 devices .*world_size=3"):
        nc.distributed.run(d, *xs, world_size=3)
    with pytest.raises(nc.DeviceError, match="no device region.*nc.evaluate"):
        nc.distributed.run(nc.library.attention(), *xs, world_size=2)
    with pytest.raises(nc.DeviceError, match="binds the devices P = 3"):
        nc.distributed.run(nc.shard(nc.library.attention(), "q", devices="P"), *xs, world_size=2, sizes={"P": 3})
    hs = nc.symbol("h") / 2
    nested = nc.kernel(nc.einsum("n h, h e -> n e", h=hs) >> nc.all_reduce("n e", devices=2))
    with pytest.raises(nc.DeviceError, match="'all-reduce' sits in a region nested"):
        nc.distributed.run(device_region(nested, "h", 2, nc.symbol("h")), np.ones((2, 4)), np.ones((4, 3)),
                           world_size=2)
    grouped = nc.shard(nc.group(nc.kernel(nc.library.attention()), "q", "g_q"), "q", devices=2)
    with pytest.raises(nc.ShapeError, match=r"\(g_q = 5\) exceeds the axis \(q = 4\)"):     # device 0 holds 4 of 7
        nc.distributed.run(grouped, np.ones((7, 2)), np.ones((3, 2)), np.ones((3, 2)), world_size=2, sizes={"g_q": 5})
    ringed = nc.ring(nc.shard(nc.library.attention(), "q", devices=2), "x")     # a ring passes: its ranks run it
    assert bound_devices(ringed, 2, None) == {}


def test_a_backend_torch_lacks_is_named(monkeypatch):
    monkeypatch.setattr(torch.distributed, "is_gloo_available", lambda: False)
    with pytest.raises(nc.ToolNotFoundError, match="gloo backend is not available"):
        nc.distributed.World(2)
    with pytest.raises(nc.DeviceError, match="backend='tcp'.*gloo"):
        nc.distributed.World(2, backend="tcp")
