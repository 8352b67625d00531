"""The derived FlashAttention plan as a generated C kernel (and run by the fast plan runner) vs torch's
``scaled_dot_product_attention`` on its fastest CPU path, fp32, one and two threads.

**torch's paths.**  On 3-D inputs ``(B, N, d)`` torch's CPU dispatcher takes the unfused math path
(``aten::_scaled_dot_product_attention_math``: the full ``N × N`` scores), on 4-D inputs ``(B, H, N, d)`` its
fused flash kernel (``aten::_scaled_dot_product_flash_attention_for_cpu``), about 3× faster.  The baseline is
the 4-D call; the script prints which aten kernel each call ran (torch's profiler) and, for one head, times
the 3-D call beside it.

**Tiles** come from the CPU model (``nc.hardware.load_cpu``, ``--cpu``, default ``epyc-zen4``): the C kernel
runs one block per thread with its arena in the core's L2, so ``cpu.tiles(...)`` takes ``nc.optimal`` at
the L2's capacity in fp32 values for the groups and the longest stream that keeps ``H*``, with at least as
many Grid blocks as the most threads asked for (see ``napkin_cat/hardware/cpu.py``).  The script prints
the model's caches and this machine's (sysfs).

**Timing.**  Each row times the C kernel and torch (4-D, and 3-D where asked) in alternation, ``--repeats``
rounds, medians; torch on as many threads as the kernel (``torch.set_num_threads``; the kernel's
``threads=``, OpenMP over its Grid blocks, one OpenBLAS thread inside a tile).  Run with
``OPENBLAS_NUM_THREADS=1``.  Compilation is cached and not timed.

    OPENBLAS_NUM_THREADS=1 python benchmarks/attention_cpu.py [--c-sizes 4096 8192] [--heads 1 8]
        [--threads 1 2] [--repeats 5] [--cpu epyc-zen4] [--sizes 1024 4096 8192] [--no-math]
"""
from __future__ import annotations

import argparse
import datetime
import gc
import statistics
import time
import tracemalloc

import numpy as np

import napkin_cat as nc
from rewrites import flash_attention


def algorithm(heads: int):
    """The derived FlashAttention diagram: one head, or ``heads`` heads woven in (inputs ``h × N × d``)."""
    return flash_attention(nc.library.attention() if heads == 1 else nc.library.multi_head_attention()).diagram


def tiles(diagram, cpu, sizes: dict, blocks: int = 1) -> dict:
    """The CPU model's tiles, with at least ``blocks`` Grid blocks (one per thread)."""
    return {str(k): int(v) for k, v in cpu.tiles(nc.cost(diagram), sizes, blocks=blocks).sizes.items()
            if str(k) not in sizes}


def torch_kernel(torch, *args) -> str:
    """The aten kernel that one ``scaled_dot_product_attention`` call on ``args`` runs (torch's profiler)."""
    from torch.profiler import ProfilerActivity, profile
    with torch.no_grad(), profile(activities=[ProfilerActivity.CPU]) as prof:
        torch.nn.functional.scaled_dot_product_attention(*args)
    names = [e.key for e in prof.key_averages() if e.key.startswith("aten::_scaled_dot_product")]
    return names[0] if names else "aten::scaled_dot_product_attention (no inner kernel recorded)"


def alternated(fns, repeats):
    """Each of ``fns`` run once, then timed ``repeats`` times in alternation (a busy machine's drift hits all
    alike): one list of seconds per function."""
    times = [[] for _ in fns]
    for fn in fns:
        fn()
    for _ in range(repeats):
        for fn, out in zip(fns, times):
            gc.collect()
            t = time.perf_counter()
            fn()
            out.append(time.perf_counter() - t)
    return times


def paired_medians(fns, repeats):
    """Medians of each of ``fns`` timed in alternation."""
    return [statistics.median(t) for t in alternated(fns, repeats)]


def c_kernel_table(args, torch, cpu):
    """The generated C kernel vs torch's fused kernel (4-D inputs), per heads × N × threads."""
    rows, paths = [], {}
    d = args.d
    for heads in args.heads:
        diagram = algorithm(heads)
        for n in args.c_sizes:
            sizes = {"q": n, "x": n, "d": d, **({"h": heads} if heads > 1 else {})}
            t = tiles(diagram, cpu, sizes, blocks=max(args.threads))
            p = nc.plan(diagram, {**sizes, **t})
            k = nc.codegen.c(p)
            rng = np.random.default_rng(0)
            shape = (n, d) if heads == 1 else (heads, n, d)
            Q, K, V = (rng.standard_normal(shape, dtype=np.float32) for _ in range(3))
            fused = [torch.from_numpy(a).reshape(1, heads, n, d) for a in (Q, K, V)]
            math = [torch.from_numpy(a).reshape(heads, n, d) for a in (Q, K, V)]
            paths.setdefault("4-D (1, H, N, d)", torch_kernel(torch, *(a[..., :64, :] for a in fused)))
            paths.setdefault("3-D (H, N, d)", torch_kernel(torch, *(a[..., :64, :] for a in math)))
            out = np.empty(shape, np.float32)
            k(Q, K, V, out=[out])   # compile (cached) outside the timing
            sdpa = torch.nn.functional.scaled_dot_product_attention
            for threads in args.threads:
                torch.set_num_threads(threads)
                with torch.no_grad():
                    ref = sdpa(*fused).reshape(shape).numpy()
                    fns = [lambda: k(Q, K, V, threads=threads, out=[out]), lambda: sdpa(*fused)]
                    if args.math and heads == 1:
                        fns.append(lambda: sdpa(*math))
                    times = paired_medians(fns, args.repeats)
                err = float(np.max(np.abs(k(Q, K, V, threads=threads) - ref)))
                rows.append((heads, n, threads, t, times[0], times[1], times[2] if len(times) > 2 else None, err))
            torch.set_num_threads(1)
    for shape, name in paths.items():
        print(f"torch path for {shape} inputs: {name}")
    print()
    tile_names = " ".join(f"{k}" for k in rows[0][3]) if rows else ""
    print(f"| heads | N | threads | tiles ({tile_names}) | C kernel ms | torch fused (4-D) ms | C / torch fused | "
          "torch math (3-D) ms | max error vs torch |")
    print("| ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: |")
    for heads, n, threads, t, tc, tf, tm, err in rows:
        tiles_text = ", ".join(f"{k}={v}" for k, v in t.items())
        math_text = f"{tm * 1e3:.0f}" if tm is not None else "—"
        print(f"| {heads} | {n} | {threads} | {tiles_text} | {tc * 1e3:.1f} | {tf * 1e3:.1f} | {tc / tf:.2f} | "
              f"{math_text} | {err:.1e} |")
    print()


