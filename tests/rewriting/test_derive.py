"""FlashAttention and tiled matmul derived by rules alone; partition rules fuzzed (paper §3, App. A.1)."""
import json

import numpy as np
import pytest
import sympy

import napkin_cat as nc
from napkin_cat.rewriting import Trace, rewrite
from rewrites import ALL_RULES, PARTITION, flash_attention, tiled_matmul
from rewrites.partition import group_partition, kernel_fusion, stream_partition

S = nc.symbol
q, x, d, h, g, M = (S(n) for n in ("q", "x", "d", "h", "g", "M"))


def test_flash_attention_is_derived_by_rules():
    att = nc.library.attention()
    r = flash_attention(att)
    assert [s.rule for s in r.trace] == ["softmax_contraction_to_unscaled"] + ["kernel_formation"] * 5 + \
        ["kernel_fusion"] * 4 + ["stream_partition", "group_partition"]
    assert nc.equivalent(att, r.diagram, trials=6)
    # the derived algorithm is the cost model of the paper
    c = nc.cost(r.diagram)
    assert c.N_g == q / S("g_q") and sympy.expand(c.H_g[1] - (2 * S("g_q") * d + 2 * x * d)) == 0
    assert sympy.expand(nc.optimal(c).H - (2 * q * d + 4 * x * q * d ** 2 / M)) == 0
    # and the direct API (which streams SoftMax · V by the same registered form) moves, keeps and computes
    # the same: the form's state (μ, z, o) is counted once on both routes
    direct = nc.cost(nc.group(nc.stream(nc.kernel(att), "x", "s_x"), "q", "g_q"))
    assert direct.H == c.H and direct.M == c.M
    assert all(sympy.expand(direct.flops[p] - c.flops[p]) == 0 for p in c.flops)


def test_trace_replays_checks_and_round_trips(tmp_path):
    att = nc.library.attention()
    r = flash_attention(att)
    assert r.trace.replay(att) == r.diagram
    assert r.trace.check()
    back = Trace.loads(r.trace.dumps(), ALL_RULES)
    assert back.replay(att) == r.diagram
    assert json.loads(r.trace.dumps())["steps"][-1]["rule"] == "group_partition"
    out = r.trace.draw(str(tmp_path / "strip.png"))
    assert (tmp_path / "strip.png").stat().st_size > 10_000 and out.endswith("strip.png")


@pytest.mark.parametrize("build, grouped, H_star", [
    (nc.library.multi_head_attention, ["q", "h"], 2 * h * q * d + 4 * h * x * q * d ** 2 / M),
    (nc.library.grouped_query_attention, ["q", "g", "h"], 2 * g * h * q * d + 4 * g * h * x * q * d ** 2 / M),
])
def test_same_derivation_for_mha_and_gqa(build, grouped, H_star):
    f = build()
    r = flash_attention(f)
    assert [s.rule for s in r.trace][-len(grouped):] == ["group_partition"] * len(grouped)
    assert nc.equivalent(f, r.diagram, trials=4)
    assert sympy.expand(nc.optimal(nc.cost(r.diagram)).H - H_star) == 0


def test_tiled_matmul_is_derived_by_rules():
    mm = nc.library.matmul()
    r = tiled_matmul(mm)
    assert [s.rule for s in r.trace] == ["kernel_formation", "stream_partition", "group_partition",
                                         "group_partition"]
    assert nc.equivalent(mm, r.diagram, trials=4)
    a, b, c = S("a"), S("b"), S("c")
    o = nc.optimal(nc.cost(r.diagram))
    assert sympy.expand(o.H - (2 * a * b * c / sympy.sqrt(M) + a * c)) == 0
    assert r.trace.replay(mm) == r.diagram


def test_side_conditions_name_the_reason():
    k = nc.kernel(nc.softmax("q x", over="x"))
    with pytest.raises(nc.RewriteError, match="condition 'streamable' fails: .*SoftMax alone is not streamable"):
        stream_partition.using(axis="x").apply(k)
    with pytest.raises(nc.RewriteError, match="condition 'weaved' fails"):
        group_partition.using(axis="x").apply(nc.kernel(nc.library.attention()))
    with pytest.raises(nc.RewriteError, match="does not match"):
        kernel_fusion.apply(nc.kernel(nc.library.attention()))


