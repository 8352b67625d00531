"""Memory columns that another column bounds term by term are dropped before the integer search (issue 35, sym-35g).

``compiled`` pools the program's columns at the sizes and drops each one some other column bounds coefficient by
coefficient (:func:`napkin_cat.cost.integer_search.undominated`): the largest column, the memory a tiling needs, is
then the same at every tiling, so the search's answer is the one over every column (a symbolic transformer block's
records: 4,259 columns searched, 980 after the pruning).

Second routes: exact evaluation of every column at random tilings (the dropped ones never exceed the kept ones), and
the brute force from the maths, every divisor tiling of the symbolic cost substituted by sympy against every column
of the record, which the search over the kept columns must match.
"""
from __future__ import annotations

import itertools
import random
from fractions import Fraction

import pytest
import sympy

import napkin_cat as nc
from napkin_cat.cost.integer_search import best_many, divisors, undominated
from napkin_cat.cost.optimum import optima
from napkin_cat.cost.sized_optimum import compiled
from napkin_cat.cost.tiling import unexpanded


def at(poly, combo) -> Fraction:
    coeffs, exps = poly
    total = Fraction(0)
    for a, e in zip(coeffs, exps):
        term = Fraction(a)
        for g, k in zip(combo, e):
            term *= Fraction(g) ** k
        total += term
    return total


def random_columns(rng, tiles: int = 3, count: int = 8) -> list:
    """Posynomials over ``tiles`` tiles, some of them another plus more terms (so bounded by it)."""
    cols = []
    for _ in range(count):
        if cols and rng.random() < 0.5:      # a column bounded by an earlier one, or one bounding it
            coeffs, exps = rng.choice(cols)
            keep = [k for k in range(len(coeffs)) if rng.random() < 0.7] or [0]
            if rng.random() < 0.5:
                cols.append((tuple(coeffs[k] * Fraction(rng.randint(1, 3), 3) for k in keep),
                             tuple(exps[k] for k in keep)))
            else:
                extra = tuple(rng.randint(0, 2) for _ in range(tiles))
                cols.append((coeffs + (Fraction(rng.randint(1, 5)),), exps + (extra,)))
            continue
        n = rng.randint(1, 3)
        exps = tuple(dict.fromkeys(tuple(rng.randint(0, 2) for _ in range(tiles)) for _ in range(n)))
        cols.append((tuple(Fraction(rng.randint(1, 7), rng.randint(1, 3)) for _ in exps), exps))
    return list(dict.fromkeys(cols))      # (pooled as compiled pools them)


@pytest.mark.parametrize("seed", range(12))
def test_the_dropped_columns_never_exceed_a_kept_one(seed):
    rng = random.Random(seed)
    cols = random_columns(rng)
    kept = undominated(cols)
    assert len(kept) < len(cols)                   # (the generator makes bounded columns: some are dropped)
    assert [c for c in cols if c in kept] == list(kept)        # a subset, in order
    for _ in range(200):
        combo = tuple(Fraction(rng.randint(1, 64), rng.randint(1, 4)) for _ in range(3))
        assert max(at(c, combo) for c in kept) == max(at(c, combo) for c in cols)


def test_a_column_with_a_negative_coefficient_is_kept_and_bounds_nothing():
    one = Fraction(1)
    a = ((one, one), ((1, 1), (1, 0)))          # g₀g₁ + g₀
    b = ((one, -one), ((1, 1), (0, 1)))         # g₀g₁ − g₁: below a at every tiling, but not term by term
    c = ((one,), ((1, 1),))                     # g₀g₁: below a term by term, above b
    assert undominated([a, b, c]) == (a, b)
    assert undominated([b, c]) == (b, c)        # b bounds c nowhere term by term (its negative term)


@pytest.mark.parametrize("seed", range(6))
def test_the_search_over_the_kept_columns_is_the_brute_force_over_all(seed):
    rng = random.Random(100 + seed)
    cols = random_columns(rng)
    H = ((Fraction(3), Fraction(5), Fraction(1), Fraction(2)), ((-1, 0, 0), (0, -1, 0), (0, 0, -1), (-1, -1, 0)))
    values = [divisors(12), divisors(8), divisors(6)]
    memories = [1, 4, 16, 64, 300, 2000, 10 ** 6]
    found = best_many(H, undominated(cols), values, memories)
    for m, got in zip(memories, found):
        fits = [(at(H, g), max(at(c, g) for c in cols), g[::-1], g) for g in itertools.product(*values)
                if max(at(c, g) for c in cols) <= m]
        want = min(fits)[0::3] if fits else None
        assert got == want, (m, got, want)


def brute(c, memory: int, sizes: dict) -> int | None:
    """The least transfers over every divisor tiling of ``c``'s groups within every column of its record, by sympy."""
    env = {nc.symbol(k): v for k, v in sizes.items()}
    env.update({s: 1 for _, s, _ in c.streams if isinstance(s, sympy.Symbol)})
    tiles = [(t, sizes[str(g.axes[i])]) for g in c.groups for i, t in enumerate(g.tiles)]
    best = None
    for combo in itertools.product(*(divisors(n) for _, n in tiles)):
        put = {**env, **{t: v for (t, _), v in zip(tiles, combo)}}
        if max(sympy.sympify(col).subs(put) for col in c.columns[1]) > memory:
            continue
        h = sympy.sympify(c.H[1]).subs(put)
        best = h if best is None else min(best, h)
    return best


KERNELS = {
    "attention": (lambda: nc.group(nc.stream(nc.library.attention(), "x", "s_x"), "q", "g_q"),
                  {"q": 16, "x": 16, "d": 8}),
    "matmul": (lambda: nc.group(nc.group(nc.stream(nc.library.matmul(), "b", "s_b"), "a", "g_a"), "c", "g_c"),
               {"a": 12, "b": 8, "c": 6}),
    "mlp": (lambda: nc.group(nc.stream(nc.library.mlp(), "i", "s_i"), "n", "g_n"),
            {"n": 12, "i": 8, "f": 6, "o": 4}),
}


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_a_kernel_with_bounded_columns_finds_the_brute_force_optimum(name):
    make, sizes = KERNELS[name]
    c = nc.cost(make())
    searched = compiled(unexpanded(c, 1), tuple(sorted(sizes.items())))[1]
    assert len(searched) < len(set(c.columns[1]))      # (columns bounded by another: not searched)
    for memory in (40, 100, 200, 400, 1000, 5000):
        o = optima(c, [memory], sizes=sizes)[0]
        assert (None if o is None else o.H) == brute(c, memory, sizes), memory
