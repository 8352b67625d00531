"""``nc.library.prefix_lm_attention`` and ``softcap_attention`` (issue 36's mask zoo), each checked by a second
route: numpy written from the mathematics (O and the log-sum-exp L; the gradient against central finite
differences of that numpy); ``nc.derive`` at a few memories, whose H is what the plan runner counts and what the
mask's definition implies (Q and O once, K and V once per key some query of a tile attends); and, at tiles that
do not line up with the prefix, the key tiles the mask skips counted from the mask's truth table."""
from __future__ import annotations

import math
import os

import numpy as np
import pytest

import napkin_cat as nc
from napkin_cat.errors import ArgumentError, IndexingError

L = nc.library


# ------------------------------------------------------------------------------------------ the mathematics
def prefix_truth(P, q, x):
    """``x ≤ q or x < P`` on the q × x grid."""
    qs, xs = np.arange(q)[:, None], np.arange(x)[None, :]
    return (xs <= qs) | (xs < P)


def causal_truth(q, x):
    return prefix_truth(0, q, x)


def attend(Q, K, V, allowed=True, cap=None):
    """``O = softmax_x(s) V`` and ``L = logsumexp_x(s)`` of ``s = Q Kᵀ/√d``, capped to ``cap·tanh(s/cap)``, then
    −∞ where not allowed (a row with no key: NaN, as the algorithm gives)."""
    s = Q @ K.T / math.sqrt(Q.shape[1])
    if cap is not None:
        s = cap * np.tanh(s / cap)
    s = np.where(allowed, s, -np.inf)
    with np.errstate(invalid="ignore"):
        m = s.max(axis=1, keepdims=True)
        e = np.exp(s - m)
        return (e / e.sum(axis=1, keepdims=True)) @ V, (m + np.log(e.sum(axis=1, keepdims=True)))[:, 0]


def _qkv(q, x, d, seed=0, scale=1.0):
    rng = np.random.default_rng(seed)
    return [scale * rng.normal(size=(n, d)) for n in (q, x, x)]


