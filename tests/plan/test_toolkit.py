"""The plan IR's toolkit: one vocabulary (``access``), one walk, one rebuild, one liveness.

Laws: ``rebuild(b, id) == b``; ``with_blocks(s, blocks(s)) == s``; ``walk_scoped`` places every statement
in the block its scope names; every statement kind has a row in ``ACCESS``; the columns that liveness
samples give the peak that the instrumented run measures, on the library's algorithms.
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import sympy

import napkin_cat as nc
from napkin_cat.plan import ir, skips
from napkin_cat.plan.ir import (ACCESS, Access, Alloc, Combine, Compute, Copy, Fill, Free, GridLoop, Kernel, Load,
                                PlanError, Range, Ref, Store, StreamLoop, Variable, access, blocks, rebuild, walk,
                                walk_scoped, with_blocks)
from napkin_cat.plan.liveness import columns, live_in, with_frees
from napkin_cat.plan.program import Plan

i = sympy.Symbol("i", integer=True, nonnegative=True)
PART = Ref("t", (("a", Range(i * 2, 2, 6)),))     # a slice: a write to it keeps the rest of t


def plans():
    """Plans of library algorithms: streamed, grouped, nested, ragged and the paper's FlashAttention."""
    from rewrites import flash_attention
    mm = nc.library.matmul()
    att = nc.library.attention()
    yield "matmul s", nc.plan(nc.stream(mm, "b", "s_b"), {"a": 4, "b": 6, "c": 5, "s_b": 3})
    yield "matmul g s", nc.plan(nc.group(nc.stream(mm, "b", "s_b"), "a", "g_a"),
                                {"a": 4, "b": 6, "c": 5, "s_b": 2, "g_a": 2})
    yield "attention g s", nc.plan(nc.group(nc.stream(att, "x", "s_x"), "q", "g_q"),
                                   {"q": 4, "x": 6, "d": 2, "g_q": 2, "s_x": 3})
    yield "flash ragged", nc.plan(flash_attention(att).diagram, {"q": 5, "x": 7, "d": 3, "g_q": 2, "s_x": 3})
    yield "layer_norm g", nc.plan(nc.group(nc.library.layer_norm(), "n", "g_n"), {"n": 4, "d": 6, "g_n": 2})
    yield "mlp unfused", nc.plan(nc.unfused(nc.library.mlp()), {"n": 3, "i": 4, "f": 5, "o": 2})


PLANS = dict(plans())


# ---------------------------------------------------------------------------------------------- walk and rebuild
@pytest.mark.parametrize("name", sorted(PLANS))
def test_rebuild_by_the_identity_is_the_plan(name):
    p = PLANS[name]
    assert rebuild(p.body, lambda s: s) == p.body
    for s in walk(p.body):
        assert with_blocks(s, blocks(s)) == s


@pytest.mark.parametrize("name", sorted(PLANS))
def test_rebuild_maps_every_simple_statement_once_in_program_order(name):
    p = PLANS[name]
    seen = []

    def tag(s):
        if isinstance(s, ir.COMPOUND):
            return s
        seen.append(s)
        return dataclasses.replace(s, origin=f"#{len(seen)}") if hasattr(s, "origin") else s
    body = rebuild(p.body, tag)
    assert seen == [s for s in walk(p.body) if not isinstance(s, ir.COMPOUND)]
    assert [getattr(s, "origin", None) for s in walk(body) if not isinstance(s, ir.COMPOUND)
            and hasattr(s, "origin")] == [f"#{k + 1}" for k, s in enumerate(seen) if hasattr(s, "origin")]
    # dropping statements and splicing several in their place
    no_frees = rebuild(p.body, lambda s: () if isinstance(s, Free) else s)
    assert not [s for s in walk(no_frees) if isinstance(s, Free)]
    doubled = rebuild(p.body, lambda s: (s, s) if isinstance(s, Load) else s)
    assert sum(isinstance(s, Load) for s in walk(doubled)) == 2 * sum(isinstance(s, Load) for s in walk(p.body))


