"""Document masking in the C kernel: the data's block mask (none trips skipped, full ones unmasked) vs the same
kernel run dense (every trip, masked), fp32, one thread.

One sequence of ``N`` tokens packed with documents of random lengths (uniform in ``[lo, hi]``, chosen so that
about a fifth of the ``g_q × s_x`` blocks hold an allowed pair); FlashAttention over it (Grid over queries,
stream over keys) at the tiles given.  Each round times the kernel with the block mask (its tables made by
``k.block_mask``, derived from the plan's own mask, then read at the kernel's tiles: the pre-pass, timed apart; each
call then checks its stamp, a digest of the ids) and without, in alternation;
prints medians and spreads (min–max) over ``--repeats`` rounds, the block density, the runner's counted
transfers and FLOPs with and without the block mask (at ``--count-size``, a smaller N: the runner is numpy),
and the commit.

    OPENBLAS_NUM_THREADS=1 python benchmarks/block_mask_cpu.py [--size 4096] [--tiles 64 64] [--repeats 7]
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import time

import numpy as np

import napkin_cat as nc
from napkin_cat.algorithms.blockmask import FULL, NONE


def documents(rng, n, lo, hi):
    lengths = []
    while sum(lengths) < n:
        lengths.append(int(rng.integers(lo, hi + 1)))
    return np.repeat(np.arange(len(lengths)), lengths)[:n].astype(np.int32)


def flash():
    return nc.group(nc.stream(nc.kernel(nc.library.document_attention()), "x", "s_x"), "q", "g_q")


def timed(fn, repeats):
    out = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=4096)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--tiles", type=int, nargs=2, default=(64, 64))
    ap.add_argument("--documents", type=int, nargs=2, default=None, help="lengths lo hi (N/10 … 3N/10)")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--count-size", type=int, default=512)
    a = ap.parse_args()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    N, D, (g, s) = a.size, a.dim, a.tiles
    lo, hi = a.documents or (N // 10, 3 * N // 10)
    rng = np.random.default_rng(0)
    seg = documents(rng, N, lo, hi)
    Q, K, V = (rng.standard_normal((N, D), dtype=np.float32) for _ in range(3))
    p = nc.plan(flash(), {"q": N, "x": N, "d": D, "g_q": g, "s_x": s})
    k = nc.codegen.c(p)
    t0 = time.perf_counter()
    bm = k.block_mask(Q, K, V, seg, seg)          # derived from the plan's own mask (nc.plan.condition), stamped
    t1 = time.perf_counter()
    (tables,) = k.block_arguments((Q, K, V, seg, seg), bm)
    t2 = time.perf_counter()
    density = float(np.count_nonzero(tables != NONE) / tables.size)
    full = float(np.count_nonzero(tables == FULL) / tables.size)
    masked_out = k(Q, K, V, seg, seg, block_mask=bm)
    dense_out = k(Q, K, V, seg, seg)
    assert np.allclose(masked_out, dense_out, rtol=1e-4, atol=1e-5)
    skip, dense = [], []
    for _ in range(a.repeats):
        skip += timed(lambda: k(Q, K, V, seg, seg, block_mask=bm, threads=1), 1)   # the stamp checked per call
        dense += timed(lambda: k(Q, K, V, seg, seg, threads=1), 1)
    print(f"commit {commit}; N = {N}, d = {D}, g_q = {g}, s_x = {s}; {seg.max() + 1} documents of {lo}…{hi} tokens")
    print(f"blocks: {tables.size}, density (blocks run) {density:.3f}, full {full:.3f}")
    print(f"pre-pass: k.block_mask {1e3 * (t1 - t0):.1f} ms, tables at the kernel's tiles {1e3 * (t2 - t1):.1f} ms")
    for name, ts in (("block mask", skip), ("dense", dense)):
        print(f"{name:>10}: median {1e3 * statistics.median(ts):8.2f} ms  (min {1e3 * min(ts):.2f}, max "
              f"{1e3 * max(ts):.2f}, {len(ts)} runs)")
    print(f"speed-up (medians): {statistics.median(dense) / statistics.median(skip):.2f}x")
    n = a.count_size
    seg_n = documents(rng, n, max(1, lo * n // N), max(1, hi * n // N))
    xs = [rng.standard_normal((n, D)) for _ in range(3)]
    gn, sn = max(1, g * n // N), max(1, s * n // N)      # the tiles scaled with the documents
    pn = nc.plan(flash(), {"q": n, "x": n, "d": D, "g_q": gn, "s_x": sn})
    bmn = nc.block_mask(nc.library.document_mask(q=n, x=n), seg_n, seg_n)
    _, cm = pn.run(*xs, seg_n, seg_n, block_mask=bmn)
    _, cd = pn.run(*xs, seg_n, seg_n)
    print(f"runner at N = {n}: transfers {cm.transfers[1]} of {cd.transfers[1]} "
          f"({cm.transfers[1] / cd.transfers[1]:.3f}),"
          f" tensor FLOPs {cm.flops['tensor'] / cd.flops['tensor']:.3f} of dense; block density "
          f"{bmn.density({'q': gn, 'x': sn}):.3f} (tiles {gn} × {sn})")


if __name__ == "__main__":
    main()
