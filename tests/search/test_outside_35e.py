"""Issue 35 from outside: a split stream inside a grid over an axis its softmax state lacks.

``nc.derive(attention, memory=24, sizes={q: 1, x: 64, d: 8}, min_blocks=2)`` answers with two kernels: S = Q Kᵀ
in a grid over x, then softmax(S) V in a grid over d whose x stream is split in ``p_x`` parts (FlashDecoding's
partials o, m, l, then a merge).  The law: a plan's transfers are what its kernels move, so the runner's count
(``nc.plan(...).run``), the cost functor's (``nc.cost``) and the count from the maths agree.  The maths (one
tile of q, ``t = d / g_d`` tiles of d, ``x / g_x`` tiles of x):

* kernel 1 reads Q once per x tile and K once, writes S: ``(x/g_x)·q·d + x·d + q·x``;
* kernel 2 reads S and V once per d tile, each part writes its partial o (``q·g_d``) and its state m, l
  (``2·q``), the merge reads them back and writes the output: ``t·(q·x + x·g_d) + 2·p_x·t·(q·g_d + 2·q) + q·d``.

Found by ``benchmarks/bench_outside_35e.py`` (``h100 mqa-decode``: 8,504,832 derived and costed, 8,537,344 run).
At fa410b4 the cost functor and ``derive`` gave the maths' count (1264 here) and the runner counted
``2·(g_d − 1)·q`` more per part and d tile (1292): the plan's combine ran one block per row of the d group and
each row loaded the state m, l, which has no d axis, again.  The combine now runs by rows only of the axes every
state has (``plan.partials``); the maths checks the count that all three now give.
"""
import numpy as np

import napkin_cat as nc


def _maths(s):
    q, x, d, gx, gd, p = s["q"], s["x"], s["d"], s["g_x"], s["g_d"], s["p_x"]
    t = d // gd
    first = (x // gx) * q * d + x * d + q * x
    second = t * (q * x + x * gd) + 2 * p * t * (q * gd + 2 * q) + q * d
    return first + second


def test_split_in_a_grid_over_d_runner_equals_cost_and_maths():
    f = nc.library.attention()
    sizes = {"q": 1, "x": 64, "d": 8}
    r = nc.derive(f, memory=24, sizes=sizes, min_blocks=2)
    at = {**sizes, **{str(k): int(v) for k, v in r.optimum.sizes.items() if str(k) not in sizes}}
    assert at.get("p_x", 1) > 1 and "g_d" in at, f"the answer is no longer a split in a grid over d: {at}"
    rng = np.random.default_rng(0)
    xs = [rng.normal(size=(1, 8)), rng.normal(size=(64, 8)), rng.normal(size=(64, 8))]
    out, ran = nc.plan(r.diagram, at).run(*xs)
    assert nc.equivalent(f, r.diagram, sizes=at)
    counted = nc.cost(r.diagram, sizes=at).H[1]
    assert ran.transfers[1] == counted == r.H == _maths(at), \
        f"runner {ran.transfers[1]}, cost {counted}, derive {r.H}; the maths with the state read once: {_maths(at)}"
