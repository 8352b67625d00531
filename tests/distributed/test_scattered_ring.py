"""The block's sequence-parallel form with its K and V ringed (``shard e: … reduce-scatter n …, ring m (computed)``),
which the device search offers, run on torch.distributed (gloo, P = 2 and 4) at sizes P divides and ragged ones.

Its ring reads K and V renamed from the tokens a reduce-scatter cut (``n ↦ m``); the cost at sizes cut ``n`` per device
but left ``m`` at ``n/P``, so ``nc.cost`` raised ("rename: renames axes of equal sizes ...") at every size and the form
was refused at timing though offered.  Second routes: the outputs against numpy written here from the maths (and
``nc.evaluate``); each rank's sent, received and messages, counted by the runner from the arrays it handed to
torch.distributed, against the cost functor's link.
"""
from __future__ import annotations

import numpy as np
import pytest

import napkin_cat as nc
from napkin_cat.search.devices import device_forms


def block_np(xs):
    """The transformer block (pre-norm attention, then a GELU MLP, each with its residual) from the maths."""
    X, g1, b1, Wq, Wk, Wv, Wo, g2, b2, W1, c1, W2, c2 = xs
    d = Wq.shape[-1]

    def ln(x, g, b):
        mu = x.mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + 1e-5) * g + b

    def softmax(s):
        e = np.exp(s - s.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)
    Q, K, V = (np.einsum("ne,ehd->hnd", ln(X, g1, b1), W) for W in (Wq, Wk, Wv))
    Y = X + np.einsum("hnd,hde->ne", softmax(np.einsum("hnd,hmd->hnm", Q, K) / np.sqrt(d)) @ V, Wo)
    u = ln(Y, g2, b2) @ W1 + c1
    gelu = 0.5 * u * (1 + np.tanh(np.sqrt(2 / np.pi) * (u + 0.044715 * u ** 3)))
    return Y + gelu @ W2 + c2


@pytest.mark.parametrize("n", [8, 7])
def test_the_scattered_ring_of_the_block_runs_and_moves_what_it_costs(world, n):
    P, rng = world.size, np.random.default_rng(30 + world.size + n)
    e, h, dd, ff = 2 * P, 2, 2, 3
    f = nc.library.transformer_block()
    (form,) = [g for g in device_forms(f, P) if g.refused is None and g.label.startswith("shard e")
               and "reduce-scatter" in g.label and "ring m (computed)" in g.label]
    assert form.trace.replay(f) == form.diagram
    shapes = [(n, e), (e,), (e,), (e, h, dd), (e, h, dd), (e, h, dd), (h, dd, e), (e,), (e,), (e, ff), (ff,),
              (ff, e), (e,)]
    xs = [rng.normal(size=s) for s in shapes]
    sizes = {"n": n, "e": e, "h": h, "d": dd, "f": ff}
    c = nc.cost(form.diagram, sizes=sizes).link           # main: SignatureError (m left at n/P)
    r = nc.distributed.run(form.diagram, *xs, world_size=P, world=world)
    assert np.allclose(r.outputs[0], block_np(xs), atol=1e-3)    # gelu: the library's approximation or erf's
    assert np.allclose(r.outputs[0], nc.evaluate(f, *xs))
    assert (r.link.sent, r.link.received, r.link.messages) == (c.sent, c.received, c.messages)
