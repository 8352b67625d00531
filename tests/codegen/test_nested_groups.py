"""Issue 31, family 3: C kernels that computed wrong answers on plans the fuzz drew (groups nested along one
axis at ragged tiles; a map that permutes its axes, written in place).

The inner group runs ``⌈Min(g, k − i·g)/h⌉`` trips; at the plan's sizes sympy (1.14) dropped that ceiling
(``⌈Min(8, 12 − 8·i)/6⌉`` → ``Min(8, 12 − 8·i)/6``: it infers an even numerator over 6 to be an integer) and
the printer wrote the coefficient ``1/6`` as ``0``: the C kernel's inner loop ran no trip and its outputs were
never written.  The printer substitutes sizes keeping each ceiling (:func:`napkin_cat.codegen.printer.substituted`)
and refuses a fractional coefficient instead of truncating it.

The layout let an elementwise map's output take its input's bytes when their extents matched in order, also
where the map permutes axes of one size (``S a n -> n a S``, ``S = n``): the kernel read elements it had
overwritten.  In place now needs the same axes in the same order (a rename: the same positions).
"""
from __future__ import annotations

import numpy as np
import pytest
import sympy

import napkin_cat as nc
from napkin_cat.codegen.printer import CodePrinter

from kernels_common import needs_cc


def _nested(k: int, outer: int, inner: int):
    d = nc.elementwise("exp", "k", k=k)
    alg = nc.group(nc.group(nc.kernel(d), "k", "g_k"), "k", "h_k")
    return nc.plan(alg, {"g_k": outer, "h_k": inner})


@needs_cc
@pytest.mark.parametrize("k, outer, inner", [(12, 8, 6), (13, 6, 4), (12, 6, 4), (10, 10, 3)])
def test_the_c_kernel_of_nested_groups_computes_every_element(k, outer, inner):
    p = _nested(k, outer, inner)
    x = np.linspace(-2, 2, k).astype("f4")
    np.testing.assert_allclose(nc.codegen.c(p)(x), np.exp(x.astype(float)), rtol=1e-5)


def test_the_inner_groups_trips_keep_their_ceiling():
    p = _nested(12, 8, 6)
    printer = CodePrinter(p)
    outer, = [s for s in p.body if type(s).__name__ == "GridLoop"]
    inner, = [s for s in outer.body if type(s).__name__ == "GridLoop"]
    trips = printer.trips(inner)
    i = outer.index
    assert [int(trips.subs(i, t)) for t in (0, 1)] == [-(-min(8, 12 - 8 * t) // 6) for t in (0, 1)] == [2, 1]


def test_a_fractional_coefficient_is_refused_not_truncated():
    printer = CodePrinter(_nested(12, 8, 6))
    i = sympy.Symbol("i", integer=True, nonnegative=True)
    with pytest.raises(nc.CodegenError, match=r"coefficient 1/6 is not an integer"):
        printer.code(i / 6)


@needs_cc
@pytest.mark.parametrize("perm", ["S a n -> n a S", "S a n -> S a n"])
def test_a_map_that_permutes_its_axes_is_not_written_over_its_input(perm):
    """``id(S a n -> n a S)`` with ``S = n``: its output and its input have one shape (5×g×5) but not one order,
    so the output may not take the input's bytes (the layout put both at one offset, and the C kernel read
    elements its own map had overwritten); then ``Σ_S u_nS z_naS`` in groups of ``a``."""
    n, S, a = 5, 5, 8
    out = perm.split("-> ")[1]
    b = nc.Builder(nc.types("n S, S a n", n=n, S=S, a=a))
    u, v = b.inputs
    z = b(nc.elementwise("id", perm, n=n, S=S, a=a), v)
    d = b.build(b(nc.einsum(f"n S, {out} -> n a", n=n, S=S, a=a), u, z))
    p = nc.plan(nc.group(nc.kernel(d), "a", "g_a"), {"g_a": 4})
    rng = np.random.default_rng(0)
    U, V = rng.normal(size=(n, S)).astype("f4"), rng.normal(size=(S, a, n)).astype("f4")
    np.testing.assert_allclose(nc.codegen.c(p)(U, V), np.einsum("ns,san->na", U, V), rtol=1e-4, atol=1e-5)
