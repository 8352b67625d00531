"""The storage-reuse law of a step: a sum read once at an addend of an op writing the state in place is
accumulated into the state, never stored (napkin_cat.algorithms.reuse)."""
import numpy as np
import pytest
import sympy

import napkin_cat as nc
from napkin_cat.algorithms.reuse import accumulated_addends
from napkin_cat.algorithms.streaming import analyse
from napkin_cat.errors import SignatureError
from napkin_cat.syntax.axis import symbol
from napkin_cat.syntax.primitive import Addend, KINDS, declare, kind_of
from napkin_cat.syntax.wiring import trace_values


def flash():
    return nc.group(nc.stream(nc.library.attention(), "x", "s_x"), "q", "g_q")


def test_fma_and_add_declare_their_addends():
    assert [(a.position, a.rest, a.operands) for a in kind_of("fma").addends] == [(2, "mul", (0, 1))]
    assert sorted((a.position, a.operands) for a in kind_of("add").addends) == [(0, (1,)), (1, (0,))]
    assert kind_of("mul").addends == ()


def test_declaring_an_addend_among_its_rest_is_refused():
    with pytest.raises(SignatureError, match="addends"):
        declare("bad_addend", lambda xs, core: [xs[0]], addends=(Addend(0, "id", (0,)),))
    assert "bad_addend" not in KINDS


def test_attention_step_accumulates_pv_into_o():
    (r,) = analyse(nc.library.attention(), "x").reducers
    ops, _, _ = trace_values(r.step)
    (a,) = accumulated_addends(r.step, len(r.state))
    assert ops[a.maker][0].data.kind == "contract" and ops[a.consumer][0].data.kind == "fma"
    assert r.state[a.state].name == "o"


def test_no_column_holds_o_and_the_product_together():
    """Fails on main: the column ``3·d·g_q + 3·g_q`` held o, its rescaled value's addend ΔO = P·V and the Q tile."""
    m = nc.cost(flash()).M[1]
    d, g = symbol("d"), symbol("g_q")
    terms = m.args if isinstance(m, sympy.Max) else (m,)
    assert 3 * d * g + 3 * g not in terms
    assert all(sympy.Poly(t, d).coeff_monomial(d).coeff(g) <= 2 for t in terms)


def test_a_users_sum_is_accumulated_as_the_built_in_sum_is(scratch_kinds):
    """The law reads the accumulator's record: one whose two states merge by ``add`` (whatever its name) starts
    from the rest already in the state, as ``reduce_sum`` does in the step ``o' = o + Σₓ chunk``; one that merges
    otherwise (a product) or says nothing (no ``merge``) is stored."""
    def zeros(shape, dtype=float):
        return np.zeros(shape, dtype)

    for name, acc in (("total", nc.Accumulator("total", zeros, np.add, merge="add")),
                      ("prod", nc.Accumulator("prod", lambda shape, dtype=float: np.ones(shape, dtype), np.multiply,
                                              merge="mul")),
                      ("unsaid", nc.Accumulator("sum", zeros, np.add))):
        declare(f"reduce_{name}", lambda xs, core: [np.sum(xs[0], axis=-1)], accumulator=acc)

    def step(reduction):
        return nc.Id(nc.types("q")) @ reduction >> nc.elementwise("add", "q, q -> q")

    (builtin,) = accumulated_addends(step(nc.reduce("sum", "q x -> q")), 1)
    assert (builtin.maker, builtin.consumer, builtin.addend, builtin.state) == (0, 1, Addend(1, "id", (0,)), 0)
    assert accumulated_addends(step(nc.apply("reduce_total", "q x -> q")), 1) == [builtin]
    for name in ("prod", "unsaid"):
        assert accumulated_addends(step(nc.apply(f"reduce_{name}", "q x -> q")), 1) == []
