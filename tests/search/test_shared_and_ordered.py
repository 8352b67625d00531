"""nc.derive on what models are made of (issue 21): inputs shared by several contractions are loaded once, and an
n-ary contraction is split into pairwise ones in the order the search finds cheapest.

The numbers are the issue's: SwiGLU's up-projection at n = 4096, e = 1024, f = 4096 (before: 486,539,264 at
M = 2^16 and 125,829,120 at 2^20, the hand-built one-kernel partition moving 419,430,400 and 117,440,512);
linear attention ``q d, x d, x e -> q e`` at q = x = 4096, d = e = 64 (before: one box, H 101,449,728 at
M = 2^12 and 3·q·x·d·e = 2.06·10¹¹ FLOPs; as two einsums 1,581,056 and 6.7·10⁷).
"""
import numpy as np
import pytest

import napkin_cat as nc
from napkin_cat.cost.numeric import at as cost_at
from napkin_cat.search.variants import variants

POWERS = [2 ** k for k in range(10, 21)]
SWIGLU = {"n": 4096, "e": 1024, "f": 4096}
LINEAR = {"q": 4096, "x": 4096, "d": 64, "e": 64}


def integer_optimum(algorithm, memory, sizes):
    c = nc.cost(algorithm)
    env = {nc.symbol(k): v for k, v in sizes.items()}
    if not c.groups:
        ones = {s: 1 for _, s, _ in c.streams}
        return int(c.H[1].subs(env)) if int(c.M[1].subs(env).subs(ones)) <= memory else None
    try:
        return int(nc.optimal(c, memory=memory, sizes=sizes).H)
    except nc.MemoryLimitError:
        return None


def regime(curve, memory):
    (g,) = curve.at(memory).regimes
    return g


def hand_built(function):
    """One kernel of the whole function, partitioned by hand with nc.kernel / stream / group: every streamed
    (or swept) axis, the carried axes grouped in both orders, and the unfused algorithm."""
    out = [nc.unfused(function)]
    for v in variants(function):
        out.append(v.diagram)
    k = nc.stream(nc.kernel(function), "e", "s_e")
    out += [nc.group(nc.group(k, "n", "g_n"), "f", "g_f"), nc.group(nc.group(k, "f", "g_f"), "n", "g_n")]
    return out


@pytest.fixture(scope="module")
def swiglu_curve():
    return nc.derive(nc.library.swiglu(), memory=POWERS, sizes=SWIGLU)


# ---------------------------------------------------------------------- 3. shared inputs, loaded once
def test_swiglu_meets_the_hand_built_kernel(swiglu_curve):
    r = swiglu_curve
    assert r.H[2 ** 16] == 419_430_400 < 486_539_264                  # before: X loaded once per contraction
    assert r.H[2 ** 20] == 88_080_384 < 117_440_512 < 125_829_120     # a sweep of f beats the hand-built tiles
    fully = dict(r.candidates)["fully fused"]
    assert fully[2 ** 16] == 419_430_400 < 553_648_128                 # the one kernel loads X once
    g = regime(r, 2 ** 16)
    assert g.variant.kind == "fully fused" and "shared_load" in [s.rule for s in g.trace]


def test_swiglu_is_never_above_a_hand_built_partition(swiglu_curve):
    algorithms = hand_built(nc.library.swiglu())
    for m in POWERS:
        hand = [h for h in (integer_optimum(a, m, SWIGLU) for a in algorithms) if h is not None]
        assert hand and swiglu_curve.H[m] <= min(hand), (m, swiglu_curve.H[m], min(hand))


def test_each_swiglu_answer_is_made_by_the_rules_and_counted(swiglu_curve):
    f = nc.library.swiglu()
    for g in swiglu_curve.regimes[::5]:
        assert cost_at(g.diagram, {**SWIGLU, **g.tiles}).H[1] == g.H
        assert nc.isomorphic(g.trace.replay(f), g.diagram)
        assert nc.equivalent(f, g.diagram, trials=1, seed=1)


