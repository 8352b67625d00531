"""§5.7, §6 and Appendices "Lower Bound on Compute Time" and A.4 reproduced: Table 3, the g_q threshold,
the ideal throughput, FlashAttention-3's utilisation, matmul's arithmetic intensity.

The algorithm is attention in the number formats the paper states (Table 1: FP8 queries and keys,
FP16 values, scores, probabilities and output; FA3 FP16 with FP32 scores and output; FA3 FP8 with FP8
probabilities and values), derived into FlashAttention by the rule book; its per-op FLOPs come from the
cost functor (``Cost.ops``) and the rates from the hardware model (``nc.hardware.load``).

>>> from napkin_cat.paper.ledger import Ledger
>>> from napkin_cat.paper.context import Context
>>> book = Ledger(); section_5_7(book, Context(out=None))
>>> book.ok, len(book.claims) >= 15
(True, True)
"""
from __future__ import annotations

from fractions import Fraction

from napkin_cat import library
from napkin_cat.cost.iocost import cost
from napkin_cat.hardware.clock import clock_table_of
from napkin_cat.hardware.intensity import matmul_intensity
from napkin_cat.hardware.model import load
from napkin_cat.hardware.overlap import inter, intra, simulate, tasks_of

#: the number formats of the paper's configuration (Table 1) and of FlashAttention-3 (§6)
FORMATS = {
    "paper": {"Q": "fp8", "K": "fp8", "S": "fp16", "P": "fp16", "V": "fp16", "O": "fp16"},
    "fa3-fp16": {"Q": "fp16", "K": "fp16", "S": "fp32", "P": "fp16", "V": "fp16", "O": "fp32"},
    "fa3-fp8": {"Q": "fp8", "K": "fp8", "S": "fp32", "P": "fp8", "V": "fp8", "O": "fp16"},
}
PAPER_SIZES = {"d": 128, "s_x": 64, "g_q": 128}   # Table 1: d = 128, s_x = u_x = 64 (g_q cancels per thread)
FA3_SIZES = {"d": 128, "s_x": 128, "g_q": 128}    # §6.1: effective g_q = 128 and s_x = 128
SOFTMAX_OVERHEAD = {"special": Fraction(2, 3)}     # §6.3: "if we assume a 66% overhead in SoftMax"


def clock_table_for(ctx, variant: str, sizes: dict):
    """Table 3 of FlashAttention derived by rules from attention in ``variant``'s formats, on H100 SXM5."""
    cache = ctx.__dict__.setdefault("_clock_tables", {})
    key = (variant, tuple(sorted(sizes.items())))
    if key not in cache:
        derived = ctx.derive("flash_attention", library.attention(formats=FORMATS[variant]))
        cache[key] = clock_table_of(cost(derived.diagram), load("h100-sxm5"), sizes)
    return cache[key]


def section_5_7(book, ctx):
    """§5.7 Table 3, the tensor-core bound, Appendix "Lower Bound on Compute Time" (errata D-04, D-14)."""
    sec = "§5.7 Table 3"
    t = clock_table_for(ctx, "paper", PAPER_SIZES)
    names = ["Q-K MatMul", "SoftMax (exponent)", "P-V MatMul", "FP16 Accumulate"]
    printed = [("tensor", 16384, 8192, 2), ("special", 65, 16, 4.06), ("tensor", 16384, 4096, 4),
               ("general", 256, 512, 0.5)]
    book.fact("S5.7-columns", sec, "the loop body has four columns: Q-K matmul, SoftMax exponent, P-V matmul, "
              "FP16 accumulate", paper=", ".join(names), library=len(t.columns) == 4,
              note="columns read off the derived diagram: " + ", ".join(f"{c.label} ({c.pipeline})" for c in t.columns))
    for name, col, (pipe, ops, rate, clk) in zip(names, t.columns, printed):
        key = name.split(" ")[0].lower().replace("-", "")
        book.fact(f"S5.7-{key}-pipeline", sec, f"{name}: pipeline", paper=pipe, library=col.pipeline == pipe,
                  note=f"library: {col.pipeline}")
        book.number(f"S5.7-{key}-ops", sec, f"{name}: ops per thread", paper=ops, library=float(col.ops), abs_=0)
        book.number(f"S5.7-{key}-rate", sec, f"{name}: ops per clock", paper=rate, library=float(col.rate), abs_=0)
        book.number(f"S5.7-{key}-clocks", sec, f"{name}: clocks per thread", paper=clk, library=float(col.clocks),
                    abs_=0.005)
    book.number("S5.7-k_TC", sec, "clock cycles per iteration are lower bound by 6 per thread (tensor cores)",
                paper=6, library=float(t.k_TC), abs_=0)
    sec = "App. lower bound"
    book.number("S5.7-g_q-295", sec, "g_q must exceed 295 not to be bandwidth-bound on H100 SXM5 (no caching)",
                paper=295, library=float(t.min_rows), rel=0.002,
                note=f"H = {t.moved} B per trip per block (K tile FP8 + V tile FP16), f_K = 1.83 GHz (D-14)")
    gpu = t.gpu
    literal = gpu.f_K * t.moved * gpu.hbm / (gpu.f_K * gpu.sm_count)
    book.erratum("S5.7-D-04", sec, "the printed bound g_q ≥ f_K H B/(f_K N_SM) (D-04: dimensionally wrong; the "
                 "intended g_q ≥ f_K H N_SM/(k_TC B))", paper=float(literal), library=float(t.min_rows),
                 corrected=295.35, rel=0.002, erratum="D-04",
                 note="the paper's side evaluates the printed formula with the same H, B, N_SM")
    book.number("S5.7-ideal", sec, "the ideal tensor-core-bound throughput is 1.32 PFLOP/s", paper=1.32e15,
                library=float(t.ideal), rel=0.005,
                note="at f_K = 1.83 GHz, the clock behind NVIDIA's dense specs (D-14)")
    book.fact("S5.7-D-14", sec, "295 and 1.32 PFLOP/s rest on an unstated clock (D-14: 1.83 GHz; at the 1.98 GHz "
              "boost they would be 319.6 and 1.427 PF)", paper="f_K unstated",
              library=gpu.f_K == Fraction(183, 100) * 10 ** 9 and gpu.boost > gpu.f_K,
              note=f"the hardware model states f_K = {float(gpu.f_K) / 1e9} GHz, boost {float(gpu.boost) / 1e9} GHz")


