"""Tables 1-2 from the plan of FlashAttention configured for the Hopper toy hierarchy; errata D-01 both ways;
capacity errors; the same configuration at d = 64 and on A100.

The configuration's inputs are the paper's (Table 1: FP8 Q and K, FP16 otherwise; its caption's sizes; the
split of the output accumulation along d); the rows are the configured plan's variables, never typed in.
"""
from __future__ import annotations

import json
from fractions import Fraction

import pytest

import napkin_cat as nc
from napkin_cat.hardware import CapacityError, HardwareError, Variable, config_table, configure, load

from typed_attention import VARIANTS, typed_attention

KB = 1024
PARTITION = {"block": "g_q", "warpgroup": "w_q", "thread": "t_q"}
PAPER = {"w_q": 128, "t_q": 1, "s_x": 64, "u_x": 64, "d": 128, "d'": 32, "d''": 8, "g_q": 3 * 128}   # Table 1, N = 3
SPLITS = {"d": {"SMEM": "d'", "registers": "d''"}}     # step 2: the output accumulation split along d
SUBLOOPS = {"x": "u_x"}                                 # step 2: the sub-loop of the s_x stream


def flash(variant="paper"):
    from rewrites import flash_attention
    return flash_attention(typed_attention(*VARIANTS[variant])).diagram


@pytest.fixture(scope="module")
def configured():
    return configure(flash(), "hopper", PAPER, splits=SPLITS, subloops=SUBLOOPS)


#: the sub-loop's tile (Table 1's P′, A)
U = "u_x"


def d01(c):
    """Table 1's A: the SoftMax output piped from the threads to the tensor cores."""
    (var,) = [p.var for p in c.pipes if p.source == "registers" and p.targets == ("tensor-core",)]
    return var


@pytest.fixture(scope="module")
def table(configured):
    return configured.table(load("h100-sxm5"), printed={d01(configured): (8192, "errata D-01")})


#: Table 1 as the paper prints it, beside the configured plan's variable: (level, size expression, dtype,
#: M_TB, M_WG).  Where the plan's size expression differs from the paper's the bytes agree, for a stated reason:
#:   Q: the paper writes the tensor cores' view w_q×d; the plan holds the block's tile g_q×d = N·w_q×d in SMEM,
#:      which the tensor cores read in place;
#:   O', α: the paper writes one thread's t_q rows; the plan spreads g_q rows over the block's threads;
#:   α: μ, z and δ, three rows of 256 B.
TABLE1 = {
    "Q": ("SMEM", "d*g_q", "fp8", 0, 16384),
    "K": ("SMEM", "d*s_x", "fp8", 16384, 0),            # ×2: asynchronous loads
    "V": ("SMEM", "d*s_x", "fp16", 32768, 0),           # ×2
    "S": ("tensor-core", "s_x*w_q", "fp16", 0, 16384),
    "P": ("SMEM", "g_q*s_x", "fp16", 0, 16384),
    "P'": ("registers", "t_q*u_x".replace("u_x", U), "fp16", 0, 16384),
    "A": ("SMEM", "g_q*u_x".replace("u_x", U), "fp16", 0, 16384),         # the paper prints 8192 (errata D-01)
    "α": ("registers", "g_q", "fp16", 0, 768),
    "O'": ("registers", "d*g_q", "fp16", 0, 32768),
    "D": ("tensor-core", "d'*w_q", "fp16", 0, 8192),
    "ΔO": ("SMEM", "d'*g_q", "fp16", 0, 8192),
    "ΔO'": ("registers", "d''*t_q", "fp16", 0, 2048),
}


