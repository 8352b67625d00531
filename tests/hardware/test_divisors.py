"""Divisor constraints: the paper's superscripts derived from the hardware, named errors, candidates."""
from __future__ import annotations

import pytest

from napkin_cat.hardware import ArrayUse, DivisorError, HardwareError, MatmulUse, constraints, load, uses_of

PARTITION = {"block": "g_q", "warpgroup": "w_q", "thread": "t_q"}


@pytest.fixture
def paper():
    # Table 1's moved arrays and the two products (step 4)
    return constraints(load("h100-sxm5"),
                       arrays=[ArrayUse("Q", ("g_q", "d"), "fp8", moved=True),
                               ArrayUse("K", ("s_x", "d"), "fp8", moved=True),
                               ArrayUse("V", ("s_x", "d"), "fp16", moved=True)],
                       matmuls=[MatmulUse("QK", m="w_q", n="s_x", k="d", dtype="fp8"),
                                MatmulUse("PV", m="w_q", n="d", k="u_x", dtype="fp16")],
                       partition=PARTITION, hierarchy="hopper")


def test_the_papers_superscripts(paper):
    assert paper.divisor("d") == 128          # d^(128): 128 B coalesced over 1-byte FP8 values
    assert paper.divisor("w_q") == 128        # w_q^(128): a warpgroup's threads (and wgmma m64)
    assert paper.divisor("u_x") == 16         # wgmma k16 for FP16
    assert paper.divisor("s_x") == 8          # wgmma n, multiple of 8
    assert paper.check({**dict(w_q=128, t_q=1, s_x=64, u_x=64, d=128), "g_q": 384})


def test_candidates_are_multiples_of_the_lcm_and_divide_the_full_size(paper):
    assert paper.candidates("u_x", upper=64) == [16, 32, 48, 64]
    assert paper.candidates("u_x", upper=64, full=96) == [16, 32, 48]


@pytest.mark.parametrize("config, message", [
    (dict(d=96), r"tile d = 96 of Q violates coalesced GMEM↔SMEM access of Q \(fp8: 128 B / 1 B per value\): it "
                 r"needs a multiple of 128; legal values near 96: 128"),
    (dict(w_q=192, d=128), r"tile w_q = 192 of w_q violates warpgroup multiple \(128 threads per warpgroup\).*"
                           r"legal values near 192: 128, 256"),
    (dict(w_q=128, g_q=192, d=128), r"tile g_q = 192 of g_q violates whole warpgroups per thread block: it needs "
                                    r"a multiple of 128"),
    (dict(w_q=128, d=128, s_x=64, u_x=24), r"tile u_x = 24 of matmul PV \(fp16\) is the k of a tensor-core "
                                           r"instruction .* needs a multiple of 16; legal values near 24: 16, 32"),
    (dict(w_q=128, t_q=2, d=128), r"w_q = 128 rows over 128 threads gives t_q = 1, but t_q = 2"),
])
def test_violations_name_tile_variable_divisor_and_alternatives(paper, config, message):
    with pytest.raises(DivisorError, match=message):
        paper.check(config)


def test_a100_has_no_fp8_tensor_instruction_and_other_shapes():
    with pytest.raises(HardwareError, match=r"a100 has no tensor-core instruction for fp8 operands \(matmul QK\)"):
        constraints(load("a100"), matmuls=[MatmulUse("QK", "w_q", "s_x", "d", "fp8")])
    c = constraints(load("a100"), matmuls=[MatmulUse("QK", "w_q", "s_x", "d", "fp16")])
    c.check({"w_q": 32, "s_x": 8, "d": 16})     # wmma m32n8k16 fits where m16n16k16 does not
    with pytest.raises(DivisorError, match="fits no shape"):
        c.check({"w_q": 8, "s_x": 8, "d": 16})


def test_uses_read_off_a_derived_flash_attention(variant):
    diagram, _, _ = variant("paper")
    arrays, matmuls = uses_of(diagram, "hopper")
    assert {(a.axes, a.dtype) for a in arrays} == {(("g_q", "d"), "fp8"), (("s_x", "d"), "fp8"),
                                                   (("s_x", "d"), "fp16"), (("g_q", "d"), "fp16")}
    assert [(m.m, m.n, m.k, m.dtype) for m in matmuls] == [("g_q", "s_x", "d", "fp8"), ("g_q", "d", "s_x", "fp16")]
    c = constraints(load("h100-sxm5"), arrays=arrays, matmuls=matmuls)
    # FP8 Q and K coalesce 128 values along d; s_x is wgmma's n (8) in Q·Kᵀ and its k (16) in P·V (FP16)
    assert c.divisor("d") == 128 and c.divisor("s_x") == 16
