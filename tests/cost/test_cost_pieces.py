"""What the cost functor keeps between candidates: a box's cost pieces (kept on the box) and the integer
search's exact sums (integers, one reduction), each checked by a route that does not share the code."""
import itertools
import random
from fractions import Fraction

import pytest

import napkin_cat as nc
from napkin_cat.cost.integer_search import best, best_many, divisors
from napkin_cat.syntax.flat import layers

S = nc.symbol


def test_boxes_alike_but_for_their_axes_cost_their_own():
    """Two matmul boxes of one name and kind, over different axes: each costs ``2·Π sizes`` of its own axes,
    however many times and in whatever order either is costed (pieces kept per box, not per name or kind)."""
    m1, m2 = nc.library.matmul(), nc.library.matmul("p", "r", "t")
    (_, b1), = layers(m1)
    (_, b2), = layers(m2)
    assert b1.name == b2.name and b1.data.kind == b2.data.kind
    for d, (x, y, z) in [(m1, "abc"), (m2, "prt"), (m1, "abc"), (m2, "prt")]:
        assert sum(nc.cost(d).flops.values()) == 2 * S(x) * S(y) * S(z)


def test_each_occurrence_of_one_box_is_its_own_op():
    """One box object twice in a diagram: two op records with distinct occurrence indices (0 and 1), costed
    again the same way (the pieces are kept, the occurrence is not)."""
    f = nc.elementwise("exp", "q x")
    for _ in range(2):
        c = nc.cost(f >> f)
        assert sorted(r.index for r in c.ops) == [0, 1]
        assert sum(r.flops * r.trips for r in c.ops) == sum(c.flops.values())


def _brute(H, cols, values, M):
    """The optimum by enumeration in Fractions: least H, then least memory, then smallest later tiles."""
    def at(poly, g):
        return sum((Fraction(a) * _prod(Fraction(t) ** k for t, k in zip(g, e)) for a, e in zip(*poly)),
                   Fraction(0))
    found = None
    for g in itertools.product(*values):
        peak = max((at(c, g) for c in cols), default=Fraction(0))
        if peak <= M:
            key = (at(H, g), peak, g[::-1])
            found = key if found is None or key < found else found
    return None if found is None else (found[0], found[2][::-1])


def _prod(xs):
    out = Fraction(1)
    for x in xs:
        out *= x
    return out


def _poly(rng, n, terms, lo):
    coeffs = tuple(Fraction(rng.randint(1, 9), rng.choice([1, 2, 3, 7])) for _ in range(terms))
    exps = tuple(tuple(rng.randint(lo, 2) for _ in range(n)) for _ in range(terms))
    return coeffs, exps


@pytest.mark.parametrize("seed", range(12))
def test_integer_search_equals_enumeration_in_fractions(seed):
    """Random posynomials (rational coefficients, exponents −2 … 2) over two or three tiles: the search's
    exact answer and its tiles equal an enumeration in Fractions, at a tight and a loose memory, and over a sweep of
    memories (the search's symbolic mode asks 41 at once)."""
    rng = random.Random(seed)
    n = rng.choice([2, 3])
    H = _poly(rng, n, rng.randint(2, 4), -2)
    cols = [_poly(rng, n, rng.randint(1, 4), 0) for _ in range(rng.randint(1, 3))]
    values = [divisors(rng.choice([6, 8, 12])) for _ in range(n)]
    peaks = sorted(max(sum(Fraction(a) * _prod(Fraction(t) ** k for t, k in zip(g, e)) for a, e in zip(*c))
                       for c in cols) for g in itertools.product(*values))
    Ms = [peaks[len(peaks) // 3], peaks[-1]]
    expected = [_brute(H, cols, values, M) for M in Ms]
    # memories where every tiling fits (one answer, found once) among tighter ones, in any order, and below the least
    sweep = [2 * peaks[-1], peaks[len(peaks) // 3], 3 * peaks[-1], peaks[-1], peaks[0] - Fraction(1, 2), peaks[0]]
    assert best_many(H, cols, values, sweep) == [_brute(H, cols, values, M) for M in sweep]
    assert best_many(H, cols, values, Ms) == expected
    assert [best(H, cols, values, M) for M in Ms] == expected


@pytest.mark.parametrize("seed", range(3))
def test_a_sweep_through_every_peak_equals_enumeration(seed):
    """Every tiling's peak as a memory, shuffled (what a tiling learnt at one memory is reused at the next: its
    tiles, exact H and exact peak), over two or three tiles: each answer equals the enumeration in Fractions."""
    rng = random.Random(100 + seed)
    n = 2 + seed % 2
    H = _poly(rng, n, rng.randint(2, 4), -2)
    cols = [_poly(rng, n, rng.randint(1, 3), 0) for _ in range(rng.randint(1, 2))]
    values = [divisors(rng.choice([12, 24] if n == 2 else [6, 8])) for _ in range(n)]
    peaks = sorted({max(sum(Fraction(a) * _prod(Fraction(t) ** k for t, k in zip(g, e)) for a, e in zip(*c))
                        for c in cols) for g in itertools.product(*values)})
    sweep = peaks + [p - Fraction(1, 3) for p in peaks[::3]]
    rng.shuffle(sweep)
    assert best_many(H, cols, values, sweep) == [_brute(H, cols, values, M) for M in sweep]
