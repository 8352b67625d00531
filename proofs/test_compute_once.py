"""Discharge ``kernel_common_value`` (``rewrites/compute_once.py``): a kernel computes each value once.

The obligation (random kernels, formed, fused and joined, that compute a value twice: both operands' gradients of a
product through a map, a mask of positions read by two readers, a map read twice beside two scales of one value by
two constants, which are two values), exact in floating point, H unchanged at every level and FLOPs down by those of
the merged boxes; mutants that merge boxes of other parameters, or merge nothing, fail it; the plan's C kernel of the
rewritten kernel computes numpy's values; the refusal by name.
"""
from __future__ import annotations

import shutil
from dataclasses import replace

import numpy as np
import pytest

import napkin_cat as nc
from napkin_cat.rewriting import ObligationError, RuleSet, rewrite
from rewrites import kernel_formation, kernel_fusion, shared_load, sibling_fusion
from rewrites.basic import boxes, common_value, copy_discard, twins
from rewrites.compute_once import computed_once, kernel_common_value, operand_gradients_apart
from rewrites.kernels import strip

proves = pytest.mark.proves


def joined():
    """``operand_gradients_apart`` in one kernel (formed, fused, joined, each value loaded once)."""
    made = rewrite(operand_gradients_apart(), [kernel_formation, kernel_fusion, sibling_fusion]).diagram
    return rewrite(made, [shared_load, copy_discard]).diagram


def kernel_of(d):
    (k,) = [b for b in d.boxes if isinstance(b, nc.Kernel)]
    return k


@proves("kernel_common_value")
def test_kernel_common_value_is_sound():
    proof = kernel_common_value.obligation.discharge(kernel_common_value, trials=10, variants=4)
    assert proof.rewrites >= 10 and proof.cost_checked and proof.varied >= 2
    assert proof.max_error == 0.0


def _forgetful_key(net, nid):
    """A mutant's key: the kind and the arrays on the ports and the values read; the parameters (a scale's
    constant) forgotten."""
    node = net.nodes[nid]
    if node.kind != "box" or node.spec.kind in ("load", "save"):
        return None
    from napkin_cat.rewriting.closed import source
    return node.spec.kind, node.dom, node.cod, tuple(source(net, w) for w in net.ins[nid])


def _mutant_rhs(rules):
    def rhs(m):
        k = m.box("k")
        inside = strip(k)
        net = nc.engine.to_netlist(inside)
        once = nc.kernel(rewrite(inside, rules, "fixpoint", max_steps=len(net.nodes) + len(net.wires) + 1).diagram,
                         k.params["level"])
        b, ins = m.wiring()
        got = b(once, *(ins[("k", p)] for p in range(len(k.dom))))
        got = got if isinstance(got, tuple) else (got,)
        return m.finish(b, {("k", j): w for j, w in enumerate(got)})
    return rhs


@pytest.mark.parametrize("rules, error", [
    (RuleSet((replace(common_value, pattern=twins(_forgetful_key)), copy_discard)), "is unsound"),
    (RuleSet((copy_discard,)), "cost claim fails"),
], ids=["parameters forgotten", "nothing merged"])
def test_a_mutant_fails_the_proof(rules, error):
    mutant = replace(kernel_common_value, rhs=_mutant_rhs(rules))
    with pytest.raises(ObligationError, match=error):
        mutant.obligation.discharge(mutant, trials=16)


@proves("kernel_common_value")
def test_the_joined_kernel_computes_s_and_p_once():
    """Both operands' gradients in one kernel: S = Q Kᵀ and exp S once (7 boxes → 5), the same loads and saves,
    one q×x product (2·q·x·d tensor FLOPs) and one exp (q·x special) fewer; numpy's values."""
    lhs = joined()
    rhs = kernel_common_value.apply(lhs)
    assert [boxes(strip(kernel_of(d))) for d in (lhs, rhs)] == [7, 5]
    before, after = nc.cost(lhs, sizes={"q": 6, "x": 5, "d": 3}), nc.cost(rhs, sizes={"q": 6, "x": 5, "d": 3})
    assert before.H == after.H
    assert before.flops["tensor"] - after.flops["tensor"] == 2 * 6 * 5 * 3
    assert before.flops["special"] - after.flops["special"] == 6 * 5
    assert not kernel_common_value.matches(rhs)                       # nothing computed twice any more
    rng = np.random.default_rng(0)
    Q, K, G = rng.normal(size=(6, 3)), rng.normal(size=(5, 3)), rng.normal(size=(6, 5))
    P = np.exp(Q @ K.T)
    for got, want in zip(nc.evaluate(rhs, Q, K, G), ((G * P) @ K, P.T @ Q), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-12)


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
@proves("kernel_common_value")
def test_the_c_kernel_of_the_merged_kernel_computes_the_gradients():
    """Streamed along q and grouped along x (the dK/dV kernel's partition), printed as C: numpy's values."""
    rhs = kernel_common_value.apply(joined())
    sizes = {"q": 7, "x": 5, "d": 4}
    rng = np.random.default_rng(1)
    Q, K, G = rng.normal(size=(7, 4)), rng.normal(size=(5, 4)), rng.normal(size=(7, 5))
    P = np.exp(Q @ K.T)
    k = nc.codegen.c(nc.plan(rhs, sizes), real="double")
    for got, want in zip(k(Q, K, G), ((G * P) @ K, P.T @ Q), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-12)


def test_a_kernel_that_computes_each_value_once_is_refused_by_name():
    once = kernel_common_value.apply(joined())
    (m,) = [m for m in kernel_common_value.candidates(nc.engine.to_netlist(once))]
    assert "computes each of its values once" in kernel_common_value.failure(m)[1]
    assert boxes(computed_once(strip(kernel_of(once)))) == boxes(strip(kernel_of(once)))
