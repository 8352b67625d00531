"""nc.derive: the cheapest algorithm per memory size, checked against an independent brute force over the
hand-built partitions (the direct API), against today's integer optimum, and by replaying its trace."""
import numpy as np
import pytest
import sympy

import napkin_cat as nc
from napkin_cat.cost.numeric import at as cost_at
from napkin_cat.search.variants import streamable_axes
from rewrites import flash_attention, tiled_matmul

S = nc.symbol
q, x, d, M = (S(n) for n in "qxdM")
ATT = {"q": 4096, "x": 4096, "d": 128}
POWERS = [2 ** k for k in range(10, 21)]


def integer_optimum(algorithm, memory, sizes):
    try:
        return int(nc.optimal(nc.cost(algorithm), memory=memory, sizes=sizes).H)
    except nc.MemoryLimitError:
        return None


def fused_attention(sizes, memory):
    return integer_optimum(flash_attention(nc.library.attention()).diagram, memory, sizes)


def best_kernel(function, memory, sizes):
    """min over the streamable axes of kernel(function), and over the sliced streams along every axis an input
    and an output carry, every other axis its outputs carry grouped (direct API)."""
    best = None
    outs = [a.names for a in function.cod.inside]
    sliced = [(a, True) for a in outs[0] if any(a in i.names for i in function.dom.inside)]
    for axis, sweep in [(a, False) for a in streamable_axes(function) or [None]] + sliced:
        k = nc.kernel(function)
        if axis:
            try:
                k = nc.stream(k, axis, f"s_{axis}", sliced=sweep)
            except nc.RewriteError:
                continue
        for a in reversed([n for n in outs[0] if all(n in o for o in outs) and n != axis]):
            try:
                k = nc.group(k, a, f"g_{a}")
            except nc.RewriteError:
                pass
        c = nc.cost(k)
        if c.groups:
            h = integer_optimum(k, memory, sizes)
        else:
            env = {**{S(f"s_{a}"): 1 for a in sizes}, **{S(n): v for n, v in sizes.items()}}   # slices of 1
            h = int(c.H[1].subs(env))
            if int(c.M[1].subs(env)) > memory:
                h = None
        if h is not None and (best is None or h < best):
            best = h
    return best


def segment(lo, hi):
    """Operations lo … hi-1 of attention (S = Q·Kᵀ, P = SoftMax(S), O = P·V) as one function."""
    inputs = {0: "q d, x d", 1: "q x", 2: "q x"}[lo] + (", x d" if hi == 3 else "")
    b = nc.Builder(nc.types(inputs))
    ins = list(b.inputs)
    cur = b(nc.einsum("q d, x d -> q x"), ins[0], ins[1]) if lo == 0 else ins[0]
    if lo <= 1 < hi:
        cur = b(nc.softmax("q x", over="x", beta=nc.library.inverse_temperature(d)), cur)
    if hi == 3:
        cur = b(nc.einsum("q x, x d -> q d"), cur, ins[-1])
    return b.build(cur)


def brute_force_attention(sizes, memory):
    """Every split of attention into consecutive kernels, each partitioned by hand: the least H*."""
    best = None
    for cuts in ([], [1], [2], [1, 2]):
        bounds = [0] + cuts + [3]
        parts = [best_kernel(segment(lo, hi), memory, sizes) for lo, hi in zip(bounds, bounds[1:])]
        if None not in parts and (best is None or sum(parts) < best):
            best = sum(parts)
    return best


@pytest.fixture(scope="module")
def curve():
    return nc.derive(nc.library.attention(), memory=POWERS, sizes=ATT)


def test_attention_beats_the_fused_form_where_memory_is_small_and_never_loses(curve):
    for m in POWERS:
        fused = fused_attention(ATT, m)
        assert curve.H[m] <= fused, (m, curve.H[m], fused)
    assert curve.H[2 ** 10] * 4 < fused_attention(ATT, 2 ** 10)          # 2.15e9 for the fused form
    assert curve.H[2 ** 14] < fused_attention(ATT, 2 ** 14) == 135_266_304
    assert curve.at(2 ** 10).variant.kind == "partly fused"
    assert all(curve.at(m).variant.kind == "fully fused" for m in POWERS if m >= 2 ** 15)


@pytest.mark.parametrize("m", [2 ** 10, 2 ** 12, 2 ** 14, 2 ** 16])
def test_attention_equals_an_independent_brute_force(curve, m):
    assert curve.H[m] == brute_force_attention(ATT, m)


