"""The number formats of a gradient of 16-bit arrays (:data:`napkin_cat.autodiff.vjps.SUMS`): every sum of cotangents
(a contraction, a reduce_sum) in fp32, a map of cotangents in its widest operand's format, every product's operands
in one format, the gradient's outputs in its inputs' formats.  Attention's backward in bf16 then keeps dP and D in
fp32, as FlashAttention-2 does (their difference, in 16 bits, left dQ and dK errors of 1.4e-2 under Triton's
interpreter in the GPU benchmark's dry run, 9e-3 with this); fp32 gradients are unchanged."""
from __future__ import annotations

import numpy as np
import pytest

import napkin_cat as nc
from napkin_cat.syntax.flat import layers

BF16 = {"Q": "bf16", "K": "bf16", "S": "fp32", "P": "bf16", "V": "bf16", "O": "bf16"}


def kinds_formats(d):
    """(kind, input formats, output formats) of every primitive box of ``d``."""
    out = []
    for _, box in layers(d):
        kind = getattr(box.data, "kind", None)
        if kind is not None:
            out.append((kind, [a.dtype.name for a in box.dom.inside], [a.dtype.name for a in box.cod.inside]))
    return out


@pytest.mark.parametrize("saved", [True, False])
def test_a_bf16_attention_backward_sums_in_fp32_and_multiplies_in_one_format(saved):
    f = nc.library.attention(formats=BF16, lse=saved)
    g = nc.grad(f, wrt=[0, 1, 2], saved=saved, aux=1 if saved else 0)
    assert [a.dtype.name for a in g.cod.inside] == ["bf16", "bf16", "bf16"]     # as Q, K, V
    seen = kinds_formats(g)
    contracts = [(ins, out) for kind, ins, out in seen if kind == "contract"]
    assert len(contracts) >= 5
    for ins, out in contracts:
        assert len(set(ins)) == 1, ins                  # one format per product (the tensor cores')
    sums = [out for kind, ins, out in seen if kind in ("contract", "reduce_sum") and "bf16" in ins]
    assert sums and all(o == ["fp32"] for o in sums), sums
    # dP = dO·Vᵀ (q×x, from bf16 operands) is fp32, and so is every q×x map computed from it
    dp = [out for kind, ins, out in seen if kind == "contract" and ins == ["bf16", "bf16"]]
    assert dp and all(o == ["fp32"] for o in dp)


def test_fp32_gradients_are_unchanged_by_the_rule():
    f = nc.library.attention(lse=True)
    g = nc.grad(f, wrt=[0, 1, 2], saved=True, aux=1)
    assert {o[0] for _, _, o in kinds_formats(g) if o} <= {"fp32", "bool", "int32"}
    rng = np.random.default_rng(0)
    Q, K, V, dO = (rng.normal(size=(6, 3)) for _ in range(4))
    O, L = nc.evaluate(f, Q, K, V)
    dq, dk, dv = nc.evaluate(g, Q, K, V, O, L, dO)
    eps, i = 1e-6, (2, 1)                    # one entry of dQ by central differences of ⟨dO, O⟩
    Qp, Qm = Q.copy(), Q.copy()
    Qp[i] += eps
    Qm[i] -= eps
    fd = ((nc.evaluate(f, Qp, K, V)[0] - nc.evaluate(f, Qm, K, V)[0]) * dO).sum() / (2 * eps)
    assert dq[i] == pytest.approx(fd, rel=1e-6)
