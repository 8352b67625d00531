"""lamb-35: the scan's float functions (:func:`~napkin_cat.search.top_columns.float_functions`) are lambdify's
code without lambdify's per call work.  Checked against ``sympy.lambdify(args, e, "math")`` (the slow route it
replaces) bit for bit: the same floats (``==``, not near), the same lists, the same errors, on the points and
columns of real programs (the fused swiglu kernel, a two-tile column with a cross term whose points hold
``sqrt(M + d·n)``) and on memories where radicals turn negative."""
from __future__ import annotations

import pytest
import sympy

import napkin_cat as nc
from napkin_cat.cost.tiling import TilingProgram
from napkin_cat.search.top_columns import all_sets, float_functions, memory_functions, options, top_columns

M = nc.symbol("M")
f, n, e, d, h = (nc.symbol(s) for s in ("f", "n", "e", "d", "h"))
g, gn, ge = nc.symbol("g_f"), nc.symbol("g_n"), nc.symbol("g_e")
SIZES = {f: 72, n: 64, e: 68, d: 48, h: 4}
MEMORIES = [0.5, 3.0, 17.0, 1000.0, 4096.0 * 1.000001, 65537.25, 1e9, 2.0 ** 44]


def swiglu():
    return TilingProgram(2 * e * f * n / gn + e * f * n / g + f * n,
                         (g * gn, 2 * g * gn + 2 * g + gn), (g, gn), ("f", "n"), (f, n))


def cross():
    return TilingProgram(d * e * h * n / gn + d * e * h * n ** 2 / (ge * gn) + e * n + e * h * n ** 2 / ge,
                         (d * ge + d * gn + ge * gn,), (ge, gn), ("e", "n"), (e, n))


def _outcome(fn, *args):
    """What the scan reads of a call: the value (floats compared exactly, lists elementwise) or the error's type."""
    try:
        return ("value", fn(*args))
    except (ValueError, ZeroDivisionError, OverflowError, TypeError) as err:
        return ("error", type(err))


def _same(a, b):
    assert a[0] == b[0]
    if a[0] == "error":
        assert a[1] is b[1]
        return
    assert type(a[1]) is type(b[1])
    assert repr(a[1]) == repr(b[1])        # bit for bit (repr of a float round-trips), lists alike


@pytest.mark.parametrize("prog", [swiglu(), cross()], ids=["swiglu", "cross"])
def test_points_as_lambdify(prog):
    env = {k: sympy.Integer(v) for k, v in SIZES.items()}
    _, _, free, _ = top_columns(prog)
    exprs = []
    for _, H, tiles in options(prog, M, all_sets(prog)):
        exprs += [sympy.sympify(H).xreplace(env), [sympy.sympify(tiles[t]).xreplace(env) for t in free]]
    assert len(exprs) >= 2
    fast = float_functions([M], exprs)
    for e_, fn in zip(exprs, fast):
        slow = sympy.lambdify(M, e_, "math")
        for m in MEMORIES:
            _same(_outcome(fn, m), _outcome(slow, m))


@pytest.mark.parametrize("prog", [swiglu(), cross()], ids=["swiglu", "cross"])
def test_columns_as_lambdify(prog):
    """Functions of several arguments (the columns of the free tiles), in order."""
    env = {k: sympy.Integer(v) for k, v in SIZES.items()}
    _, tops, free, _ = top_columns(prog)
    exprs = [sympy.sympify(T).xreplace(env) for T in tops]
    fast = float_functions(list(free), exprs)
    for e_, fn in zip(exprs, fast):
        slow = sympy.lambdify(list(free), e_, "math")
        for tv in ((1.0, 1.0), (3.5, 0.25), (1e6, 7.0), (0.0, 2.0)):
            _same(_outcome(fn, *tv), _outcome(slow, *tv))


def test_errors_and_odd_names_as_lambdify():
    """A radical negative below a memory raises where lambdify's raises; an argument that is no Python name
    (lambdify swaps it for a dummy) and one a free symbol of another name leaves in the code go as lambdify's."""
    x, odd, c = sympy.Symbol("x", positive=True), sympy.Symbol("a b"), sympy.Symbol("c")
    exprs = [sympy.sqrt(x - 10) / x + sympy.Rational(1, 3), [x ** sympy.Rational(3, 2), 1 / (x - 4)],
             sympy.Max(x, 7) + sympy.log(x)]
    for args in ([x], [odd]):
        es = [sympy.sympify(e_).xreplace({x: args[0]}) if not isinstance(e_, list)
              else [t.xreplace({x: args[0]}) for t in e_] for e_ in exprs]
        fast = float_functions(args, es)
        for e_, fn in zip(es, fast):
            slow = sympy.lambdify(args, e_, "math")
            for m in (4.0, 5.0, 10.0, 11.5, 1e12):
                _same(_outcome(fn, m), _outcome(slow, m))
    (left,) = float_functions([x], [x + c])
    assert left(1.0) == sympy.lambdify([x], x + c, "math")(1.0) == 1.0 + c      # a symbol stays a symbol


def _base_route(M, e_):
    """What the scan did before lamb-35: ``M`` swapped for a positive dummy, then ``sympy.lambdify``."""
    Mp = sympy.Dummy("Mp", positive=True)
    sub = {M: Mp}
    return sympy.lambdify(Mp, [x.xreplace(sub) for x in e_] if isinstance(e_, list) else e_.xreplace(sub), "math")


def test_memory_functions_as_lambdify_bit_for_bit():
    """The block's two-tile point (its tiles hold ``sqrt`` of three sums in ``M``, a product whose factors
    lambdify orders by the argument's kind: a dummy in a list, a symbol alone): every float as the old route's, on
    a scan's worth of memories; the factors' order changes last bits at some of them (the mutation: a symbol in
    the lists too)."""
    r = sympy.sqrt(19) * sympy.sqrt(2 * M + 1478656) * sympy.sqrt(M + 1245184) * sympy.sqrt(M + 1478656)
    t1 = -(2048 * M ** 2 + 4542431232 * M - 311296 * r + 2238897731928064) / (466944 * M - 512 * r + 345224773632)
    t2 = (1478656 * M - 256 * r + 1841198792704) / (-2048 * M - 2744385536)
    exprs = [t1 + t2, [t1, t2], [t2], t1 * t2]
    fast = memory_functions(M, exprs)
    grid = [4096.0 * 2 ** (k / 16) for k in range(16 * 30)] + [5543204.6573882615, 6044907.542627969]
    for e_, fn in zip(exprs, fast):
        slow = _base_route(M, e_)
        for m in grid:
            _same(_outcome(fn, m), _outcome(slow, m))
