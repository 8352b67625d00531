"""The closed forms' shortcuts (issue 35 item 3), each against a second route.

* :func:`~napkin_cat.cost.lagrange.direct_point` (one tile under one column linear in it) against the bounded
  elimination it replaces (the direct route switched off) and against the KKT equations evaluated at numbers;
* the library's optima (large-M and exact, the exact one joining active sets by their multipliers' signs) equal
  with and without the direct route;
* :func:`~napkin_cat.cost.lagrange.remembered`: answers equal to those computed without it, symbols told apart by
  their assumptions, callers' copies their own;
* :func:`~napkin_cat.cost.growth.growth` and :func:`~napkin_cat.cost.growth.total_degree` against sympy's
  ``Poly`` in a scaling variable and ``sympy.degree``.
"""
import random

import sympy

import napkin_cat as nc
from napkin_cat.cost import lagrange
from napkin_cat.cost.lagrange import direct_point, kkt_points, remembered, sign_of
from napkin_cat.cost.growth import growth, total_degree

S = nc.symbol
d, e, n, M, g, h = (S(k) for k in ("d", "e", "n", "M", "g_x", "g_y"))


def monomial(rng, sizes=(d, e, n)):
    return rng.randint(1, 4) * sympy.Mul(*rng.sample(sizes, rng.randint(0, 2)))


def program(rng):
    """A one-tile program: ``H`` a constant plus terms decreasing in ``g``, ``C = a·g + b`` (posynomials)."""
    H = monomial(rng) + sum(monomial(rng) / g ** rng.choice((1, 1, 2)) for _ in range(rng.randint(1, 3)))
    a = sum(monomial(rng) for _ in range(rng.randint(1, 2)))
    b = rng.choice((0, monomial(rng), monomial(rng) + monomial(rng)))
    return sympy.expand(H), sympy.expand(a * g + b)


def eliminated(monkeypatch, H, C):
    with monkeypatch.context() as m:
        m.setattr(lagrange, "direct_point", lambda *args: None)
        return kkt_points(H, [C], [g], M)


def test_direct_point_is_the_eliminations_and_solves_the_kkt_equations(monkeypatch):
    rng = random.Random(35)
    for _ in range(12):
        H, C = program(rng)
        direct = direct_point(H, C, g, M)
        assert direct is not None, (H, C)
        assert kkt_points(H, [C], [g], M) == [direct]
        (ref,) = eliminated(monkeypatch, H, C)
        assert sympy.srepr(ref["g_x"]) == sympy.srepr(direct["g_x"]), (H, C)
        assert sympy.cancel(ref["lambda_0"] - direct["lambda_0"]) == 0, (H, C)
        # from the maths, at numbers: C(g*) = M, ∂H/∂g + λ ∂C/∂g = 0, λ > 0
        at = {d: rng.randint(2, 50), e: rng.randint(2, 50), n: rng.randint(2, 50)}
        at[M] = int(C.subs(g, rng.randint(5, 500)).subs(at))
        gs, lam = (float(direct[k].subs(at)) for k in ("g_x", "lambda_0"))
        assert abs(float(C.subs(at).subs(g, gs)) - at[M]) <= 1e-9 * at[M]
        grad = float(sympy.diff(H, g).subs(at).subs(g, gs)) + lam * float(sympy.diff(C, g).subs(at).subs(g, gs))
        assert abs(grad) <= 1e-9 * lam * float(sympy.diff(C, g).subs(at)) and lam > 0


def test_direct_point_declines_what_it_cannot_decide():
    assert direct_point(d / g, g ** 2 + d, g, M) is None           # not linear in the tile
    assert direct_point(d / g + e * g, d * g, g, M) is None        # ∂H/∂g of either sign: the elimination decides
    assert direct_point(d / g, d * g - e * g, g, M) is None        # a slope of unknown sign


def test_the_librarys_optima_are_the_same_without_the_direct_route(monkeypatch):
    # one tile, two columns: each active set of one column is solved directly, the branches joined by the signs of
    # their multipliers (the exact optimum), and the large-M form under the leading column
    algorithms = [nc.group(nc.stream(nc.library.attention(), "x", "s_x"), "q", "g_q")]
    for k, alg in enumerate(algorithms):
        c = nc.cost(alg)
        one, other = S(f"M_kkt_{k}_a"), S(f"M_kkt_{k}_b")     # names no other test uses: nothing memoised
        with monkeypatch.context() as m:
            m.setattr(lagrange, "direct_point", lambda *args: None)
            ref = nc.optimal(c, memory=one)
        got = nc.optimal(c, memory=other)
        for field in ("H", "exact_H"):
            mine = getattr(got, field).xreplace({other: one})
            assert sympy.srepr(mine) == sympy.srepr(getattr(ref, field)), (alg, field)
        for field in ("sizes", "exact_sizes"):
            mine = {t: sympy.sympify(v).xreplace({other: one}) for t, v in getattr(got, field).items()}
            assert sympy.srepr(mine) == sympy.srepr(getattr(ref, field)), (alg, field)


def test_remembered_answers_are_those_computed_without_it():
    rng = random.Random(7)
    programs = [program(rng) for _ in range(8)]
    two = (d * e / h + d * e / g + e, g * h + d * g)
    alone = [kkt_points(H, [C], [g], M) for H, C in programs] + [kkt_points(two[0], [two[1]], [g, h], M)]
    store = {}
    with remembered(store):
        kept = [kkt_points(H, [C], [g], M) for H, C in programs] + [kkt_points(two[0], [two[1]], [g, h], M)]
        kept[0][0]["g_x"] = 0                                       # a caller's copy is its own
        again = kkt_points(*programs[0][:1], [programs[0][1]], [g], M)
    assert len(store) > len(programs)
    assert sympy.srepr(kept[1:]) == sympy.srepr(alone[1:]) and sympy.srepr(again) == sympy.srepr(alone[0])


def test_remembered_tells_symbols_apart_by_their_assumptions():
    plain = sympy.Symbol("d")                                        # the same name as d, not known positive
    with remembered({}):
        assert (sign_of(d + 1), sign_of(plain + 1)) == (1, None)


def test_growth_is_the_polynomial_in_a_scaling_variable():
    rng = random.Random(3)
    t = sympy.Symbol("t", positive=True)
    columns = [sympy.expand(sum(monomial(rng) * g ** rng.randint(0, 2) * h ** rng.randint(0, 2)
                                for _ in range(rng.randint(1, 4)))) for _ in range(40)]
    columns += [d ** 2 * g * h + d * g, g * h + d]                     # a degree missing; none constant
    for col in columns:
        scaled = sympy.expand(col.subs({g: t * g, h: t * h}))
        ref = sympy.Poly(scaled, t).all_coeffs() if scaled.has(t) else [scaled]
        got = growth(col, [g, h])
        assert len(got) == len(ref) and all(sympy.expand(a - b) == 0 for a, b in zip(got, ref)), col
        for term in sympy.Add.make_args(col):
            assert total_degree(term) == sum(sympy.degree(term, s) for s in term.free_symbols)
