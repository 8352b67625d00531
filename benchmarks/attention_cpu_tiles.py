"""Which tiles make the C kernel fast: derive by the CPU time model vs by transfers vs the CPU model's heuristic, each
against torch's fastest CPU attention (issue 33 item 5).

Per mask (dense, causal) and N (q = x = N, d = 64, fp32, one head), the C kernel (``nc.codegen.c``) of

* ``time``: ``nc.derive(f, sizes=, hardware=CPU, threads=T)`` (:mod:`napkin_cat.hardware.cputime`);
* ``L2``: ``nc.derive(f, memory=CPU's L2 in fp32 values, sizes=)`` at its own tiles (fewest transfers);
* ``model``: the same algorithm at ``cpu.tiles(...)`` (the groups of H*, the longest stream that keeps it, T blocks);

and torch's ``scaled_dot_product_attention`` on 4-D input ``(1, 1, N, d)`` (``is_causal`` for causal: its fused
flash kernel for CPU), all on ``T`` threads, timed in alternation, ``--repeats`` rounds: median and spread
(min-max).  The time model's predicted time is printed beside the measured.  Compilation is not timed; the
derivations are (seconds, once).

    OPENBLAS_NUM_THREADS=1 PYTHONPATH=. python benchmarks/attention_cpu_tiles.py [--sizes 1024 4096] [--threads 2]
        [--repeats 5] [--cpu epyc-zen3-dev]
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import time

import numpy as np
import torch

import napkin_cat as nc
from attention_cpu import alternated   # the same alternated timing as the CPU benchmark (run from benchmarks/)

MASKS = {"dense": nc.library.attention, "causal": nc.library.causal_attention}


def commit() -> str:
    """The commit measured (``+ uncommitted changes`` when the tree differs from it), or why it is unknown."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                               text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError) as e:
        return f"unknown ({e})"
    return head.stdout.strip() + (" + uncommitted changes" if dirty else "")


def ints(tiles) -> dict:
    return {str(k): int(v) for k, v in tiles.items()}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1024, 4096])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--d", type=int, default=64)
    ap.add_argument("--cpu", default="epyc-zen3-dev")
    args = ap.parse_args(argv)
    cpu, T = nc.hardware.load_cpu(args.cpu), args.threads
    torch.set_num_threads(T)
    print(f"commit {commit()}; torch {torch.__version__}")
    print(f"CPU model {cpu.name} (L2 {cpu.l2} B: {cpu.memory(1)} fp32 values); this machine's sysfs caches: "
          f"{nc.hardware.this_cpu()}; threads {T}; repeats {args.repeats}")
    print()
    print("| mask | N | tiles by | g_q, s_x | derive s | C kernel ms (min-max) | predicted ms | / torch |")
    print("| --- | ---: | --- | --- | ---: | ---: | ---: | ---: |")
    for mask, make in MASKS.items():
        f = make()
        for n in args.sizes:
            sizes = {"q": n, "x": n, "d": args.d}
            t0 = time.perf_counter()
            by_time = nc.derive(f, sizes=sizes, hardware=cpu, threads=T)
            t1 = time.perf_counter()
            by_l2 = nc.derive(f, memory=cpu.memory(1), sizes=sizes)
            t2 = time.perf_counter()
            heuristic = cpu.tiles(nc.cost(by_l2.diagram), sizes, blocks=T)
            picks = [("time", by_time.diagram, ints(by_time.optimum.exact_sizes), t1 - t0),
                     ("L2", by_l2.diagram, ints(by_l2.optimum.exact_sizes), t2 - t1),
                     ("model", by_l2.diagram, {k: v for k, v in ints(heuristic.sizes).items() if k not in sizes},
                      None)]
            rng = np.random.default_rng(0)
            Q, K, V = (rng.standard_normal((n, args.d), dtype=np.float32) for _ in range(3))
            four = [torch.from_numpy(a).reshape(1, 1, n, args.d) for a in (Q, K, V)]
            kernels, outs = [], []
            for _, diagram, tiles, _ in picks:
                k = nc.codegen.c(nc.plan(diagram, {**sizes, **tiles}))
                out = np.empty((n, args.d), np.float32)
                k(Q, K, V, out=[out], threads=T)
                kernels.append(k)
                outs.append(out)
            causal = mask == "causal"
            with torch.no_grad():
                ref = torch.nn.functional.scaled_dot_product_attention(*four, is_causal=causal)[0, 0].numpy()
                for out, (label, *_), in zip(outs, picks):
                    err = float(np.max(np.abs(out - ref)))
                    assert err < 1e-3, (mask, n, label, err)
                fns = [(lambda k=k, out=out: k(Q, K, V, out=[out], threads=T)) for k, out in zip(kernels, outs)]
                fns.append(lambda: torch.nn.functional.scaled_dot_product_attention(*four, is_causal=causal))
                times = alternated(fns, args.repeats)
            ref_ms = statistics.median(times[-1]) * 1e3
            for (label, diagram, tiles, took), ts in zip(picks, times):
                med = statistics.median(ts) * 1e3
                pred = nc.hardware.predict_cpu(diagram, cpu, {**sizes, **tiles}, threads=T).time * 1e3
                took_text = f"{took:.1f}" if took is not None else "—"
                print(f"| {mask} | {n} | {label} | {tiles.get('g_q')}, {tiles.get('s_x')} | {took_text} | "
                      f"{med:.1f} ({min(ts) * 1e3:.1f}-{max(ts) * 1e3:.1f}) | {pred:.1f} | {med / ref_ms:.2f} |")
            print(f"| {mask} | {n} | torch SDPA 4-D | — | — | {ref_ms:.1f} ({min(times[-1]) * 1e3:.1f}-"
                  f"{max(times[-1]) * 1e3:.1f}) | — | 1.00 |")


if __name__ == "__main__":
    main()