@pytest.mark.parametrize("P", [0, 1, 4, 7, 12])
def test_prefix_lm_attention_is_softmax_over_the_causal_keys_and_the_prefix(P):
    q, x, d = 9, 12, 3                                  # more keys than queries: the last keys only in a prefix
    Q, K, V = _qkv(q, x, d)
    O, Lse = nc.evaluate(L.prefix_lm_attention(P, q=q, x=x, d=d, lse=True), Q, K, V)
    want_O, want_L = attend(Q, K, V, prefix_truth(P, q, x))
    np.testing.assert_allclose(O, want_O, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(Lse, want_L, rtol=1e-12, atol=1e-12)


def test_a_prefix_of_nothing_is_causal_and_of_every_key_is_attention():
    Q, K, V = _qkv(6, 6, 2, seed=1)
    np.testing.assert_allclose(nc.evaluate(L.prefix_lm_attention(0, q=6, x=6, d=2), Q, K, V),
                               nc.evaluate(L.causal_attention(q=6, x=6, d=2), Q, K, V), rtol=1e-12)
    np.testing.assert_allclose(nc.evaluate(L.prefix_lm_attention(6, q=6, x=6, d=2), Q, K, V),
                               nc.evaluate(L.attention(q=6, x=6, d=2), Q, K, V), rtol=1e-12)


#: mask name → (the mask at sizes q, x, or None; its truth on the grid from the segment ids)
SOFTCAPS = {
    "none": (lambda q, x: None, lambda q, x, ids: np.ones((q, x), bool)),
    "causal": (lambda q, x: L.causal_mask(q=q, x=x), lambda q, x, ids: causal_truth(q, x)),
    "prefix 3": (lambda q, x: L.prefix_lm_mask(3, q=q, x=x), lambda q, x, ids: prefix_truth(3, q, x)),
    "document": (lambda q, x: L.document_mask(q=q, x=x), lambda q, x, ids: ids[0][:, None] == ids[1][None, :]),
}


@pytest.mark.parametrize("cap", [0.5, 3.0])
@pytest.mark.parametrize("mask", list(SOFTCAPS))
def test_softcap_attention_caps_the_scaled_scores_then_masks(mask, cap):
    q, x, d = 7, 9, 4
    Q, K, V = _qkv(q, x, d, seed=2, scale=2.0)          # scores of a few units: tanh bends at either cap
    ids = [np.array([0, 0, 1, 1, 1, 2, 2], np.int32), np.array([0, 0, 0, 1, 1, 2, 2, 2, 2], np.int32)]
    f = L.softcap_attention(cap, q=q, x=x, d=d, mask=SOFTCAPS[mask][0](q, x), lse=True)
    O, Lse = nc.evaluate(f, Q, K, V, *(ids if mask == "document" else []))
    allowed = SOFTCAPS[mask][1](q, x, ids)
    want_O, want_L = attend(Q, K, V, allowed, cap=cap)
    np.testing.assert_allclose(O, want_O, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(Lse, want_L, rtol=1e-12, atol=1e-12)
    # every capped score lies in (−c, c), so L = log Σ e^s is within c of log(the number of keys seen)
    assert np.all(np.abs(Lse - np.log(allowed.sum(axis=1))) < cap)
    assert not np.allclose(O, attend(Q, K, V, allowed)[0], atol=1e-3)        # the cap changed the answer


def test_a_cap_far_above_the_scores_is_plain_attention():
    Q, K, V = _qkv(5, 6, 3, seed=4)
    np.testing.assert_allclose(nc.evaluate(L.softcap_attention(1e6, q=5, x=6, d=3), Q, K, V),
                               nc.evaluate(L.attention(q=5, x=6, d=3), Q, K, V), rtol=1e-9)


GRADS = {
    "prefix-LM": (lambda: L.prefix_lm_attention(4, q=6, x=7, d=3), prefix_truth(4, 6, 7), None),
    "softcap": (lambda: L.softcap_attention(1.5, q=6, x=7, d=3), np.ones((6, 7), bool), 1.5),
    "softcap, prefix-LM": (lambda: L.softcap_attention(1.5, q=6, x=7, d=3, mask=L.prefix_lm_mask(4, q=6, x=7)),
                           prefix_truth(4, 6, 7), 1.5),
}


@pytest.mark.parametrize("name", list(GRADS))
def test_the_gradient_is_the_finite_differences_of_the_mathematics(name):
    """``nc.grad`` (Q, K, V, dO → dQ, dK, dV) against central differences of ⟨dO, O⟩ of the numpy above."""
    make, allowed, cap = GRADS[name]
    xs = _qkv(6, 7, 3, seed=5, scale=1.5)
    dO = np.random.default_rng(6).normal(size=(6, 3))
    got = nc.evaluate(nc.grad(make()), *xs, dO)
    h = 1e-6
    for i, (x, g) in enumerate(zip(xs, got)):
        fd = np.zeros_like(x)
        for j in np.ndindex(x.shape):
            up, down = [y.copy() for y in xs], [y.copy() for y in xs]
            up[i][j] += h
            down[i][j] -= h
            fd[j] = (np.sum(dO * attend(*up, allowed, cap)[0]) - np.sum(dO * attend(*down, allowed, cap)[0])) / (2 * h)
        np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-7, err_msg=f"{name}: input {i}")


# ------------------------------------------------------------------------------- what the algorithms move
def tiles_that_run(truth, g, s):
    """The (query tile, key tile) pairs of ``g`` queries × ``s`` keys on which ``truth`` is somewhere true, as
    (queries in it, keys in it): the tiles a stream over x must run (the last ones shorter where ragged)."""
    q, x = truth.shape
    return [(min(g, q - a), min(s, x - b)) for a in range(0, q, g) for b in range(0, x, s)
            if truth[a:a + g, b:b + s].any()]


def moved_by_definition(truth, tiles, d):
    """The transfers of a fused kernel over query tiles ``g_q`` streaming key tiles ``s_x`` (Q loaded and O stored
    once; K and V once per key tile that runs), or of a sweep over q (K and V held: every array once); None for
    another structure."""
    q, x = truth.shape
    if set(tiles) == {"s_q"}:
        return 2 * q * d + 2 * x * d
    if set(tiles) != {"g_q", "s_x"}:
        return None
    return 2 * q * d + 2 * d * sum(keys for _, keys in tiles_that_run(truth, tiles["g_q"], tiles["s_x"]))


slow = pytest.mark.skipif(not os.environ.get("NAPKIN_SLOW"), reason="more derivations: set NAPKIN_SLOW=1")

#: name → (the algorithm at no sizes, its truth table at (q, x), its cap)
DERIVED = {
    "prefix-LM 12": (lambda: L.prefix_lm_attention(12), lambda q, x: prefix_truth(12, q, x), None),
    "prefix-LM 7": (lambda: L.prefix_lm_attention(7), lambda q, x: prefix_truth(7, q, x), None),
    "softcap": (lambda: L.softcap_attention(2.0), lambda q, x: np.ones((q, x), bool), 2.0),
    "softcap, causal": (lambda: L.softcap_attention(2.0, mask=L.causal_mask()), causal_truth, 2.0),
    "softcap, prefix-LM 5": (lambda: L.softcap_attention(2.0, mask=L.prefix_lm_mask(5)),
                             lambda q, x: prefix_truth(5, q, x), 2.0),
}


@pytest.mark.parametrize("name, sizes, memories", [
    ("prefix-LM 7", {"q": 30, "x": 21, "d": 4}, [100, 400]),         # no tile lines up with the prefix
    ("softcap, prefix-LM 5", {"q": 20, "x": 20, "d": 2}, [40, 120]),
    pytest.param("prefix-LM 12", {"q": 32, "x": 32, "d": 4}, [96, 256, 1024], marks=slow),
    pytest.param("softcap", {"q": 32, "x": 32, "d": 4}, [96, 256, 1024], marks=slow),
    pytest.param("softcap, causal", {"q": 32, "x": 32, "d": 4}, [96, 256, 1024], marks=slow),
])
def test_derived_H_is_what_the_runner_counts_and_the_mask_implies(name, sizes, memories):
    make, truth_at, cap = DERIVED[name]
    r = nc.derive(make(), memory=memories, sizes=sizes)
    truth = truth_at(sizes["q"], sizes["x"])
    xs = _qkv(sizes["q"], sizes["x"], sizes["d"], seed=7)
    want = attend(*xs, truth, cap)[0]
    defined = 0
    for reg in r.regimes:
        tiles = {k: int(v) for k, v in reg.tiles.items() if k not in sizes}
        at = {**sizes, **tiles}
        out, counted = nc.plan(reg.diagram, at).run(*xs)
        cost = nc.cost(reg.diagram, sizes=at)
        assert counted.transfers[1] == cost.H[1] == reg.H, (name, reg.memory, tiles)
        assert counted.flops == cost.flops, (name, reg.memory, tiles)
        np.testing.assert_allclose(out, want, rtol=1e-9, atol=1e-9)
        moved = moved_by_definition(truth, tiles, sizes["d"])
        if moved is not None:
            assert reg.H == moved, (name, reg.memory, tiles, moved)
            defined += 1
    assert defined >= 1 and len(r.regimes) >= 2


def flash(f):
    return nc.group(nc.stream(f, "x", "s_x"), "q", "g_q")


@pytest.mark.parametrize("sizes, P", [({"q": 24, "x": 24, "d": 2, "g_q": 4, "s_x": 6}, 5),
                                      ({"q": 24, "x": 24, "d": 2, "g_q": 8, "s_x": 4}, 0),         # causal
                                      ({"q": 10, "x": 13, "d": 3, "g_q": 4, "s_x": 3}, 9)])   # ragged tiles
def test_the_key_tiles_a_prefix_lm_mask_skips_are_counted(sizes, P):
    """FlashAttention's schedule at tiles that need not line up with the prefix: the key tiles it runs are those
    on which ``x ≤ q or x < P`` holds somewhere (counted here from the truth table), in the plan runner and the
    cost at sizes alike; the capped scores of softcap attention are masked after the cap, so its stream skips the
    same tiles, and computes one tanh per score of the tiles that run."""
    q, x, d, g, s = (sizes[k] for k in ("q", "x", "d", "g_q", "s_x"))
    truth = prefix_truth(P, q, x)
    ran = tiles_that_run(truth, g, s)
    every = len(range(0, q, g)) * len(range(0, x, s))
    assert len(ran) < every                             # the sizes are such that some tile is skipped
    xs = _qkv(q, x, d, seed=8)
    plain = flash(L.prefix_lm_attention(P))
    capped = flash(L.softcap_attention(1.0, mask=L.prefix_lm_mask(P)))
    for alg in (plain, capped):
        _, counted = nc.plan(alg, sizes).run(*xs)
        assert counted.transfers[1] == nc.cost(alg, sizes=sizes).H[1] == 2 * q * d + 2 * d * sum(k for _, k in ran)
    scores = sum(a * b for a, b in ran)
    assert nc.cost(capped, sizes=sizes).flops["special"] - nc.cost(plain, sizes=sizes).flops["special"] == scores


# ------------------------------------------------------------------------------------------- their inputs
@pytest.mark.parametrize("prefix, why", [(-1, "negative"), (2.5, "not an integer"), (True, "not an integer"),
                                         ("3", "not an integer"), (2 ** 65, "more than 2")])
def test_a_prefix_that_is_not_a_count_of_keys_is_refused(prefix, why):
    with pytest.raises(IndexingError, match=f"prefix P = .* is {why}.*an integer 0 … the key axis"):
        L.prefix_lm_attention(prefix)


def test_a_prefix_longer_than_the_key_axis_is_refused_and_the_whole_axis_is_not():
    with pytest.raises(IndexingError, match="prefix P = 9 is longer than the key axis x = 8; .* 0 ≤ P ≤ 8"):
        L.prefix_lm_attention(9, q=8, x=8)
    with pytest.raises(IndexingError, match="longer than the key axis x = 4"):
        L.prefix_lm_mask(5, x=4)
    assert L.prefix_lm_attention(8, q=8, x=8).dom == L.attention(q=8, x=8).dom
    assert L.prefix_lm_attention(30, q=40).dom == L.attention(q=40).dom     # x not given: no size to hold it to


@pytest.mark.parametrize("cap, why", [(0, "not a finite positive"), (-2.0, "not a finite positive"),
                                      (float("inf"), "not a finite positive"), (float("nan"), "not a finite positive"),
                                      ("50", "not a real number"), (True, "not a real number"),
                                      (None, "not a real number")])
def test_a_cap_that_is_not_a_finite_positive_number_is_refused(cap, why):
    with pytest.raises(ArgumentError, match=f"the cap c = .* is {why}.*c a finite real > 0"):
        L.softcap_attention(cap)


def test_a_softcap_mask_at_other_sizes_or_not_a_mask_is_refused():
    with pytest.raises(IndexingError, match="axis 'q' has size 4, the scores' has 5"):
        L.softcap_attention(2.0, q=5, x=4, mask=L.causal_mask(q=4, x=4))
    with pytest.raises(IndexingError, match="a mask is a bool array"):
        L.softcap_attention(2.0, mask=L.alibi_bias())
    with pytest.raises(ArgumentError, match="the mask is a str; a mask is a diagram"):
        L.softcap_attention(2.0, mask="causal")


@pytest.mark.parametrize("make", [lambda **k: L.prefix_lm_attention(3, **k), lambda **k: L.softcap_attention(**k),
                                  lambda **k: L.softcap_attention(5.0, mask=L.document_mask(
                                      **{n: v for n, v in k.items() if n in "qx"}), **k)])
def test_sizes_are_symbolic_by_default_and_taken_as_keywords(make):
    d = make()
    assert all(not a.is_concrete for arr in d.dom.inside for a in arr.axes)
    given = make(q=3, x=4, d=5)
    assert [[a.size for a in arr.axes] for arr in given.dom.inside][:3] == [[3, 5], [4, 5], [4, 5]]


def test_the_masks_are_drawn_from_positions_and_a_softcap_takes_its_masks_inputs_after_q_k_v():
    assert L.prefix_lm_mask(4).dom == nc.Ty()
    assert sum(getattr(b.data, "kind", None) == "position" for b in L.prefix_lm_mask(4).boxes) == 2
    assert [str(a) for a in L.softcap_attention(mask=L.document_mask()).dom.inside] == \
        ["q×d", "x×d", "x×d", "q:int32", "x:int32"]
    assert len(L.prefix_lm_attention(4, lse=True).cod) == len(L.softcap_attention(lse=True).cod) == 2
