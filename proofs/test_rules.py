"""Discharge every rule's proof obligation: numerically, symbolically, and its cost claim.

Each test is marked ``@pytest.mark.proves(<rule name>)``; ``test_meta.py`` fails
when a rule of the registered rule book (``rulebook().rules``, the paper's ``rewrites.ALL_RULES``)
has no proof that ran and passed in the session.  The parametrised proofs range over the
registered book, so a session that registers another book (see ``test_checks_can_fail.py``)
proves that book's rules.
"""
from __future__ import annotations

import numpy as np
import pytest
import sympy
from hypothesis import given, settings, strategies as st
from hypothesis.extra.numpy import arrays

import napkin_cat as nc
from napkin_cat.rewriting import isomorphic, to_netlist
from napkin_cat.rewriting.registry import rulebook
from rewrites import (SIMPLIFY, auxiliary_to_unscaled, copy_discard, remove_identity, save_load_elimination,
                      softmax_contraction_to_unscaled, softmax_to_auxiliary, unscaled_softmax)
from rewrites.fusion import numel, transfer_volume
from rewrites.softmax_identities import division_identity, online_softmax_identity, table4_identity

proves = pytest.mark.proves
SEEDS = st.integers(0, 2 ** 32 - 1)


RULES = rulebook().rules


# ---------------------------------------------------------------------- every rule, random instances
@pytest.mark.parametrize("rule", [pytest.param(r, marks=proves(r.name), id=r.name) for r in RULES])
@settings(max_examples=16, deadline=None, derandomize=True)
@given(seed=SEEDS)
def test_obligation_holds_on_random_instances(rule, seed):
    evidence = rule.obligation.check_instance(rule, seed)
    assert evidence["rewrites"] >= 1


# ---------------------------------------------------------------------- every rule, random variants of its instances
#: seeds of the variants each rule's obligation is also discharged on (napkin_cat.rewriting.variants: axes renamed,
#: sizes made concrete, one or two axes woven at random positions over random inputs)
VARIANTS = 8
#: the fewest variants each rule must rewrite (a variant it does not match proves nothing)
REWRITTEN = VARIANTS // 4


class OfferedUnrewritable(AssertionError):
    """A rule's ``matches`` offered a match its rewrite could not perform (not an unsound rewrite, which raises
    ObligationError and fails the test whatever the rule)."""


@pytest.mark.parametrize("rule", [pytest.param(r, marks=proves(r.name), id=r.name) for r in RULES])
def test_obligation_holds_on_random_variants_of_its_instances(rule):
    """Every variant the rule matches rewrites to the same function (and meets the cost claim); a match offered
    and not rewritten is collected, the other variants still checked; at least :data:`REWRITTEN` rewritten."""
    rewritten, refused = 0, []
    for seed in range(VARIANTS):
        try:
            evidence = rule.obligation.check_instance(rule, seed, varied=True)
        except nc.ObligationError:
            raise
        except (nc.RewriteError, nc.CompositionError) as e:
            refused.append(f"seed {seed}: {type(e).__name__}: {str(e).splitlines()[0]}")
            continue
        rewritten += evidence["rewrites"] > 0
    if refused:
        raise OfferedUnrewritable(f"rule {rule.name!r} offered matches its rewrite could not perform on "
                                  f"{len(refused)} of {VARIANTS} variants: {'; '.join(refused[:2])}")
    assert rewritten >= REWRITTEN, f"rule {rule.name!r} rewrote {rewritten} of {VARIANTS} variants"


@pytest.mark.parametrize("rule", [pytest.param(r, marks=proves(r.name), id=r.name) for r in RULES
                                  if r.obligation is not None and r.obligation.symbolic])
def test_symbolic_checks_of_the_obligation(rule):
    proof = rule.obligation.discharge(rule, trials=0)
    assert proof.symbolic == tuple(c.__name__ for c in rule.obligation.symbolic)


# ---------------------------------------------------------------------- symbolic (sympy)
@proves("softmax_contraction_to_unscaled", "auxiliary_to_unscaled")
def test_online_softmax_combination_is_the_unsplit_softmax_contraction():
    online_softmax_identity()


@proves("softmax_to_auxiliary", "auxiliary_to_unscaled")
def test_table4_auxiliary_softmax_is_the_softmax_of_the_concatenation():
    table4_identity()


