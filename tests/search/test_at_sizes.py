"""kkt-35d: :func:`~napkin_cat.search.candidates.past_at` reads a tile (and its axis) at the reference sizes through
:func:`~napkin_cat.search.candidates.at_sizes` (the first step of ``at_reference_sizes``, kept per expression and
sizes), then puts the memory in.  Checked against ``at_reference_sizes(t, ref, M, at)`` (the route it replaces):
the same expression (``==`` and ``srepr``) and the same complex value, on the tiles of real top-degree points
(radicals of sums in ``M``), at two sets of sizes read in turn (mutation: the memo keyed by the expression alone
returns the first sizes' form at the second and fails), at memories where a radical turns negative."""
from __future__ import annotations

import sympy

import napkin_cat as nc
from napkin_cat.cost.tiling import TilingProgram
from napkin_cat.search.candidates import at_reference_sizes, at_sizes
from napkin_cat.search.top_columns import all_sets, options, top_columns

M = nc.symbol("M")
f, n, e, d, h = (nc.symbol(s) for s in ("f", "n", "e", "d", "h"))
g, gn, ge = nc.symbol("g_f"), nc.symbol("g_n"), nc.symbol("g_e")


def _tiles():
    swiglu = TilingProgram(2 * e * f * n / gn + e * f * n / g + f * n,
                           (g * gn, 2 * g * gn + 2 * g + gn), (g, gn), ("f", "n"), (f, n))
    cross = TilingProgram(d * e * h * n / gn + d * e * h * n ** 2 / (ge * gn) + e * n + e * h * n ** 2 / ge,
                          (d * ge + d * gn + ge * gn,), (ge, gn), ("e", "n"), (e, n))
    out = []
    for prog in (swiglu, cross):
        free = top_columns(prog)[2]
        for _, H, tiles in options(prog, M, all_sets(prog)):
            out += [H] + [tiles[t] for t in free]
    return out + [n, e * d, sympy.Integer(7)]        # axes as past_at reads them


def _pairs(ref):
    return tuple(sorted(((k, sympy.sympify(v)) for k, v in ref.items()), key=lambda kv: str(kv[0])))


def test_at_sizes_is_at_reference_sizes():
    exprs = _tiles()
    assert any(x.has(sympy.sqrt(M + d * n)) or any(isinstance(p, sympy.Pow) and p.exp == sympy.Rational(1, 2)
                                                   and p.base.has(M) for p in x.atoms(sympy.Pow)) for x in exprs)
    for ref in ({f: 72, n: 64, e: 68, d: 48, h: 4}, {f: 44, n: 12, e: 20, d: 5, h: 4}):
        pairs = _pairs(ref)
        for x in exprs:
            for at in (0.5, 3.0, 1000.0, 4096.0 * 1.000001, 2.0 ** 40):
                fast = at_sizes(x, pairs).xreplace({M: sympy.sympify(at)})
                slow = at_reference_sizes(x, ref, M, at)
                assert fast == slow and sympy.srepr(fast) == sympy.srepr(slow)
                try:
                    a = complex(fast)
                except (TypeError, ValueError) as err:
                    b = err
                    try:
                        complex(slow)
                    except type(b):
                        continue
                    raise AssertionError(f"{x} at {at}: the kept route raised, the direct one did not")
                assert a == complex(slow)
            assert at_sizes(x, pairs) == at_reference_sizes(x, ref)
