"""A device whose shard of a co-sharded axis is empty holds none of it (issue 31's "nothing silently clamped or
guessed", on issue 37's device memory): ``Link.held`` counted such a shard at its whole shard size where the region
was built at concrete sizes (its shard size a number), and at 0 where built symbolic, so one program held two
amounts.

The program: a device region along ``q`` whose second input arrives co-sharded along ``x`` (fewer values than devices,
so the last device's shard of it is empty); the inside exponentiates its rows twice (the shard of ``B`` waits, at the
peak), sums its shard of ``B`` and all-reduces that sum.  Second route: per device, its level-0 peak counted here
from np.array_split's shards and the program's columns written out by hand; and the region built at symbolic sizes
costed at the same sizes.
"""
from __future__ import annotations

import numpy as np
import pytest

import napkin_cat as nc
from napkin_cat.algorithms.devices import device_region
from napkin_cat.syntax.collectives import shard_size


def program(q, x, e, d, f, P):
    a, b = dict(q=shard_size(q, P), e=e), dict(x=shard_size(x, P), d=d, f=f)
    one = (nc.elementwise("exp", "q e", **a) @ nc.einsum("x d f -> d", **b)) >> \
        (nc.elementwise("exp", "q e", **a) @ nc.all_reduce("d", devices=P, d=d)) >> \
        nc.einsum("q e, d -> q e d", **a, d=d)
    return device_region(one, "q", P, q, also={"x": x}, sharded_in=("q", "x"), sharded_out=("q",))


def held_by_hand(q, x, e, d, f, P):
    """Per device: its rows and its shard of B wait together (q_p·e + x_p·d·f), then its rows and the sum (q_p·e + d),
    then the output (q_p·e·d); x cut among the devices that hold rows."""
    qs = [len(c) for c in np.array_split(np.arange(q), P)]
    active = sum(n > 0 for n in qs)
    xs = [len(c) for c in np.array_split(np.arange(x), active)] + [0] * (P - active)
    return tuple(max(qp * e + xp * d * f, qp * e + d, qp * e * d) if qp else 0 for qp, xp in zip(qs, xs))


@pytest.mark.parametrize("q, x, P", [(8, 3, 4), (5, 2, 4), (6, 2, 4), (7, 4, 3), (8, 8, 4)])
def test_an_empty_shard_holds_nothing(q, x, P):
    e, d, f = 1, 2, 50
    sizes = dict(q=q, x=x, e=e, d=d, f=f)
    hand = held_by_hand(q, x, e, d, f, P)
    concrete = nc.cost(program(q, x, e, d, f, P), sizes={}).link.held          # main: the empty shard counted whole
    s = nc.symbol
    symbolic = nc.cost(program(s("q"), s("x"), s("e"), s("d"), s("f"), P), sizes=sizes).link.held
    assert concrete == hand
    assert symbolic == hand
    rng = np.random.default_rng(q + x)
    A, B = rng.normal(size=(q, e)), rng.normal(size=(x, d, f))
    expected = np.exp(np.exp(A))[:, :, None] * B.sum((0, 2))[None, None, :]
    assert np.allclose(nc.evaluate(program(q, x, e, d, f, P), A, B), expected)
