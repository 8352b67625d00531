"""A monotone tile with no crossing in the scanned range never reaches its axis (:func:`napkin_cat.search.breakpoints
.no_crossing`, issue 35 item 3): where ``t(M) − n`` is real, monotone and of one sign over the memories
``2^-64 … 2^256`` at the reference sizes, :func:`~napkin_cat.search.breakpoints.reaching` answers None without asking
sympy to solve ``t = n``.

Second route: ``sympy.solve`` of ``t = n`` called here: for every tile the law skips, none of sympy's roots is real,
positive, inside the scan and a point where ``t`` meets ``n`` at the reference sizes (what the envelope took before
the law); for every tile that does cross there, the law does not hold and ``reaching`` finds sympy's root.  Counted,
never timed: a skipped tile makes no call of sympy's solver.
"""
from __future__ import annotations

import random

import sympy

import napkin_cat as nc
from napkin_cat.search import breakpoints
from napkin_cat.search.breakpoints import SCAN, no_crossing, reaching

S = nc.symbol
M, d, e, n = (S(k) for k in "Mden")

#: tiles t(M) against the axis n: some tend to a limit below n, some start past it, some cross it
TILES = [
    n * M / (2 * M + d),                               # rises to n/2: never reaches n
    sympy.sqrt(d) * sympy.sqrt(M + d * n) / sympy.sqrt(n),   # at least d: past n from the start where d > n
    e * M / (M + d),                                    # rises to e: crosses n only where e > n
    -d + sympy.sqrt(M + d ** 2),                        # grows as √M: crosses n
    (M + d) / (M + e),                                  # between d/e and 1: never reaches n ≥ 2
    d / (M + 1) + n / 4,                                # falls to n/4 from above: crosses n only where d > 3n/4
]


def met_in_scan(t, ref) -> list:
    """The second route: sympy's roots of ``t = n`` real, positive, inside the scan, where ``t`` meets ``n``."""
    lo, hi = 2.0 ** SCAN[0], 2.0 ** SCAN[-1]
    out = []
    for r in sympy.solve(sympy.Eq(t, n), M):
        v = complex(sympy.sympify(r).subs(ref).evalf())
        if abs(v.imag) > 1e-9 * max(1.0, abs(v.real)) or not lo <= v.real <= hi:
            continue
        if abs(complex(t.subs(ref).subs(M, v.real)) - float(n.subs(ref))) <= 1e-6 * float(n.subs(ref)):
            out.append(v.real)
    return out


def test_the_law_agrees_with_sympy_and_skips_its_solver(monkeypatch):
    solved = []
    real = breakpoints.sympy_roots

    def counting(t, axis, memory):
        solved.append(t)
        return real.__wrapped__(t, axis, memory)
    monkeypatch.setattr(breakpoints, "sympy_roots", counting)
    rng = random.Random(35)
    skipped = crossed = 0
    for _ in range(3):
        ref = {d: rng.choice([3, 16, 200, 1500]), e: rng.choice([5, 64, 900]), n: rng.choice([4, 48, 1024])}
        pairs = tuple(sorted(ref.items(), key=lambda kv: str(kv[0])))
        for t in TILES:
            roots = met_in_scan(t, ref)
            law = no_crossing(t, n, M, pairs)
            if law:
                skipped += 1
                assert roots == [], (t, ref, roots)
                before = len(solved)
                assert reaching(t, n, M, {k: v + 0 for k, v in ref.items()}) is None
                assert len(solved) == before, "a tile the law skips was solved by sympy"
            elif roots:
                crossed += 1
                b = reaching(t, n, M, ref)
                assert b is not None and abs(b.at - min(roots)) <= 1e-6 * min(roots), (t, ref, roots, b)
    assert skipped >= 6 and crossed >= 6       # both kinds met: the test reads the law on each side


def test_a_crossing_or_an_unknown_shape_is_not_skipped():
    """A tile that meets its axis inside the scan, or whose difference is not monotone, is never called crossing-free
    (the sign check and the monotone check each matter)."""
    pairs = ((n, 3),)
    assert not no_crossing(sympy.sqrt(M), n, M, pairs)                 # crosses at M = 9
    assert not no_crossing(sympy.sin(M) + n, n, M, pairs)              # not monotone
    assert not no_crossing(sympy.sqrt(M - 1), n, M, pairs)             # not real below M = 1
    assert no_crossing(n * M / (2 * M + 1), n, M, pairs)               # tends to n/2 from below
