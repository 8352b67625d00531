"""The device region (issue 37, item 1): ``nc.shard`` as a Grid over devices, its parameters, its refusals, its JSON."""
from __future__ import annotations

import numpy as np
import pytest
import sympy

import napkin_cat as nc
from napkin_cat.algorithms.devices import device_region
from napkin_cat.syntax.collectives import shard_bounds


def test_a_shard_is_a_partition_over_devices_with_a_shard_of_the_axis_inside():
    q, P = nc.symbol("q"), nc.symbol("P")
    box = nc.shard(nc.library.attention(), "q", devices="P").boxes[0]
    assert (box.region, box.axis, box.devices, box.size, box.trips) == ("shard", "q", P, q / P, P)
    assert box.sharded("dom") == ("q", None, None) and box.sharded("cod") == ("q",)
    assert all(a.axis("q").size == q / P for a in box.arg.dom.inside if "q" in a.names)
    concrete = nc.shard(nc.library.attention(q=10), "q", devices=4).boxes[0]
    assert concrete.size == 3 and concrete.full_size() == 10


@pytest.mark.parametrize("total,devices", [(10, 4), (7, 3), (6, 3), (5, 5), (9, 1), (2, 5)])
def test_shards_are_cut_as_numpy_cuts_them(total, devices):
    cut = shard_bounds(total, devices)
    expected = np.cumsum([0] + [len(c) for c in np.array_split(np.arange(total), devices)]).tolist()
    assert cut == expected


def test_refusals_name_what_is_at_fault():
    with pytest.raises(nc.RewriteError, match="SoftMax.*core"):
        nc.shard(nc.library.attention(), "x", devices=2)        # x is reduced, not woven
    with pytest.raises(nc.AxisError, match="devices=0"):
        nc.shard(nc.library.attention(), "q", devices=0)
    with pytest.raises(nc.AxisError, match=r"along 'z': no input or output carries it; the axes are \['d', 'q', 'x'\]"):
        nc.shard(nc.library.attention(), "z", devices=2)
    with pytest.raises(nc.RewriteError, match="one device level"):
        nc.shard(nc.shard(nc.library.attention(), "q", devices=2), "q", devices=2)
    with pytest.raises(nc.DeviceError, match="inside a device region"):
        nc.evaluate(nc.all_reduce("n", devices=2), np.ones(3))


def _megatron(P, h):
    hs = h / P if not isinstance(h, int) else -(-h // P)
    one = (nc.einsum("n d, d h -> n h", h=hs) >> nc.elementwise("relu", "n h", h=hs)) @ nc.Id("h e", h=hs) \
        >> nc.einsum("n h, h e -> n e", h=hs) >> nc.all_reduce("n e", devices=P)
    return device_region(one, "h", P, h)


def test_a_device_region_with_collectives_survives_json():
    rng = np.random.default_rng(0)
    for d in (_megatron(nc.symbol("P"), nc.symbol("h")), _megatron(3, 7),
              nc.shard(nc.group(nc.stream(nc.library.attention(), "x", "s_x"), "q", "g_q"), "q", devices="P")):
        back = nc.loads(nc.dumps(d))
        assert back == d
        xs = [rng.random(s) for s in ([(2, 4), (4, 7), (7, 5)] if len(d.dom) == 3 and "h" in d.dom.inside[1].names
                                      else [(7, 4), (5, 4), (5, 4)])]
        sizes = {k: v for k, v in {"P": 3, "g_q": 2, "s_x": 2}.items() if k in map(str, _symbols(d))}
        assert np.allclose(nc.evaluate(back, *xs, sizes=sizes), nc.evaluate(d, *xs, sizes=sizes))


def _symbols(d):
    from napkin_cat.syntax.sizes import symbols_of
    return symbols_of(d, params=True)


def test_a_woven_region_keeps_its_devices():
    d = nc.shard(nc.library.attention(), "q", devices=2)
    w = nc.weave(d, "h", inputs=[0, 1, 2], position=0)
    box = w.boxes[0]
    assert box.region == "shard" and box.devices == 2 and box.arg.dom.inside[0].names == ("h", "q", "d")
    rng = np.random.default_rng(1)
    Q, K, V = rng.random((3, 5, 4)), rng.random((3, 6, 4)), rng.random((3, 6, 4))
    assert np.allclose(nc.evaluate(w, Q, K, V), nc.evaluate(nc.weave(nc.library.attention(), "h", inputs=[0, 1, 2],
                                                                       position=0), Q, K, V))
    assert sympy.simplify(box.trips - 2) == 0


def test_more_devices_than_values_leaves_the_last_ones_idle():
    """q = 2 over 5 devices: devices 2-4 hold no shard; they compute nothing, hold nothing, exchange nothing."""
    rng = np.random.default_rng(3)
    Q, K, V = rng.random((2, 4)), rng.random((5, 4)), rng.random((5, 4))
    d = nc.shard(nc.library.attention(q=2), "q", devices=5)
    assert np.allclose(nc.evaluate(d, Q, K, V), nc.evaluate(nc.library.attention(), Q, K, V))
    c = nc.cost(d, sizes={"x": 5, "d": 4})
    assert c.link.held[2:] == (0, 0, 0) and c.link.held[0] == 4 + 2 * 20
    h = nc.symbol("h")
    one = nc.einsum("n h, h e -> n e", h=h / 4) >> nc.all_reduce("n e", devices=4)
    reduced = device_region(one, "h", 4, h)
    x, w = rng.random((2, 3)), rng.random((3, 2))
    assert np.allclose(nc.evaluate(reduced, x, w), x @ w)
    link = nc.cost(reduced, sizes={"n": 2, "e": 2, "h": 3}).link      # 3 active devices: 4 values cut 2, 1, 1
    assert link.sent == (2 + 2 * 2, 3 + 2 * 1, 3 + 2 * 1, 0) and link.messages == (4, 4, 4, 0)
