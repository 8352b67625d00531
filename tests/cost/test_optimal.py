"""Optimal transfers H*(a, M): the paper's large-M forms and the exact optimum side by side (§3, §4.1, D-12)."""
import re

import sympy
import pytest

import napkin_cat as nc
from napkin_cat.cost.hierarchy import quantization_factors

S = nc.symbol
a, b, c, q, x, d, h, M = (S(n) for n in "abcqxdhM")


def tiled_matmul(**sizes):
    return nc.group(nc.group(nc.stream(nc.library.matmul(**sizes), "b", "s_b"), "a", "g_a"), "c", "g_c")


def flash(**sizes):
    return nc.group(nc.stream(nc.library.attention(**sizes), "x", "s_x"), "q", "g_q")


def test_matmul_square_tiling_is_optimal():
    o = nc.optimal(nc.cost(tiled_matmul()), memory="M")
    assert o.sizes[S("g_a")] == o.sizes[S("g_c")] == sympy.sqrt(M)
    assert sympy.expand(o.H - (2 * a * b * c / sympy.sqrt(M) + a * c)) == 0
    assert o.terms == [(a * c, 0), (2 * a * b * c, sympy.Rational(1, 2))]
    # exact with s_b = 1: g = sqrt(M + 1) - 1 (errata D-12)
    assert o.exact_sizes[S("g_a")] == sympy.sqrt(M + 1) - 1
    assert sympy.simplify(o.exact_H - (2 * a * b * c / (sympy.sqrt(M + 1) - 1) + a * c)) == 0
    assert "H* (exact, memory g_a*g_c + g_a + g_c ≤ M)" in str(o)


def test_attention_optimum():
    o = nc.optimal(nc.cost(flash()), memory="M")
    assert o.sizes[S("g_q")] == M / (2 * d)
    assert sympy.expand(o.H - (2 * q * d + 4 * x * q * d ** 2 / M)) == 0
    assert [beta for _, beta in o.terms] == [0, 1]
    # the exact optimum under the full memory model is never below the printed bound
    vals = {q: 4096, x: 4096, d: 128, M: 50000}
    assert float(o.exact_H.subs(vals)) >= float(o.H.subs(vals))


def test_multi_head_attention_optimum():
    mha = nc.group(nc.group(nc.stream(nc.library.multi_head_attention(), "x", "s_x"), "q", "g_q"), "h", "g_h")
    o = nc.optimal(nc.cost(mha), memory="M")
    assert o.sizes[S("g_h")] == 1 and o.sizes[S("g_q")] == M / (2 * d)
    assert sympy.expand(o.H - (2 * h * q * d + 4 * h * x * q * d ** 2 / M)) == 0   # the paper's bound holds (D-03)


def test_integer_search_respects_divisors_and_bound():
    o = nc.optimal(nc.cost(tiled_matmul()), memory=4096, sizes={"a": 256, "b": 256, "c": 256})
    ga, gc = int(o.sizes[S("g_a")]), int(o.sizes[S("g_c")])
    assert 256 % ga == 0 and 256 % gc == 0
    assert ga * gc + ga + gc <= 4096
    bound = 2 * 256 ** 3 / 4096 ** 0.5 + 256 * 256
    assert float(o.H) >= bound
    # brute force agrees
    best = min(256 ** 3 * (1 / g1 + 1 / g2) + 256 ** 2 for g1 in (1, 2, 4, 8, 16, 32, 64, 128, 256)
               for g2 in (1, 2, 4, 8, 16, 32, 64, 128, 256) if g1 * g2 + g1 + g2 <= 4096)
    assert float(o.H) == best


def test_memory_below_any_tile():
    with pytest.raises(nc.MemoryLimitError, match="the smallest legal memory is 3"):
        nc.optimal(nc.cost(tiled_matmul()), memory=2, sizes={"a": 8, "b": 8, "c": 8})


def test_needs_a_partition_and_a_level():
    with pytest.raises(nc.NapkinError, match="no group partition"):
        nc.optimal(nc.cost(nc.kernel(nc.library.matmul())))
    with pytest.raises(nc.LevelError, match="moves nothing at level 2"):
        nc.optimal(nc.cost(tiled_matmul()), level=2)


def test_quantization_factors():
    """FP32 → FP16: attention ×4, matmul ×2^1.5 on their memory-bound terms (§4.3)."""
    att = quantization_factors(nc.optimal(nc.cost(flash())), 4, 2)
    mm = quantization_factors(nc.optimal(nc.cost(tiled_matmul())), 4, 2)
    assert 1 / att[1] == 4
    assert sympy.nsimplify(1 / mm[sympy.Rational(1, 2)]) == 2 * sympy.sqrt(2)
    assert abs(float(1 / mm[sympy.Rational(1, 2)]) - 2 ** 1.5) < 1e-12


