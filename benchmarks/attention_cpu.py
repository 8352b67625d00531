"""The fast runner on the derived FlashAttention plan vs torch's scaled_dot_product_attention and naive numpy.

fp32 end to end, one thread everywhere (run with ``OPENBLAS_NUM_THREADS=1``), medians of ``--repeats``
runs, peak memory of one call by tracemalloc (numpy's allocations) for the plan and naive numpy
(torch allocates outside tracemalloc's view; the memory target is against naive numpy).

The tiles are not hand-picked: ``g_q`` comes from ``nc.optimal`` on the plan's cost at a CPU cache level
(L2 = 1 MiB of fp32 values); among stream sizes that leave the optimal transfers ``H*`` unchanged
(the paper's stream size 1 is one of them), the largest is taken, since a longer slice means fewer
trips and transfers do not depend on it.

    OPENBLAS_NUM_THREADS=1 python benchmarks/attention_cpu.py [--sizes 1024 4096 8192] [--repeats 5]
"""
from __future__ import annotations

import argparse
import gc
import statistics
import time
import tracemalloc

import numpy as np

import napkin_cat as nc
from rewrites import flash_attention

L2_VALUES = 2 ** 20 // 4   # 1 MiB of fp32


def tiles(diagram, n: int, d: int) -> dict:
    """``g_q`` from nc.optimal; the largest stream size that keeps ``H*`` (divisors of n, up to the group)."""
    c = nc.cost(diagram)
    sizes = {"q": n, "x": n, "d": d}
    best = nc.optimal(c, memory=L2_VALUES, level=1, sizes=sizes, streams=1)
    chosen = best
    for s in sorted((k for k in range(1, n + 1) if n % k == 0)):
        try:
            o = nc.optimal(c, memory=L2_VALUES, level=1, sizes=sizes, streams=s)
        except nc.MemoryLimitError:
            break
        if o.H == best.H:
            chosen = o
    return {str(k): int(v) for k, v in chosen.sizes.items()}


def naive(Q, K, V):
    S = (Q @ K.T) * np.float32(Q.shape[1] ** -0.5)
    S = np.exp(S - S.max(axis=1, keepdims=True))
    return (S / S.sum(axis=1, keepdims=True)) @ V


def median_time(fn, repeats):
    times = []
    for _ in range(repeats):
        gc.collect()
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def traced_peak(fn) -> int:
    gc.collect()
    tracemalloc.start()
    fn()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[1024, 4096, 8192])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--d", type=int, default=64)
    args = ap.parse_args()
    import torch
    torch.set_num_threads(1)
    diagram = flash_attention(nc.library.attention()).diagram
    rows = []
    for n in args.sizes:
        t = tiles(diagram, n, args.d)
        p = nc.plan(diagram, {"q": n, "x": n, "d": args.d, **t})
        rng = np.random.default_rng(0)
        Q, K, V = (rng.standard_normal((n, args.d), dtype=np.float32) for _ in range(3))
        tq, tk, tv = (torch.from_numpy(a) for a in (Q, K, V))
        y = p(Q, K, V)
        ref = torch.nn.functional.scaled_dot_product_attention(tq[None], tk[None], tv[None])[0].numpy()
        err = float(np.max(np.abs(y - ref)))
        with torch.no_grad():
            t_torch = median_time(lambda: torch.nn.functional.scaled_dot_product_attention(
                tq[None], tk[None], tv[None]), args.repeats)
        t_plan = median_time(lambda: p(Q, K, V), args.repeats)
        t_naive = median_time(lambda: naive(Q, K, V), args.repeats)
        m_plan = traced_peak(lambda: p(Q, K, V))
        m_naive = traced_peak(lambda: naive(Q, K, V))
        rows.append((n, t, t_plan, t_torch, t_naive, m_plan, m_naive, err))
    print("| N | tiles (nc.optimal, L2 = 1 MiB) | plan ms | torch ms | naive ms | plan / torch | "
          "plan MiB | naive MiB | plan / naive memory | max error vs torch |")
    print("| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    mib = 2 ** 20
    for n, t, tp, tt, tn, mp, mn, err in rows:
        print(f"| {n} | g_q={t['g_q']}, s_x={t['s_x']} | {tp * 1e3:.0f} | {tt * 1e3:.0f} | {tn * 1e3:.0f} | "
              f"{tp / tt:.2f} | {mp / mib:.1f} | {mn / mib:.1f} | {mp / mn:.3f} | {err:.1e} |")


if __name__ == "__main__":
    main()
