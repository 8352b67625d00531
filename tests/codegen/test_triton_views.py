"""Views between kernels in Triton (issue tview-36): a derived plan leaves each rename (relabelled axes, heads split or
merged by name) between the kernels that make and read its value; the launcher binds the view to its input's buffer
(:mod:`napkin_cat.codegen.triton.views`): no copy, no launch.

Routes: the Triton kernel under the interpreter = the *un-derived* diagram evaluated by numpy in float64 = the plan's
runner; the launches the interpreter runs (the launcher's lines, counted) = the plan's Kernel statements
= :func:`~napkin_cat.algorithms.kernels.kernels_of` of the derived diagram, and its programs = the launches' blocks.
The mutant: a view bound to its input's values in another order (the heads axis first: wrong strides) fails.
"""
from __future__ import annotations

import functools
import sys
from pathlib import Path

import numpy as np
import pytest

import napkin_cat as nc
from napkin_cat.algorithms.kernels import kernels_of
from napkin_cat.codegen.launch import launches
from napkin_cat.codegen.triton import TritonKernel
from napkin_cat.library.sizing import Sized
from napkin_cat.plan.ir import Kernel, walk

from kernels_common import inputs, needs_triton

sys.path.insert(0, str(Path(__file__).parents[1] / "search"))
from test_axes_apart import stack  # noqa: E402

pytestmark = needs_triton
L = nc.library
BLOCK = {"n": 8, "e": 8, "h": 2, "d": 4, "f": 16}


def mha_split_merged():
    """x: n×e → heads split by the projections (h n d), keys and values renamed onto ``m``, multi-head attention,
    heads merged by the output projection (n e)."""
    k = Sized({})
    b = nc.Builder(k.types("n e, e h d, e h d, e h d, h d e"))
    X, Wq, Wk, Wv, Wo = b.inputs
    Q, K, V = (b(k.einsum("n e, e h d -> h n d"), X, W) for W in (Wq, Wk, Wv))
    K, V = (b(k.rename("h n d -> h m d"), T) for T in (K, V))
    n = nc.Axis("n", None).size
    att = nc.rename_axis(nc.rename_axis(L.multi_head_attention(), "q", "n", n), "x", "m", n)
    return b.build(b(k.einsum("h n d, h d e -> n e"), b(att, Q, K, V), Wo))


CASES = {   # name → (diagram, sizes, memory)
    "block-128": (L.transformer_block, BLOCK, 128),
    "block-64": (L.transformer_block, BLOCK, 64),
    "mlp-stack": (lambda: stack(["gelu"] * 3, own=False), {"n": 8, "e": 8, "f": 16}, 256),
    "mha": (mha_split_merged, {"n": 8, "e": 8, "h": 2, "d": 4}, 128),
}


@functools.cache
def derived(name):
    make, sizes, memory = CASES[name]
    f = make()
    r = nc.derive(f, memory=memory, sizes=sizes)
    tiles = {str(k): int(v) for k, v in (r.optimum.exact_sizes or r.optimum.sizes).items() if str(k) not in sizes}
    return f, r.diagram, nc.plan(r.diagram, {**sizes, **tiles}), sizes


def launch_lines(k) -> tuple[list, list]:
    """Line numbers (from 1) of the launcher's kernel calls and of each kernel's first body line (run once per
    program, whether the kernel reads ``tl.program_id`` or is a single program without a grid)."""
    rows = k.source.splitlines()
    calls = [i + 1 for i, t in enumerate(rows) if t.lstrip().startswith(("kernel[", "nc_kernel")) and "](" in t]
    programs = [i + 2 for i, t in enumerate(rows) if t.startswith("def nc_kernel")]
    return calls, programs


