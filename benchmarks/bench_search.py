"""The derivation search (``nc.derive``): time per curve, against the fixed script it replaces.

Run with ``OPENBLAS_NUM_THREADS=1 python benchmarks/bench_search.py [--runs R]``.

Rows (medians of ``--runs``):

* **numeric attention curve**: q = x = 4096, d = 128, M = 2¹⁰ … 2²⁰ (11 memories), the table of the issue;
* **symbolic attention**: the ``Piecewise`` in M with its breakpoint;
* **numeric matmul curve**: 1024³ at the same 11 memories;
* **transformer block** (numeric, 2 memories): a large diagram (capped kernels, grown by fusion).

Each is timed three ways: ``process`` (a fresh interpreter: the first call, every cache empty; the import is
not timed), ``search-cold`` (the search's cache of costed kernels cleared before each run; the cost layer's
own caches stay warm) and ``warm`` (the cache kept: a repeated query, e.g. another range of memories).
The baseline is what the fixed script costs for the same question: ``rewrites.flash_attention`` (or
``tiled_matmul``) once, then ``nc.optimal``'s integer search at each memory (one algorithm, no search).
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import napkin_cat as nc  # noqa: E402
from napkin_cat.search.context import KERNELS  # noqa: E402
from rewrites import flash_attention, tiled_matmul  # noqa: E402

POWERS = [2 ** k for k in range(10, 21)]
ATT = {"q": 4096, "x": 4096, "d": 128}
MM = {"a": 1024, "b": 1024, "c": 1024}
TB = {"n": 512, "e": 256, "h": 4, "d": 64, "f": 1024}

CASES = {
    "numeric attention curve": ("nc.library.attention()", "memory=POWERS, sizes=ATT"),
    "symbolic attention": ("nc.library.attention()", "memory='M'"),
    "numeric matmul curve": ("nc.library.matmul()", "memory=POWERS, sizes=MM"),
    "transformer block (2 memories)": ("nc.library.transformer_block()", "memory=[2 ** 12, 2 ** 16], sizes=TB"),
}


def median(fn, runs: int, before=None) -> float:
    times = []
    for _ in range(runs):
        if before:
            before()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def in_process(build: str, args: str) -> float:
    """The first call in a fresh interpreter (import not timed)."""
    code = ("import time, napkin_cat as nc\n"
            f"from benchmarks.bench_search import POWERS, ATT, MM, TB\n"
            f"f = {build}\n"
            "t0 = time.perf_counter()\n"
            f"nc.derive(f, {args})\n"
            "print(time.perf_counter() - t0)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                         env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    return float(out.stdout.strip().splitlines()[-1])


def baseline(script, function, sizes) -> float:
    algorithm = script(function).diagram
    c = nc.cost(algorithm)
    for m in POWERS:
        try:
            nc.optimal(c, memory=m, sizes=sizes)
        except nc.MemoryLimitError:
            pass


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args(argv)
    print(f"{'case':34} {'process s':>10} {'search-cold s':>14} {'warm s':>8}")
    for name, (build, call) in CASES.items():
        f = eval(build)
        first = in_process(build, call)
        fn = eval(f"lambda: nc.derive(f, {call})", {**globals(), "f": f})
        runs = args.runs if "transformer" not in name else max(1, args.runs // 2)
        cold = median(fn, runs, before=KERNELS.clear)
        warm = median(fn, runs)
        print(f"{name:34} {first:10.3f} {cold:14.3f} {warm:8.3f}")
    att, mm = nc.library.attention(), nc.library.matmul()
    b_att = median(lambda: baseline(flash_attention, att, ATT), args.runs)
    b_mm = median(lambda: baseline(tiled_matmul, mm, MM), args.runs)
    print(f"baseline (fixed script + nc.optimal at 11 memories): attention {b_att:.3f} s, matmul {b_mm:.3f} s")


if __name__ == "__main__":
    main()