@pytest.mark.parametrize("memory", [2 ** 16, 2 ** 20])
def test_the_plan_and_the_c_kernel_load_x_once(swiglu_curve, memory):
    """At small sizes with the derived algorithm's shape: the runner counts what the cost functor says, X once."""
    g = regime(swiglu_curve, memory)
    sizes = {"n": 32, "e": 16, "f": 32, **{k: max(1, int(v) // 128) for k, v in g.tiles.items()}}
    p = nc.plan(g.diagram, sizes)
    rng = np.random.default_rng(0)
    xs = [rng.normal(size=s) for s in ((32, 16), (16, 32), (16, 32))]
    out, counters = p.run(*xs)
    z = xs[0] @ xs[1]
    want = z / (1 + np.exp(-z)) * (xs[0] @ xs[2])
    assert np.allclose(out, want)
    assert counters.transfers[1] == cost_at(g.diagram, sizes).H[1]
    n_groups, f_groups = 32 // sizes.get("g_n", 32), 32 // sizes.get("g_f", 32)
    # X once per group of f (not once per contraction), W₁ and W₃ once per group of n, the result once
    assert counters.transfers[1] == f_groups * 32 * 16 + n_groups * 2 * 16 * 32 + 32 * 32
    assert np.allclose(nc.codegen.c(p)(*xs), want, rtol=1e-4, atol=1e-4)


def test_norms_load_their_input_once():
    """LayerNorm and RMSNorm read X twice (statistics, then the normalisation): one kernel reads it once."""
    sizes = {"n": 4096, "d": 1024}
    for f, params in ((nc.library.rms_norm(), 1024), (nc.library.layer_norm(), 2048)):
        r = nc.derive(f, memory=2 ** 16, sizes=sizes)
        assert r.H == 2 * 4096 * 1024 + params                          # before: 3·n·d + the parameters


def test_a_book_without_a_share_rule_loads_every_port():
    from napkin_cat.rewriting.registry import Rulebook
    from rewrites import RULEBOOK
    book = Rulebook("no sharing", RULEBOOK.rules, dict(RULEBOOK.derivations),
                    roles={k: v for k, v in RULEBOOK.roles.items() if k != "share"})
    r = nc.derive(nc.library.swiglu(), memory=2 ** 16, sizes=SWIGLU, book=book)
    assert r.H == 486_539_264 and "shared_load" not in [s.rule for s in r.trace]


# ---------------------------------------------------------------------- 4. n-ary contractions, ordered
def two_einsums():
    b = nc.Builder(nc.types("q d, x d, x e"))
    Q, K, V = b.inputs
    return b.build(b(nc.einsum("q d, d e -> q e"), Q, b(nc.einsum("x d, x e -> d e"), K, V)))


@pytest.fixture(scope="module")
def linear_curves():
    one = nc.derive(nc.einsum("q d, x d, x e -> q e"), memory=POWERS, sizes=LINEAR)
    two = nc.derive(two_einsums(), memory=POWERS, sizes=LINEAR)
    return one, two


def test_linear_attention_as_one_einsum_is_split_in_the_cheap_order(linear_curves):
    one, two = linear_curves
    assert one.H[2 ** 12] == 1_581_056 < 101_449_728
    env = {nc.symbol(k): v for k, v in LINEAR.items()}
    for m in POWERS:
        assert one.H[m] <= two.H[m], m
        g = regime(one, m)
        assert "pairwise_contraction" in g.variant.prepared
        flops = sum(int(v.subs(env).subs({nc.symbol(k): t for k, t in g.tiles.items()}))
                    for v in g.cost.flops.values())
        assert flops == 67_108_864, (m, str(g.variant))                  # 2xde + 2qde, nothing recomputed


def test_the_split_trace_replays(linear_curves):
    one, _ = linear_curves
    f = nc.einsum("q d, x d, x e -> q e")
    for g in one.regimes[::5]:
        assert nc.isomorphic(g.trace.replay(f), g.diagram)
        assert nc.equivalent(f, g.diagram, trials=1, seed=2)


def test_a_chain_of_four_matrices_takes_its_cheapest_order():
    """(A B C D) at skinny inner sizes: the split the search makes has the matrix-chain optimum's FLOPs."""
    sizes = {"a": 512, "b": 8, "c": 512, "d": 8, "e": 512}
    chain = nc.einsum("a b, b c, c d, d e -> a e")
    r = nc.derive(chain, memory=2 ** 16, sizes=sizes)
    env = {nc.symbol(k): v for k, v in {**sizes, **r.regimes[0].tiles}.items()}
    flops = sum(int(v.subs(env)) for v in r.cost.flops.values())
    a, b, c, d, e = sizes.values()
    orders = {"((A B) C) D": a * b * c + a * c * d + a * d * e, "(A B) (C D)": a * b * c + c * d * e + a * c * e,
              "A (B (C D))": c * d * e + b * c * e + a * b * e, "(A (B C)) D": b * c * d + a * b * d + a * d * e,
              "A ((B C) D)": b * c * d + b * d * e + a * b * e}
    assert flops == 2 * min(orders.values()) == 4_325_376 < 2 * orders["((A B) C) D"]
    assert "pairwise_contraction" in r.variant.prepared
