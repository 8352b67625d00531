"""The lowering passes (napkin_cat.plan.lowering): a list of functions over one immutable value.

Each pass leaves the value it is given as it was; the placement is computed once and read by the later
passes; a plan after any prefix of the passes that ends a rewrite still computes what the two-level
plan computes; a missing tile is a typed error of the plan layer (configure() turns it into a hardware
one, a subclass of both).
"""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import napkin_cat as nc
from napkin_cat.hardware import HardwareError, configure, load_hierarchy
from napkin_cat.hardware.errors import ConfigurationError
from napkin_cat.plan.ir import Compute, Free, GridLoop, Kernel, Load, StreamLoop, walk, walk_scoped
from napkin_cat.plan.liveness import with_frees
from napkin_cat.plan.lowering import PASSES, Lowering, LoweringError, Options, Pass, lower
from napkin_cat.plan.lowering.buffers import in_a_stream_body
from napkin_cat.plan.lowering.state import frozen
from napkin_cat.plan.program import Plan
from napkin_cat.syntax.axis import symbol

HOPPER = load_hierarchy("hopper")
SIZES = {"q": 16, "x": 24, "d": 16, "g_q": 16, "s_x": 8, "u_x": 4}
UNITS = {"w_q": 8, "t_q": 2, "d'": 8, "d''": 4}
SPLITS = {"d": {"SMEM": "d'", "registers": "d''"}}


@pytest.fixture(scope="module")
def flash():
    from rewrites import flash_attention
    return nc.stream(flash_attention(nc.library.attention()).diagram, "x", "u_x")


@pytest.fixture(scope="module")
def base(flash):
    return nc.plan(flash, SIZES, accumulate=False)


def options(**more):
    return Options(splits=frozen({a: frozen(t) for a, t in SPLITS.items()}), buffers=2,
                   given=frozen({**SIZES, **UNITS}), **more)


def arrays(seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(16, 16)), rng.normal(size=(24, 16)), rng.normal(size=(24, 16))


def runs(state) -> Plan:
    """The state's statements as a plan with its Frees (every pass but ``place`` leaves one that runs)."""
    body = with_frees(tuple(s for s in state.body if not isinstance(s, Free)), set(state.base.outputs))
    return Plan(state.base.diagram, dict(state.sizes), body, dict(state.variables), state.base.inputs,
                state.base.outputs)


def test_the_passes_are_data_run_in_order(base):
    assert [p.name for p in PASSES] == ["strip", "hoist", "place", "recolour", "buffer", "free"]
    seen = []
    spy = tuple(Pass(p.name, lambda s, p=p: (seen.append(p.name), p.run(s))[1]) for p in PASSES)
    out = lower(base, HOPPER, options(), passes=spy)
    assert seen == [p.name for p in PASSES] and out.plan is not None


def test_no_pass_changes_the_value_it_is_given(base):
    state = Lowering.start(base, HOPPER, options())
    for p in PASSES:
        before = (state.body, dict(state.variables), dict(state.sizes), state.placements, dict(state.what),
                  state.tail)
        after = p.run(state)
        assert (state.body, dict(state.variables), dict(state.sizes), state.placements, dict(state.what),
                state.tail) == before, p.name
        assert after is not state
        state = after
    with pytest.raises(TypeError):
        state.variables["x0"] = None      # the tables are read-only views
    with pytest.raises(dataclasses.FrozenInstanceError):
        state.body = ()


def test_every_rewriting_pass_keeps_what_the_plan_computes(base):
    Q, K, V = arrays()
    want = base(Q, K, V)
    state = Lowering.start(base, HOPPER, options())
    for p in PASSES:
        state = p.run(state)
        if p.name != "place":
            np.testing.assert_allclose(runs(state)(Q, K, V), want, rtol=1e-12, atol=1e-12, err_msg=p.name)
    _, counted = state.plan.run(Q, K, V)
    assert counted.flops == base.run(Q, K, V)[1].flops       # moved between levels, never changed