def test_each_answer_is_its_algorithm_made_by_the_rules(curve):
    att = nc.library.attention()
    seen = set()
    for r in curve.regimes:
        # a second route: the ceil-aware numeric cost functor at the chosen tiles
        assert cost_at(r.diagram, {**ATT, **r.tiles}).H[1] == r.H
        if id(r.diagram) in seen:
            continue
        seen.add(id(r.diagram))
        assert nc.isomorphic(r.trace.replay(att), r.diagram)
        assert nc.equivalent(att, r.diagram, trials=2, seed=len(seen))


def test_the_fused_regime_is_flash_attention():
    att = nc.library.attention()
    r = nc.derive(att, memory=2 ** 18, sizes=ATT)
    flash = flash_attention(att)
    assert [s.rule for s in r.trace] == [s.rule for s in flash.trace]
    assert nc.isomorphic(r.diagram, flash.diagram)
    assert r.H == fused_attention(ATT, 2 ** 18)


def test_tiles_that_need_not_divide_reach_the_mappers_numbers(curve):
    """tiles="any": a shorter last tile is allowed (as nc.evaluate and the ceil-aware cost count it)."""
    r = nc.derive(nc.library.attention(), memory=POWERS, sizes=ATT, tiles="any")
    for g in r.regimes:
        assert cost_at(g.diagram, {**ATT, **g.tiles}).H[1] == g.H      # the second route agrees
        assert g.H <= curve.H[g.memory]
    assert r.H[2 ** 10] <= 420_000_000                  # AccelForge's mapper: 4.2e8
    assert r.H[2 ** 14] <= 1.01 * 101_711_872            # the mapper: 101,711,872 (its own memory model)
    assert any(ATT[a] % t for g in r.regimes for a, t in (("q", g.tiles.get("g_q", 1)),))
    with pytest.raises(nc.NapkinError, match="numeric-mode option"):
        nc.derive(nc.library.attention(), memory="M", tiles="any")


def test_matmul_equals_todays_integer_optimum_at_every_memory():
    sizes = {"a": 1024, "b": 1024, "c": 1024}
    r = nc.derive(nc.library.matmul(), memory=POWERS, sizes=sizes)
    tiled = tiled_matmul(nc.library.matmul())
    for m in POWERS:
        assert r.H[m] == integer_optimum(tiled.diagram, m, sizes)
        assert r.at(m).gap >= 1           # Smith et al.'s bound is a lower bound
    assert nc.isomorphic(r.trace.replay(nc.library.matmul()), r.diagram)
    # the search's answer is the named derivation of the paper
    assert [s.rule for s in r.trace] == [s.rule for s in tiled.trace] and nc.isomorphic(r.diagram, tiled.diagram)


