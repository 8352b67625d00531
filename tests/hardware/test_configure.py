"""configure(): an algorithm recoloured onto a toy hierarchy's levels; what it computes (numpy), the laws it keeps
(each computation on a level that offers its pipelines, transfers between parent and child levels), other
algorithms and axis names, and bad input."""
from __future__ import annotations

import importlib.resources

import numpy as np
import pytest

import napkin_cat as nc
from napkin_cat.hardware import HardwareError, configure, load_hierarchy
from napkin_cat.hardware.toy import pipelines_of
from napkin_cat.plan.ir import Compute, GridLoop, Kernel, Load, Store, StreamLoop, walk

from typed_attention import VARIANTS, typed_attention

PAPER = {"w_q": 128, "t_q": 1, "s_x": 64, "d": 128, "d'": 32, "d''": 8, "g_q": 256}
SPLITS = {"d": {"SMEM": "d'", "registers": "d''"}}


def flash(diagram=None):
    from rewrites import flash_attention
    return flash_attention(diagram if diagram is not None else typed_attention(*VARIANTS["paper"])).diagram


def kernels(stmts, level=None):
    """(statement, level of the kernel it runs in) for every simple statement."""
    for s in stmts:
        if isinstance(s, Kernel):
            yield from kernels(s.body, s.level)
        elif isinstance(s, GridLoop):
            yield from kernels(s.body, level)
        elif isinstance(s, StreamLoop):
            for b in (s.head, s.body, s.tail):
                yield from kernels(b, level)
        else:
            yield s, level


def check_laws(c):
    h = c.hierarchy
    variables = c.plan.variable_map
    for s, level in kernels(c.plan.body):
        if isinstance(s, Compute):
            lv = h.level(level)
            assert set(pipelines_of(s.box)) <= set(lv.offers), (s.box.name, lv.name)
            assert {a.level for a in (*s.box.dom.inside, *s.box.cod.inside)} == {level}
        if isinstance(s, (Load, Store)):
            src, dst = h.level(variables[s.src.var].level), h.level(variables[s.dst.var].level)
            assert src.parent == dst.name or dst.parent == src.name, (s, src.name, dst.name)


def test_the_configured_plan_computes_attention():
    # small tiles (several warpgroups of several threads with two rows each, three trips of two sub-loop trips
    # each, both splits) keep the instrumented run short; the paper's sizes run the same
    # statements on larger tiles
    small = {"w_q": 8, "t_q": 2, "g_q": 16, "s_x": 8, "u_x": 4, "x": 24, "d": 16, "d'": 8,
             "d''": 4}
    c = configure(flash(), "hopper", small, splits=SPLITS, subloops={"x": "u_x"})
    rng = np.random.default_rng(1)
    Q, K, V = rng.normal(size=(16, 16)), rng.normal(size=(24, 16)), rng.normal(size=(24, 16))
    out, counted = c.plan.run(Q, K, V)
    S = Q @ K.T / np.sqrt(16)
    P = np.exp(S - S.max(axis=1, keepdims=True))
    np.testing.assert_allclose(out, (P / P.sum(axis=1, keepdims=True)) @ V, rtol=1e-12, atol=1e-12)
    _, base = c.base.run(Q, K, V)
    assert counted.flops == base.flops              # recolouring moves work, it does not change it
    assert set(counted.transfers) == {1, 2, 3} and set(base.transfers) == {1}
    # the tensor cores read Q, K, V and A in place (wgmma takes SMEM operands): they load nothing
    assert not [s for s, lvl in kernels(c.plan.body) if isinstance(s, Load) and lvl == 3]
    check_laws(c)
    # the sub-loop keeps the accumulator: Q·Kᵀ runs once per s_x trip, before it (S is w_q×s_x, P′ t_q×u_x)
    loops = [s for s in walk(c.plan.body) if isinstance(s, StreamLoop)]
    assert [str(lp.tile) for lp in loops] == ["s_x", "u_x"]
    assert not any(isinstance(s, Compute) and s.kind == "contract" and s.box.cod.inside[0].names == ("q", "x")
                   for s in walk(loops[-1].body))
    sizes = {str(c.variable(n).size) for n in c.steady}
    assert {"s_x*w_q", "g_q*s_x", "t_q*u_x", "g_q*u_x"} <= sizes


def test_recolouring_follows_what_each_level_offers():
    c = configure(flash(), "hopper", PAPER, splits=SPLITS)
    assert [(a.box, a.level) for a in c.assignments] == [("·", "tensor-core"), ("SoftMax₁", "registers"),
                                                         ("·", "tensor-core"), ("fma", "registers"),
                                                         ("div", "registers")]
    assert {(p.source, p.targets) for p in c.pipes} == {("tensor-core", ("registers",)),
                                                         ("registers", ("tensor-core",)), ("registers", ("SMEM",))}
    assert c.partition == {"block": "g_q", "warpgroup": "w_q", "thread": "t_q"}
    assert c.tail and all(c.variable(n).name not in c.steady for n in c.tail)
    text = str(c)
    assert "kernel @3:" in text and "kernel @2:" in text and "# group d" in text


