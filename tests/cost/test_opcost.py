"""The per-op FLOP breakdown ``Cost.ops``: it adds up to ``Cost.flops`` and composes like it."""
import pytest
import sympy

import napkin_cat as nc
from napkin_cat.cost.iocost import OpCost
from rewrites import flash_attention, tiled_matmul

S = nc.symbol


def _by_pipeline(c):
    out = {}
    for r in c.ops:
        out[r.pipeline] = out.get(r.pipeline, 0) + r.flops * r.trips
    return out


ALGORITHMS = {
    "flash": lambda: flash_attention(nc.library.attention()).diagram,
    "mha": lambda: flash_attention(nc.library.multi_head_attention()).diagram,
    "tiled-matmul": lambda: tiled_matmul(nc.library.matmul()).diagram,
    "unfused-mlp": lambda: nc.unfused(nc.library.mlp()),
    "streamed-reductions": lambda: nc.stream(nc.elementwise("exp", "q x") >> nc.reduce("sum", "q x -> q"), "x", "s_x"),
    "function": lambda: nc.library.attention(),
}


@pytest.mark.parametrize("name", list(ALGORITHMS))
def test_records_add_up_to_the_flops(name):
    c = nc.cost(ALGORITHMS[name]())
    got = _by_pipeline(c)
    assert set(got) == set(c.flops)
    assert all(sympy.simplify(got[p] - c.flops[p]) == 0 for p in c.flops), (got, c.flops)
    assert all(isinstance(r, OpCost) and r.pipeline in ("tensor", "special", "general") for r in c.ops)


def test_records_compose_like_the_cost():
    f, g = nc.einsum("a b, b c -> a c"), nc.elementwise("exp", "a c")
    cf, cg, cfg = nc.cost(f), nc.cost(g), nc.cost(f >> g)
    assert cfg.ops == cf.then(cg).ops == cf.ops + cg.ops
    assert [r.trips for r in cf.scaled(S("k")).ops] == [S("k")]


def test_tiled_matmul_records_say_where_each_box_runs():
    c = nc.cost(tiled_matmul(nc.library.matmul()).diagram)
    (r,) = c.ops
    a, b, cc = S("a"), S("b"), S("c")
    g_a, g_c, s_b = S("g_a"), S("g_c"), S("s_b")
    assert (r.label, r.kind, r.pipeline, r.role, r.dtype) == ("·", "contract", "tensor", "body", "fp32")
    assert r.region == (("grid", "c"), ("grid", "a"), ("stream", "b"))
    assert r.flops == 2 * g_a * g_c * s_b and sympy.simplify(r.trips - a * b * cc / (g_a * g_c * s_b)) == 0


def test_flash_attention_records_follow_table3_per_row_and_trip():
    """Table 3 with u_x = s_x, per row and per s_x trip, read from the records of the stream body."""
    c = nc.cost(flash_attention(nc.library.attention()).diagram)
    g_q, s_x, d = S("g_q"), S("s_x"), S("d")
    body = [r for r in c.ops if r.role == "body"]
    per_row = {}
    for r in body:
        per_row[r.pipeline] = per_row.get(r.pipeline, 0) + r.flops / g_q
    assert sympy.expand(per_row["tensor"] - 4 * d * s_x) == 0          # Q-K 2·d·s_x + P-V 2·s_x·d
    assert sympy.expand(per_row["special"] - (s_x + 1)) == 0           # s_x + s_x/u_x
    tail = [r for r in c.ops if r.role == "tail"]
    assert [(r.kind, r.trips) for r in tail] == [("div", S("q") / g_q)]  # o / z once per group