@pytest.mark.parametrize("memory", [-5, 0, -2.5, sympy.Integer(-3), sympy.Rational(-1, 2), "-M"])
@pytest.mark.parametrize("sizes", [None, {"a": 8, "b": 8, "c": 8}])
def test_non_positive_memory_is_a_memory_limit_error(memory, sizes):
    """A memory of zero or below names the value and says what is legal (Soundness item 11)."""
    shown = str(memory)
    with pytest.raises(nc.MemoryLimitError, match=rf"memory must be positive, got {re.escape(shown)}\b"):
        nc.optimal(nc.cost(tiled_matmul()), memory=memory, sizes=sizes)


@pytest.mark.parametrize("memory, message", [
    (float("inf"), "memory must be finite, got inf"),
    (sympy.oo, "memory must be finite, got oo"),
    (1 + 2j, r"memory must be positive, got \(1\+2j\)"),
    ("M +", r"memory 'M \+' is not a number or an expression"),
    ([4096], r"memory \[4096\] is not a number or an expression"),
])
def test_memory_that_is_no_capacity_is_refused(memory, message):
    with pytest.raises(nc.MemoryLimitError, match=message):
        nc.optimal(nc.cost(tiled_matmul()), memory=memory)


def test_integer_search_names_the_missing_size():
    c = nc.cost(tiled_matmul())
    with pytest.raises(nc.NapkinError, match=r"give a concrete size for axis 'c' \(sizes=\{'c': …\}\)"):
        nc.optimal(c, memory=4096, sizes={"a": 8, "b": 8})
    with pytest.raises(nc.NapkinError, match=r"not a number: give sizes for \['b'\]"):
        nc.optimal(c, memory=4096, sizes={"a": 8, "c": 8})
    with pytest.raises(nc.MemoryLimitError, match="needs a number for the memory limit, got M"):
        nc.optimal(c, memory="M", sizes={"a": 8, "b": 8, "c": 8})


def test_integer_search_refuses_a_non_positive_axis_size():
    with pytest.raises(nc.AxisError, match="the size of 'a' must be a positive int, got 0"):
        nc.optimal(nc.cost(tiled_matmul()), memory=4096, sizes={"a": 0, "b": 8, "c": 8})


def test_integer_search_over_given_candidates():
    """Legal tile values from outside (the hardware's divisor constraints): the best among them, exactly."""
    c = nc.cost(tiled_matmul())
    sizes = {"a": 256, "b": 256, "c": 256}
    free = nc.optimal(c, memory=4096, sizes=sizes)
    o = nc.optimal(c, memory=4096, sizes=sizes, candidates={"g_a": [16, 32, 128], "g_c": [16, 32]})
    best = min((256 ** 3 * sympy.Rational(1, g1) + 256 ** 3 * sympy.Rational(1, g2) + 256 ** 2, g1, g2)
               for g1 in (16, 32, 128) for g2 in (16, 32) if g1 * g2 + g1 + g2 <= 4096)
    assert (o.H, o.sizes[S("g_a")], o.sizes[S("g_c")]) == best
    assert o.H >= free.H
    with pytest.raises(nc.NapkinError, match=r"candidates for g_a: \[96\] do not divide axis 'a' of size 256"):
        nc.optimal(c, memory=4096, sizes=sizes, candidates={"g_a": [32, 96]})
    with pytest.raises(nc.NapkinError, match=r"candidates for \['g_q'\]: not tiles of this algorithm"):
        nc.optimal(c, memory=4096, sizes=sizes, candidates={"g_q": [32]})
    with pytest.raises(nc.MemoryLimitError, match="no tiling from the candidates"):
        nc.optimal(c, memory=4096, sizes=sizes, candidates={"g_a": [256], "g_c": [256]})


def test_large_m_form_is_the_papers_memory_model_whatever_the_column_order():
    """App. A.2: the large-M constraint is what a group holds (H_g with streamed axes relabelled to their
    slices), not whichever column of the exact model comes first: reordering the columns changes nothing."""
    import dataclasses
    from rewrites import flash_attention
    c = nc.cost(flash_attention(nc.library.attention()).diagram)
    S = nc.symbol
    o = nc.optimal(c)
    assert o.constraint == 2 * S("d") * S("g_q")
    flipped = dataclasses.replace(c, columns={lvl: list(reversed(cols)) for lvl, cols in c.columns.items()})
    assert nc.optimal(flipped).H == o.H == 2 * S("d") * S("q") + 4 * S("d") ** 2 * S("q") * S("x") / S("M")
    # the exact optimum keeps every column: it is never below the large-M bound
    assert any(col.has(S("g_q")) and sympy.degree(col, S("g_q")) == 1 for col in c.columns[1])
