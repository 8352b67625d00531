"""Tables 1-2 from variables and a hardware model; errata D-01 both ways; capacity errors; other GPUs and d."""
from __future__ import annotations

from fractions import Fraction

import pytest

from napkin_cat.hardware import CapacityError, HardwareError, Variable, config_table, load

KB = 1024
PARTITION = {"block": "g_q", "warpgroup": "w_q", "thread": "t_q"}
PAPER = dict(w_q=128, t_q=1, s_x=64, u_x=64, d=128, dp=32, dpp=8)   # Table 1's caption (d' = dp, d'' = dpp)


def table1_variables():
    """Step 5's variables as the plan will give them (size expressions, dtypes, logical levels, buffers)."""
    return [
        Variable("Q", "w_q*d", "fp8", "tensor-core", role="operand", description="Queries"),
        Variable("K", "s_x*d", "fp8", "SMEM", buffers=2, description="Keys"),
        Variable("V", "s_x*d", "fp16", "SMEM", buffers=2, description="Values"),
        Variable("S", "w_q*s_x", "fp16", "tensor-core", description="Attention scores"),
        Variable("P", "g_q*s_x", "fp16", "SMEM", description="Weighted scores"),
        Variable("P'", "t_q*u_x", "fp16", "registers", description="Weighted scores (registers)"),
        Variable("A", "w_q*u_x", "fp16", "tensor-core", role="operand", description="Weighted scores (tensor core)"),
        Variable("α", "t_q*3", "fp16", "registers", description="Auxiliary"),
        Variable("O'", "t_q*d", "fp16", "registers", description="Output (registers)"),
        Variable("D", "w_q*dp", "fp16", "tensor-core", description="Delta output (tensor core)"),
        Variable("ΔO", "g_q*dp", "fp16", "SMEM", description="Delta output (SMEM)"),
        Variable("ΔO'", "t_q*dpp", "fp16", "registers", description="Delta output (registers)"),
    ]


@pytest.fixture(scope="module")
def table():
    return config_table(table1_variables(), load("h100-sxm5"), PAPER, partition=PARTITION, n=3,
                        printed={"A": (8192, "errata D-01")})


def test_table1_rows(table):
    expected = {"Q": (0, 16384), "K": (16384, 0), "V": (32768, 0), "S": (0, 16384), "P": (0, 16384),
                "P'": (0, 16384), "A": (0, 16384), "α": (0, 768), "O'": (0, 32768), "D": (0, 8192),
                "ΔO": (0, 8192), "ΔO'": (0, 2048)}
    assert {r.variable.name: (r.per_tb, r.per_wg) for r in table.rows} == expected
    assert {r.variable.name: r.pool for r in table.rows if r.pool == "SMEM"}.keys() == {"Q", "K", "V", "P", "A", "ΔO"}


def test_table1_totals_and_table2_as_printed(table):
    smem, regs = table.printed.pool("SMEM"), table.printed.pool("registers")
    assert (smem.M_TB, smem.M_WG) == (48 * KB, 48 * KB) and (regs.M_TB, regs.M_WG) == (0, Fraction(7475, 100) * KB)
    assert (smem.M_max, regs.M_max) == (227 * KB, 256 * KB)
    assert round(float(smem.N_max), 1) == 3.7 and round(float(regs.N_max), 1) == 3.4
    assert smem.excess_tb == 35 * KB and round(float(smem.excess_wg) / KB, 2) == 11.67
    assert regs.excess_tb == Fraction(3175, 100) * KB and round(float(regs.excess_wg) / KB, 2) == 10.58
    assert round(float(regs.excess_thread)) == 85 and smem.excess_thread is None


def test_errata_d01_computed_values(table):
    a = table.row("A")
    assert (a.per_wg, a.printed, a.erratum) == (16384, 8192, "errata D-01")
    smem = table.pool("SMEM")
    assert smem.M_WG == 56 * KB and round(float(smem.N_max), 2) == 3.20
    assert smem.excess_tb == 11 * KB and round(float(smem.excess_wg) / KB, 2) == 3.67
    assert table.pool("registers") == table.printed.pool("registers")   # D-01 leaves the register limit alone
    text = table.to_text()
    assert "paper prints 8192 (errata D-01)" in text and "3.2" in text and "3.73" in text
    data = __import__("json").loads(table.to_json())
    assert data["pools"][0]["M_WG_B"] == 57344 and data["pools_as_printed"][0]["M_WG_B"] == 49152


def test_default_n_is_the_largest_that_fits():
    t = config_table(table1_variables(), load("h100-sxm5"), PAPER, partition=PARTITION)
    assert t.n == 3


def test_exceeding_smem_names_the_pool_and_the_variables():
    with pytest.raises(CapacityError, match=r"SMEM overflows with N = 4 warpgroups: .* largest variables: Q"):
        config_table(table1_variables(), load("h100-sxm5"), PAPER, partition=PARTITION, n=4)


def test_exceeding_registers_per_thread():
    big = [Variable("acc", "t_q*d", "fp32", "registers")]
    with pytest.raises(CapacityError, match=r"registers: 2048 B per thread exceeds the per-thread limit "
                                            r"register_bytes_per_thread = 1020 B; largest variables: acc"):
        config_table(big, load("h100-sxm5"), dict(t_q=4, d=128, w_q=512), partition=PARTITION, n=1)


def test_missing_size_and_bad_buffers_are_named():
    with pytest.raises(HardwareError, match=r"variable 'K' \(size s_x\*d\) needs a size for s_x"):
        config_table([Variable("K", "s_x*d", "fp8", "SMEM")], load("h100-sxm5"), {"d": 128}, partition=PARTITION)
    with pytest.raises(HardwareError, match=r"buffers = 0 must be a positive integer"):
        config_table([Variable("K", "s_x*d", "fp8", "SMEM", buffers=0)], load("h100-sxm5"), PAPER,
                     partition=PARTITION)
    with pytest.raises(HardwareError, match=r"grows like g_q\^2"):
        config_table([Variable("G", "g_q*g_q", "fp8", "SMEM")], load("h100-sxm5"), PAPER, partition=PARTITION)


def test_head_dimension_64_frees_memory_for_more_warpgroups(table):
    # d enters Q, K, V, O', (and not D, ΔO which use d'): halving d shrinks those rows, so N_max grows
    t = config_table(table1_variables(), load("h100-sxm5"), {**PAPER, "d": 64}, partition=PARTITION)
    assert t.row("K").per_tb == table.row("K").per_tb // 2 and t.row("O'").per_wg == table.row("O'").per_wg // 2
    assert t.pool("registers").N_max > table.pool("registers").N_max
    assert t.pool("SMEM").N_max > table.pool("SMEM").N_max


def test_the_same_configuration_on_a100_ampere_toy_hierarchy(table):
    # Ampere: warps (32 threads) are the scaling unit, wmma operands sit in registers, SMEM is 163 KB per block
    part = {"block": "g_q", "warp": "w_q", "thread": "t_q"}
    vs = [v for v in table1_variables()]
    t = config_table(vs, load("a100"), {**PAPER, "w_q": 32}, partition=part)
    assert t.scaling == "warp" and t.threads == 32
    assert t.row("Q").pool == "registers" and t.row("A").pool == "registers"    # operand pool of the ampere level
    assert t.pool("SMEM").M_max == 163 * KB
