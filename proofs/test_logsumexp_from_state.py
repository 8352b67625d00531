"""Discharge ``logsumexp_from_softmax`` (``rewrites/logsumexp_from_state.py``): a row's log-sum-exp read off the
state of the online SoftMax beside it, μ + log z.

The obligation (attention, causal attention and a random row with a random β, each with its log-sum-exp, prepared
for FlashAttention-2), exact on random values, no transfer changed and the exponentials of the second pass gone;
mutants (z for log z; β forgotten) fail it; the search finds the rule (the causal forward derived with it runs one
online pass: no LSE box), and the derived plan and its C kernel give numpy's O and L, written from the formula.
"""
from __future__ import annotations

import shutil
from dataclasses import replace

import numpy as np
import pytest

import napkin_cat as nc
from napkin_cat.cost.numeric import at
from napkin_cat.rewriting import ObligationError
from napkin_cat.rewriting.closed import source
from napkin_cat.rewriting.match import Pattern, where
from napkin_cat.rewriting.registry import Rulebook
from napkin_cat.syntax.flat import layers
from rewrites import RULEBOOK
from rewrites.logsumexp_from_state import logsumexp_from_softmax

proves = pytest.mark.proves
SIZES = {"q": 64, "x": 64, "d": 16}
M = 2 ** 11
WITHOUT = Rulebook("without logsumexp_from_softmax", RULEBOOK.rules, dict(RULEBOOK.derivations),
                   roles={**RULEBOOK.roles, "prepare": tuple(n for n in RULEBOOK.roles["prepare"]
                                                               if n != "logsumexp_from_softmax")})


@proves("logsumexp_from_softmax")
def test_logsumexp_from_softmax_is_sound():
    proof = logsumexp_from_softmax.obligation.discharge(logsumexp_from_softmax, trials=10, variants=4)
    assert proof.rewrites >= 10 and proof.cost_checked and proof.varied >= 2
    assert proof.max_error < 1e-12


def _sum_not_log(m):
    """A mutant's rhs: μ + z."""
    b, ins = m.wiring()
    s = m.box("s")
    outs = b(s, *(ins[("s", p)] for p in range(len(s.dom))))
    sig = " ".join(outs[1].array.names)
    L = b(nc.elementwise("add", f"{sig}, {sig} -> {sig}"), outs[1], outs[3])
    return m.finish(b, {**{("s", j): w for j, w in enumerate(outs)}, ("l", 0): L})


def _any_softmax(net, nid):
    """A mutant's match: any SoftMax₁ of the same row, whatever the log-sum-exp reads (β forgotten)."""
    node = net.nodes[nid]
    if node.kind != "box" or node.spec.kind != "reduce_logsumexp":
        return None
    return next((s for s, sm in net.nodes.items() if sm.kind == "box" and sm.spec.kind == "softmax_unscaled"
                 and sm.cod[1] == node.cod[0] and source(net, net.ins[s][0]) != source(net, net.ins[nid][0])),
                None)


@pytest.mark.parametrize("mutant", [
    replace(logsumexp_from_softmax, rhs=_sum_not_log),
    replace(logsumexp_from_softmax, pattern=Pattern(
        {"l": where("mutant", lambda net, n: _any_softmax(net, n.id) is not None, nodes=("box",))},
        absorb=lambda net, nodes: {"s": _any_softmax(net, nodes["l"])})),
], ids=["z for log z", "beta forgotten"])
def test_a_mutant_fails_the_proof(mutant):
    with pytest.raises(ObligationError):
        mutant.obligation.discharge(mutant, trials=10)


@pytest.fixture(scope="module")
def derived():
    return {book.name: nc.derive(nc.library.causal_attention(lse=True), M, sizes=SIZES, book=book)
            for book in (RULEBOOK, WITHOUT)}


def computed(d, out=None) -> list:
    """The names of the primitive boxes ``d`` computes, inside its regions too."""
    out = [] if out is None else out
    for _, b in layers(d):
        if hasattr(b, "arg"):
            computed(b.arg, out)
        elif getattr(b, "data", None) is not None:
            out.append(b.name)
    return out


def reference(Q, K, V):
    """Causal attention and its log-sum-exp from the formula (numpy)."""
    S = Q @ K.T / np.sqrt(Q.shape[1])
    S = np.where(np.arange(K.shape[0])[None, :] <= np.arange(Q.shape[0])[:, None], S, -np.inf)
    m = S.max(1, keepdims=True)
    e = np.exp(S - m)
    return e @ V / e.sum(1, keepdims=True), (m + np.log(e.sum(1, keepdims=True)))[:, 0]


@proves("logsumexp_from_softmax")
def test_the_search_reads_the_logsumexp_off_the_softmax(derived):
    """The causal forward with L, derived: one online pass (no LSE box, L = μ + log z), as few transfers, fewer
    FLOPs than the derivation without the rule (its second running max and sum), at the same tiles."""
    r, plain = derived[RULEBOOK.name], derived[WITHOUT.name]
    assert "logsumexp_from_softmax" in [s.rule for s in r.trace]
    names, before = computed(r.diagram), computed(plain.diagram)
    assert "LSE" not in names and names.count("log") == 1 and "LSE" in before
    assert r.H == plain.H
    tiles = {**SIZES, **{str(k): int(v) for k, v in r.optimum.sizes.items()}}
    ours, theirs = at(r.diagram, tiles).flops, at(plain.diagram, tiles).flops
    assert ours["special"] < theirs["special"] and ours["general"] < theirs["general"]


def test_the_derived_plan_and_its_c_kernel_give_o_and_l(derived):
    r = derived[RULEBOOK.name]
    sizes = {"q": 7, "x": 5, "d": 4, **{str(k): 3 for k in r.optimum.sizes if str(k) not in SIZES}}
    rng = np.random.default_rng(2)
    Q, K, V = rng.normal(size=(7, 4)), rng.normal(size=(5, 4)), rng.normal(size=(5, 4))
    want = reference(Q, K, V)
    got, counts = nc.plan(r.diagram, sizes).run(Q, K, V)
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
    assert counts.transfers == at(r.diagram, sizes).H
    if shutil.which("cc") is not None:
        k = nc.codegen.c(nc.plan(r.diagram, sizes), real="double", poison=True)
        for a, b in zip(k(Q, K, V), want, strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
