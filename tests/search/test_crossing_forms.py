"""Where a symbolic derive's pieces meet: the closed forms read at the reference sizes, and how long they are.

Causal attention's envelope has two crossings that are roots of quartics, by radicals (828 operations each).
They are read at the reference sizes by ``xreplace`` (every size at once; ``subs`` made each partly numeric form
again: 0.7 s a read), and not rationalised (``sympy.radsimp`` made them 3.3x longer for 0.4 s each): the same
numbers, checked here against sympy's own ``subs`` and ``radsimp`` (the second route).
"""
from __future__ import annotations

import pytest
import sympy

import napkin_cat as nc
from napkin_cat.search.crossings import MAX_RADSIMP_OPS, at_reference
from napkin_cat.search.envelope import reference_sizes


@pytest.fixture(scope="module")
def causal():
    f = nc.library.causal_attention()
    return f, nc.derive(f, memory="M")


def _bounds(r):
    return [b for reg in r.regimes for b in (reg.lower, reg.upper) if b not in (None, sympy.oo)
            and isinstance(b, sympy.Expr) and b.free_symbols]


def test_every_bound_reads_at_the_reference_sizes_as_subs_reads_it(causal):
    f, r = causal
    ref = {nc.symbol(k): v for k, v in reference_sizes(f).items()}
    bounds = _bounds(r)
    assert len(bounds) >= 4
    for b in bounds:
        by_subs = float(b.subs(ref))
        assert at_reference(b, ref) == pytest.approx(by_subs, rel=1e-12), b


def test_a_large_root_is_kept_as_solved_and_is_radsimps_number(causal):
    f, r = causal
    ref = {nc.symbol(k): v for k, v in reference_sizes(f).items()}
    large = [b for b in _bounds(r) if sympy.count_ops(b) > MAX_RADSIMP_OPS]
    assert large, "causal attention's quartic crossings are among its bounds"
    for b in large[:1]:     # (radsimp of one: 0.4-1.8 s)
        rationalised = sympy.radsimp(b)
        assert sympy.count_ops(b) < sympy.count_ops(rationalised)
        assert float(b.subs(ref)) == pytest.approx(float(rationalised.subs(ref)), rel=1e-12)


def test_the_pieces_meeting_at_a_quartic_crossing_state_one_H_there(causal):
    """At each quartic crossing both pieces state one H (the crossing is where two forms are equal)."""
    f, r = causal
    ref = {nc.symbol(k): v for k, v in reference_sizes(f).items()}
    M, met = r.memory, 0
    for left, right in zip(r.regimes, r.regimes[1:]):
        b = left.upper
        if not (isinstance(b, sympy.Expr) and sympy.count_ops(b) > MAX_RADSIMP_OPS):
            continue
        at = float(b.subs(ref))
        h_left = float(left.H.subs(ref).subs(M, at))
        h_right = float(right.H.subs(ref).subs(M, at))
        assert h_left == pytest.approx(h_right, rel=1e-9)
        met += 1
    assert met >= 1
