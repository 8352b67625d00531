"""Positions, comparisons, logic, where/select, gather, log-sum-exp: numpy semantics against plain numpy,
FLOPs, dtypes, streaming, and every documented error."""
import numpy as np
import pytest
import sympy

import napkin_cat as nc
from napkin_cat.algorithms.streaming import analyse
from napkin_cat.syntax.primitive import kind_of

q, x, n, v = (nc.symbol(s) for s in "qxnv")


def test_positions_count_from_zero_and_are_integers():
    p = nc.position("x", x=5)
    assert p.dom == nc.Ty() and p.cod.inside[0].dtype == nc.INT32
    got = nc.evaluate(p)
    assert got.tolist() == [0, 1, 2, 3, 4] and np.issubdtype(got.dtype, np.integer)


def test_a_position_inside_a_partition_is_the_global_position():
    """Inside a Grid over x each group numbers its own slice from its start: the whole axis comes back."""
    b = nc.Builder(nc.types("x"))
    (v_,) = b.inputs
    shifted = b.build(b(nc.elementwise("add", "x, x -> x"), v_, b(nc.cast("x", to="fp32", dtype="int32"),
                                                                  b(nc.position("x")))))
    grid = nc.group(shifted, "x", "g_x")
    vals = np.zeros(7)
    assert nc.evaluate(grid, vals, sizes={"g_x": 3}).tolist() == list(range(7))


@pytest.mark.parametrize("op, ref", [("le", np.less_equal), ("lt", np.less), ("ge", np.greater_equal),
                                     ("gt", np.greater), ("eq", np.equal), ("ne", np.not_equal)])
def test_comparisons_broadcast_by_name(op, ref):
    a, c = np.array([0, 2, 4]), np.array([1, 2])
    got = nc.evaluate(nc.compare(op, "x, q -> q x"), a, c)
    assert got.dtype == bool and (got == ref(a[None, :], c[:, None])).all()
    assert nc.compare(op, "x, q -> q x").cod.inside[0].dtype == nc.BOOL


def test_logic_where_and_select():
    m, k = np.array([True, False, True]), np.array([True, True, False])
    assert nc.evaluate(nc.logical("and", "x, x -> x"), m, k).tolist() == [True, False, False]
    assert nc.evaluate(nc.logical("or", "x, x -> x"), m, k).tolist() == [True, True, True]
    assert nc.evaluate(nc.logical("not", "x"), m).tolist() == [False, True, False]
    vals, other = np.array([1.0, 2.0, 3.0]), np.array([9.0, 8.0, 7.0])
    assert nc.evaluate(nc.where("x, x -> x"), m, vals).tolist() == [1.0, -np.inf, 3.0]
    assert nc.evaluate(nc.where("x, x -> x", other=0), m, vals).tolist() == [1.0, 0.0, 3.0]
    assert nc.evaluate(nc.select("x, x, x -> x"), m, vals, other).tolist() == [1.0, 8.0, 3.0]


def test_gather_takes_along_its_axis_and_a_slice_gives_its_part():
    rng = np.random.default_rng(0)
    X, t = rng.normal(size=(4, 6)), np.array([5, 0, 3, 3])
    g = nc.gather("n v, n -> n")
    np.testing.assert_array_equal(nc.evaluate(g, X, t), X[np.arange(4), t])
    streamed = nc.stream(g, "v", "s_v")
    np.testing.assert_allclose(nc.evaluate(streamed, X, t, sizes={"s_v": 4}), X[np.arange(4), t])
    (r,) = analyse(g, "v").reducers
    assert r.kind == "sum"          # each index falls in exactly one slice: the slices' parts add up


def test_a_table_read_at_positions_over_other_axes():
    """``y[h, q, x] = T[h, t[q, x]]``: the table woven over h only, the index over q and x only; numpy's fancy
    indexing is the reference, streamed along the table's axis (the slices' parts add up) and grouped."""
    rng = np.random.default_rng(3)
    T, t = rng.normal(size=(2, 9)), rng.integers(0, 9, size=(4, 5)).astype(np.int32)
    g = nc.gather("h v, q x -> h q x")
    assert [(w.name, w.inputs) for w in g.boxes[0].data.weaves] == [("x", (1,)), ("q", (1,)), ("h", (0,))]
    want = T[:, t]
    np.testing.assert_array_equal(nc.evaluate(g, T, t), want)
    tiled = nc.group(nc.stream(g, "v", "s_v"), "q", "g_q")
    np.testing.assert_allclose(nc.evaluate(tiled, T, t, sizes={"s_v": 4, "g_q": 2}), want)
    assert nc.cost(g).flops == {"general": nc.symbol("h") * q * x}
    np.testing.assert_array_equal(nc.evaluate(nc.gather("v, q x -> q x"), T[0], t), T[0][t])


