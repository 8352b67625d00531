"""The instrumented runner measures what the cost functor predicts, on every library algorithm.

Random sizes (ragged ones included), random legal partitions (a stream along an axis the
algorithm is streamable along, groups along axes it is weaved over): the plan's outputs equal
``nc.evaluate`` of the original function diagram, and its counters (transfers, bytes, peak, FLOPs)
equal the cost functor evaluated at those sizes (ceil-aware where tiles are ragged).
"""
from __future__ import annotations

import numpy as np
import pytest
import sympy
from hypothesis import given, settings, strategies as st, HealthCheck

import napkin_cat as nc
from napkin_cat.cost.numeric import at
from napkin_cat.errors import NapkinError
from napkin_cat.syntax.sizes import symbols_of
from napkin_cat.syntax.axis import symbol

LIBRARY = {
    "matmul": nc.library.matmul, "attention": nc.library.attention, "mha": nc.library.multi_head_attention,
    "gqa": nc.library.grouped_query_attention, "mlp": nc.library.mlp, "layer_norm": nc.library.layer_norm,
    "rms_norm": nc.library.rms_norm, "transformer_block": nc.library.transformer_block,
}


def axes_of(d):
    return sorted({a.name for arr in (*d.dom.inside, *d.cod.inside) for a in arr.axes})


def partitions(d):
    """Every legal (stream axis or None, group axes) of ``d`` with at most one stream and two groups."""
    out = []
    names = axes_of(d)
    for s in [None] + names:
        try:
            base = nc.stream(d, s, f"s_{s}") if s else d
        except NapkinError:
            continue
        for g1 in [None] + names:
            for g2 in [None] + names:
                if g2 is not None and (g1 is None or g2 <= g1):
                    continue
                try:
                    x = base
                    for g in (g1, g2):
                        if g:
                            x = nc.group(x, g, f"g_{g}")
                except NapkinError:
                    continue
                if s or g1:
                    out.append(((s, g1, g2), x))
    return out


PARTITIONS = {name: partitions(make()) for name, make in LIBRARY.items()}


def inputs(d, env, rng):
    return [rng.normal(size=tuple(int(sympy.sympify(a.size).subs(env)) for a in arr.axes)) for arr in d.dom.inside]


def check(function, algorithm, sizes, seed=0):
    """Run the plan; compare outputs with nc.evaluate and counters with the cost functor at ``sizes``."""
    p = nc.plan(algorithm, sizes)
    env = {symbol(k): v for k, v in sizes.items()}
    xs = inputs(function, env, np.random.default_rng(seed))
    y, n = p.run(*xs)
    want = nc.evaluate(function, *xs)
    for a, b in zip(y if isinstance(y, tuple) else (y,), want if isinstance(want, tuple) else (want,), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-9)
    c = at(algorithm, sizes)
    assert n.transfers == c.H and n.bytes == c.H_bytes
    assert n.flops == c.flops
    assert n.peak == {l: m for l, m in c.M.items() if l > 0}
    assert n.peak == p.peak   # the runner measures what the plan's text says it holds
    return p, n


@pytest.mark.parametrize("name", sorted(LIBRARY))
def test_every_library_algorithm_has_legal_partitions(name):
    assert PARTITIONS[name], f"{name}: no legal partition found"


@pytest.mark.parametrize("name", sorted(LIBRARY))
@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_counters_equal_the_cost_functor(name, data):
    function = LIBRARY[name]()
    (s, g1, g2), algorithm = data.draw(st.sampled_from(PARTITIONS[name]), label="partition")
    found = symbols_of(algorithm)
    sizes = {}
    for sym in sorted(found, key=str):
        if not str(sym).startswith(("s_", "g_")):
            sizes[str(sym)] = data.draw(st.integers(1, 5), label=str(sym))
    for sym in sorted(found, key=str):
        n = str(sym)
        if n.startswith(("s_", "g_")):
            sizes[n] = data.draw(st.integers(1, sizes[n[2:]]), label=n)
    check(function, algorithm, sizes, seed=data.draw(st.integers(0, 100), label="seed"))


