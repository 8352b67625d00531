"""A probability picked from a SoftMax (``rewrites.gathered_probability``) derives into one read of the logits.

``p[i] = SoftMax_v(L[i, :])[t_i]`` over a vocabulary of 131,072 (and the prime 131,071): at every memory ``nc.derive``
moves the compulsory values alone (the logits once, the index and the output: n·v + 2n), ``H`` = ``nc.cost`` at the
answer's tiles = the plan runner's count (run at the larger tiles that memory allows: at the answer's own the runner
would loop n·v times, and the answer's ``H`` does not depend on its tiles) and the plan computes the numpy
probability, also where it underflows or a logit is masked.  The book without the rule (the mutant) reads the logits
twice where a row does not fit.  A program the law was not written for (a top-1 MoE gate: SoftMax over experts of
X·W, gathered at the routing index) derives no worse and moves less where the gate's row does not fit; a SoftMax read
by a gather and by a contraction derives as it did without the rule, and computes the numpy reference.
"""
from __future__ import annotations

import numpy as np
import pytest

import napkin_cat as nc
from napkin_cat.errors import AxisError
from napkin_cat.rewriting import RuleSet
from napkin_cat.rewriting.registry import Rulebook
from rewrites import RULEBOOK

#: rows: each is the same problem (a row of 131,072 logits, past 4096 and 65536, within 2^20), and 16 rows still do
#: not fit whole at any memory of the test (16 · 131,072 = 2^21 > 2^20); the plan's runner steps through every row's
#: trips, so 64 rows cost 4× as much and showed nothing more (suite-37: 6.7 → ~2 CPU s a case)
N = 16


def vocab_prob():
    b = nc.Builder(nc.types("n v") @ nc.types("n", dtype=nc.INT32))
    logits, t = b.inputs
    return b.build(b(nc.gather("n v, n -> n"), b(nc.softmax("n v", over="v"), logits), t))


def moe_gate():
    """Top-1 MoE gate probability: G = X W over experts e, p[t] = SoftMax_e(G)[t, r_t], r the routing index."""
    b = nc.Builder(nc.types("t d, d e") @ nc.types("t", dtype=nc.INT32))
    X, W, r = b.inputs
    G = b(nc.einsum("t d, d e -> t e"), X, W)
    return b.build(b(nc.gather("t e, t -> t"), b(nc.softmax("t e", over="e"), G), r))


def mixed():
    """The target's probability and the expected logit Σ_v p·L: the SoftMax read by a gather and a contraction."""
    b = nc.Builder(nc.types("n v") @ nc.types("n", dtype=nc.INT32))
    logits, t = b.inputs
    p = b(nc.softmax("n v", over="v"), logits)
    return b.build(b(nc.gather("n v, n -> n"), p, t), b(nc.einsum("n v, n v -> n"), p, logits))


def without_the_rule():
    """The rule book less ``softmax_of_gathered`` (the mutant the H tests must catch)."""
    rules = RuleSet(tuple(r for r in RULEBOOK.rules if r.name != "softmax_of_gathered"))
    roles = {k: (tuple(n for n in v if n != "softmax_of_gathered") if isinstance(v, tuple) else v)
             for k, v in RULEBOOK.roles.items()}
    return Rulebook("no gathered softmax", rules, dict(RULEBOOK.derivations), roles=roles)


def softmax_rows(L):
    with np.errstate(invalid="ignore"):
        e = np.exp(L - L.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)


def runnable_tiles(reg, sizes, memory):
    """The answer's tiles, each stream tile raised to the largest power of two the memory holds (fewest trips)."""
    tiles = {str(k): int(v) for k, v in reg.optimum.sizes.items() if str(k) not in sizes}
    for s in (2 ** k for k in range(16, -1, -1)):
        at = {**sizes, **{k: (s if k.startswith("s_") else v) for k, v in tiles.items()}}
        try:
            if nc.cost(reg.diagram, sizes=at).M.get(1, 0) <= memory:
                return at
        except AxisError:                                     # a tile past its axis
            continue
    return {**sizes, **tiles}


