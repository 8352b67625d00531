"""The tiling program and its clamped forms are remembered by value (issue 35, sym-35g): a symbolic derive asks for a
block's program, and for it with the same tiles whole, once per candidate that holds the block.

``program`` keys its memo by what the record holds (what each group holds as written, expanded on a miss only) and
``clamped`` by the program and the names of the tiles set whole.  Second route: the program built again from the
record by hand (``held``, ``H`` and the columns with the streams at 1) and the clamped one by substituting the axes.
"""
from __future__ import annotations

from dataclasses import replace

import pytest
import sympy

import napkin_cat as nc
from napkin_cat.cost.optimum import clamped
from napkin_cat.cost.tiling import held, program
from napkin_cat.errors import NapkinError

COSTS = {
    "attention": lambda: nc.cost(nc.group(nc.stream(nc.library.attention(), "x", "s_x"), "q", "g_q")),
    "matmul": lambda: nc.cost(nc.group(nc.group(nc.stream(nc.library.matmul(), "b", "s_b"), "a", "g_a"), "c", "g_c")),
    "mlp": lambda: nc.cost(nc.group(nc.stream(nc.library.mlp(), "i", "s_i"), "n", "g_n")),
}


@pytest.mark.parametrize("name", sorted(COSTS))
def test_the_program_holds_what_each_group_holds(name):
    c = COSTS[name]()
    p = program(c, 1)
    ones = dict(p.fixed)
    assert p.held and p.held == tuple(sympy.expand(k.subs(ones)) for k in held(c, 1))
    assert sympy.expand(p.H - sympy.sympify(c.H[1]).subs(ones)) == 0
    assert program(c, 1) is p                  # asked again: the one made


def test_programs_that_differ_in_what_a_group_holds_are_not_one():
    a = COSTS["attention"]()
    b = COSTS["attention"]()
    b.groups = [replace(g, H_g={1: 3 * sympy.sympify(g.H_g[1])}) for g in b.groups]
    pa, pb = program(a, 1), program(b, 1)       # the same transfers and columns, what a group holds thrice
    assert pa.held != pb.held
    assert pb.held == tuple(sympy.expand(3 * k) for k in pa.held)


def test_clamped_is_the_program_at_the_axes_of_the_tiles_named():
    c = COSTS["matmul"]()
    p = program(c, 1)
    a, b, cc = (nc.symbol(k) for k in "abc")
    g_a, g_c = nc.symbol("g_a"), nc.symbol("g_c")
    one = clamped(p, ["g_c"])
    assert one.tiles == (g_a,) and sympy.expand(one.H - p.H.xreplace({g_c: cc})) == 0
    assert clamped(p, [g_c]) is one and clamped(p, ("g_c",)) is one      # names or symbols: one key
    both = clamped(p, ["g_a", "g_c"])
    assert both.tiles == () and sympy.expand(both.H - (a * b + a * cc + b * cc)) == 0
    assert clamped(p, ["g_a"]).tiles == (g_c,)          # other names: another program
    assert clamped(p, []) is p


def test_a_bad_name_is_refused_every_time():
    p = program(COSTS["matmul"](), 1)
    for _ in range(2):
        with pytest.raises(NapkinError, match="not tiles of this program"):
            clamped(p, ["g_x"])
