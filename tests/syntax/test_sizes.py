"""One size type (issue 20): ``Sizes`` is made in one place and every entry point applies its rules.

A value that is not a positive int is refused naming the axis; a name the diagram does not have is refused
naming it and listing the legal ones; ``nc.optimal(...).sizes`` plans directly; the CLI says the same in one
line on stderr with exit status 2.
"""
from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, strategies as st

import napkin_cat as nc
from napkin_cat.cli import main
from napkin_cat.syntax.sizes import Sizes, names_of

MM = {"a": 6, "b": 4, "c": 5}


def tiled():
    return nc.group(nc.stream(nc.library.matmul(), "b", "s_b"), "a", "g_a")


TILED = {**MM, "g_a": 4, "s_b": 3}


# ---------------------------------------------------------------------- the value
def test_names_and_symbols_are_one_key():
    s = Sizes({"a": 3, nc.symbol("b"): 4}, c=5)
    assert s["a"] == s[nc.symbol("a")] == 3 and nc.symbol("b") in s and "b" in s
    assert list(s) == ["a", "b", "c"] and s.env == {nc.symbol("a"): 3, nc.symbol("b"): 4, nc.symbol("c"): 5}
    assert s == {"a": 3, "b": 4, "c": 5} == dict(s) and s != {"a": 3}
    assert Sizes(s) is not s and Sizes(s) == s and hash(Sizes(s)) == hash(s)
    assert (s | {"g_a": 2})["g_a"] == 2 and ({"g_a": 2} | s)["a"] == 3
    assert eval(repr(s), {"Sizes": Sizes}) == s


@pytest.mark.parametrize("value, shown", [("64", r"'64' \(a str\)"), (0, "0"), (-3, "-3"), (True, "True"),
                                          (6.0, r"6.0 \(a float\)"), (None, r"None \(a NoneType\)")])
def test_a_value_that_is_not_a_positive_int_names_the_axis(value, shown):
    with pytest.raises(nc.AxisError, match=rf"the size of 'q' must be a positive int, got {shown}"):
        Sizes({"q": value})


def test_numpy_and_sympy_integers_are_ints():
    s = Sizes(a=np.int64(4), b=nc.symbol("b").subs(nc.symbol("b"), 3) + 0)
    assert s == {"a": 4, "b": 3} and all(type(v) is int for v in s.values())


@pytest.mark.parametrize("sizes, message", [
    ({"a": 3, nc.symbol("a"): 4}, r"the size of 'a' is given twice, as 3 and 4"),
    ({3: 4}, r"keyed by an axis or tile name \(a str\) or its symbol, got 3 \(a int\)"),
    ({"a b": 4}, r"axis name 'a b' is not legal"),
])
def test_malformed_keys_are_refused(sizes, message):
    with pytest.raises(nc.AxisError, match=message):
        Sizes(sizes)


def test_restrict_is_the_lenient_way_for_a_part():
    whole = Sizes(TILED)
    part = nc.library.matmul()
    assert whole.restrict(part) == MM and whole.missing(part) == []
    with pytest.raises(nc.AxisError, match=r"size given for 'g_a', which the diagram does not have; its axes and "
                                           r"tiles are \['a', 'b', 'c'\]"):
        whole.of(part)


@given(st.dictionaries(st.sampled_from(["a", "b", "c", "g_a", "s_b"]), st.integers(1, 9)))
def test_missing_is_what_require_names(given_sizes):
    s = Sizes(given_sizes)
    missing = s.missing(tiled())
    assert missing == sorted(names_of(tiled()) - set(given_sizes))
    if missing:
        with pytest.raises(nc.AxisError, match=rf"missing \[{', '.join(repr(m) for m in missing)}\]"):
            s.require(tiled(), "the plan")
    else:
        assert s.require(tiled(), "the plan") is s


# ---------------------------------------------------------------------- every entry point, the same rules
def _entry_points(sizes):
    """Each public entry point that takes sizes, called with ``sizes`` on the tiled matmul (or its function)."""
    A, B = np.ones((6, 4)), np.ones((4, 5))
    return {
        "nc.plan": lambda: nc.plan(tiled(), {**TILED, **sizes}),
        "nc.cost": lambda: nc.cost(tiled(), sizes={**TILED, **sizes}),
        "nc.evaluate": lambda: nc.evaluate(tiled(), A, B, sizes={"g_a": 4, "s_b": 3, **sizes}),
        "nc.equivalent": lambda: nc.equivalent(nc.library.matmul(), tiled(), sizes={**MM, **sizes}),
        "nc.derive": lambda: nc.derive(nc.library.matmul(), memory=64, sizes={**MM, **sizes}),
        "nc.derive(hardware=)": lambda: nc.derive(nc.library.matmul(), sizes={**MM, **sizes}, hardware="h100-sxm5"),
        "nc.hardware.predict": lambda: nc.hardware.predict(tiled(), "h100-sxm5", {**TILED, **sizes}),
    }