def test_fusion_removes_exactly_the_round_trips():
    u = nc.unfused(nc.library.attention())
    fused = rewrite(u, [kernel_fusion]).diagram
    assert sympy.expand(nc.cost(u).H[1] - nc.cost(fused).H[1]) == 4 * q * x   # S and P, each saved and loaded


FUNCTIONS = [lambda: nc.library.attention(), lambda: nc.library.matmul(), lambda: nc.library.mlp(),
             lambda: nc.library.multi_head_attention(), lambda: nc.library.rms_norm(),
             lambda: nc.library.grouped_query_attention(),
             lambda: nc.elementwise("exp", "q x") >> nc.reduce("sum", "q x -> q")]


def test_fuzz_partition_rules():
    """Random functions, random legal partition steps (random axes, random matches), equivalence
    preserved at every derivation; every partition rule fires."""
    fired, total = {}, 0
    for seed in range(40):
        rng = np.random.default_rng(seed)
        f = FUNCTIONS[seed % len(FUNCTIONS)]()

        def pick(diagram, options):
            return options[int(rng.integers(len(options)))] if options else None
        r = rewrite(f, PARTITION, pick, max_steps=int(rng.integers(3, 9)))
        assert nc.equivalent(f, r.diagram, trials=2, seed=seed), (seed, [s.rule for s in r.trace])
        total += len(r.trace)
        for s in r.trace:
            fired[s.rule] = fired.get(s.rule, 0) + 1
    assert total >= 100, fired
    assert set(fired) == {r.name for r in PARTITION}, fired


def test_fuzz_decomposition_rules():
    """Written-out partitions on random concrete algorithms, applied repeatedly: the function is kept."""
    from rewrites import DECOMPOSE
    fired, total = {}, 0
    builders = [lambda r: nc.library.attention(q=int(r.integers(1, 4)), x=int(r.integers(2, 9)), d=2),
                lambda r: nc.library.matmul(a=int(r.integers(2, 5)), b=int(r.integers(2, 9)), c=3),
                lambda r: nc.library.mlp(n=int(r.integers(2, 5)), i=4, f=6, o=2, activation="relu"),
                lambda r: nc.reduce("max", "q x -> q", q=3, x=int(r.integers(2, 9)))]
    for seed in range(30):
        rng = np.random.default_rng(seed)
        f = builders[seed % len(builders)](rng)

        def pick(diagram, options):
            return options[int(rng.integers(len(options)))] if options else None
        r = rewrite(f, DECOMPOSE, pick, max_steps=int(rng.integers(1, 4)))
        assert nc.equivalent(f, r.diagram, trials=2, seed=seed, scale=10.0), (seed, [s.rule for s in r.trace])
        total += len(r.trace)
        for s in r.trace:
            fired[s.rule] = fired.get(s.rule, 0) + 1
    assert total >= 40 and set(fired) == {r.name for r in DECOMPOSE}, fired


def test_online_softmax_with_a_fully_masked_first_chunk():
    """−inf logits over the whole first chunk: δ and the first partial sum vanish, no NaN appears."""
    from rewrites import online_softmax_decomposition
    b = nc.Builder(nc.types("q x, x d", q=2, x=6, d=3))
    S, V = b.inputs
    sc = b.build(b(nc.einsum("q x, x d -> q d", q=2, x=6, d=3), b(nc.softmax("q x", over="x", q=2, x=6), S), V))
    two = online_softmax_decomposition.using(first=3).apply(sc)
    rng = np.random.default_rng(0)
    logits, values = rng.normal(size=(2, 6)) * 1e4, rng.normal(size=(6, 3))
    logits[:, :3] = -np.inf
    got, want = nc.evaluate(two, logits, values), nc.evaluate(sc, logits, values)
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, want, rtol=1e-12)
