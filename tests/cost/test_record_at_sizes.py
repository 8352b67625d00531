"""The cost at sizes of a partition record (``relabelled=False``) counts through the relabelling it stands for.

A record is the bubble around the inside as it was (what the search costs without building the partition); the
symbolic functor reads its inside through the relabelling (:mod:`napkin_cat.cost.scope`), and the cost at sizes
(:mod:`napkin_cat.cost.numeric`) must too: before, it counted each box as drawn, a group of ``a`` by 4 as if every
group held the whole of ``a`` (a matmul's tensor FLOPs times ``a/g_a``).  Three routes agree on each diagram below
(groups, streams, sweeps, 2-D loops, sub-loops, split streams, concrete tiles, two-level kernels, on matmul,
attention, mlp, swiglu, multi-head and masked attention, at tiles that divide and at ragged ones):

* the record at sizes is the built partition at sizes (``relabelled=True``), field by field (H, bytes, FLOPs, M);
* it is the instrumented runner's counts on the built partition (``nc.plan(built, sizes).run``), where a plan exists
  (a concrete tile that does not divide has none);
* where the tiles divide and no mask makes the symbolic count an estimate, it is the record's symbolic cost
  substituted at the sizes (H, bytes, FLOPs);

and the same on random partitions of the library's algorithms at random, often ragged, sizes (a property), and
``predict_cpu`` (which reads the cost at sizes) predicts the record as the built partition.

Mutations caught: the fold counting each box as drawn (``box_pieces(box)``, the old path: every case); a record's
shorter last concrete tile seen at the full tile (the concrete-tile cases); the tiles of a record inside a record of
its axis cut from the axis as drawn, not the outer tile (the two-level cases); ``bind`` checking such a tile against
the axis as drawn (a record's tile larger than the outer tile accepted: the refusal test). Not caught: a stream
record's head and tail counted through the enclosing view alone, not the stream's own (no box there carries the
streamed axis: an input that does is streamed; the fold sees them as the symbolic functor does, for the law's sake).
"""
from __future__ import annotations

import numpy as np
import pytest
import sympy
from hypothesis import HealthCheck, given, settings, strategies as st

import napkin_cat as nc
from napkin_cat.errors import AxisError, NapkinError, PlanError
from napkin_cat.hardware import predict_cpu
from napkin_cat.syntax.axis import symbol
from napkin_cat.syntax.sizes import symbols_of

L = nc.library


def S(axis, size, **kw):
    return lambda d, relabelled: nc.stream(d, axis, size, relabelled=relabelled, **kw)


def G(axis, size):
    return lambda d, relabelled: nc.group(d, axis, size, relabelled=relabelled)


def K(level):
    return lambda d, relabelled: nc.kernel(d, level)


def drawn(f, steps, relabelled: bool):
    d = f()
    for step in steps:
        d = step(d, relabelled)
    return d