@pytest.mark.parametrize("entry", list(_entry_points({})))
def test_a_string_size_is_refused_naming_the_axis(entry):
    with pytest.raises(nc.AxisError, match=r"the size of 'a' must be a positive int, got '6' \(a str\)"):
        _entry_points({"a": "6"})[entry]()


@pytest.mark.parametrize("entry", list(_entry_points({})))
def test_a_name_the_diagram_lacks_is_refused_listing_the_legal_ones(entry):
    with pytest.raises(nc.AxisError, match=r"size given for 'dd', which .* does not have; its axes and tiles are "
                                           r"\[.*'a', 'b', 'c'.*\]"):
        _entry_points({"dd": 3})[entry]()


def test_optimal_sizes_plan_directly():
    c = nc.cost(nc.group(tiled(), "c", "g_c"))
    o = nc.optimal(c, memory=40, sizes=MM)
    assert isinstance(o.sizes, Sizes) and set(o.sizes) == {"a", "b", "c", "g_a", "g_c", "s_b"}
    assert o.sizes[nc.symbol("g_a")] == o.sizes["g_a"]
    p = nc.plan(nc.group(tiled(), "c", "g_c"), o.sizes)
    assert p.run(np.ones((6, 4)), np.ones((4, 5)))[1].transfers == {1: int(o.H)}


def test_derive_results_plan_directly():
    r = nc.derive(nc.library.matmul(), memory=64, sizes=MM)
    p = nc.plan(r.diagram, r.optimum.sizes)
    assert p.run(np.ones((6, 4)), np.ones((4, 5)))[1].transfers == {1: r.H}


# ---------------------------------------------------------------------- the command line
@pytest.mark.parametrize("argv, message", [
    (["cost", "matmul", "--sizes", "a=6,b=4,c=5,zz=3"], "size given for 'zz', which the diagram does not have"),
    (["derive", "matmul", "--memory", "64", "--sizes", "a=6,b=4,c=5,zz=3"], "size given for 'zz'"),
    (["plan", "matmul", "--sizes", "a=6,b=4,c=5,zz=3"], "size given for 'zz'"),
    (["codegen", "matmul", "--target", "c", "--sizes", "a=6,b=4,c=5,zz=3"], "size given for 'zz'"),
    (["cost", "matmul", "--sizes", "a=6,b=0"], "malformed --sizes"),
])
def test_the_cli_refuses_in_one_line_with_status_2(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and err.startswith("napkin: error:")


def test_the_cli_cost_at_sizes_is_nc_cost_at_sizes(capsys):
    """``napkin cost --sizes`` gives the counts at those sizes (ragged tiles exact), not the formula substituted."""
    from napkin_cat.cli.commands import derivation_for
    d = derivation_for("matmul", nc.library.matmul()).diagram
    sizes = {"a": 13, "b": 7, "c": 5, "g_a": 3, "g_c": 3, "s_b": 3}
    text = ",".join(f"{k}={v}" for k, v in sizes.items())
    assert main(["cost", "matmul", "--derived", "--json", "--sizes", text]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["H"] == {str(l): str(h) for l, h in nc.cost(d, sizes=sizes).H.items()}
    assert not nc.cost(d).H[1].subs(Sizes(sizes).env).is_Integer       # the formula at ragged tiles is no count


def test_vanishes_agrees_with_simplify_and_reads_no_witness_a_symbol_refuses():
    """``vanishes`` is ``simplify(e) == 0``: settled by a value only where the point meets every assumption (an
    even ``k`` or a negative ``n`` is never put 10007, at which ``(−1)^k − 1`` and ``|n| + n``, written unevaluated,
    are not 0 though they vanish for every even k and negative n), and a non-zero value at a legal point is a
    witness."""
    import sympy
    from napkin_cat.syntax.sizes import vanishes
    k, n = sympy.Symbol("k", even=True, positive=True), sympy.Symbol("n", negative=True)
    d = nc.symbol("d")
    cases = [sympy.Add(sympy.Pow(-1, k, evaluate=False), -1, evaluate=False),
             sympy.Add(sympy.Abs(n, evaluate=False), n, evaluate=False), 1 / sympy.sqrt(d) - 1, sympy.sqrt(d) ** 2 - d,
             (d + 1) ** 2 - d ** 2 - 2 * d - 1, sympy.Rational(1, 3) - 0.3, sympy.log(d) - sympy.log(d + 0)]
    assert [vanishes(e) for e in cases] == [sympy.simplify(e) == 0 for e in cases] \
        == [True, True, False, True, True, False, True]
