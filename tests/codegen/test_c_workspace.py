"""The C kernel's workspace (level-0 variables that are neither inputs nor outputs) is kept between runs: a run
after a run takes the set the first gave back, with the first run's values still in it, and computes the
runner's results; runs at once take sets of their own; release gives the free sets back."""
from __future__ import annotations

import threading

import numpy as np
import sympy

import napkin_cat as nc

from kernels_common import assert_close, inputs, needs_cc

pytestmark = needs_cc

SIZES = {"q": 24, "x": 40, "d": 8}


def unfused_attention():
    """Attention as written (no fusion): its scores and probabilities pass through main memory."""
    p = nc.plan(nc.unfused(nc.library.attention()), SIZES)
    return p, nc.codegen.c(p)


def test_the_workspace_is_the_level0_intermediates_and_is_reused_with_stale_values():
    p, k = unfused_attention()
    # the intermediates at level 0, by the plan's variables: the workspace holds each, 4 bytes a value
    work = [v for v in p.variables if v.level == 0 and v.role not in ("input", "output")]
    assert work and k.workspaces.sizes == tuple(
        4 * int(np.prod([int(sympy.sympify(e).subs(p.sizes)) for _, e in v.shape])) for v in work)
    first, second = inputs(p, seed=1), inputs(p, seed=2, scale=3.0)
    assert_close(k(*first), p(*first))
    (held,) = k.workspaces.free
    # the second run finds the first run's values in its workspace, and must not read them
    assert_close(k(*second), p(*second))
    assert k.workspaces.free == [held] and k.workspaces.bytes >= sum(k.workspaces.sizes)
    k.workspaces.release()
    assert k.workspaces.free == [] and k.workspaces.bytes == 0
    assert_close(k(*first), p(*first))


def test_runs_at_once_from_threads_each_take_their_own_set():
    p, k = unfused_attention()
    xs = [inputs(p, seed=10 + i, scale=1.0 + i) for i in range(4)]
    want = [p(*x) for x in xs]
    k(*xs[0])                                   # compiled before the threads start
    got = [None] * len(xs)
    start = threading.Barrier(len(xs))

    def run(i):
        start.wait()
        for _ in range(5):
            got[i] = k(*xs[i])

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(xs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for g, w in zip(got, want):
        assert_close(g, w)
    assert 1 <= len(k.workspaces.free) <= len(xs)