def test_flops_of_the_index_kinds():
    assert nc.cost(nc.position("x")).flops == {}
    assert nc.cost(nc.compare("le", "x, q -> q x")).flops == {"general": q * x}
    assert nc.cost(nc.gather("n v, n -> n")).flops == {"general": n}
    lse = nc.cost(nc.reduce("logsumexp", "n v -> n")).flops
    assert sympy.expand(lse["special"] - n * (v + 1)) == 0 and sympy.expand(lse["general"] - n * (3 * v + 1)) == 0


def test_logsumexp_matches_numpy_and_streams_by_its_online_form():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(3, 7)) * 50
    X[0] = -np.inf
    X[1, :3] = -np.inf
    lse = nc.reduce("logsumexp", "n v -> n")
    m = np.max(X[1:], axis=1)
    want = np.concatenate([[-np.inf], m + np.log(np.exp(X[1:] - m[:, None]).sum(1))])
    np.testing.assert_allclose(nc.evaluate(lse, X), want, rtol=1e-12)
    streamed = nc.group(nc.stream(lse, "v", "s_v"), "n", "g_n")
    np.testing.assert_allclose(nc.evaluate(streamed, X, sizes={"s_v": 3, "g_n": 2}), want, rtol=1e-12)
    assert [r.kind for r in analyse(lse, "v").reducers] == ["logsumexp_online"]
    assert kind_of("log").item_flops(None) == {"special": 1}


def test_integer_formats():
    assert nc.INT32.is_integer and nc.BOOL.is_integer and not nc.FP32.is_integer
    assert nc.INT32.bytes == 4 and nc.BOOL.bytes == 1
    assert nc.INT32.quantize(np.array([1.6, -2.4])).tolist() == [2, -2]


# --------------------------------------------------------------------------- typed errors
def test_a_gather_index_must_be_an_integer_array():
    with pytest.raises(nc.IndexingError, match=r"gather 'n v, n -> n': the index must be an integer array; "
                                               r"dtype fp32 is not"):
        nc.gather("n v, n -> n", index_dtype="fp32")
    with pytest.raises(nc.IndexingError, match=r"gather along 'v': the index input holds non-integers"):
        nc.evaluate(nc.gather("n v, n -> n"), np.ones((2, 3)), np.array([0.5, 1.0]))


def test_a_gather_index_carries_output_axes_and_not_the_gathered_one():
    with pytest.raises(nc.IndexingError, match=r"the index carries \['m'\], which the output \['n'\] does not; "
                                               r"every index axis is an output axis"):
        nc.gather("n v, m -> n")
    with pytest.raises(nc.IndexingError, match=r"the first input must carry one axis the output does not, the axis "
                                               r"gathered along; it carries \['n', 'v', 'w'\] and the output"):
        nc.gather("n v w, n -> n")
    with pytest.raises(nc.IndexingError, match=r"the index carries the gathered axis 'v'"):
        nc.gather("v, q v -> q")
    with pytest.raises(nc.IndexingError, match=r"the output axes \['h'\] are in neither input"):
        nc.gather("v, q -> h q")


def test_positions_are_integers_and_name_one_axis():
    with pytest.raises(nc.IndexingError, match=r"position of 'x': positions are integers; dtype fp32 is not"):
        nc.position("x", dtype="fp32")
    with pytest.raises(nc.SignatureError, match=r"position of 'x': sizes given for \['q'\]"):
        nc.position("x", q=3)


def test_unknown_comparisons_and_logic_are_refused():
    with pytest.raises(nc.SignatureError, match=r"unknown comparison 'leq'; comparisons are"):
        nc.compare("leq", "x, q -> q x")
    with pytest.raises(nc.SignatureError, match=r"unknown logical operation 'xor'"):
        nc.logical("xor", "x, x -> x")
    with pytest.raises(nc.SignatureError, match=r"le: input 0 axis 'y' is not in the output"):
        nc.compare("le", "y, q -> q x")


def test_a_window_of_negative_width_is_refused():
    with pytest.raises(nc.IndexingError, match=r"the window w = -3 is negative"):
        nc.library.sliding_window_attention(-3)
    with pytest.raises(nc.IndexingError, match=r"the window w = 1.5 is not an integer"):
        nc.library.window_mask(1.5)


def test_a_mask_over_an_axis_the_scores_lack_is_refused():
    b = nc.Builder(nc.Ty())
    mask = b.build(b(nc.compare("le", "y, q -> q y"), b(nc.position("y")), b(nc.position("q"))))
    with pytest.raises(nc.IndexingError, match=r"the mask is over axis 'y', which the scores q×x lack"):
        nc.library.masked_attention(mask)
    with pytest.raises(nc.IndexingError, match=r"the mask's output is fp32; a mask is a bool array"):
        nc.library.masked_attention(nc.library.alibi_bias())
    with pytest.raises(nc.IndexingError, match=r"the mask's axis 'q' has size 4, the scores' has 5"):
        nc.library.masked_attention(nc.library.causal_mask(q=4, x=5), q=5, x=5)