def naive(Q, K, V):
    S = (Q @ K.T) * np.float32(Q.shape[1] ** -0.5)
    S = np.exp(S - S.max(axis=1, keepdims=True))
    return (S / S.sum(axis=1, keepdims=True)) @ V


def traced_peak(fn) -> int:
    gc.collect()
    tracemalloc.start()
    fn()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak


def runner_table(args, torch, cpu):
    """The fast plan runner (numpy, one thread) vs torch's fused kernel (one thread) and naive numpy; memory by
    tracemalloc (numpy's allocations: torch allocates outside its view)."""
    diagram = algorithm(1)
    rows = []
    torch.set_num_threads(1)
    for n in args.sizes:
        sizes = {"q": n, "x": n, "d": args.d}
        t = tiles(diagram, cpu, sizes)
        p = nc.plan(diagram, {**sizes, **t})
        rng = np.random.default_rng(0)
        Q, K, V = (rng.standard_normal((n, args.d), dtype=np.float32) for _ in range(3))
        fused = [torch.from_numpy(a)[None, None] for a in (Q, K, V)]
        with torch.no_grad():
            ref = torch.nn.functional.scaled_dot_product_attention(*fused)[0, 0].numpy()
            t_plan, t_torch, t_naive = paired_medians(
                [lambda: p(Q, K, V), lambda: torch.nn.functional.scaled_dot_product_attention(*fused),
                 lambda: naive(Q, K, V)], args.repeats)
        err = float(np.max(np.abs(p(Q, K, V) - ref)))
        rows.append((n, t, t_plan, t_torch, t_naive, traced_peak(lambda: p(Q, K, V)),
                     traced_peak(lambda: naive(Q, K, V)), err))
    print("| N | tiles | plan runner ms | torch fused ms | naive numpy ms | plan / torch | plan MiB | naive MiB | "
          "plan / naive memory | max error vs torch |")
    print("| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    mib = 2 ** 20
    for n, t, tp, tt, tn, mp, mn, err in rows:
        print(f"| {n} | g_q={t['g_q']}, s_x={t['s_x']} | {tp * 1e3:.0f} | {tt * 1e3:.0f} | {tn * 1e3:.0f} | "
              f"{tp / tt:.2f} | {mp / mib:.1f} | {mn / mib:.1f} | {mp / mn:.3f} | {err:.1e} |")



def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--c-sizes", type=int, nargs="*", default=[4096, 8192])
    ap.add_argument("--heads", type=int, nargs="+", default=[1, 8])
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--d", type=int, default=64)
    ap.add_argument("--cpu", default="epyc-zen4", help="a shipped CPU model's name or a .toml file")
    ap.add_argument("--sizes", type=int, nargs="*", default=[1024, 4096, 8192],
                    help="sizes for the plan runner's table (none: skip it)")
    ap.add_argument("--no-math", dest="math", action="store_false", help="do not time torch's 3-D (math) path")
    args = ap.parse_args()
    import torch
    cpu = nc.hardware.load_cpu(args.cpu)
    here = nc.hardware.this_cpu()
    kib = 1024
    print(f"{datetime.date.today()}, {nc.hardware.this_cpu_name()}, torch {torch.__version__}, numpy {np.__version__}, "
          f"BLAS in the C kernel: {'cblas_sgemm' if _blas() else 'none (loops)'}")
    print(f"CPU model {cpu.name}: L1d {cpu.l1d // kib} KiB, L2 {cpu.l2 // kib} KiB, L3 {cpu.l3 // kib} KiB; level-1 "
          f"memory {cpu.memory(1, 'fp32')} fp32 values.  This machine (sysfs): " +
          (f"L1d {here['l1d'] // kib} KiB, L2 {here['l2'] // kib} KiB, L3 {here['l3'] // kib} KiB" if here else
           "not readable"))
    print()
    if args.c_sizes:
        c_kernel_table(args, torch, cpu)
    if args.sizes:
        runner_table(args, torch, cpu)


def _blas() -> bool:
    from napkin_cat.codegen.c import blas_available
    return blas_available()


if __name__ == "__main__":
    main()