def test_other_axis_names_and_another_algorithm():
    att = nc.rename_axis(nc.rename_axis(nc.rename_axis(typed_attention(*VARIANTS["paper"]), "q", "u"), "x", "v"),
                         "d", "e")
    c = configure(flash(att), "hopper", {"w_u": 128, "t_u": 1, "s_v": 64, "e": 128, "g_u": 384, "e1": 32, "e2": 8},
                  splits={"e": {"SMEM": "e1", "registers": "e2"}})
    t = c.table("h100-sxm5")
    assert c.partition == {"block": "g_u", "warpgroup": "w_u", "thread": "t_u"}
    assert (float(t.pool("registers").M_WG) / 1024, t.pool("SMEM").M_WG // 1024, t.n) == (74.75, 56, 3)
    # matmul, grouped along two axes: the first is the scaling axis; its state accumulates on the tensor cores
    mm = nc.group(nc.group(nc.stream(nc.library.matmul(), "b", "s_b"), "a", "g_a"), "c", "g_c")
    m = configure(mm, "hopper", {"g_a": 256, "g_c": 64, "s_b": 32, "w_a": 128, "t_a": 1, "b": 96, "c": 128})
    A, B = np.random.default_rng(2).normal(size=(256, 96)), np.random.default_rng(3).normal(size=(96, 128))
    np.testing.assert_allclose(m.plan(A, B), A @ B, rtol=1e-12, atol=1e-12)
    check_laws(m)
    (state,) = [n for n in m.steady if m.variable(n).role == "state"]
    assert m.variable(state).level == 3 and m.table("h100-sxm5").row(state).per_wg == 128 * 64 * 4


def test_ampere_loads_the_tensor_cores_operands_into_registers():
    c = configure(flash(typed_attention(*VARIANTS["fp16"])), "ampere", {**PAPER, "w_q": 32, "g_q": 64},
                  splits=SPLITS)
    check_laws(c)
    loads = [(c.variable(s.dst.var).level, str(c.variable(s.dst.var).size))
             for s, lvl in kernels(c.plan.body) if isinstance(s, Load) and lvl == 3]
    assert set(loads) == {(3, "d*w_q"), (3, "d*s_x"), (3, "s_x*w_q"), (3, "d'*s_x")}   # Q, K, A, V fragments
    rng = np.random.default_rng(4)
    Q, K, V = rng.normal(size=(64, 128)), rng.normal(size=(128, 128)), rng.normal(size=(128, 128))
    np.testing.assert_allclose(c.plan(Q, K, V), c.base(Q, K, V), rtol=1e-12)


def test_bad_configurations_are_named():
    f = flash()
    with pytest.raises(HardwareError, match=r"needs the size of t_q \(the thread tile of q\)"):
        configure(f, "hopper", {k: v for k, v in PAPER.items() if k != "t_q"}, splits=SPLITS)
    with pytest.raises(HardwareError, match=r"size given for 's_y', which neither the algorithm"):
        configure(f, "hopper", {**PAPER, "s_y": 3}, splits=SPLITS)
    with pytest.raises(HardwareError, match=r"splits\['d'\] must map level names to tile names"):
        configure(f, "hopper", PAPER, splits={"d": "d'"})
    with pytest.raises(nc.LevelError, match=r"level 'L2' is not in the toy hierarchy 'hopper'"):
        configure(f, "hopper", PAPER, splits={"d": {"L2": "d'"}})
    with pytest.raises(HardwareError, match=r"stream_buffers = 0 must be a positive integer"):
        configure(f, "hopper", PAPER, splits=SPLITS, stream_buffers=0)
    with pytest.raises(HardwareError, match=r"scaling axis 'x' is not grouped around the kernel; its grouped axes "
                                            r"are \['q'\]"):
        configure(f, "hopper", PAPER, splits=SPLITS, axis="x")
    with pytest.raises(HardwareError, match=r"configure takes an algorithm diagram or its plan, got str"):
        configure("flash", "hopper", PAPER)


def test_a_hierarchy_without_a_level_for_an_operation_is_refused(tmp_path):
    assert load_hierarchy("hopper").path
    text = (importlib.resources.files("napkin_cat.hardware") / "hierarchies" / "hopper.toml").read_text()
    no_sfu = tmp_path / "no-sfu.toml"
    no_sfu.write_text(text.replace('offers = ["general", "special"]', 'offers = ["general"]'))
    with pytest.raises(nc.LevelError, match=r"box 'SoftMax₁' uses the pipeline\(s\) \['special', 'general'\], which "
                                            r"no level below SMEM of 'hopper' offers together"):
        configure(flash(), str(no_sfu), PAPER, splits=SPLITS)
