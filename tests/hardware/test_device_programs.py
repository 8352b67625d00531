"""A ring's programs on a chosen device (hardware/local_programs.py, ``local_parts(..., device=p)``): the busiest
device's are the ones a cluster derive times (issue 37).

Second route: each device's programs, run by nc.evaluate on that device's rows of Q (np.array_split's shards, the
order's chunks), give numpy's causal attention at those rows: the programs read the device's own positions.  The
device the cost calls busiest is numpy's count of each device's unmasked query × key pairs.
"""
from __future__ import annotations

import numpy as np
import pytest

import napkin_cat as nc
from napkin_cat.algorithms.orders import ORDERS
from napkin_cat.hardware.local_programs import local_parts
from napkin_cat.hardware.ringcharge import busiest

P = 3


def causal_np(Q, K, V, rows):
    S = Q[rows] @ K.T / np.sqrt(Q.shape[1])
    S = np.where(np.arange(len(K))[None, :] <= rows[:, None], S, -np.inf)
    E = np.exp(S - S.max(1, keepdims=True))
    return (E / E.sum(1, keepdims=True)) @ V


@pytest.mark.parametrize("order, q", [("contiguous", 14), ("zigzag", 14), ("zigzag", 18)])
def test_each_device_program_reads_its_own_positions(order, q):
    """q = 14: 3 shards of 5, 5, 4; 6 chunks of 3, 3, 2, 2, 2, 2 (devices 0 and 1 hold pieces of two sizes, the second
    shorter: one program still, its rows the pieces joined; device 2 chunks 2 and 3, adjacent: one program).
    q = 18: 6 chunks of 3, every device's two pieces one program, its rows the pieces joined."""
    x = q
    d = nc.ring(nc.shard(nc.library.causal_attention(), "q", devices=P, order=order), "x")
    rng = np.random.default_rng(1)
    Q, K, V = rng.normal(size=(q, 4)), rng.normal(size=(x, 4)), rng.normal(size=(x, 4))
    o = ORDERS[order]
    chunks = np.array_split(np.arange(q), o.chunks(P))
    env = nc.Sizes({"q": q, "x": x, "d": 4}).env
    for p in range(P):
        programs = [prog for prog, ringed in local_parts(d, env, device=p) if ringed]
        pieces = [chunks[c] for c in o.pieces(p, P)]
        if all(len(c) == len(pieces[0]) for c in pieces[:-1]) and len(pieces[-1]) <= len(pieces[0]):
            pieces = [np.concatenate(pieces)]           # pieces of one size (the last no longer): one program
        assert len(programs) == len(pieces)
        for prog, rows in zip(programs, pieces):
            assert prog.dom.inside[0].axis("q").size == len(rows)
            assert np.allclose(nc.evaluate(prog, Q[rows], K, V), causal_np(Q, K, V, rows))


@pytest.mark.parametrize("order, P, n", [("contiguous", 4, 16), ("zigzag", 4, 16), ("contiguous", 3, 10)])
def test_the_busiest_device_is_numpys(order, P, n):
    d = nc.ring(nc.shard(nc.library.causal_attention(), "q", devices=P, order=order), "x")
    o = ORDERS[order]
    chunks = np.array_split(np.arange(n), o.chunks(P))
    pairs = [sum(int((np.arange(n)[None, :] <= chunks[c][:, None]).sum()) for c in o.pieces(p, P))
             for p in range(P)]
    link = nc.cost(d, sizes={"q": n, "x": n, "d": 2}).link
    assert busiest(link) == int(np.argmax(pairs))          # the first of equal ones (zigzag: every device)


def test_no_such_device():
    d = nc.ring(nc.shard(nc.library.causal_attention(), "q", devices=P), "x")
    with pytest.raises(nc.HardwareError, match=r"device=3: the region .* runs on devices 0 … 2"):
        local_parts(d, nc.Sizes({"q": 6, "x": 6, "d": 2}).env, device=3)
