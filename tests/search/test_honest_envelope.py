"""The symbolic answer's honesty checks of ``benchmarks/bench_outside_35s.py`` that failed at 18ac490, each fixed by a
general rule of the envelope (:mod:`napkin_cat.search.envelope`, :mod:`~napkin_cat.search.lower_envelope`,
:mod:`~napkin_cat.search.held_on`):

* a form that stops holding between two grid memories hands over to the candidate cheapest just past its end, not
  to the one cheapest a grid step on (the renamed block at ``seq 12 dm 20 nh 4 dh 5 hid 44`` rose from 12,442.4 to
  12,442.6 at ``M = 120``);
* the first piece starts at the least memory a numeric derive names (swiglu at its default reference sizes started at
  4, a numeric derive runs from 3);
* a piece that carries an algorithm on (:class:`~napkin_cat.search.held_on.HeldOn`) states what that algorithm needs
  by the exact columns where it is more than the piece's first memory (gqa + W_o: 536 from ``M = 216``), and is the
  piece before's algorithm at that piece's end (its need is the piece before's as ``M`` reaches 216).
"""
import math
import re

import pytest
import sympy

import napkin_cat as nc
from napkin_cat.search.breakpoints import Breakpoint
from napkin_cat.search.envelope import reference_sizes
from napkin_cat.search.lower_envelope import lower_envelope

L = nc.library
M = nc.symbol("M")


class Form:
    """A stand-in for a candidate of the envelope: ``H`` in ``M`` (no sizes), from ``start`` up to ``until``."""

    def __init__(self, H, start, until=math.inf):
        self.H = sympy.sympify(H)
        self.at_ref = sympy.lambdify(M, self.H, "math")
        self.start = Breakpoint(float(start), sympy.sympify(start))
        self.until_at = until
        self.until = sympy.oo if until == math.inf else sympy.sympify(until)

    @property
    def smallest(self):
        return self.start.expr


def test_a_form_that_stops_holding_hands_over_to_the_cheapest_just_past_its_end():
    """A (``100/M``) holds up to ``M = 8``; B, its clamped form, goes on from there at A's value; C is 0.01 % above
    B at 8 and crosses below it at 8.005, before the grid's next memory (8.011).  At 18ac490 A handed over to C (the
    cheapest a grid step on) at 8: ``H`` rose from 12.5 to 12.50078.  Now to B, and B to C where the two cross."""
    A = Form(100 / M, 1, until=8.0)
    B = Form(96 / M + sympy.Rational(1, 2), 8)
    C = Form(106 / M + sympy.Rational(1, 2) - 10 / sympy.Float(8.005), 1)
    cands = [A, B, C]
    pieces = lower_envelope(cands, M, {})
    assert [w for w, *_ in pieces] == [0, 1, 2]
    assert math.isclose(float(pieces[1][2]), 8.005, rel_tol=1e-9)       # B to C where they cross
    for (w, _, upper, _), (v, lower, _, _) in zip(pieces, pieces[1:]):
        at = float(upper)
        assert float(lower) == at
        assert cands[v].at_ref(at) <= cands[w].at_ref(at) * (1 + 1e-12), f"H rises at M = {at}"


@pytest.fixture(scope="module")
def swiglu():
    f = L.swiglu_mlp()
    ref = {str(k): int(v) for k, v in reference_sizes(f).items()}
    return f, ref, nc.derive(f, memory="M", reference=ref)


def test_symbolic_swiglu_starts_at_the_least_memory(swiglu):
    """The least memory a numeric derive names (3 at the default reference sizes) is probed: an algorithm that fits
    there only between the grid's memories (2, 4) is a candidate, and the first piece starts there (18ac490: at 4).
    The second route: the numeric derive at that memory (an algorithm that fits it) moves at least the symbolic ``H``
    (which relaxes the tiles to reals)."""
    f, ref, r = swiglu
    with pytest.raises(nc.MemoryLimitError) as e:
        nc.derive(f, memory=1, sizes=ref)
    least = e.value.smallest
    env = {nc.symbol(k): v for k, v in ref.items()}
    assert float(sympy.sympify(r.regimes[0].lower).subs(env)) == least
    num = nc.derive(f, memory=least, sizes=ref)
    assert 0 < float(sympy.sympify(r.regimes[0].H).subs(env).subs(M, least)) <= num.H