MM = dict(a=6, b=8, c=4)
ATT = dict(q=6, x=8, d=4)
#: name → (function, partition steps, sizes: every tile dividing its axis, then some ragged)
CASES = {
    "matmul group (the issue)": (L.matmul, [G("a", "g_a")], [dict(MM, g_a=2), dict(MM, g_a=4)]),
    "matmul stream, group": (L.matmul, [S("b", "s_b"), G("a", "g_a")], [dict(MM, s_b=4, g_a=3),
                                                                       dict(MM, s_b=3, g_a=4)]),
    "matmul sweep": (L.matmul, [S("a", "s_a", sliced=True), G("c", "g_c")], [dict(MM, s_a=3, g_c=2),
                                                                            dict(MM, s_a=4, g_c=3)]),
    "matmul two groups": (L.matmul, [S("b", "s_b"), G("a", "g_a"), G("c", "g_c")],
                          [dict(MM, s_b=2, g_a=3, g_c=2), dict(MM, s_b=3, g_a=4, g_c=3)]),
    "matmul concrete tiles": (L.matmul, [S("b", 2), G("a", 3)], [MM]),
    "matmul concrete ragged tile": (L.matmul, [S("b", 3), G("a", 4)], [MM]),
    "matmul sub-loop": (L.matmul, [S("b", "s_b"), S("b", "u_b"), G("a", "g_a")],
                        [dict(MM, s_b=4, u_b=2, g_a=2), dict(a=5, b=7, c=4, s_b=4, u_b=3, g_a=2)]),
    "matmul split stream": (L.matmul, [S("b", "s_b", parts="P"), G("a", "g_a")], [dict(MM, s_b=2, P=2, g_a=3)]),
    "matmul two levels": (L.matmul, [K(2), K(1), G("a", "g_a"), G("a", "h_a")],
                          [dict(a=8, b=3, c=4, g_a=2, h_a=4), dict(a=7, b=5, c=4, g_a=2, h_a=3)]),
    "matmul two levels, stream": (L.matmul, [K(2), K(1), S("b", "s_b"), G("a", "g_a"), G("a", "h_a")],
                                  [dict(a=8, b=4, c=4, s_b=2, g_a=2, h_a=4), dict(a=7, b=5, c=4, s_b=2, g_a=2,
                                                                                  h_a=3)]),
    "attention flash": (L.attention, [S("x", "s_x"), G("q", "g_q")], [dict(ATT, s_x=4, g_q=3),
                                                                     dict(ATT, s_x=3, g_q=4)]),
    "attention 2-D loop": (L.attention, [S("x", "s_x"), S("d", "s_d"), G("q", "g_q")],
                           [dict(ATT, s_x=4, s_d=2, g_q=2), dict(q=5, x=7, d=5, s_x=3, s_d=2, g_q=2)]),
    "attention split stream": (L.attention, [S("x", "s_x", parts="P"), G("q", "g_q")],
                               [dict(ATT, s_x=2, P=2, g_q=2)]),
    "attention sweep q": (L.attention, [S("q", "s_q", sliced=True)], [dict(ATT, s_q=2), dict(ATT, s_q=4)]),
    "multi-head attention": (L.multi_head_attention, [S("x", "s_x"), G("q", "g_q"), G("h", "g_h")],
                             [dict(ATT, h=2, s_x=4, g_q=3, g_h=1), dict(ATT, h=3, s_x=3, g_q=4, g_h=2)]),
    "mlp stream f": (L.mlp, [S("f", "s_f"), G("n", "g_n")], [dict(n=4, i=4, f=6, o=3, s_f=3, g_n=2),
                                                            dict(n=5, i=4, f=6, o=3, s_f=4, g_n=2)]),
    "mlp stream i": (L.mlp, [S("i", "s_i"), G("n", "g_n")], [dict(n=4, i=4, f=6, o=3, s_i=2, g_n=2),
                                                            dict(n=5, i=4, f=6, o=3, s_i=3, g_n=2)]),
    "swiglu mlp": (L.swiglu_mlp, [S("f", "s_f"), G("n", "g_n")], [dict(n=4, e=3, f=6, o=3, s_f=3, g_n=2),
                                                                 dict(n=5, e=3, f=6, o=3, s_f=4, g_n=3)]),
    "causal attention": (L.causal_attention, [S("x", "s_x"), G("q", "g_q")], [dict(q=8, x=8, d=3, s_x=2, g_q=4),
                                                                             dict(q=7, x=7, d=3, s_x=3, g_q=2)]),
    "causal concrete ragged": (L.causal_attention, [S("x", 3), G("q", 2)], [dict(q=7, x=7, d=3)]),
    "sliding window": (lambda: L.sliding_window_attention(2), [S("x", "s_x"), G("q", "g_q")],
                       [dict(q=8, x=8, d=3, s_x=2, g_q=4), dict(q=7, x=7, d=3, s_x=2, g_q=3)]),
    "document ids": (L.document_attention, [S("x", "s_x"), G("q", "g_q")], [dict(q=6, x=6, d=3, s_x=2, g_q=3),
                                                                           dict(q=7, x=7, d=3, s_x=3, g_q=2)]),
    "document sweep": (L.document_attention, [S("x", "s_x", sliced=True), G("q", "g_q")],
                       [dict(q=6, x=6, d=3, s_x=2, g_q=3)]),
}
PAIRS = [(name, k) for name, (_, _, sizes) in CASES.items() for k in range(len(sizes))]


def inputs(d, sizes, seed=0):
    """Random inputs of ``d`` at ``sizes``: normal floats, sorted ids for an int array (a document's)."""
    env = {symbol(k): v for k, v in sizes.items()}
    rng = np.random.default_rng(seed)
    out = []
    for arr in d.dom.inside:
        shape = tuple(int(sympy.sympify(a.size).subs(env)) for a in arr.axes)
        if arr.dtype.name.startswith("int"):
            out.append(np.sort(rng.integers(0, 3, size=shape)).astype(np.int32))
        else:
            out.append(rng.normal(size=shape))
    return out


