"""``nc.optimal(c, M, sizes=...)`` takes a stream size given in ``sizes`` (before the fix it reported and used the
default stream size 1: ``{g_a: 12, g_c: 6, s_b: 1}`` with H = 576 for ``sizes={..., 's_b': 4}``)."""
import pytest

import napkin_cat as nc
from napkin_cat.cost.numeric import at
from napkin_cat.errors import NapkinError


def tiled():
    return nc.group(nc.group(nc.stream(nc.library.matmul(), "b", "s_b"), "a", "g_a"), "c", "g_c")


def test_a_stream_size_in_sizes_is_the_one_used_and_reported():
    sizes = {"a": 12, "b": 12, "c": 12, "s_b": 4}
    o = nc.optimal(nc.cost(tiled()), 100, sizes=sizes)
    assert o.sizes[nc.symbol("s_b")] == 4
    chosen = {**sizes, **{str(k): int(v) for k, v in o.sizes.items()}}
    assert o.H == at(tiled(), chosen).H[1]                 # the transfers at the sizes it reports
    assert at(tiled(), chosen).M[1] <= 100                 # and they fit


def test_a_stream_size_given_twice_differently_is_refused():
    with pytest.raises(NapkinError, match=r"s_b.*4.*2"):
        nc.optimal(nc.cost(tiled()), 100, streams={"s_b": 2}, sizes={"a": 12, "b": 12, "c": 12, "s_b": 4})