@proves("divide_after_contraction", "softmax_contraction_to_unscaled")
def test_division_commutes_with_contraction():
    division_identity()


# ---------------------------------------------------------------------- SoftMax: extreme logits
def _softmax_rows(S, V):
    with np.errstate(all="ignore"):
        e = np.exp(S - np.max(S, axis=1, keepdims=True))
        return (e / e.sum(axis=1, keepdims=True)) @ V


LOGITS = st.one_of(st.floats(-1e4, 1e4), st.just(-np.inf))


@proves("softmax_contraction_to_unscaled")
@settings(max_examples=60, deadline=None, derandomize=True)
@given(data=st.data(), q=st.integers(1, 4), x=st.integers(1, 6), d=st.integers(1, 3),
       beta=st.sampled_from([1, 0.125]))
def test_unscaled_softmax_contraction_with_extreme_and_masked_logits(data, q, x, d, beta):
    S = data.draw(arrays(np.float64, (q, x), elements=LOGITS))
    V = data.draw(arrays(np.float64, (x, d), elements=st.floats(-10, 10)))
    b = nc.Builder(nc.types("q x, x d"))
    Si, Vi = b.inputs
    lhs = b.build(b(nc.einsum("q x, x d -> q d"), b(nc.softmax("q x", over="x", beta=beta), Si), Vi))
    rhs = softmax_contraction_to_unscaled.apply(lhs)
    with np.errstate(all="ignore"):
        want, got, ref = nc.evaluate(lhs, S, V), nc.evaluate(rhs, S, V), _softmax_rows(beta * S, V)
    masked = np.all(np.isneginf(S), axis=1)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    assert np.all(np.isnan(got[masked])) and not np.any(np.isnan(got[~masked]))
    assert np.allclose(got[~masked], want[~masked], rtol=1e-9, atol=1e-9)
    assert np.allclose(got[~masked], ref[~masked], rtol=1e-9, atol=1e-9)


@proves("softmax_to_auxiliary", "auxiliary_to_unscaled", "divide_after_contraction")
@settings(max_examples=30, deadline=None, derandomize=True)
@given(data=st.data(), x=st.integers(1, 6))
def test_softmax_through_auxiliary_and_unscaled_with_extreme_logits(data, x):
    S = data.draw(arrays(np.float64, (2, x), elements=LOGITS))
    sm = nc.softmax("q x", over="x")
    aux = softmax_to_auxiliary.apply(sm)
    unscaled = auxiliary_to_unscaled.apply(aux)
    with np.errstate(all="ignore"):
        outs = [nc.evaluate(d, S) for d in (sm, aux, unscaled)]
    for y in outs[1:]:
        assert np.array_equal(np.isnan(y), np.isnan(outs[0]))
        assert np.allclose(y, outs[0], equal_nan=True, rtol=1e-12, atol=1e-15)


@proves("auxiliary_to_unscaled")
@settings(max_examples=40, deadline=None, derandomize=True)
@given(data=st.data(), x=st.integers(1, 5))
def test_auxiliary_to_unscaled_for_any_running_state(data, x):
    """All four outputs agree for any prior (μ′, z′), including μ′ = −∞ (the stream head)."""
    X = data.draw(arrays(np.float64, (3, x), elements=LOGITS))
    mu = data.draw(arrays(np.float64, (3,), elements=LOGITS))
    z = data.draw(arrays(np.float64, (3,), elements=st.floats(0, 1e3)))
    aux = softmax_to_auxiliary.apply(nc.softmax("q x", over="x")).boxes  # the SoftMax₀ box
    box = next(b for b in aux if b.name == "SoftMax₀")
    rhs = auxiliary_to_unscaled.apply(box)
    with np.errstate(all="ignore"):
        for a, b in zip(nc.evaluate(box, X, mu, z), nc.evaluate(rhs, X, mu, z), strict=True):
            assert np.allclose(a, b, equal_nan=True, rtol=1e-12, atol=1e-12)


LIBRARY = [nc.library.attention, nc.library.multi_head_attention, nc.library.grouped_query_attention]


@proves("softmax_to_auxiliary", "auxiliary_to_unscaled", "divide_after_contraction",
        "copy_discard", "delete_pure_box", "softmax_contraction_to_unscaled")