def _own(f, sizes: dict) -> dict:
    """The sizes of ``f()``'s own axes (the tiles' names left out: the unpartitioned function has none)."""
    names = {str(s) for s in symbols_of(f())}
    return {n: v for n, v in sizes.items() if n in names}


def fields(c) -> tuple:
    return c.H, c.H_bytes, c.flops, c.M


def test_there_are_twenty_diagrams_and_the_issue_is_one():
    assert len(CASES) >= 20 and len(PAIRS) >= 40
    rec = nc.group(L.matmul(), "a", "g_a", relabelled=False)
    sizes = {"a": 1024, "b": 1024, "c": 1024, "g_a": 4}
    c, symbolic = nc.cost(rec, sizes=sizes), nc.cost(rec)
    env = {symbol(k): v for k, v in sizes.items()}
    assert c.flops == {"tensor": 2 * 1024 ** 3} == {p: int(f.subs(env)) for p, f in symbolic.flops.items()}
    assert c.H == {1: int(symbolic.H[1].subs(env))}


@pytest.mark.parametrize("name,k", PAIRS)
def test_a_record_at_sizes_is_the_built_partition_the_run_and_the_symbolic_cost(name, k):
    f, steps, all_sizes = CASES[name]
    sizes = all_sizes[k]
    rec, built = drawn(f, steps, False), drawn(f, steps, True)
    assert any(not getattr(b, "relabelled", True) for b in _regions(rec)), "the record has no record partition"
    assert set(map(str, symbols_of(built))) == set(sizes), sorted(map(str, symbols_of(built)))
    at = nc.cost(rec, sizes=sizes)
    assert fields(at) == fields(nc.cost(built, sizes=sizes))
    try:
        p = nc.plan(built, sizes)
    except PlanError:          # a concrete tile that does not divide its axis: no plan masks its last tile
        assert _concrete_ragged(built, sizes)
    else:
        xs = inputs(built, sizes)
        with np.errstate(invalid="ignore"):     # a query of a document no key shares: 0/0, NaN by the semantics
            y, counted = p.run(*xs)
            want = nc.evaluate(f(), *xs, sizes=_own(f, sizes))
        for got, ref in zip(*((v,) if isinstance(v, np.ndarray) else v for v in (y, want))):
            np.testing.assert_allclose(got, ref, rtol=1e-9, atol=1e-12, equal_nan=True)
        assert (at.H, at.H_bytes, at.flops, at.peak) == (counted.transfers, counted.bytes, counted.flops, counted.peak)
    symbolic = nc.cost(rec)
    if _divides(built, sizes) and not symbolic.estimated:
        env = {symbol(n): v for n, v in sizes.items()}
        for mine, theirs in ((at.H, symbolic.H), (at.H_bytes, symbolic.H_bytes), (at.flops, symbolic.flops)):
            assert mine == {key: int(sympy.sympify(v).subs(env)) for key, v in theirs.items()}


def _regions(d):
    from napkin_cat.syntax.flat import layers
    from napkin_cat.algorithms.bubbles import Region
    for _, box in layers(d):
        if isinstance(box, Region):
            yield box
            yield from _regions(box.arg)


def _partitions(d):
    from napkin_cat.algorithms.bubbles import Partition
    return [b for b in _regions(d) if isinstance(b, Partition)]


def _concrete_ragged(built, sizes) -> bool:
    env = {symbol(k): v for k, v in sizes.items()}
    return any(isinstance(b.size, int) and int(sympy.sympify(b.full_size()).subs(env)) % b.size
               for b in _partitions(built))


def _divides(built, sizes) -> bool:
    env = {symbol(k): v for k, v in sizes.items()}
    return all(int(sympy.sympify(b.full_size()).subs(env)) % int(sympy.sympify(b.size).subs(env)) == 0
               for b in _partitions(built))


# ---------------------------------------------------------------------------------------------- a property
FUNCTIONS = {"matmul": L.matmul, "attention": L.attention, "mlp": L.mlp, "causal": L.causal_attention,
             "window": lambda: L.sliding_window_attention(2), "document": L.document_attention,
             "swiglu": L.swiglu_mlp}


def _axes(d):
    return sorted({a.name for arr in (*d.dom.inside, *d.cod.inside) for a in arr.axes})


