"""Derive reaches the 2-D loop (a stream inside a stream's trip along another axis, issue 22 item 1): fused
linear cross-entropy at n = 1024, e = 256, v = 8192 streams the vocabulary and, per vocabulary slice, the hidden
axis, without any axis named in the search.

Hand count of the 2-D schedule (independent of the search): per group of g_n rows and slice of s_v words, a loop
over e in slices of s_e reads the hidden rows' slice (g_n·s_e) and the weight's (s_v·s_e), so
H = n·e·v/s_v + n·v·e/g_n + 2n (targets and losses once) in memory g_n·s_v + s_e·(g_n + s_v) + 4·g_n."""
from __future__ import annotations

import numpy as np

import napkin_cat as nc
from napkin_cat.cost.numeric import at
from napkin_cat.rewriting.registry import Rulebook
from rewrites import RULEBOOK

SIZES = {"n": 1024, "e": 256, "v": 8192}


def hand(g, s_v, s_e, n=1024, e=256, v=8192):
    """(H, memory) of the 2-D schedule at tiles dividing their axes (see the module docstring)."""
    return n * e * v // s_v + n * v * e // g + 2 * n, g * s_v + s_e * (g + s_v) + 4 * g


def best_by_hand(M):
    divisors = [2 ** k for k in range(14)]
    return min(hand(g, s, t)[0] for g in divisors if g <= 1024 for s in divisors if s <= 8192 for t in (1, 2, 4)
               if t <= 256 and hand(g, s, t)[1] <= M)


def test_linear_cross_entropy_derives_the_2d_loop_at_2_14():
    d = nc.derive(nc.library.linear_cross_entropy(), 2 ** 14, sizes=SIZES)
    (k,) = d.variant.kernels
    assert k.stream == "v" and k.inner == ("e",) and k.groups == ("n",)
    assert "inner_stream" in [s.rule for s in d.trace]
    assert d.H == best_by_hand(2 ** 14) == 50_333_696
    g, s_v, s_e = (int(d.optimum.sizes[a]) for a in ("g_n", "s_v", "s_e"))
    assert hand(g, s_v, s_e) == (d.H, at(d.diagram, {**SIZES, "g_n": g, "s_v": s_v, "s_e": s_e}).M[1])
    assert nc.isomorphic(d.trace.replay(nc.library.linear_cross_entropy()), d.diagram)


def test_without_the_nest_role_derive_moves_a_third_more():
    """Before the 2-D loop (a book without a rule playing ``nest``): the logits written by a tiled product and
    read by a streamed log-sum-exp, 67,110,912 values; the 2-D loop saves 25%."""
    roles = {k: v for k, v in RULEBOOK.roles.items() if k != "nest"}
    book = Rulebook("no nest", RULEBOOK.rules, dict(RULEBOOK.derivations), roles=roles)
    before = nc.derive(nc.library.linear_cross_entropy(), 2 ** 14, sizes=SIZES, book=book)
    assert before.H == 67_110_912 and not any(k.inner for k in before.variant.kernels)
    assert "inner_stream" not in [s.rule for s in before.trace]
    after = nc.derive(nc.library.linear_cross_entropy(), 2 ** 14, sizes=SIZES)
    assert after.H < before.H


def test_ragged_tiles_reach_the_2d_loop_too():
    """With a shorter last tile allowed the 2-D loop moves 34,605,056 values at 2^14 (g_n = 128, s_v = 121): the
    hidden rows once per vocabulary trip (⌈v/s_v⌉ of them), the weight once per group of rows (⌈n/g_n⌉)."""
    d = nc.derive(nc.library.linear_cross_entropy(), 2 ** 14, sizes=SIZES, tiles="any")
    (k,) = d.variant.kernels
    assert k.inner == ("e",)
    g, s_v = int(d.optimum.sizes["g_n"]), int(d.optimum.sizes["s_v"])
    n, e, v = 1024, 256, 8192
    assert d.H == n * e * -(-v // s_v) + -(-n // g) * v * e + 2 * n == 34_605_056   # ⌈trips⌉: the hand count


def test_the_derived_2d_loop_runs_at_ragged_sizes():
    """The derived diagram's plan at small ragged sizes: the loss numpy computes, counts equal the cost."""
    d = nc.derive(nc.library.linear_cross_entropy(), 2 ** 14, sizes=SIZES)
    sizes = {"n": 7, "e": 11, "v": 13, "g_n": 3, "s_v": 5, "s_e": 4}
    p = nc.plan(d.diagram, sizes)
    rng = np.random.default_rng(0)
    H, W, t = rng.normal(size=(7, 11)), rng.normal(size=(13, 11)), rng.integers(0, 13, 7).astype(np.int32)
    y, counted = p.run(H, W, t)
    logits = H @ W.T
    m = logits.max(1)
    want = m + np.log(np.exp(logits - m[:, None]).sum(1)) - logits[np.arange(7), t]
    np.testing.assert_allclose(y, want, rtol=1e-10)
    assert counted.transfers == at(d.diagram, sizes).H