@pytest.mark.parametrize("make", LIBRARY, ids=lambda f: f.__name__)
def test_step_by_step_derivation_equals_the_fused_rule(make):
    """Paper Appendix "Fusion of SoftMax-Contraction", step by step, then in one step."""
    d = make()
    r = unscaled_softmax(d)
    assert r.trace.check(trials=2)
    assert nc.equivalent(d, r.diagram, scale=30.0)
    assert isomorphic(r.diagram, softmax_contraction_to_unscaled.apply(d))
    kinds = [n.spec.kind for n in to_netlist(r.diagram).nodes.values() if n.kind == "box"]
    assert "softmax" not in kinds and "softmax_aux" not in kinds and kinds.count("softmax_unscaled") == 1
    assert kinds[-1] == "div"  # the /z tail is last


# ---------------------------------------------------------------------- fusion: the cost claim
@proves("save_load_elimination")
@pytest.mark.parametrize("dtype", ["fp32", "fp16", "fp8"])
def test_save_load_elimination_removes_exactly_the_round_trip(dtype):
    arr = nc.types("q d", level=1, dtype=dtype).inside[0]
    other = nc.types("x", level=1, dtype=dtype).inside[0]
    f = nc.elementwise("exp", "q d", level=1, dtype=dtype)
    g = nc.elementwise("tanh", "q d", level=1, dtype=dtype)
    trip = nc.transfer("save", arr) >> nc.transfer("load", arr.replace(level=0))
    d = (f >> trip >> g) @ nc.transfer("save", other)
    after = save_load_elimination.apply(d)
    q, dd, x = nc.symbol("q"), nc.symbol("d"), nc.symbol("x")
    assert transfer_volume(d) == 2 * q * dd + x and transfer_volume(after) == x
    assert sympy.simplify(transfer_volume(d) - transfer_volume(after) - 2 * numel(arr)) == 0
    before, now = nc.cost(d), nc.cost(after)
    assert sympy.simplify(before.H[1] - now.H[1] - 2 * q * dd) == 0
    nbytes = nc.DTYPES[dtype].bytes
    assert sympy.simplify(before.H_bytes[1] - now.H_bytes[1] - 2 * q * dd * nbytes) == 0
    assert nc.equivalent(d, after)


@proves("save_load_elimination")
def test_a_load_to_another_format_is_not_a_round_trip():
    arr = nc.types("q", level=1).inside[0]
    d = nc.transfer("save", arr) >> nc.transfer("load", arr.replace(level=0))
    assert save_load_elimination.matches(d)
    assert not save_load_elimination.matches(nc.transfer("save", arr))


# ---------------------------------------------------------------------- structural rules
@proves("copy_discard")
@pytest.mark.parametrize("n", [2, 3, 4])
def test_copy_discard_is_the_counit_law(n):
    t = nc.types("q d")
    d = nc.Diagram.copy(t, n) >> (nc.Diagram.copy(t, 0) @ nc.Id(nc.Ty(*[t.inside[0]] * (n - 1))))
    out = copy_discard.apply(d)
    assert isomorphic(out, nc.Diagram.copy(t, n - 1) if n > 2 else nc.Id(t))
    assert n > 2 or out == nc.Id(t)


@proves("delete_pure_box")
def test_deletion_removes_the_box_and_its_discards():
    b = nc.Builder(nc.types("q x, x d"))
    S, V = b.inputs
    d = b.build(b(nc.elementwise("tanh", "q x"), S))  # V unused: discarded
    b2 = nc.Builder(nc.types("q x, x d"))
    S2, V2 = b2.inputs
    b2(nc.einsum("q x, x d -> q d"), S2, V2)  # computed, then discarded
    dead = b2.build(b2(nc.elementwise("tanh", "q x"), S2))
    r = nc.rewrite(dead, SIMPLIFY)
    assert isomorphic(r.diagram, d)
    assert [s.rule for s in r.trace][0] == "delete_pure_box"


@proves("remove_identity")
def test_identity_boxes_go_but_broadcasts_stay():
    d = nc.elementwise("id", "q x") >> nc.elementwise("exp", "q x")
    assert remove_identity.apply(d) == nc.elementwise("exp", "q x")
    broadcast = nc.weave(nc.Id("x"), "q", inputs=[])  # an 'id' box that adds the axis q
    assert [b.data.kind for b in broadcast.boxes] == ["id"]
    assert remove_identity.candidates(broadcast) and not remove_identity.matches(broadcast)
    with pytest.raises(nc.RewriteError, match="not_a_broadcast"):
        remove_identity.apply(broadcast)
