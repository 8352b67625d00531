"""kkt-35e: the two-tile points of the block's attention columns with a cross term hold ``sqrt(M + …)``; their
``H`` expanded has ~2,000-7,000 operations, as the tiles put in ~220.  :func:`~napkin_cat.search.top_columns.options`
keeps the shorter (:func:`~napkin_cat.search.top_columns.kept_form`); checked here against the expanded ``H`` at
the point (the route before) by value, at random sizes and memories, 30 digits.

Both forms are read by mpmath at 60 digits (``sympy.lambdify(..., "mpmath")``: the sizes exact, the memory the
30-digit float): the same values as ``sympy.N(form.xreplace(env), 30)`` to far more digits than the 12 compared, where
``xreplace`` rebuilt the ~7,000-operation expanded form at each of the 300 points (20 of 27 profiled CPU s)."""
from __future__ import annotations

import random

import mpmath
import sympy

import napkin_cat as nc
from napkin_cat.cost.tiling import TilingProgram
from napkin_cat.search.top_columns import kept_form, options, top_columns

M = nc.symbol("M")
n, e, d, h = (nc.symbol(s) for s in ("n", "e", "d", "h"))
ge, gn = nc.symbol("g_e"), nc.symbol("g_n")


def block_attention(k):
    """The block's attention kernels whose first column ``k·g_e·g_n`` binds at a cross-term point (as the block's
    symbolic derive builds them; ``k`` = 1, 2: the two largest points of its derive)."""
    cols = (k * ge * gn, d * ge + d * gn + k * ge * gn)
    return TilingProgram(d * e * h * n / gn + d * e * h * n ** 2 / (ge * gn) + k * e * n + e * h * n ** 2 / ge,
                         cols, (ge, gn), ("e", "n"), (e, n), fixed=(), held=(d * ge + d + k * ge * gn + gn,))


def _close(a, b, tol=1e-12):
    return abs(complex(a) - complex(b)) <= tol * abs(complex(b))


def test_the_kept_form_of_the_blocks_large_points_is_their_expanded_H_in_value():
    rng = random.Random(35)
    points = 0
    args = (n, e, d, h, M)
    for k in (1, 2):
        prog = block_attention(k)
        H, _, free, _ = top_columns(prog)
        for _, Hform, tiles in options(prog, M, ((0,),)):
            expanded = sympy.expand(H.xreplace({t: tiles[t] for t in free}))
            assert sympy.count_ops(Hform) * 5 < sympy.count_ops(expanded)      # the short form is the one kept
            kept, before = (sympy.lambdify(args, x, "mpmath") for x in (Hform, expanded))
            for _ in range(50):
                env = {s: sympy.Integer(rng.randint(1, 300)) for s in (n, e, d, h)}
                env[M] = sympy.Float(10 ** rng.uniform(1, 9), 30)
                with mpmath.workdps(60):
                    at = [mpmath.mpf(int(env[s])) for s in args[:-1]] + [mpmath.mpf(env[M]._mpf_)]
                    a, b = kept(*at), before(*at)
                assert _close(a, b), (k, env, a, b)
            points += 1
    assert points >= 2


def test_a_power_sum_is_kept_expanded_and_a_short_expansion_is_kept():
    a, t = sympy.symbols("a t", positive=True)
    assert kept_form(a * (1 + t / M) ** 2, M) == a + 2 * a * t / M + a * t ** 2 / M ** 2
    root = sympy.sqrt(M + a)
    assert kept_form(root * (root + 1), M) == M + a + root                  # expanded is shorter: it is kept
    big = (a + root) ** 6 / (a + 1)
    assert kept_form(big, M) == big                                           # as put in: shorter than expanded


def _kept_form_by_sympy(Hpoint, M):
    """The route before (kept_form with ``sympy.expand``): what :func:`kept_form` must return, tree for tree."""
    from napkin_cat.cost.lagrange import tidy
    from napkin_cat.cost.op_count import count_ops
    from napkin_cat.cost.optimum_record import power_terms
    from napkin_cat.errors import NapkinError
    Hstar = sympy.expand(Hpoint)
    if not any(t.as_coeff_exponent(M)[0].has(M) for t in sympy.Add.make_args(Hstar)):
        try:
            return sympy.Add(*[a * M ** (-b) for a, b in power_terms(Hstar, M)])
        except NapkinError:
            pass
    tidied = tidy(Hstar)
    return Hpoint if count_ops(Hpoint) < count_ops(tidied) else tidied


def test_the_kept_form_is_the_one_sympys_expansion_gives_tree_for_tree():
    """kept_form expands each repeated subexpression of a point once (cost/expanded.expanded): on the block's
    cross-term points (1,900-7,350 operations expanded) and on seeded random points with repeated radicals and
    quotients in ``M``, the point's expansion and the form kept are srepr-identical to sympy's route.  Mutations:
    the memo answers a repeated subexpression unexpanded, or kept_form reads a tree one hint short: this fails."""
    from napkin_cat.cost.expanded import expanded
    points = []
    for k in (1, 2):
        prog = block_attention(k)
        H, _, free, _ = top_columns(prog)
        points += [H.xreplace({t: tiles[t] for t in free}) for _, _, tiles in options(prog, M, ((0,),))]
    a, t = sympy.symbols("a t", positive=True)
    rng = random.Random(35)
    for _ in range(12):
        r = sympy.sqrt(M + rng.randint(1, 3) * a * t)
        q = 1 / (M - a + r * (M + t) / (2 * a + rng.randint(1, 3)))
        points.append(sympy.Add(*(rng.randint(1, 5) * a ** rng.randint(0, 2) * q ** rng.choice([1, 2]) * (a + r)
                                  ** rng.choice([1, 2]) for _ in range(rng.randint(2, 4)))) + a * t / M)
    for _ in range(12):
        g = (a + t) * M ** sympy.Rational(rng.randint(-2, 0), 2)
        points.append(sympy.Add(*(rng.randint(1, 4) * a ** rng.randint(0, 2) * g ** rng.choice([-1, 1, 2])
                                  * (1 + t / M) ** rng.randint(1, 2) for _ in range(3))))
    assert len(points) >= 26
    assert [sympy.srepr(expanded(p)) for p in points] == [sympy.srepr(sympy.expand(p)) for p in points]
    assert [sympy.srepr(kept_form(p, M)) for p in points] == [sympy.srepr(_kept_form_by_sympy(p, M)) for p in points]