def rows_by_paper_name(c, t):
    """The table's rows under the paper's names, found by what each variable is in the plan."""
    h = c.hierarchy
    rows = {r.variable.name: r for r in t.rows}
    level = {n: h.level(c.variable(n).level).name for n in rows}
    out = {}
    loads = [n for n in rows if c.variable(n).role == "tile" and level[n] == "SMEM"]
    out["Q"] = next(n for n in loads if c.variable(n).buffers == 1)
    streamed = [n for n in loads if c.variable(n).buffers == 2]
    out["K"], out["V"] = sorted(streamed, key=lambda n: nc.DTYPES[c.variable(n).dtype].bytes)
    tc_pipes = [p for p in c.pipes if p.source == "tensor-core"]
    out["P"], out["ΔO"] = (min(tc_pipes, key=lambda p: "d" in str(c.variable(p.var).size)).var,
                           max(tc_pipes, key=lambda p: "d" in str(c.variable(p.var).size)).var)
    out["A"] = d01(c)
    tc = [n for n in rows if level[n] == "tensor-core"]
    out["S"] = next(n for n in tc if "d" not in str(c.variable(n).size))
    out["D"] = next(n for n in tc if "d" in str(c.variable(n).size))
    regs = [n for n in rows if level[n] == "registers"]
    out["P'"] = next(n for n in regs if c.variable(n).role == "tile" and "x" in str(c.variable(n).size))
    out["ΔO'"] = next(n for n in regs if c.variable(n).role == "tile" and "d" in str(c.variable(n).size))
    out["O'"] = next(n for n in regs if c.variable(n).role == "state" and "d" in str(c.variable(n).size))
    out["α"] = [n for n in regs if str(c.variable(n).size) == "g_q"]
    return out, rows, level


def test_table1_rows_come_from_the_configured_plan(configured, table):
    names, rows, level = rows_by_paper_name(configured, table)
    assert len(rows) == 14 and len(names["α"]) == 3       # every variable of the steady state has a paper row
    used = set()
    for paper, (lvl, size, dtype, tb, wg) in TABLE1.items():
        found = names[paper] if isinstance(names[paper], list) else [names[paper]]
        used |= set(found)
        assert {level[n] for n in found} == {lvl}, paper
        assert {tuple(sorted(str(rows[n].size).split("*"))) for n in found} == {tuple(sorted(size.split("*")))}, paper
        assert {rows[n].variable.dtype for n in found} == {dtype}, paper
        assert (sum(rows[n].per_tb for n in found), sum(rows[n].per_wg for n in found)) == (tb, wg), paper
    assert used == set(rows)
    assert {n: configured.variable(n).buffers for n in (names["K"], names["V"])} == {names["K"]: 2, names["V"]: 2}


