"""``nc.cost(d, sizes=...)``: the cost at concrete sizes is what a run counts, at any tiles, ragged included.

One record (``nc.Cost``) holds the symbolic cost, the cost at sizes and the runner's counts, under its names
(``H``, ``H_bytes``, ``M``, ``flops``) and the runner's (``transfers``, ``bytes``, ``peak``).  The property is
drawn over every algorithm of ``nc.library`` (whatever it holds), a random legal partition of it (a stream, up to
two groups), random axis sizes and random tiles, where a ragged draw makes each tile one that does not divide its
axis when the axis allows.
"""
from __future__ import annotations

import numpy as np
import pytest
import sympy
from hypothesis import HealthCheck, given, settings, strategies as st

import napkin_cat as nc
from napkin_cat.errors import AxisError, NapkinError
from napkin_cat.syntax.axis import symbol


def _library() -> dict:
    out = {}
    for name in nc.library.__all__:
        try:
            d = getattr(nc.library, name)()
        except TypeError:          # an algorithm that needs an argument (a window, say): not drawn here
            continue
        if isinstance(d, nc.Diagram):
            out[name] = d
    return out


LIBRARY = _library()


def _axes(d):
    return sorted({a.name for arr in (*d.dom.inside, *d.cod.inside) for a in arr.axes})


def partitions(d) -> list:
    """Every legal (stream axis or None, group axes) of ``d`` with at most one stream and two groups."""
    out = []
    names = _axes(d)
    for s in [None] + names:
        try:
            base = nc.stream(d, s, f"s_{s}") if s else d
        except NapkinError:
            continue
        for g1 in [None] + names:
            for g2 in [None] + names:
                if g2 is not None and (g1 is None or g2 <= g1):
                    continue
                try:
                    x = base
                    for g in (g1, g2):
                        if g:
                            x = nc.group(x, g, f"g_{g}")
                except NapkinError:
                    continue
                if s or g1:
                    out.append(x)
    return out


PARTITIONS = {name: partitions(d) for name, d in LIBRARY.items()}


def test_the_library_is_drawn_whole():
    assert {"matmul", "attention", "linear", "mlp", "rms_norm", "transformer_block"} <= set(LIBRARY)
    assert all(PARTITIONS[name] for name in LIBRARY), [n for n in LIBRARY if not PARTITIONS[n]]


def _sizes(data, algorithm, ragged: bool) -> dict:
    names = sorted(str(s) for s in _symbols(algorithm))
    sizes = {n: data.draw(st.integers(2 if ragged else 1, 6), label=n) for n in names if not n.startswith(("s_", "g_"))}
    for n in names:
        if n.startswith(("s_", "g_")):
            full = sizes[n[2:]]
            odd = [t for t in range(2, full) if full % t]
            sizes[n] = data.draw(st.sampled_from(odd) if ragged and odd else st.integers(1, full), label=n)
    return sizes


def _symbols(d) -> set:
    from napkin_cat.syntax.sizes import symbols_of
    return symbols_of(d)


def _inputs(d, sizes, seed):
    """Normal floats; sorted small ids for an int array (a document's), so that documents share keys."""
    env = {symbol(k): v for k, v in sizes.items()}
    rng = np.random.default_rng(seed)
    out = []
    for arr in d.dom.inside:
        shape = tuple(int(sympy.sympify(a.size).subs(env)) for a in arr.axes)
        ints = arr.dtype.name.startswith("int")
        out.append(np.sort(rng.integers(0, 3, size=shape)).astype(np.int32) if ints else rng.normal(size=shape))
    return out


@pytest.mark.parametrize("name", sorted(LIBRARY))
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_the_cost_at_sizes_is_what_the_run_counts(name, data):
    algorithm = data.draw(st.sampled_from(PARTITIONS[name]), label="partition")
    ragged = data.draw(st.booleans(), label="ragged")
    sizes = _sizes(data, algorithm, ragged)
    c = nc.cost(algorithm, sizes=sizes)
    with np.errstate(invalid="ignore"):         # a query of a document no key shares: 0/0, NaN by the semantics
        y, counted = nc.plan(algorithm, sizes).run(*_inputs(algorithm, sizes, 0))
    assert (c.H, c.H_bytes, c.flops, c.peak) == (counted.transfers, counted.bytes, counted.flops, counted.peak)
    assert all(isinstance(v, int) for table in (c.H, c.H_bytes, c.M, c.flops) for v in table.values())


def test_one_record():
    """The symbolic cost, the cost at sizes and the runner's counts are one type, with the runner's names too."""
    mm = nc.group(nc.stream(nc.library.matmul(), "b", "s_b"), "a", "g_a")
    sizes = {"a": 5, "b": 7, "c": 3, "g_a": 2, "s_b": 3}
    at, symbolic = nc.cost(mm, sizes=sizes), nc.cost(mm)
    _, counted = nc.plan(mm, sizes).run(*_inputs(mm, sizes, 1))
    assert nc.Counters is nc.Cost and type(at) is type(symbolic) is type(counted) is nc.Cost
    assert (at.transfers, at.bytes, at.peak) == (at.H, at.H_bytes, {1: at.M[1]}) == (
        counted.H, counted.H_bytes, counted.M)
    assert isinstance(symbolic.H[1], sympy.Expr) and symbolic.H[1].free_symbols