def test_the_placement_is_one_frozen_value_per_kernel(base):
    state = PASSES[2].run(PASSES[1].run(PASSES[0].run(Lowering.start(base, HOPPER, options()))))
    (placement,) = state.placements
    with pytest.raises(dataclasses.FrozenInstanceError):
        placement.axis = "x"
    with pytest.raises(TypeError):
        placement.home["o0"] = None
    levels = {s.kind: placement.level[s].name for s in walk(state.body) if isinstance(s, Compute)}
    assert levels == {"contract": "tensor-core", "softmax_unscaled": "registers", "fma": "registers",
                      "div": "registers"}
    assert [a.level for a in state.assignments] == [placement.level[s].name for s in walk(state.body)
                                                   if isinstance(s, Compute)]
    assert placement.home_of("o0").name == "registers" and not placement.per_unit("o0")
    (S,) = [s.outs[0].var for s in walk(state.body) if isinstance(s, Compute) and s.kind == "contract"
            and "x" in s.box.cod.inside[0].names]
    assert placement.per_unit(S) and placement.needs_pipe(S) and placement.reader_levels(S) == {"registers"}
    assert placement.home_of("x1_1") is placement.block                  # a tile a transfer makes


def test_hoisting_moves_the_maps_that_open_a_sub_loop(base):
    hoisted = PASSES[1].run(PASSES[0].run(Lowering.start(base, HOPPER, options())))
    kept = PASSES[1].run(PASSES[0].run(Lowering.start(base, HOPPER, options(hoist=False))))
    inner = [s for s in walk(hoisted.body) if isinstance(s, StreamLoop)][-1]
    assert [s.kind for s in walk(inner.body) if isinstance(s, Compute)] == ["softmax_unscaled", "contract", "fma"]
    assert kept.body == PASSES[0].run(Lowering.start(base, HOPPER, options())).body
    moved = [n for n in hoisted.variables if hoisted.variables[n].shape != base.variable_map[n].shape]
    assert moved and all(dict(hoisted.variables[n].shape)["x"] == symbol("s_x") for n in moved)


def test_buffers_go_to_the_tiles_loaded_on_every_trip(base):
    one = lower(base, HOPPER, options())
    assert {v.name: v.buffers for v in one.plan.variables if v.role == "tile" and v.level == 1} == \
        {"x0_1": 1, "x1_1": 2, "x2_1": 2}
    loads = [(s.dst.var, in_a_stream_body(scope)) for s, scope in walk_scoped(one.plan.body)
             if isinstance(s, Load) and one.plan.variable_map[s.src.var].level == 0]
    assert loads == [("x0_1", False), ("x1_1", True), ("x2_1", True)]


def test_lowered_kernels_sit_under_the_block_kernel(base):
    state = lower(base, HOPPER, options())
    kernels = [k.level for k in walk(state.plan.body) if isinstance(k, Kernel)]
    assert kernels[0] == 1 and set(kernels[1:]) == {2, 3}
    splits = [g.origin for g in walk(state.plan.body) if isinstance(g, GridLoop) and g.origin.startswith("split")]
    assert splits == ["split d (SMEM)", "split d (registers)", "split d (registers)"]


def test_a_missing_tile_is_a_lowering_error_and_a_configuration_error(base, flash):
    given = {k: v for k, v in {**SIZES, **UNITS}.items() if k != "t_q"}
    with pytest.raises(LoweringError, match=r"needs the size of t_q \(the thread tile of q\)"):
        lower(base, HOPPER, dataclasses.replace(options(), given=frozen(given)))
    with pytest.raises(ConfigurationError, match=r"needs the size of t_q") as e:
        configure(flash, "hopper", given, splits=SPLITS)
    assert isinstance(e.value, HardwareError) and isinstance(e.value, LoweringError)


def test_a_kernel_below_the_block_level_is_refused():
    p = nc.plan(nc.kernel(nc.library.matmul(), level=2), {"a": 2, "b": 2, "c": 2})
    with pytest.raises(LoweringError, match=r"configure starts from kernels at the block level 1 \(SMEM\); this plan "
                                            r"has a kernel at level 2"):
        lower(p, HOPPER, Options())