def _steps(d) -> list:
    """Every legal (stream axis or None, sliced, group axes) of ``d``: a stream (or sweep) and up to two groups."""
    out = []
    names = _axes(d)
    for s in [None] + names:
        for sliced in ((False, True) if s else (False,)):
            for g1 in [None] + names:
                for g2 in [None] + names:
                    if (g2 is not None and (g1 is None or g2 <= g1)) or not (s or g1):
                        continue
                    steps = ([S(s, f"s_{s}", sliced=sliced)] if s else []) + [G(g, f"g_{g}") for g in (g1, g2) if g]
                    try:
                        drawn(lambda: d, steps, True)
                    except NapkinError:
                        continue
                    out.append(steps)
    return out


STEPS = {name: _steps(f()) for name, f in FUNCTIONS.items()}


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_random_record_at_random_sizes_is_what_the_built_partition_runs(name, data):
    """A random partition of the function drawn as a record, at random sizes (each tile ragged where a draw says
    and the axis allows): its cost at sizes is the built partition's, and the runner's counts on it; the runner
    computes what the function does (``nc.evaluate`` of the unpartitioned function, NaN in the same places)."""
    f = FUNCTIONS[name]
    steps = data.draw(st.sampled_from(STEPS[name]), label="partition")
    rec, built = drawn(f, steps, False), drawn(f, steps, True)
    names = sorted(str(s) for s in symbols_of(built))
    sizes = {n: data.draw(st.integers(2, 7), label=n) for n in names if not n.startswith(("s_", "g_"))}
    for n in names:
        if n.startswith(("s_", "g_")):
            full = sizes[n[2:]]
            odd = [t for t in range(2, full) if full % t]
            ragged = data.draw(st.booleans(), label=f"{n} ragged")
            sizes[n] = data.draw(st.sampled_from(odd) if ragged and odd else st.integers(1, full), label=n)
    at = nc.cost(rec, sizes=sizes)
    assert fields(at) == fields(nc.cost(built, sizes=sizes))
    xs = inputs(built, sizes, 1)
    with np.errstate(invalid="ignore"):
        # a query the mask leaves no key (a window or a document past every key's: q > x, ids apart) is legal:
        # its softmax is 0/0, NaN by the diagram's semantics (the torch op maps it to FlexAttention's 0)
        y, counted = nc.plan(built, sizes).run(*xs)
        want = nc.evaluate(f(), *xs, sizes=_own(f, sizes))
    for got, ref in zip(*((v,) if isinstance(v, np.ndarray) else v for v in (y, want))):
        np.testing.assert_allclose(got, ref, rtol=1e-9, atol=1e-12, equal_nan=True)   # NaN where, and only where
    assert (at.H, at.H_bytes, at.flops) == (counted.transfers, counted.bytes, counted.flops)
    if name not in MASKED:
        assert at.peak == counted.peak


#: functions whose peak at sizes (the symbolic columns' at the sizes) the runner need not reach where a mask skips
#: trips, the partition built as much as its record (sliding window, q = x = d = 2, a stream of x by 1: 24 against
#: the runner's 22): not the record's to decide
MASKED = {"causal", "window", "document"}


# ---------------------------------------------------------------------------------------------- predict_cpu
@pytest.mark.parametrize("name", ["matmul group (the issue)", "attention flash", "mlp stream f", "causal attention"])
def test_predict_cpu_on_a_record_is_its_built_partition(name):
    """``predict_cpu`` reads the cost at sizes of each kernel: the record's prediction is the built partition's."""
    f, steps, all_sizes = CASES[name]
    sizes = all_sizes[-1]
    rec, built = drawn(f, steps, False), drawn(f, steps, True)
    a, b = predict_cpu(rec, "epyc-zen3-dev", sizes), predict_cpu(built, "epyc-zen3-dev", sizes)
    assert a.time == pytest.approx(b.time, rel=1e-12)
    for x, y in zip(a.kernels, b.kernels):
        assert x.terms == pytest.approx(y.terms, rel=1e-12) and (x.bytes, x.flops) == (y.bytes, y.flops)


@pytest.mark.parametrize("relabelled", [True, False])
def test_a_tile_larger_than_the_outer_tile_is_refused_on_a_record_as_on_the_built(relabelled):
    """Two levels: the level-2 groups (``g_a``) partition the level-1 tile (``h_a``), record or built."""
    d = drawn(L.matmul, [K(2), K(1), G("a", "g_a"), G("a", "h_a")], relabelled)
    with pytest.raises(AxisError, match=r"the group size of 'a' \(g_a = 4\) exceeds the axis \(a = 2\)"):
        nc.cost(d, sizes=dict(a=8, b=3, c=4, g_a=4, h_a=2))
