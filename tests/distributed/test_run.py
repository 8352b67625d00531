"""``nc.distributed.run`` (issue 37, item 4): device regions run on torch.distributed (gloo, one process per device,
loopback), at P = 2 and P = 4, one world per P running every program.

Each program is checked three ways: its outputs equal ``nc.evaluate``'s on one device exactly (the same numpy
operations in the same order), and numpy written here from the maths; the values each rank sent and received,
counted from the arrays it handed to torch.distributed, equal ``nc.cost(d, sizes=...).link`` per device (the cost
functor's formulas: a second route to the runner's actual tensor sizes).  The axes are ragged (not multiples of P),
so shards differ in size and some devices are idle where P exceeds an axis."""
from __future__ import annotations

import numpy as np
import pytest
import sympy

torch = pytest.importorskip("torch", reason="torch is the `kernels` extra (pip install 'napkin-cat[kernels]')")

import napkin_cat as nc  # noqa: E402
from napkin_cat.algorithms.devices import device_region  # noqa: E402
from napkin_cat.syntax.sizes import symbols_of  # noqa: E402
from rewrites.devices import device_gather, tensor_parallel  # noqa: E402

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
    xs = nc.symbol("x") / P
    b = nc.Builder(nc.types("q x", x=xs))
    (S,) = b.inputs
    m = b(nc.all_reduce("q", devices=P, merge="max"), b(nc.reduce("max", "q x -> q", x=xs), S))
    e = b(nc.elementwise("exp", "q x", x=xs), b(nc.elementwise("sub", "q x, q -> q x", x=xs), S, m))
    z = b(nc.all_reduce("q", devices=P, merge="add"), b(nc.reduce("sum", "q x -> q", x=xs), e))
    d = device_region(b.build(b(nc.elementwise("div", "q x, q -> q x", x=xs), e, z)), "x", P, nc.symbol("x"))
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


def two_regions(P, rng):
    """A row-parallel product, then a region sharded along n, then a box on the launcher: the links add."""
    hs = nc.symbol("h") / P
    a = device_region(nc.einsum("n h, h e -> n e", h=hs) >> nc.all_reduce("n e", devices=P), "h", P, nc.symbol("h"))
    d = a >> nc.shard(nc.elementwise("exp", "n e"), "n", devices=P) >> nc.reduce("sum", "n e -> e")
    X, W = rng.normal(size=(3, 6)), rng.normal(size=(6, 2)) / 3
    return d, (X, W), np.exp(X @ W).sum(0), {"n": 3, "h": 6, "e": 2}


PROGRAMS = [flash_on_symbolic_devices, mlp, gathered_attention, sharded_softmax, partial_attention, scatter_then_gather,
            all_to_all_round_trip, two_regions]


@pytest.fixture(scope="module")
def four():
    with nc.distributed.World(4) as w:          # one spawn: P = 2 runs on its first two ranks
        yield w


@pytest.fixture(params=[2, 4])
def world(request, four):
    return four if request.param == 4 else four.first(2)


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


def test_a_partial_left_unreduced_is_refused_by_name(world):
    P = world.size
    one = nc.einsum("n h, h e -> n e", h=nc.symbol("h") / P)              # no all-reduce: every rank a partial
    d = device_region(one, "h", P, nc.symbol("h"))
    with pytest.raises(nc.DeviceError, match="output 0 .*replicated.*device 1"):
        nc.distributed.run(d, np.ones((2, 4)), np.arange(12.0).reshape(4, 3), world_size=P, world=world)


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


def test_a_backend_torch_lacks_is_named(monkeypatch):
    monkeypatch.setattr(torch.distributed, "is_gloo_available", lambda: False)
    with pytest.raises(nc.ToolNotFoundError, match="gloo backend is not available"):
        nc.distributed.World(2)
    with pytest.raises(nc.DeviceError, match="backend='tcp'.*gloo"):
        nc.distributed.World(2, backend="tcp")