@pytest.mark.parametrize("name", sorted(PLANS))
def test_walk_scoped_names_the_block_each_statement_sits_in(name):
    p = PLANS[name]
    pairs = list(walk_scoped(p.body))
    assert [s for s, _ in pairs] == list(walk(p.body))
    for s, scope in pairs:
        if scope:
            outer, k = scope[-1]
            assert any(x is s for x in blocks(outer)[k])
        else:
            assert any(x is s for x in p.body)


def test_with_blocks_refuses_the_wrong_number_of_blocks():
    loop = StreamLoop("x", 2, 4, i, (), (), ())
    with pytest.raises(PlanError, match=r"a StreamLoop has 3 block\(s\), got 1"):
        with_blocks(loop, ((),))


# ---------------------------------------------------------------------------------------------- the vocabulary
def _box():
    return nc.elementwise("exp", "a").boxes[0]


def test_every_statement_kind_reads_and_writes_what_it_says():
    box = _box()
    t, x, o = Ref("t"), Ref("x"), Ref("o")
    inner = Compute(box, (), (x,))
    cases = {
        Alloc("t"): ((), (t,), {"t"}, set()),
        Free("t"): ((), (), set(), set()),
        Fill("t", 0.0): ((), (t,), {"t"}, set()),
        Load(t, x, 1): ((x,), (t,), {"t"}, {"x"}),
        Load(PART, x, 1): ((x,), (PART,), set(), {"x", "t"}),
        Store(x, t, 1): ((t,), (x,), {"x"}, {"t"}),
        Copy(o, t): ((t,), (o,), {"o"}, {"t"}),
        Combine(o, t, "sum"): ((t, o), (o,), set(), {"t", "o"}),
        Compute(box, (o,), (t,)): ((t,), (o,), {"o"}, {"t"}),
        Compute(box, (o,), (t,), "sum"): ((t, o), (o,), set(), {"t", "o"}),
        Compute(box, (o,), (t, inner)): ((t, x), (o,), {"o"}, {"t", "x"}),
        Compute(box, (PART,), (x,)): ((x,), (PART,), set(), {"x", "t"}),
    }
    for stmt, (reads, writes, defs, uses) in cases.items():
        a = access(stmt)
        assert (a.reads, a.writes, set(a.defs), set(a.uses)) == (reads, writes, defs, uses), stmt
        assert ir.reads(stmt) == tuple(r.var for r in reads) and ir.writes(stmt) == tuple(r.var for r in writes)
    for compound in (Kernel(1, (Load(t, x, 1),)), GridLoop("a", 2, 4, i, (Free("t"),)),
                     StreamLoop("a", 2, 4, i, (), (Store(x, t, 1),), ())):
        assert access(compound) == Access()     # its blocks hold its statements


def test_every_statement_of_the_ir_has_a_row_in_the_vocabulary():
    statements = {obj for module in (ir, skips) for obj in vars(module).values()      # (skips: a stream's masks)
                  if isinstance(obj, type) and dataclasses.is_dataclass(obj)
                  and obj not in (Variable, Range, Ref, Access)}
    assert statements == set(ACCESS)


def test_a_statement_outside_the_ir_is_refused_by_name():
    with pytest.raises(PlanError, match=r"Variable is not a statement of the plan IR; its statements are Alloc, "):
        access(Variable("v", (), "fp32", 1, "temp"))


# ---------------------------------------------------------------------------------------------- liveness
def measured_peak(p):
    """The most values live per level that the instrumented run of ``p`` measures on random inputs."""
    rng = np.random.default_rng(0)
    xs = [rng.normal(size=tuple(int(sympy.sympify(e).subs(p.sizes)) for _, e in p.variable_map[v].shape))
          for v in p.inputs]
    return p.run(*xs)[1].peak