def test_divisible_sizes_match_the_symbolic_cost():
    """Where every tile divides its axis the counters are the symbolic H, M and FLOPs substituted."""
    from rewrites import flash_attention
    d = flash_attention(nc.library.multi_head_attention()).diagram
    sizes = {"q": 6, "x": 8, "d": 3, "h": 2, "g_q": 3, "g_h": 1, "s_x": 4}
    p, n = check(nc.library.multi_head_attention(), d, sizes)
    c, env = nc.cost(d), {symbol(k): v for k, v in sizes.items()}
    assert n.transfers == {l: int(h.subs(env)) for l, h in c.H.items()}
    assert n.peak == {1: int(c.M[1].subs(env))}
    assert n.flops == {k: int(f.subs(env)) for k, f in c.flops.items()}


def test_streaming_flops_include_the_online_softmax_corrections():
    """Per row and slice one δ = exp(μ′ − μ): special FLOPs are q·x + q·⌈x/s⌉ (ragged: 10 = 4 + 4 + 2)."""
    from rewrites import flash_attention
    d = flash_attention(nc.library.attention()).diagram
    q, x, s = 5, 10, 4
    p, n = check(nc.library.attention(), d, {"q": q, "x": x, "d": 3, "g_q": 2, "s_x": s})
    assert n.flops["special"] == q * x + q * 3
    unstreamed = nc.plan(nc.group(nc.library.attention(), "q", "g_q"), {"q": q, "x": x, "d": 3, "g_q": 2})
    _, m = unstreamed.run(*inputs(nc.library.attention(), {symbol("q"): q, symbol("x"): x, symbol("d"): 3},
                                  np.random.default_rng(1)))
    assert m.flops["special"] == q * x   # the plain softmax has no correction


def test_ragged_transfers_count_the_real_tiles():
    """a = 5 in groups of 2 (2 + 2 + 1), b = 7 in slices of 3: B is read once per group of a: 3·21."""
    mm = nc.group(nc.stream(nc.library.matmul(), "b", "s_b"), "a", "g_a")
    _, n = check(nc.library.matmul(), mm, {"a": 5, "b": 7, "c": 3, "g_a": 2, "s_b": 3})
    assert n.transfers == {1: 5 * 7 + 3 * 7 * 3 + 5 * 3}


def test_the_product_is_accumulated_into_the_output_in_place():
    """FlashAttention's ``o' = fma(o, δ, P·V)`` runs as one statement with P·V inlined: the runner never holds
    ΔO = P·V (peak without ``g_q·d`` for it) and still counts its FLOPs, as the cost functor does; storing
    it first (``accumulate=False``) holds Q, o and ΔO together at the peak, computes the same."""
    from napkin_cat.plan.ir import Compute, walk
    fa = nc.group(nc.stream(nc.library.attention(), "x", "s_x"), "q", "g_q")
    sizes = {"q": 6, "x": 4, "d": 8, "g_q": 3, "s_x": 1}   # where o, Q and ΔO together were the peak
    p, n = check(nc.library.attention(), fa, sizes)
    (fma,) = [s for s in walk(p.body) if isinstance(s, Compute) and s.inlined]
    ((pos, pv),) = fma.inlined
    assert (fma.kind, pos, pv.kind, pv.outs) == ("fma", 2, "contract", ())
    assert fma.outs[0].var == fma.ins[0].var   # o written over itself
    assert "fma(o0, softmax_unscaled" in str(p) and ", ·(" in str(p)
    stored = nc.plan(fa, sizes, accumulate=False)
    _, m = stored.run(*inputs(nc.library.attention(), {symbol(k): v for k, v in sizes.items()},
                              np.random.default_rng(0)))
    assert m.flops == n.flops
    g, d = sizes["g_q"], sizes["d"]
    assert m.peak[1] == 3 * g * d + 3 * g > n.peak[1]   # Q, o and ΔO with μ, z, δ: the column that is gone