@pytest.mark.parametrize("head", [64, 256])
def test_other_head_dimensions_and_memories_below_d_squared(head):
    sizes = {"q": 2048, "x": 1024, "d": head}
    ms = [head * head // 8, head * head // 2, head * head * 2]
    r = nc.derive(nc.library.attention(), memory=ms, sizes=sizes)
    for m in ms:
        assert r.H[m] == brute_force_attention(sizes, m)
        fused = fused_attention(sizes, m)
        assert fused is None or r.H[m] <= fused


def test_a_skinny_product_reaches_its_compulsory_traffic():
    """B (128 × 128) fits on chip: the compulsory traffic is the bound; the tiled form re-reads B per group, the
    sweep along a keeps B resident and moves each value once (ab + bc + ac)."""
    sizes = {"a": 4096, "b": 128, "c": 128}
    r = nc.derive(nc.library.matmul(), memory=2 ** 16, sizes=sizes)
    compulsory = 4096 * 128 * 2 + 128 * 128
    assert r.H == compulsory < integer_optimum(tiled_matmul(nc.library.matmul()).diagram, 2 ** 16, sizes)
    assert r.bound.at({**sizes, "M": 2 ** 16}) == compulsory and r.gap == 1
    assert "sweep a" in str(r.variant)
    assert nc.isomorphic(r.trace.replay(nc.library.matmul()), r.diagram)
    assert nc.equivalent(nc.library.matmul(), r.diagram, trials=2, seed=0)


def test_a_book_without_a_sweep_rule_is_searched_without_sweeps():
    """The search considers only partitions its rule book can build: without a rule playing ``sweep`` the skinny
    product falls back to the tiled form (and nothing raises for a missing role)."""
    from napkin_cat.rewriting.registry import Rulebook
    from rewrites import RULEBOOK
    roles = {k: v for k, v in RULEBOOK.roles.items() if k != "sweep"}
    book = Rulebook("no sweeps", RULEBOOK.rules, dict(RULEBOOK.derivations), roles=roles)
    sizes = {"a": 4096, "b": 128, "c": 128}
    r = nc.derive(nc.library.matmul(), memory=2 ** 16, sizes=sizes, book=book)
    assert "sweep" not in str(r.variant)
    assert r.H == integer_optimum(tiled_matmul(nc.library.matmul()).diagram, 2 ** 16, sizes) > 4096 * 128 * 2 + 128 ** 2
    assert "sliced_stream" not in [s.rule for s in r.trace]


def test_divisor_tiles_meet_the_mappers_numbers(curve):
    """AccelForge's mapper (q = x = 4096, d = 128): 4.2e8 values at M = 2^10 and 101,711,872 at 2^14.  The
    search meets both with tiles dividing the axes: at 2^10 QKᵀ as a tiled matmul and SoftMax·V streamed with
    P·V accumulated into o; at 2^14 QKᵀ with a stationary operand (a sweep) and SoftMax·V grouped over q only."""
    assert curve.H[2 ** 10] <= 420_000_000
    assert curve.H[2 ** 10] == 419_954_688                # 400.5·2^20
    assert curve.H[2 ** 14] <= 101_711_872
    assert "sweep" in str(curve.at(2 ** 14).variant)


def test_renamed_axes_give_the_same_answers(curve):
    att = nc.rename_axis(nc.rename_axis(nc.rename_axis(nc.library.attention(), "q", "t"), "x", "k"), "d", "f")
    r = nc.derive(att, memory=[2 ** 10, 2 ** 14, 2 ** 18], sizes={"t": 4096, "k": 4096, "f": 128})
    assert [r.H[m] for m in (2 ** 10, 2 ** 14, 2 ** 18)] == [curve.H[m] for m in (2 ** 10, 2 ** 14, 2 ** 18)]
    assert "stream k" in str(r.at(2 ** 18).variant)


def test_below_the_fused_forms_smallest_tiles_an_unfused_schedule_still_runs():
    """nc.optimal refuses the fused form under 4d + 2 values; the search answers with a split schedule."""
    fused = flash_attention(nc.library.attention()).diagram
    with pytest.raises(nc.MemoryLimitError, match="smallest legal memory is 514"):
        nc.optimal(nc.cost(fused), memory=256, sizes=ATT)
    r = nc.derive(nc.library.attention(), memory=256, sizes=ATT)
    assert r.variant.kind != "fully fused" and r.H == brute_force_attention(ATT, 256)


def test_too_little_memory_names_the_smallest_that_works():
    att = nc.library.attention()
    with pytest.raises(nc.MemoryLimitError, match=r"smallest memory that works is (\d+)") as e:
        nc.derive(att, memory=4, sizes=ATT)
    small = e.value.smallest
    assert nc.derive(att, memory=small, sizes=ATT).H > 0
    with pytest.raises(nc.MemoryLimitError):
        nc.derive(att, memory=small - 1, sizes=ATT)


def test_symbolic_mode_is_the_piecewise_envelope_with_solved_breakpoints():
    at = {d: 128, x: 4096, q: 4096}
    r = nc.derive(nc.library.attention(), memory="M", reference={str(k): v for k, v in at.items()})
    assert isinstance(r.H, sympy.Piecewise) and len(r.regimes) >= 2
    small, large, whole = r.regimes[0], r.regimes[-2], r.regimes[-1]
    assert sympy.expand(large.H - (2 * q * d + 4 * x * q * d ** 2 / M)) == 0        # the paper's FlashAttention
    assert [s.rule for s in large.trace] == [s.rule for s in flash_attention(nc.library.attention()).trace]
    # past M = 2dq its g_q = M/(2d) would exceed q (issue 35): q whole, Q, K, V read and O written once
    assert large.upper == whole.lower == 2 * d * q and sympy.expand(whole.H - (2 * d * q + 2 * d * x)) == 0
    assert small.variant.kind == "partly fused"
    assert [beta for _, beta in nc.engine.power_terms(small.H, M)] == [0, sympy.Rational(1, 2)]   # matmul-like
    for before, after in zip(r.regimes, r.regimes[1:]):
        b = before.upper
        assert b == after.lower and b.free_symbols <= {d, x, q}
        point = float(b.subs(at))
        assert 0 < point <= 128 ** 2 or large.lower.subs(at) <= point      # fused wins from d² at the latest
        assert abs(float((before.H - after.H).subs(at).subs(M, point))) < 1e-6 * float(after.H.subs(at).subs(M, point))
    assert r.H.subs(M, 1) is sympy.nan                # below every algorithm's smallest memory


def test_numeric_symbolic_inputs_are_checked():
    att = nc.library.attention()
    with pytest.raises(nc.NapkinError, match="needs sizes="):
        nc.derive(att, memory=1024)
    with pytest.raises(nc.NapkinError, match=r"add \['d'\]"):
        nc.derive(att, memory=1024, sizes={"q": 8, "x": 8})
    with pytest.raises(nc.NapkinError, match="level must be a positive int"):
        nc.derive(att, memory=1024, sizes=ATT, level=0)
    with pytest.raises(nc.MemoryLimitError, match="must be positive"):
        nc.derive(att, memory=-3, sizes=ATT)


def test_the_search_memoises_blocks_by_canonical_form():
    from napkin_cat.search.blocks import OpGraph
    from napkin_cat.search.context import KernelCache
    cache = KernelCache()
    nc.derive(nc.library.attention(), memory=2 ** 12, sizes=ATT, cache=cache)
    first = len(cache)
    nc.derive(nc.library.attention(), memory=2 ** 12, sizes=ATT, cache=cache)
    assert len(cache) == first > 0        # the same kernels: nothing new is costed
    renamed = {("t" if k == "q" else k): v for k, v in ATT.items()}
    nc.derive(nc.rename_axis(nc.library.attention(), "q", "t"), memory=2 ** 12, sizes=renamed, cache=cache)
    assert len(cache) > first             # renamed axes are other kernels
    # the two layer norms of a transformer block are one kernel for the search, wherever they sit
    g = OpGraph(nc.engine.to_netlist(nc.library.transformer_block()))
    means = [i for i in range(len(g)) if g.name(i) == "mean"]
    first_ln, second_ln = (sum(1 << i for i in range(lo, lo + 8)) for lo in (means[0], means[2]))
    assert first_ln != second_ln and g.key(first_ln) == g.key(second_ln)
    assert g.key(first_ln) != g.key(first_ln >> 1)


def test_random_sizes_agree_with_the_brute_force():
    rng = np.random.default_rng(7)
    for _ in range(3):
        sizes = {"q": int(2 ** rng.integers(6, 11)), "x": int(2 ** rng.integers(6, 11)),
                 "d": int(2 ** rng.integers(3, 7))}
        m = int(2 ** rng.integers(6, 14))
        try:
            got = nc.derive(nc.library.attention(), memory=m, sizes=sizes).H
        except nc.MemoryLimitError:
            got = None
        assert got == brute_force_attention(sizes, m), (sizes, m)



@pytest.mark.parametrize("names", [("q", "x", "d"), ("t", "k", "f")])
def test_a_product_with_a_stationary_tile_is_found_under_any_axis_names(names):
    """S = QKᵀ at M = 2^14: one operand's tile of 64 rows stays on chip while the other is swept one row at a time,
    saving S slice by slice: 0.5 + 32 + 16 = 48.5·2^20 values (the mapper's kernel).  The stream-a-reduction form
    moves more."""
    a, b, c = names
    qk = nc.einsum(f"{a} {c}, {b} {c} -> {a} {b}")
    sizes = {a: 4096, b: 4096, c: 128}
    r = nc.derive(qk, memory=2 ** 14, sizes=sizes)
    assert r.H == 4096 * 128 + 4096 * 4096 * 128 // 64 + 4096 * 4096 == 50_855_936
    tiles = {str(k): int(v) for k, v in r.optimum.exact_sizes.items()}    # the tiles (.sizes: the axes too)
    assert "sweep" in str(r.variant) and sorted(tiles.values()) == [1, 64]
    assert nc.isomorphic(r.trace.replay(qk), r.diagram)
    assert cost_at(r.diagram, {**sizes, **tiles}).H[1] == r.H


@pytest.mark.parametrize("sizes", [{"a": 4096, "b": 64, "c": 64}, {"a": 64, "b": 2048, "c": 32},
                                   {"a": 512, "b": 512, "c": 512}, {"a": 96, "b": 40, "c": 3000}])
def test_no_lower_bound_lies_above_an_algorithm_that_runs(sizes):
    """A bound above a schedule the search built (and the cost functor counted) would be false: the matrix
    product bound holds only where a √M tile fits every axis; above that only the compulsory one."""
    memories = [2 ** k for k in range(8, 17)]
    r = nc.derive(nc.library.matmul(), memory=memories, sizes=sizes)
    for g in r.regimes:
        assert g.H >= r.bound.at({**sizes, "M": g.memory}), (sizes, g.memory)