@pytest.mark.parametrize("name", sorted(CASES))
def test_views_between_kernels_are_aliases(name):
    f, d, p, sizes = derived(name)
    k = nc.codegen.triton(p)
    views = k.printer.aliases
    assert views, f"{name}: the derived plan has no view between kernels (the case tests nothing)"
    for view, src in views.items():
        assert f"{view} = {src}" in k.source and f"{view} = torch.empty" not in k.source
    xs = inputs(p, seed=7)
    y, counts = k.executions(*xs)
    want = nc.evaluate(f, *(x.astype(np.float64) for x in xs), sizes=sizes)
    np.testing.assert_allclose(np.asarray(y), want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(np.asarray(p(*xs)), want, rtol=1e-4, atol=1e-4)
    calls, programs = launch_lines(k)
    kernels = sum(isinstance(s, Kernel) for s in walk(p.body))
    assert sum(counts.get(n, 0) for n in calls) == kernels == len(kernels_of(d))
    assert sum(counts.get(n, 0) for n in programs) == sum(launch.blocks for launch in launches(p)
                                                          if any(isinstance(s, Kernel) for s in launch.body))


def test_renames_inside_one_kernel():
    """At a memory that holds the block (fusion joins kernels across a rename view whose readers it holds, fuse-35)
    the renames run inside the one kernel: no alias is left, one launch, values = numpy float64 = the runner."""
    f = L.transformer_block()
    r = nc.derive(f, memory=1024, sizes=BLOCK)
    tiles = {str(k): int(v) for k, v in (r.optimum.exact_sizes or r.optimum.sizes).items() if str(k) not in BLOCK}
    p = nc.plan(r.diagram, {**BLOCK, **tiles})
    k = nc.codegen.triton(p)
    assert not k.printer.aliases and len(kernels_of(r.diagram)) == 1
    assert "rename(" in k.source, "the renames are inside the kernel"
    xs = inputs(p, seed=7)
    y, counts = k.executions(*xs)
    want = nc.evaluate(f, *(x.astype(np.float64) for x in xs), sizes=BLOCK)
    np.testing.assert_allclose(np.asarray(y), want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(np.asarray(p(*xs)), want, rtol=1e-4, atol=1e-4)
    calls, _ = launch_lines(k)
    assert sum(counts.get(n, 0) for n in calls) == 1


def test_a_view_with_the_wrong_strides_is_caught():
    """The mutant: the first view bound to its input with its first two axes exchanged (the buffer's element i is
    no longer the input's element i) gives another block."""
    f, d, p, sizes = derived("block-128")
    k = nc.codegen.triton(p)
    view, src = next(iter(k.printer.aliases.items()))
    line = f"{view} = {src}   # view of {src}, no copy"
    assert line in k.source
    wrong = k.source.replace(line, f"{view} = {src}.transpose(0, 1).contiguous().reshape({src}.shape)")
    xs = inputs(p, seed=7)
    good = np.asarray(k(*xs))
    bad = np.asarray(TritonKernel(p, wrong, k.printer)(*xs))
    want = nc.evaluate(f, *(x.astype(np.float64) for x in xs), sizes=sizes)
    np.testing.assert_allclose(good, want, rtol=1e-4, atol=1e-4)
    assert not np.allclose(bad, want, rtol=1e-2, atol=1e-2)


def test_the_derived_block_compiles_for_sm_90():
    _, _, p, _ = derived("block-128")
    k = nc.codegen.triton(p)
    report = k.compile(90)
    assert set(report["kernels"]) == set(k.printer.signature()) and len(report["kernels"]) >= 2


def test_a_computation_outside_a_kernel_is_named_with_what_is_legal():
    p = nc.plan(L.matmul(), {"a": 4, "b": 4, "c": 4})
    with pytest.raises(nc.codegen.CodegenError, match=r"contract.*outside any kernel.*views \(renames\)"):
        nc.codegen.triton(p)


def test_a_view_whose_buffer_is_written_again_is_refused():
    """No alias where a later statement writes the view's name again (the alias would see the later values):
    the derived block with its first view repeated at the end."""
    from napkin_cat.plan.program import Plan
    _, _, p, _ = derived("block-128")
    view = next(s for launch in launches(p) if not any(isinstance(s, Kernel) for s in launch.body)
                for s in launch.body)
    again = Plan(p.diagram, p.sizes, p.body + (view,), p.variable_map, p.inputs, p.outputs)
    with pytest.raises(nc.codegen.CodegenError, match=rf"cannot alias the view rename \(rename: {view.outs[0].var} "
                                                      rf"← {view.ins[0].var}\).*written again after the view"):
        nc.codegen.triton(again)