def checked(f, sizes, memories, xs, raised=False):
    """Each regime's (outputs, H), after H = nc.cost at its tiles = the runner's count at its tiles, or (``raised``)
    = nc.cost and the runner's count at the larger tiles that fit (:func:`runnable_tiles`)."""
    r = nc.derive(f, memory=memories, sizes=sizes)
    out = []
    for reg in (r.regimes or (r,)):
        own = {**sizes, **{str(k): int(v) for k, v in reg.optimum.sizes.items() if str(k) not in sizes}}
        at = runnable_tiles(reg, sizes, reg.memory) if raised else own
        ys, ran = nc.plan(reg.diagram, at).run(*xs)
        assert ran.transfers.get(1, 0) == nc.cost(reg.diagram, sizes=at).H.get(1, 0) \
            == nc.cost(reg.diagram, sizes=own).H.get(1, 0) == reg.H, f"M = {reg.memory}: runner at {at}, cost, H"
        out.append((np.asarray(ys[0] if isinstance(ys, (tuple, list)) else ys), reg))
    return out


@pytest.mark.parametrize("v", [131072, 131071])
def test_a_picked_probability_reads_the_logits_once(v):
    sizes = {"n": N, "v": v}
    rng = np.random.default_rng(v)
    L = rng.normal(size=(N, v)) * 30                          # most probabilities far below 1, many underflow
    L[rng.random(L.shape) < 0.1] = -np.inf                    # masked entries
    t = rng.integers(0, v, size=N).astype(np.int32)
    t[:4] = [0, v - 1, v, -1]                                 # the ends, and two indices outside v (read as 0)
    L[5, t[5]] = -np.inf                                      # a masked target: probability 0
    want = np.where((t >= 0) & (t < v), softmax_rows(L)[np.arange(N), np.clip(t, 0, v - 1)], 0.0)
    for ys, reg in checked(vocab_prob(), sizes, [4096, 65536, 2 ** 20], [L, t], raised=True):
        assert reg.H == N * v + 2 * N, f"M = {reg.memory}: H = {reg.H}, the logits once is {N * v + 2 * N}"
        np.testing.assert_allclose(ys, want, rtol=1e-9, atol=1e-300, err_msg=f"M = {reg.memory}")
        assert ys[5] == 0.0


def test_without_the_rule_the_logits_are_read_twice():
    """The mutant (the book without ``softmax_of_gathered``): where a row does not fit, the statistics pass and the
    normalising pass each read the logits."""
    r = nc.derive(vocab_prob(), memory=4096, sizes={"n": N, "v": 131072}, book=without_the_rule())
    assert r.H >= 2 * N * 131072


def test_a_top1_moe_gate_derives_no_worse_and_computes_the_gate():
    sizes = {"t": 48, "d": 48, "e": 48}
    rng = np.random.default_rng(5)
    X, W = rng.normal(size=(48, 48)), rng.normal(size=(48, 48))
    r_ = rng.integers(0, 48, size=48).astype(np.int32)
    want = softmax_rows(X @ W)[np.arange(48), r_]
    memories = [256, 4096, 2 ** 20]
    runs = checked(moe_gate(), sizes, memories, [X, W, r_])
    before = nc.derive(moe_gate(), memory=memories, sizes=sizes, book=without_the_rule())
    for (ys, reg), old in zip(runs, before.regimes or (before,)):
        np.testing.assert_allclose(ys, want, rtol=1e-9, err_msg=f"M = {reg.memory}")
        assert reg.H <= old.H, f"M = {reg.memory}: {reg.H} > {old.H} without the rule"
    assert runs[0][1].H < (before.regimes or (before,))[0].H       # the gate's row does not fit at 256
    assert runs[-1][1].H == 2 * 48 * 48 + 2 * 48                   # X, W, r and the output, once each


def test_a_softmax_read_by_a_gather_and_a_contraction_is_unchanged_and_correct():
    sizes = {"n": 8, "v": 300}
    rng = np.random.default_rng(7)
    L, t = rng.normal(size=(8, 300)) * 4, rng.integers(0, 300, size=8).astype(np.int32)
    P = softmax_rows(L)
    r = nc.derive(mixed(), memory=[400, 2 ** 20], sizes=sizes)
    kept = nc.derive(mixed(), memory=[400, 2 ** 20], sizes=sizes, book=without_the_rule())
    for reg, old in zip(r.regimes or (r,), kept.regimes or (kept,)):
        assert "softmax_of_gathered" not in [s.rule for s in reg.trace]
        assert reg.H == old.H and nc.dumps(reg.diagram) == nc.dumps(old.diagram)
        ys, _ = nc.plan(reg.diagram, runnable_tiles(reg, sizes, reg.memory)).run(L, t)
        np.testing.assert_allclose(ys[0], P[np.arange(8), t], rtol=1e-9)
        np.testing.assert_allclose(ys[1], (P * L).sum(1), rtol=1e-9)