def gqa_proj():
    """Grouped-query attention, then its output projection ``h g q d, h g d e -> q e``."""
    att = L.grouped_query_attention()
    b = nc.Builder(nc.Ty(*att.dom.inside, *nc.types("h g d e").inside))
    Q, K, V, Wo = b.inputs
    return b.build(b(nc.einsum("h g q d, h g d e -> q e"), b(att, Q, K, V), Wo))


def test_a_held_algorithm_states_its_exact_need():
    """gqa + W_o at ``q 20 x 36 d 6 h 2 g 3 e 16``: past ``M = 216`` the algorithm of the form before (its tiles there,
    ``g_q = 20``, ``g_e = 16``: whole) is kept on (:class:`~napkin_cat.search.held_on.HeldOn`); its exact columns need
    536 there, which the piece states.  The second route: the cost functor's memory of the piece's algorithm at
    those tiles."""
    sizes = {"q": 20, "x": 36, "d": 6, "h": 2, "g": 3, "e": 16}
    env = {nc.symbol(k): v for k, v in sizes.items()}
    r = nc.derive(gqa_proj(), memory="M", reference=sizes)
    held = [(g, n) for g in r.regimes for n in g.optimum.notes if "its tiles fixed there" in n]
    stated = [(g, n) for g, n in held if "needs" in n]
    assert stated, "no held piece states its need"
    for g, note in stated:
        need = float(re.search(r"its algorithm needs ([0-9.e+]+) there", note).group(1))
        first = float(sympy.sympify(g.lower).subs(env))
        tiles = {str(k): sympy.sympify(v).subs(env).subs(M, first) for k, v in g.optimum.sizes.items()}
        assert all(float(v).is_integer() for v in tiles.values()), tiles
        at = {**sizes, **{k: int(v) for k, v in tiles.items()}}
        assert nc.cost(g.diagram, sizes=at).M[1] == need > first


def test_a_held_algorithm_is_the_piece_before_at_its_end():
    """gqa + W_o at ``q 20 x 36 d 6 h 2 g 3 e 16``: the held piece from ``M = 216`` is the algorithm of the piece before
    at that piece's end (the same diagram; its tiles the piece before's at ``M = 216``), so its exact need (536) is
    what the piece before's algorithm needs as ``M`` reaches 216: the held piece is as sound as the form it carries on,
    over its first memory by the same terms of lower degree.  (Starting it at 536 instead, where it fits, leaves the
    piece before as far over and makes ``H`` rise at 216, 5,936 to 7,200: the forms' own tiles would have to be solved
    against the full columns.)  Second route: the cost functor's memory and ``H`` of both at those tiles."""
    sizes = {"q": 20, "x": 36, "d": 6, "h": 2, "g": 3, "e": 16}
    env = {nc.symbol(k): v for k, v in sizes.items()}
    r = nc.derive(gqa_proj(), memory="M", reference=sizes)
    checked = 0
    for before, held in zip(r.regimes, r.regimes[1:]):
        if not any("its tiles fixed there" in n for n in held.optimum.notes):
            continue
        b = float(sympy.sympify(held.lower).subs(env))
        assert float(sympy.sympify(before.upper).subs(env)) == b
        assert str(before.variant) == str(held.variant)
        at = {str(k): float(sympy.sympify(v).subs(env).subs(M, b)) for k, v in before.optimum.sizes.items()}
        kept = {str(k): float(sympy.sympify(v).subs(env).subs(M, b)) for k, v in held.optimum.sizes.items()}
        assert at == kept
        if not all(v.is_integer() for v in at.values()):
            continue
        tiles = {**sizes, **{k: int(v) for k, v in at.items()}}
        a, h = nc.cost(before.diagram, sizes=tiles), nc.cost(held.diagram, sizes=tiles)
        assert a.M[1] == h.M[1] and a.H[1] == h.H[1]
        end = float(sympy.sympify(before.H).subs(env).subs(M, b))
        assert float(sympy.sympify(held.H).subs(env)) == pytest.approx(end)
        checked += 1
    assert checked, "no held piece with integer tiles at its start"
