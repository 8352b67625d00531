"""Item 7: the FLOPs a stream introduces (online-softmax δ, rescale-and-accumulate) are counted.

Paper Table 3 (per row of queries, per s_x trip, with u_x = s_x): tensor 2·d·s_x (Q-K) + 2·s_x·d (P-V),
special s_x + s_x/u_x (the scores' exps and one δ = exp(μ′ − μ)), and the running output's
rescale-and-accumulate 2d·(s_x/u_x).  The counts are read from the derived diagram by the cost functor.
"""
import sympy

import napkin_cat as nc
from rewrites import flash_attention

S = nc.symbol
q, x, d, g_q, s_x = (S(n) for n in ("q", "x", "d", "g_q", "s_x"))


def _per_row_per_trip(total):
    """A stream-body total divided by the rows (q) and the stream trips (x/s_x)."""
    return sympy.simplify(total / (q * x / s_x))


def test_derived_flash_attention_counts_table3_flops():
    c = nc.cost(flash_attention(nc.library.attention()).diagram)
    # one exp per score and one δ = exp(μ_old − μ_new) per row per trip: s_x + 1 (Table 3: 65 for s_x = 64)
    assert sympy.expand(c.flops["special"] - (q * x + q * x / s_x)) == 0, c.flops
    assert c.flops["special"].subs({q: 1, x: 64, s_x: 64}) == 65
    assert sympy.expand(c.flops["tensor"] - 4 * q * x * d) == 0


def test_rescale_and_accumulate_of_the_running_output_is_counted_per_trip():
    """o ← δ·o′ + s·v: one fused multiply-add per output value per trip, 2d per row (Table 3's FP16 accumulate,
    2d·s_x/u_x)."""
    c = nc.cost(flash_attention(nc.library.attention()).diagram)
    acc = [r for r in c.ops if r.role == "body" and r.kind == "fma"]
    assert {r.region for r in acc} == {(("grid", "q"), ("stream", "x"))} and len(acc) == 1
    assert all(r.pipeline == "general" and r.flops == 2 * g_q * d and r.trips == q / g_q * x / s_x for r in acc)
    assert _per_row_per_trip(sum(r.flops * r.trips for r in acc)) == 2 * d
