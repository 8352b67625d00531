"""The one-device form's arrival run for real (issue 37; ``hardware/arrival.py``): ``gathered(f, layout, P)``, the
device program whose link a one-device form is charged where its inputs arrive sharded, run on torch.distributed
(gloo, the session's world: P = 2 and 4) at ragged sizes, an axis of fewer values than devices included.

Second routes: the outputs against numpy written here from the maths (and exactly ``nc.evaluate``'s of the program
and of ``f``: the gather moves values, it computes nothing); the values each rank sent and received, counted from
the arrays it handed to torch.distributed, against ``np.array_split``'s shards counted here (an all-gather of each
sharded input: ``(P − 1)·|x_p|`` sent, ``|x| − |x_p|`` received, ``P − 1`` messages, per device), which are also
the cost functor's counts (the link the one-device form is charged).
"""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is the `kernels` extra (pip install 'napkin-cat[kernels]')")

import napkin_cat as nc  # noqa: E402
from napkin_cat.hardware.arrival import gathered  # noqa: E402

pytestmark = pytest.mark.skipif(not torch.distributed.is_available() or not torch.distributed.is_gloo_available(),
                                reason="torch.distributed with gloo is needed")


def attention_np(Q, K, V, causal=False):
    S = Q @ K.T / np.sqrt(Q.shape[1])
    if causal:
        S = np.where(np.arange(len(K))[None, :] <= np.arange(len(Q))[:, None], S, -np.inf)
    E = np.exp(S - S.max(1, keepdims=True))
    return (E / E.sum(1, keepdims=True)) @ V


def relu_mlp_np(X, W1, b1, W2, b2):
    return np.maximum(X @ W1 + b1, 0) @ W2 + b2


# (name, f, layout, input shapes, numpy reference); every sharded axis ragged at P = 2 and 4
CASES = [
    ("attention, the sequence sharded", nc.library.attention(), ("q", "x", "x"), [(9, 3), (7, 3), (7, 3)],
     attention_np),
    ("causal attention, 3 keys: at P = 4 a device holds none", nc.library.causal_attention(), ("q", "x", "x"),
     [(9, 3), (3, 3), (3, 3)], lambda Q, K, V: attention_np(Q, K, V, causal=True)),
    ("attention, the keys alone sharded", nc.library.attention(), (None, "x", None), [(5, 2), (11, 2), (11, 2)],
     attention_np),
    ("mlp, the tokens and the output features sharded", nc.library.mlp(activation="relu"), ("n", None, None, "o", "o"),
     [(7, 3), (3, 5), (5,), (5, 6), (6,)], relu_mlp_np),
    ("attention, 3 queries: at P = 4 fewer than the devices, the keys still cut over all", nc.library.attention(),
     ("q", "x", "x"), [(3, 2), (9, 2), (9, 2)], attention_np),
    ("mlp, 2 tokens: at P = 4 fewer than the devices, the output features still cut over all",
     nc.library.mlp(activation="relu"), ("n", None, None, "o", "o"), [(2, 3), (3, 5), (5,), (5, 7), (7,)], relu_mlp_np),
    ("mlp, the hidden features sharded", nc.library.mlp(activation="relu"), (None, "f", "f", "f", None),
     [(6, 3), (3, 5), (5,), (5, 4), (4,)], relu_mlp_np),
]


def by_hand(xs, f, layout, P):
    """Per device, the values an all-gather of each sharded input moves, at np.array_split's shards."""
    sent, received, messages = [0] * P, [0] * P, [0] * P
    for x, a, axis in zip(xs, f.dom.inside, layout):
        if axis is None:
            continue
        pos = a.names.index(axis)
        other = x.size // x.shape[pos]
        for p, rows in enumerate(np.array_split(np.arange(x.shape[pos]), P)):
            sent[p] += (P - 1) * len(rows) * other
            received[p] += (x.shape[pos] - len(rows)) * other
            messages[p] += P - 1
    return tuple(sent), tuple(received), tuple(messages)


@pytest.mark.parametrize("name, f, layout, shapes, reference", CASES, ids=[c[0] for c in CASES])
def test_the_gathered_program_runs_and_moves_what_it_is_charged(world, name, f, layout, shapes, reference):
    P = world.size
    rng = np.random.default_rng(P + len(shapes))
    xs = [rng.normal(size=s) for s in shapes]
    sizes = {x.name: n for a, x_ in zip(f.dom.inside, xs) for x, n in zip(a.axes, x_.shape)}
    g = gathered(f, layout, P, sizes)
    r = nc.distributed.run(g, *xs, world_size=P, world=world)
    assert np.array_equal(r.outputs[0], nc.evaluate(g, *xs))
    assert np.array_equal(r.outputs[0], nc.evaluate(f, *xs))
    assert np.allclose(r.outputs[0], reference(*xs))
    hand = by_hand(xs, f, layout, P)
    assert (r.link.sent, r.link.received, r.link.messages) == hand
    c = nc.cost(g, sizes=sizes).link
    assert (c.sent, c.received, c.messages) == hand
    assert len(c.held) == P and min(c.held) >= sum(x.size for x in xs)     # each holds every input whole