def dividing(p):
    """``p``'s diagram planned at the same tiles, each axis its loops cut rounded up to a multiple of their tiles:
    no tile is masked there, so every tile is full."""
    tiles: dict = {}
    for s in walk(p.body):
        if isinstance(s, (GridLoop, StreamLoop)) and s.full in p.sizes:
            tiles.setdefault(s.full, set()).add(int(sympy.sympify(s.tile).subs(p.sizes)))
    sizes = {str(k): v for k, v in p.sizes.items()}
    for axis, ts in tiles.items():
        step = math.lcm(*ts)
        sizes[str(axis)] = -(-p.sizes[axis] // step) * step
    q = nc.plan(p.diagram, sizes)
    assert not q.masked
    return q


@pytest.mark.parametrize("name", sorted(PLANS))
def test_the_columns_give_the_peak_the_runner_measures(name):
    """``p.peak`` (liveness over the columns, at full tiles) is what the runner measures, at ``p``'s sizes where
    no tile is masked; where one is, at sizes its tiles divide (a masked edge tile holds less)."""
    p = PLANS[name]
    counted = measured_peak(p)
    if any(p.masked):
        assert all(counted[lvl] <= n for lvl, n in p.peak.items())
        assert p.peak == measured_peak(dividing(p))
    else:
        assert p.peak == counted
    # nothing is live after the program but its outputs, and every Free frees a value live before it
    assert columns(p.body, p.inputs)[-1] == frozenset(p.outputs)
    assert live_in(p.body, set(p.outputs)) == set(p.inputs)


@pytest.mark.parametrize("name", sorted(PLANS))
def test_the_frees_are_recomputed_from_the_statements(name):
    p = PLANS[name]
    stripped = rebuild(p.body, lambda s: () if isinstance(s, Free) else s)
    assert stripped != p.body and with_frees(stripped, set(p.outputs)) == p.body


# ---------------------------------------------------------------------------------------------- Combine
def test_a_fold_as_a_product_then_a_combine_runs_and_prints():
    """``o += ·(a, b)`` ⟶ ``p ← ·(a, b); o ⊕= p``: the same output, FLOPs and transfers; the C kernel too."""
    p = PLANS["matmul g s"]
    variables = dict(p.variable_map)

    def unfold(s):
        if not (isinstance(s, Compute) and s.accumulate):
            return s
        out = variables[s.outs[0].var]
        variables["part"] = dataclasses.replace(out, name="part", role="temp")
        return (dataclasses.replace(s, outs=(Ref("part"),), accumulate=None),
                Combine(s.outs[0], Ref("part"), s.accumulate, "fold"))
    body = with_frees(rebuild(rebuild(p.body, lambda s: () if isinstance(s, Free) else s), unfold),
                      set(p.outputs))
    q = Plan(p.diagram, p.sizes, body, variables, p.inputs, p.outputs)
    A, B = np.random.default_rng(1).normal(size=(4, 6)), np.random.default_rng(2).normal(size=(6, 5))
    (y, n), (_, m) = q.run(A, B), p.run(A, B)
    np.testing.assert_allclose(y, A @ B, rtol=1e-12)
    assert (n.flops, n.transfers) == (m.flops, m.transfers)
    assert n.peak == q.peak == m.peak      # the product's tile lives beside the state, not beside both tiles
    assert any({"sum0", "part"} <= col and "x1_1" not in col for col in columns(q.body, q.inputs))
    assert "sum0 += part" in q.pseudocode()
    c = nc.codegen.c(q)
    assert "// sum0 += part" in c.source
    np.testing.assert_allclose(c(A, B), A @ B, rtol=1e-5)


def test_a_combine_with_an_unknown_monoid_is_refused_when_run():
    p = PLANS["matmul s"]
    body = rebuild(p.body, lambda s: dataclasses.replace(s, monoid="prod") if isinstance(s, Combine) else
                   (s, Combine(s.outs[0], s.outs[0], "prod")) if isinstance(s, Compute) else s)
    q = Plan(p.diagram, p.sizes, body, p.variable_map, p.inputs, p.outputs)
    with pytest.raises(PlanError, match=r"Combine into 'sum0': no monoid 'prod'; monoids are \['max', 'min', 'sum'\]"):
        q.run(np.ones((4, 6)), np.ones((6, 5)))
