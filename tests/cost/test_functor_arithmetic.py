"""The cost functor's arithmetic short cuts (scaling by 1 skipped, 1·k read as k, a column's coefficient 1 left
out, a box's weave one product) give the records plain sympy arithmetic gives, computed here from the definitions."""
import random

import pytest
import sympy

import napkin_cat as nc
from napkin_cat.cost.live import Live, numel
from napkin_cat.cost.record import ONE, Cost, GroupCost, OpCost

S = nc.symbol


def _record(rng) -> Cost:
    """A record whose values mix sympy's 1, Python ints, symbols and products (what the functor's records hold)."""
    a, b, s = S("a"), S("b"), S("s_b")
    values = [ONE, sympy.Integer(3), 2, a, a * b, a / s, 1]
    pick = lambda: rng.choice(values)     # noqa: E731
    ops = [OpCost(f"box{j}", "exp", rng.choice(["special", "general"]), pick(), pick(),
                  region=rng.choice([(), (("grid", "a"),)]), role=rng.choice(["", "body"]), index=j)
           for j in range(6)]
    return Cost({0: pick(), 1: pick()}, {1: pick()}, {1: [a * b]}, {"special": pick(), "general": pick()},
                [GroupCost(("a",), (S("g_a"),), pick(), {1: a})], [], ops)


def _scaled_by_definition(c: Cost, k, region, role) -> Cost:
    """Every count times ``k`` (sympy's product, no short cut), the region prepended, the role given to ops without."""
    def times(x):
        return sympy.sympify(x) * k

    # FLOPs per execution do not scale: the records' trips do
    ops = [(o.label, o.pipeline, sympy.sympify(o.flops), times(o.trips), ((region,) if region else ()) + o.region,
            o.role or role) for o in c.ops]
    return ({l: times(h) for l, h in c.H.items()}, {l: times(h) for l, h in c.H_bytes.items()},
            {p: times(f) for p, f in c.flops.items()}, [times(g.N_g) for g in c.groups], ops)


def _read(c: Cost) -> tuple:
    def sym(x):
        return sympy.sympify(x)
    return ({l: sym(h) for l, h in c.H.items()}, {l: sym(h) for l, h in c.H_bytes.items()},
            {p: sym(f) for p, f in c.flops.items()}, [sym(g.N_g) for g in c.groups],
            [(o.label, o.pipeline, sym(o.flops), sym(o.trips), o.region, o.role) for o in c.ops])


@pytest.mark.parametrize("k", [1, ONE, 3, sympy.Integer(2), S("a") / S("s_b"), S("b")])
@pytest.mark.parametrize("region, role", [(None, ""), (("stream", "b"), "body"), (None, "tail")])
def test_scaled_equals_sympy_arithmetic(k, region, role):
    rng = random.Random(7)
    for _ in range(20):
        c = _record(rng)
        out = c.scaled(k, region=region, role=role)
        assert _read(out) == _scaled_by_definition(c, k, region, role)
        assert out.columns == c.columns and out.columns[1] is not c.columns[1]    # M does not scale; a copy


def test_live_column_is_the_sum_of_the_live_arrays():
    """A column read off :class:`Live` equals Σ numel over the distinct live values, per level, summed here directly
    (equal arrays on two values: coefficient 2; one value on two wires: counted once)."""
    q, d, p = S("q"), S("d"), S("p")
    a, b, c = nc.types("q d, q d, p").inside
    hi = a.replace(level=1)
    live = Live()
    live.put([(0, a), (1, b), (2, c), (2, c), (3, hi)])
    assert live.column() == {0: sympy.expand(2 * q * d + p), 1: q * d}
    assert live.column() == {0: sum((numel(x) for x in (a, b, c)), sympy.Integer(0)), 1: numel(hi)}
    live.take([(2, c)])             # still on one wire
    assert live.column()[0] == 2 * q * d + p
    live.take([(2, c), (3, hi)])
    assert live.column() == {0: 2 * q * d}
    assert live.column(without=[(0, a)]) == {0: q * d}


def test_box_flops_are_item_flops_times_the_weave():
    """A woven box's FLOPs: its kind's per-item FLOPs times the product of its weave axes' sizes (two here)."""
    box = nc.einsum("a b, b c -> a c")
    c = nc.cost(box)
    a, b, cc = S("a"), S("b"), S("c")
    assert sympy.expand(c.total_flops - 2 * a * b * cc) == 0
    assert [(r.flops * r.trips) for r in c.ops] == [c.flops[r.pipeline] for r in c.ops]
