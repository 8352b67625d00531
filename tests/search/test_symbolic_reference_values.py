"""A symbolic derive reads its candidates' forms at the reference sizes by ``xreplace`` (issue 35, sym-35g).

``at_reference_sizes`` puts the reference sizes into a form, then a float memory, in two steps as ``subs`` then
``subs`` did (a float meets the exact form in ``M``: ``(M − 2deh)/(2dh)`` read in one step rounds otherwise), and a
candidate's ``H`` is summed from its kernels' forms expanded one by one.  Second route: sympy's ``subs``, and
``sympy.expand`` of the whole sum, on every candidate of a derive.
"""
from __future__ import annotations

import functools

import sympy

import napkin_cat as nc
from napkin_cat.search.candidates import at_reference_sizes
from napkin_cat.search.envelope import reference_sizes

L = nc.library
M = nc.symbol("M")


def chain():
    b = nc.Builder(nc.types("a b, b c, c e"))
    A, B, C = b.inputs
    return b.build(b(nc.einsum("a c, c e -> a e"), b(nc.einsum("a b, b c -> a c"), A, B), C))


@functools.cache
def forms() -> list:
    out = []
    for f in (L.mlp(), L.swiglu(), chain(), L.attention()):
        r = nc.derive(f, memory="M")
        out.append((r, {nc.symbol(k): v for k, v in reference_sizes(f).items()}))
    return out


def test_forms_at_the_reference_sizes_are_subs():
    seen = 0
    for r, ref in forms():
        for _, H in r.candidates:
            assert sympy.srepr(at_reference_sizes(H, ref)) == sympy.srepr(H.subs(ref))
            for m in (1000.0, 12345.678, 2.0 ** 20 + 0.5):
                assert at_reference_sizes(H, ref, M, m) == H.subs(ref).subs(M, m)
                seen += 1
    assert seen > 50


def test_a_float_memory_meets_the_exact_form():
    d, e, h = nc.symbol("d"), nc.symbol("e"), nc.symbol("h")
    t = (M - 2 * d * e * h) / (2 * d * h)
    ref = {d: 64, e: 256, h: 4}
    m = 131072.39764
    assert at_reference_sizes(t, ref, M, m) == t.subs(ref).subs(M, m)


def test_every_candidate_is_expanded():
    for r, _ in forms():
        for _, H in r.candidates:
            assert sympy.srepr(H) == sympy.srepr(sympy.expand(H))
