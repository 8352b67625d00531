"""The CUDA kernel's shared memory against what the instrumented run measured at the same tiles.

``k.compile()["smem"] == p.smem_bytes`` (tests/codegen/test_cuda.py) says that ptxas (and the driver) report the
arena the printer declared; both come from the plan's liveness (:mod:`napkin_cat.codegen.layout` packs the
values that :func:`napkin_cat.plan.liveness.columns` says are live at once), so that law checks the arena's
layout against the liveness, not the liveness itself.  The independent route is the numpy run
(:mod:`napkin_cat.plan.runner`): it holds the actual arrays and counts the values live at level 1 between any two
statements it executes, as its Frees release them.  Here, for plans of several shapes (one kernel and many, a
stream and a grid, a split stream, two passes), at tiles that divide their axes:

    measured peak (values) × bytes per value  ≤  the kernel's shared memory  (every live value has its bytes)

and, as each of these plans packs without a gap, equality: a liveness that declared a value dead while the run
still held it, an arena that dropped a value, or one that wasted bytes, fails.  The shared memory is ptxas's
where nvcc is installed, else the printer's declared arena (the same number, by tests/codegen/test_cuda.py)."""
from __future__ import annotations

import numpy as np
import pytest
import sympy

import napkin_cat as nc
from napkin_cat.syntax.dtype import as_dtype
from rewrites import flash_attention

from kernels_common import HAVE_NVCC


def _derived(f, memory, sizes, tiles=None, **options):
    """The plan of what derive returns, at its tiles or at ``tiles`` (the search may pick tiles of 1 where H ties)."""
    r = nc.derive(f, memory=memory, sizes=sizes, **options)
    return nc.plan(r.diagram, {**r.sizes, **{k: int(v) for k, v in r.regimes[0].tiles.items()}, **(tiles or {})})


PLANS = {
    "matmul, grid and stream": lambda: nc.plan(nc.group(nc.stream(nc.library.matmul(), "b", "s_b"), "a", "g_a"),
                                               {"a": 64, "b": 96, "c": 32, "s_b": 16, "g_a": 16}),
    "FlashAttention (by the rules)": lambda: nc.plan(flash_attention(nc.library.attention()).diagram,
                                                     {"q": 128, "x": 128, "d": 32, "g_q": 32, "s_x": 16}),
    "attention's gradient, unfused (11 kernels)": lambda: nc.plan(nc.unfused(nc.grad(nc.library.attention())),
                                                                  {"q": 16, "x": 24, "d": 8}),
    "layer norm (derived)": lambda: _derived(nc.library.layer_norm(), 2 ** 12, {"n": 64, "d": 256}),
    "softmax of long rows (derived: two passes)": lambda: _derived(nc.softmax("n v", over="v"), 2 ** 7,
                                                                   {"n": 8, "v": 512},
                                                                   {"g_n": 4, "s_v": 16, "g_n_2": 2, "s_v_2": 32}),
    "attention at decode (derived: a split stream)": lambda: _derived(nc.library.attention(), 2 ** 13,
                                                                      {"q": 1, "x": 1024, "d": 64}, min_blocks=8),
}


def _measured_bytes(p) -> tuple[int, int]:
    """``(peak values at level 1, bytes per value)`` of the instrumented run on random inputs; every value at level
    1 of these plans has one width (so the run's count of values is a count of bytes)."""
    widths = {as_dtype(v.dtype).bytes * v.buffers for v in p.variables if v.level == 1}
    assert len(widths) == 1, f"values of several widths at level 1: {widths}"
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal(tuple(int(sympy.sympify(e).subs(p.sizes)) for _, e in p.variable_map[n].shape))
          for n in p.inputs]
    _, counters = p.run(*xs)
    return counters.peak[1], widths.pop()


@pytest.mark.parametrize("name", sorted(PLANS))
def test_the_kernels_shared_memory_is_the_peak_the_run_measured(name):
    p = PLANS[name]()
    values, width = _measured_bytes(p)
    k = nc.codegen.cuda(p)
    declared = max(info["smem"] for info in k.printer.kernels.values())
    smem = k.compile(arch="sm_90")["smem"] if HAVE_NVCC else declared
    assert smem >= values * width, f"{name}: the kernel has {smem} B, the run held {values} values of {width} B"
    assert smem == values * width, f"{name}: the kernel has {smem} B, the run held at most {values * width} B"
    print(f"{name}: run {values} values × {width} B = {smem} B = {'ptxas' if HAVE_NVCC else 'declared'} arena")