def section_6(book, ctx):
    """§6: FlashAttention-3's utilisation predicted by the overlap model with a 66% SoftMax overhead."""
    sec = "§6"
    fp16 = clock_table_for(ctx, "fa3-fp16", FA3_SIZES)
    fp8 = clock_table_for(ctx, "fa3-fp8", FA3_SIZES)
    u16 = simulate(intra(tasks_of(fp16, SOFTMAX_OVERHEAD))).utilisation()
    u8 = simulate(inter(tasks_of(fp8, SOFTMAX_OVERHEAD), warpgroups=2)).utilisation()
    book.number("S6-fa3-fp16", sec, "FP16 FlashAttention-3 (intra-warpgroup) achieves 740 of 989 TFLOP/s (75%)",
                paper=740 / 989, library=float(u16), abs_=0.01, note="predicted with a 66% SoftMax overhead")
    book.number("S6-fp16-4/3", sec, "with 66% SoftMax overhead FP16 intra-warpgroup takes 4/3 as long as necessary",
                paper=4 / 3, library=float(1 / u16), abs_=0.02)
    book.erratum("S6-fa3-fp8", sec, "FP8 FlashAttention-3 (inter-warpgroup) achieves 1.2 of 1.98 PFLOP/s (60%; "
                 "D-11: 60.6%)", paper=0.60, library=float(u8), corrected=1.2 / 1.98, rel=0.02, erratum="D-11",
                 note="predicted with a 66% SoftMax overhead; 1-point tolerance")
    book.number("S6-fp8-5/3", sec, "and FP8 inter-warpgroup takes 5/3 as long as necessary", paper=5 / 3,
                library=float(1 / u8), abs_=0.04)
    special = sum(c.clocks for c in fp8.columns if c.pipeline == "special")
    tensor = sum(c.clocks for c in fp8.columns if c.pipeline == "tensor")
    book.fact("S6-fp8-softmax-bound", sec, "FP8: the SoftMax uses as many clock cycles as the tensor cores",
              paper="special ≈ tensor", library=abs(special - tensor) <= tensor / 32,
              note=f"special {float(special):.3g} vs tensor {float(tensor):.3g} clk/thread")
    lost = 1 - simulate(intra(tasks_of(fp8))).utilisation()
    book.fact("S6-fp8-intra-loss", sec, "FP8 intra-warpgroup leaves the special-function unit idle, losing at least "
              "33% of performance", paper="≥ 33%", library=lost >= Fraction(33, 100), note=f"loss {float(lost):.1%}")
    full = simulate(inter(tasks_of(fp16, {"special": Fraction(1)}), warpgroups=2, pipelined=True))
    book.fact("S6-fp16-inter-accommodates", sec, "the FP16 inter-warpgroup strategy accommodates 100% SoftMax "
              "overhead (tensor cores stay busy)", paper="100% accommodated",
              library=full.utilisation() >= Fraction(99, 100),
              note=f"two warpgroups, two iterations in flight: tensor {float(full.utilisation()):.1%}, "
                   f"special-function unit {float(full.occupancy('special')):.0%} busy")


def appendix_a4_hardware(book, ctx):
    """Appendix A.4 on H100: FP16 values per second per level; L2 as an intermediate cache."""
    sec = "App. A.4"
    t = matmul_intensity("h100-sxm5")
    rates = {lv.name: float(lv.values_per_s) for lv in t.levels}
    book.number("A4-gmem-rate", sec, "GMEM → L2 at 3352 GB/s is 1.7e12 FP16 values per second", paper=1.7e12,
                library=rates["GMEM→L2"], rel=0.02)
    book.number("A4-l2-rate", sec, "L2 → SMEM at 12 TB/s is 6.0e12 FP16 values per second", paper=6.0e12,
                library=rates["L2→SMEM"], rel=0.02)


SECTIONS = [("§5.7 Table 3 and bounds", section_5_7), ("§6 FlashAttention-3", section_6),
            ("App. A.4 on H100", appendix_a4_hardware)]