def test_ragged_tiles_are_counted_where_the_symbolic_cost_is_not_an_integer():
    """Tiles of 3 on axes of 13, 7 and 5: the symbolic transfers substituted are a fraction, the count is not."""
    mm = nc.group(nc.group(nc.stream(nc.library.matmul(), "b", "s_b"), "a", "g_a"), "c", "g_c")
    sizes = {"a": 13, "b": 7, "c": 5, "g_a": 3, "g_c": 3, "s_b": 3}
    exact = nc.cost(mm).H[1].subs({symbol(k): v for k, v in sizes.items()})
    assert not exact.is_Integer
    _, counted = nc.plan(mm, sizes).run(*_inputs(mm, sizes, 2))
    assert nc.cost(mm, sizes=sizes).H == counted.transfers == {1: 13 * 7 * 2 + 5 * 7 * 5 + 13 * 5}


def test_where_the_tiles_divide_it_is_the_symbolic_cost_substituted():
    from rewrites import flash_attention
    d = flash_attention(nc.library.multi_head_attention()).diagram
    sizes = {"q": 6, "x": 8, "d": 3, "h": 2, "g_q": 3, "g_h": 1, "s_x": 4}
    env = {symbol(k): v for k, v in sizes.items()}
    c, at = nc.cost(d), nc.cost(d, sizes=sizes)
    assert at.H == {l: int(h.subs(env)) for l, h in c.H.items()}
    assert at.M == {l: int(m.subs(env)) for l, m in c.M.items()}
    assert at.flops == {p: int(f.subs(env)) for p, f in c.flops.items()}


@pytest.mark.parametrize("sizes, message", [
    ({"a": 5, "b": 7, "c": 3, "g_a": 2, "s_b": 3, "zz": 4}, r"size given for 'zz', which the diagram does not have"),
    ({"a": 5, "b": 7, "c": 3, "g_a": 2, "s_b": "3"}, r"the size of 's_b' must be a positive int, got '3'"),
    ({"a": 5, "b": 7, "c": 3, "g_a": 0, "s_b": 3}, r"the size of 'g_a' must be a positive int, got 0"),
    ({"a": 5, "b": 7, "c": 3, "g_a": 2}, r"missing \['s_b'\]"),
    ({"a": 5, "b": 7, "c": 3, "g_a": 6, "s_b": 3}, r"the group size of 'a' \(g_a = 6\) exceeds the axis \(a = 5\)"),
])
def test_sizes_are_checked_naming_the_axis(sizes, message):
    mm = nc.group(nc.stream(nc.library.matmul(), "b", "s_b"), "a", "g_a")
    with pytest.raises(AxisError, match=message):
        nc.cost(mm, sizes=sizes)


def test_a_derived_rms_norm_then_matmul_at_ragged_tiles():
    """The issue's case: a derived RMSNorm → matmul at n = 13, d = 7, o = 5, every tile 3."""
    f = (nc.library.rms_norm() @ nc.Id("d o")) >> nc.einsum("n d, d o -> n o")
    d = nc.derive(f, memory=256, sizes={"n": 13, "d": 7, "o": 5}).diagram
    sizes = {"n": 13, "d": 7, "o": 5, **{str(s): 3 for s in _symbols(d) if str(s).startswith(("g_", "s_"))}}
    assert not nc.cost(d).H[1].subs({symbol(k): v for k, v in sizes.items()}).is_Integer
    y, counted = nc.plan(d, sizes).run(*_inputs(f, sizes, 3))
    np.testing.assert_allclose(y, nc.evaluate(f, *_inputs(f, sizes, 3)), rtol=1e-9)
    c = nc.cost(d, sizes=sizes)
    assert (c.H, c.flops, c.peak) == (counted.transfers, counted.flops, counted.peak)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 9), st.integers(1, 9), st.integers(1, 9)), min_size=2, max_size=6))
def test_a_box_value_kept_per_the_symbols_it_reads_is_the_value_at_the_sizes(points):
    """``at_sizes.integer`` (``exact_arithmetic.value``, which keeps a sympy expression's value per the ints of the
    symbols it reads): over sizes that change a symbol it does not read (``c``) and ones it reads, each value is
    sympy's own substitution (a value kept under the wrong symbols would be read back at the wrong sizes)."""
    from napkin_cat.cost.at_sizes import integer
    a, b, c = symbol("a"), symbol("b"), symbol("c")
    exprs = [a * b + 2 * a, sympy.ceiling(a / b) * b, a ** 2 * b, sympy.Max(a, b) + 1]
    for x, y, z in points:
        env = {a: x, b: y, c: z}
        for e in exprs:
            assert integer(e, env) == int(e.subs(env)), (e, env)
    with pytest.raises(NapkinError, match="not an integer"):
        integer(a / b, {a: 1, b: 2})


def test_the_axes_a_skip_reads_are_its_masks_axes():
    """``Skip.reads`` (kept on the skip, what ``at_sizes.count_key`` reads at every tiling): the axes the masks of a
    causal and a sliding-window stream read are the query and key axes, each at its size, what a probe of the masks'
    verdict reads; not pickled with the skip."""
    import pickle
    from napkin_cat.algorithms.schedule import schedule_of
    for f in (nc.library.causal_attention(), nc.library.sliding_window_attention(8)):
        region = nc.stream(f, "x", "s_x").boxes[0].arg.boxes[0]
        skip = schedule_of(region).skip
        read: dict = {}
        skip.verdict(lambda axis, size: read.setdefault(axis, size) and (0, 1) or (0, 1))
        assert dict(skip.reads) == read and set(read) == {"q", "x"}
        assert skip.reads is skip.reads and "_reads" not in pickle.loads(pickle.dumps(skip)).__dict__
