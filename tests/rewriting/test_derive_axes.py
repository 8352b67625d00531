"""Item 9: the derivation chooses its streamed and grouped axes from the diagram's structure."""
import pytest

import napkin_cat as nc
from rewrites import flash_attention
from rewrites.derive import grouped_axes


def _attention_then_projection():
    b = nc.Builder(nc.types("q d, x d, x d, d e"))
    Q, K, V, W = b.inputs
    A = b(nc.library.attention(), Q, K, V)
    return b.build(b(nc.einsum("q d, d e -> q e"), A, W))


def _attention_written_d_q():
    b = nc.Builder(nc.types("q d, x d, x d"))
    Q, K, V = b.inputs
    s = b(nc.einsum("q d, x d -> q x"), Q, K)
    p = b(nc.softmax("q x", over="x", beta=nc.library.inverse_temperature(nc.symbol("d"))), s)
    return b.build(b(nc.einsum("q x, x d -> d q"), p, V))


@pytest.mark.parametrize("build", [
    _attention_then_projection,
    _attention_written_d_q,
    lambda: nc.rename_axis(nc.rename_axis(_attention_written_d_q(), "x", "k"), "q", "t"),
    lambda: nc.rename_axis(_attention_then_projection(), "x", "k"),
], ids=["projection", "d-q", "renamed-d-q", "renamed-projection"])
def test_derivation_reads_axes_from_structure(build):
    f = build()
    r = flash_attention(f)
    assert nc.equivalent(f, r.diagram, trials=4)
    streams = [s for s in r.trace if s.rule == "stream_partition"]
    groups = [s for s in r.trace if s.rule == "group_partition"]
    names = {a.name for arr in f.dom.inside for a in arr.axes}
    key, query = ("k" if "k" in names else "x"), ("t" if "t" in names else "q")
    # the feature axis d is summed by Q·K, so it is never grouped; a projection's e may be (like matmul's c)
    assert query in grouped_axes(f) and "d" not in grouped_axes(f)
    assert len(streams) == 1 and len(groups) == len(grouped_axes(f))
    c = nc.cost(r.diagram)
    assert [s[0] for s in c.streams] == [key] and query in c.groups[0].axes


def _gelu_mlp():
    b = nc.Builder(nc.types("n i, i f, f o"))
    X, W1, W2 = b.inputs
    h = b(nc.elementwise("gelu", "n f"), b(nc.einsum("n i, i f -> n f"), X, W1))
    return b.build(b(nc.einsum("n f, f o -> n o"), h, W2))


MLP_SIZES = {"n": 4096, "i": 1024, "f": 4096, "o": 1024}


@pytest.mark.parametrize("given", [{}, {"memory": 2 ** 14, "sizes": MLP_SIZES}], ids=["reference", "given"])
def test_a_named_derivation_outside_its_case_picks_the_streamed_axis_by_cost(given):
    """Issue 22's regression: the GELU MLP streams both its input axis i and its hidden axis f; streaming i holds
    the hidden row and recomputes x·W1 per group (1.76·10^13 at M = 2^14), streaming f moves about 6.5·10^9."""
    f = _gelu_mlp()
    r = flash_attention(f, **given)
    (stream,) = [s for s in r.trace if s.rule == "stream_partition"]
    assert dict(stream.params)["axis"] == "f"
    H = nc.optimal(nc.cost(r.diagram), memory=2 ** 14, sizes=MLP_SIZES).H
    assert H < 10 ** 10
    assert nc.equivalent(f, r.diagram, trials=2)


def test_a_named_derivation_that_fits_no_axis_points_to_derive():
    with pytest.raises(nc.MemoryLimitError, match=r"along none of them .*nc\.derive"):
        flash_attention(_gelu_mlp(), memory=16, sizes=MLP_SIZES)