def test_a_shorter_sub_loop_shrinks_only_what_it_holds(configured, table):
    # u_x = 32: the threads' P' and the tensor cores' operand A hold half the columns; S and P (made once per
    # s_x trip, before the sub-loop) do not change, nor does anything else
    c = configure(flash(), "hopper", {**PAPER, "u_x": 32}, splits=SPLITS, subloops=SUBLOOPS)
    t = c.table("h100-sxm5")
    names, _, _ = rows_by_paper_name(configured, table)
    new, _, _ = rows_by_paper_name(c, t)
    for paper in TABLE1:
        old_b = sum(table.row(n).per_wg for n in (names[paper] if paper == "α" else [names[paper]]))
        new_b = sum(t.row(n).per_wg for n in (new[paper] if paper == "α" else [new[paper]]))
        assert new_b == (old_b // 2 if paper in ("P'", "A") else old_b), paper
    with pytest.raises(HardwareError, match=r"sub-loop u_d of 'd': the algorithm does not stream 'd'; its streams "
                                            r"are \['x'\]"):
        configure(flash(), "hopper", {**PAPER, "u_d": 8}, splits=SPLITS, subloops={"d": "u_d"})


def test_table1_totals_and_table2_as_printed(table):
    smem, regs = table.printed.pool("SMEM"), table.printed.pool("registers")
    assert (smem.M_TB, smem.M_WG) == (48 * KB, 48 * KB) and (regs.M_TB, regs.M_WG) == (0, Fraction(7475, 100) * KB)
    assert (smem.M_max, regs.M_max) == (227 * KB, 256 * KB)
    assert round(float(smem.N_max), 1) == 3.7 and round(float(regs.N_max), 1) == 3.4
    assert smem.excess_tb == 35 * KB and round(float(smem.excess_wg) / KB, 2) == 11.67
    assert regs.excess_tb == Fraction(3175, 100) * KB and round(float(regs.excess_wg) / KB, 2) == 10.58
    assert round(float(regs.excess_thread)) == 85 and smem.excess_thread is None


def test_errata_d01_computed_values(configured, table):
    a = table.row(d01(configured))
    assert (a.per_wg, a.printed, a.erratum) == (16384, 8192, "errata D-01")
    smem = table.pool("SMEM")
    assert smem.M_WG == 56 * KB and round(float(smem.N_max), 2) == 3.20
    assert smem.excess_tb == 11 * KB and round(float(smem.excess_wg) / KB, 2) == 3.67
    assert table.pool("registers") == table.printed.pool("registers")   # D-01 leaves the register limit alone
    text = table.to_text()
    assert "paper prints 8192 (errata D-01)" in text and "3.2" in text and "3.73" in text
    data = json.loads(table.to_json())
    assert data["pools"][0]["M_WG_B"] == 57344 and data["pools_as_printed"][0]["M_WG_B"] == 49152


def test_default_n_is_the_configured_one_and_fit_is_the_largest_that_fits(configured):
    assert configured.table("h100-sxm5").n == 3
    two = configure(flash(), "hopper", {**PAPER, "g_q": 256}, splits=SPLITS, subloops=SUBLOOPS)
    assert two.table("h100-sxm5").n == 2 and two.table("h100-sxm5", n="fit").n == 3


def test_exceeding_smem_names_the_pool_and_the_variables(configured):
    with pytest.raises(CapacityError, match=r"SMEM overflows with N = 4 warpgroups: .* largest variables: x0_1"):
        configured.table("h100-sxm5", n=4)
    four = configure(flash(), "hopper", {**PAPER, "g_q": 512}, splits=SPLITS, subloops=SUBLOOPS)
    with pytest.raises(CapacityError, match=r"at most 3 warpgroup\(s\) fit"):
        four.table("h100-sxm5")


def test_exceeding_registers_per_thread():
    big = [Variable("acc", "t_q*d", "fp32", "registers")]
    with pytest.raises(CapacityError, match=r"registers: 2048 B per thread exceeds the per-thread limit "
                                            r"register_bytes_per_thread = 1020 B; largest variables: acc"):
        config_table(big, load("h100-sxm5"), dict(t_q=4, d=128, w_q=512), partition=PARTITION, n=1)


def test_a_configuration_that_fits_no_warpgroup_is_refused_not_clamped():
    # d = 512: the K, V and Q tiles alone take 192 KB + 64 KB per warpgroup of SMEM's 227 KB
    c = configure(flash(), "hopper", {**PAPER, "d": 512, "g_q": 128}, splits=SPLITS, subloops=SUBLOOPS)
    with pytest.raises(CapacityError, match=r"SMEM overflows with N = 1 warpgroups: 196608 \+ 1·106496 = 303104 B > "
                                            r"M_max = 232448 B; largest variables: x2_1 \(131072 B\).* no warpgroup "
                                            r"fits \(N_max = 0.34\)"):
        c.table("h100-sxm5")
    t = c.table("h100-sxm5", strict=False)
    assert t.n == 1 and t.pool("SMEM").excess_tb < 0
    assert t.pool("registers").M_WG / 128 > 1020        # and a thread would need more than its 255 registers


def test_missing_size_and_bad_buffers_are_named():
    with pytest.raises(HardwareError, match=r"variable 'K' \(size s_x\*d\) needs a size for s_x"):
        config_table([Variable("K", "s_x*d", "fp8", "SMEM")], load("h100-sxm5"), {"d": 128}, partition=PARTITION)
    with pytest.raises(HardwareError, match=r"buffers = 0 must be a positive integer"):
        config_table([Variable("K", "s_x*d", "fp8", "SMEM", buffers=0)], load("h100-sxm5"), PAPER,
                     partition=PARTITION)
    with pytest.raises(HardwareError, match=r"grows like g_q\^2"):
        config_table([Variable("G", "g_q*g_q", "fp8", "SMEM")], load("h100-sxm5"), PAPER, partition=PARTITION)
    with pytest.raises(HardwareError, match=r"N = 0 warpgroups per thread block must be a positive integer"):
        config_table([Variable("K", "s_x*d", "fp8", "SMEM")], load("h100-sxm5"), PAPER, partition=PARTITION, n=0)


def test_head_dimension_64_halves_the_k_v_tiles_and_frees_memory_for_more_warpgroups(configured, table):
    # d enters Q, K, V, O' (not S, P, P', A, α, D, ΔO, ΔO', which use s_x, d' and d''): halving d halves those
    # rows, so N_max grows on both pools
    c = configure(flash(), "hopper", {**PAPER, "d": 64}, splits=SPLITS, subloops=SUBLOOPS)
    t = c.table("h100-sxm5", n="fit")
    names, _, _ = rows_by_paper_name(configured, table)
    for paper in ("Q", "K", "V", "O'"):
        old, new = table.row(names[paper]), t.row(names[paper])
        assert (new.per_tb, new.per_wg) == (old.per_tb // 2, old.per_wg // 2), paper
    for paper in ("S", "P", "D", "ΔO", "ΔO'"):
        assert t.row(names[paper]).per_wg == table.row(names[paper]).per_wg, paper
    assert t.pool("registers").M_WG == table.pool("registers").M_WG - 16 * KB
    assert t.pool("SMEM").N_max > table.pool("SMEM").N_max and t.pool("registers").N_max > 4
    assert t.n == 4                      # four warpgroups fit now (the registers bind at 4.26)


def test_d64_fp8_keys_violate_coalescing_fp16_do_not():
    # a row of FP8 keys with d = 64 is 64 B: half a 128 B transaction (step 4's coalescing divisor)
    c = configure(flash(), "hopper", {**PAPER, "d": 64}, splits=SPLITS, subloops=SUBLOOPS)
    with pytest.raises(nc.hardware.DivisorError, match=r"tile d = 64 of x0_1 violates coalesced GMEM↔SMEM access "
                                                         r"of x0_1 \(fp8: 128 B / 1 B per value\).*multiple of 128"):
        c.check("h100-sxm5")
    fp16 = configure(flash("fa3-fp16"), "hopper", {**PAPER, "d": 64}, splits=SPLITS, subloops=SUBLOOPS)
    assert fp16.check("h100-sxm5")


def test_the_paper_configuration_passes_every_divisor_constraint_on_h100(configured):
    checked = configured.check("h100-sxm5")
    reasons = " ".join(d.reason for d in checked)
    assert "coalesced" in reasons and "warpgroup multiple (128 threads per warpgroup)" in reasons
    matmuls = configured.constraints("h100-sxm5").matmuls
    assert sorted((m.m, m.n, m.k, m.dtype) for m, _ in matmuls) == [("w_q", "d'", U, "fp16"),
                                                                    ("w_q", "s_x", "d", "fp8")]


def test_a100_has_no_fp8_tensor_cores_and_less_smem(table):
    # Ampere: warps of 32 threads are the scaling unit (w_q = 32 t_q); wmma operands are loaded into registers
    gpu = load("a100")
    sizes = {**PAPER, "w_q": 32, "g_q": 32}
    fp8 = configure(flash(), "ampere", sizes, splits=SPLITS, subloops=SUBLOOPS)
    with pytest.raises(HardwareError, match=r"a100 has no tensor-core instruction for fp8 operands"):
        fp8.check(gpu)
    c = configure(flash("fp16"), "ampere", sizes, splits=SPLITS, subloops=SUBLOOPS)
    assert c.check(gpu)
    t = c.table(gpu, n="fit", strict=False)
    assert t.scaling == "warp" and t.threads == 32 and t.pool("SMEM").M_max == 163 * KB
    # the tensor cores' operands now have register copies per warp (wmma::load_matrix_sync): Q, K, A and V
    loaded = [r for r in t.rows if (c.variable(r.variable.name).level, c.variable(r.variable.name).role) == (3, "tile")]
    assert len(loaded) == 4
    # FP16 keys double K's tile (16 → 32 KB per block, ×2 buffers)
    k = [r for r in t.rows if r.variable.dtype == "fp16" and str(r.size) == "d*s_x" and r.per_tb]
    assert sorted(r.per_tb for r in k) == [32768, 32768]
