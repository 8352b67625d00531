"""Which streams skip trips: a mask from positions whose false value makes every reducer's contribution neutral."""
import numpy as np

import napkin_cat as nc
from napkin_cat.algorithms.schedule import schedule_of


def _stream(d, axis="x"):
    return schedule_of(nc.stream(d, axis, f"s_{axis}").boxes[0].arg.boxes[0])


def _masked_reduction(reduction, other):
    b = nc.Builder(nc.types("q x"))
    (v,) = b.inputs
    m = b(nc.library.causal_mask())
    return b.build(b(nc.reduce(reduction, "q x -> q"), b(nc.where("q x, q x -> q x", other=other), m, v)))


def test_causal_attention_skips_on_its_mask_and_plain_attention_does_not():
    s = _stream(nc.library.causal_attention())
    assert s.skip is not None and s.skip.axes == {"q", "x"} and len(s.skip.masks) == 1
    assert _stream(nc.library.attention()).skip is None


def test_a_mask_skips_only_where_its_false_value_is_the_reducers_identity():
    assert _stream(_masked_reduction("sum", 0.0)).skip is not None       # 0: the sum's identity
    assert _stream(_masked_reduction("max", -np.inf)).skip is not None   # −∞: the max's
    assert _stream(_masked_reduction("sum", -np.inf)).skip is None       # −∞ added to a sum changes it
    assert _stream(_masked_reduction("max", 0.0)).skip is None
    assert _stream(_masked_reduction("logsumexp", -np.inf)).skip is not None   # the online form's neutral


def test_scores_masked_to_zero_are_not_neutral_for_the_online_softmax():
    b = nc.Builder(nc.types("q d, x d, x d"))
    Q, K, V = b.inputs
    S = b(nc.einsum("q d, x d -> q x"), Q, K)
    S = b(nc.where("q x, q x -> q x", other=0.0), b(nc.library.causal_mask()), S)
    P = b(nc.softmax("q x", over="x"), S)
    d = b.build(b(nc.einsum("q x, x d -> q d"), P, V))
    assert _stream(d).skip is None


def test_a_mask_from_data_alone_is_decided_by_a_block_mask_but_a_conjunction_with_positions_by_intervals():
    skip = _stream(nc.library.document_attention()).skip                      # segment ids: no interval
    assert skip.masks == () and [m.names for m in skip.data] == [("q", "x")]
    assert not skip.skipped(lambda a, n: (8, 4) if a == "x" else (0, 4))      # without the data's block mask
    s = _stream(nc.library.document_attention(causal=True))
    assert s.skip is not None and s.skip.skipped(lambda a, n: (8, 4) if a == "x" else (0, 4))


def test_the_skip_test_is_a_condition_on_symbolic_tiles():
    import sympy
    i, g = sympy.Symbol("i", integer=True, nonnegative=True), nc.symbol("g")
    s = _stream(nc.library.causal_attention())
    cond = s.skip.skipped(lambda a, n: (i * g, g) if a == "x" else (0, nc.symbol("q")))
    assert isinstance(cond, sympy.Basic) and cond.subs({i: 3, g: 4, nc.symbol("q"): 12}) == sympy.true
    assert cond.subs({i: 2, g: 4, nc.symbol("q"): 12}) == sympy.false


def test_two_copies_of_a_mask_skip_a_trip_whose_reducers_each_read_one():
    """A backward's kernel masks the scores with one copy of the mask and their gradient with another: the first
    copy false makes the probabilities 0, so ``where(m₂, 0·…, other=0)`` is 0 whatever m₂ is, and both sums are
    neutral (``where(m, v, other=v) = v``)."""
    b = nc.Builder(nc.types("q x, x d"))
    s, v = b.inputs
    p = b(nc.elementwise("exp", "q x"), b(nc.where("q x, q x -> q x"), b(nc.library.causal_mask()), s))
    g = b(nc.where("q x, q x -> q x", other=0.0), b(nc.library.causal_mask()),
          b(nc.elementwise("mul", "q x, q x -> q x"), p, s))
    d = b.build(b(nc.einsum("q x, x d -> q d"), p, v), b(nc.einsum("q x, x d -> q d"), g, v))
    skip = _stream(d).skip
    assert skip is not None and len(skip.masks) == 1                     # the first copy alone makes both neutral
    assert skip.skipped(lambda a, n: (4, 4) if a == "x" else (0, 2)) is True


def test_copies_of_a_mask_in_products_apart_skip_only_together():
    """A kernel of dK and dV recomputes the probabilities for each sum, each from its own copy of the mask: one copy
    false makes one sum neutral, never both, so no copy alone skips; the copies are one value (equal boxes on equal
    inputs), false together on a tile, and that tile is skipped.  The maths agrees: the outputs' rows of the tile
    do not depend on the scores there (x > q: exp(−∞) = 0), where they do on a tile the mask reaches."""
    b = nc.Builder(nc.types("q x, x d, x d"))
    s, v, w = b.inputs
    p1 = b(nc.elementwise("exp", "q x"), b(nc.where("q x, q x -> q x"), b(nc.library.causal_mask()), s))
    p2 = b(nc.elementwise("exp", "q x"), b(nc.where("q x, q x -> q x"), b(nc.library.causal_mask()), s))
    d = b.build(b(nc.einsum("q x, x d -> q d"), p1, v), b(nc.einsum("q x, x d -> q d"), p2, w))
    skip = _stream(d).skip
    assert skip is not None and len(skip.masks) == 1 and len(skip.masks[0].copies) == 1
    assert skip.skipped(lambda a, n: (4, 4) if a == "x" else (0, 2)) is True
    assert skip.skipped(lambda a, n: (0, 4) if a == "x" else (0, 2)) is False
    rng = np.random.default_rng(0)
    xs = [rng.normal(size=(8, 8)), rng.normal(size=(8, 3)), rng.normal(size=(8, 3))]
    for cols, changes in ((slice(4, 8), False), (slice(0, 4), True)):
        moved = xs[0].copy()
        moved[0:2, cols] += 1.0
        for y, z in zip(nc.evaluate(d, *xs), nc.evaluate(d, moved, *xs[1:]), strict=True):
            assert np.allclose(y[0:2], z[0:2]) != changes
