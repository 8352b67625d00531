"""Calibrate a CPU time model (``napkin_cat/hardware/cpu.py``, format 2): what one core of this machine does per
second, measured with the C kernel's own compiler flags, BLAS and ``nc_exp``.

* ``[compute] contraction``: ``cblas_sgemm`` (OpenBLAS, one thread: the C kernel runs one BLAS thread inside a
  tile) at shapes whose smallest dimension ``s`` is 1, 2, 4, …, 256 and whose other two are 256, the small one in
  each place (``m``, ``n`` or ``k``), on operands that stay in cache (the kernel's tiles sit in L2): GFLOP/s
  (``2 m n k`` per call), the median of the three placements per ``s``;
* ``[compute] special``: ``nc_exp`` (the kernel's polynomial) over a row, ``y = exp(x - m)`` summed as SoftMax's
  loop does: exps per second;
* ``[compute] general``: a row scaled and folded into a running maximum (``y = a x``, ``m = max(m, y)``): two
  ALU operations per value, operations per second;
* ``[compute] contraction_call``: what one ``cblas_sgemm`` call costs beyond its FLOPs: the intercept of a call's
  time against its FLOPs between two products whose smallest dimension is 64, ``64×64×64`` and ``256×256×64``
  (packing and dispatch, which the table's shapes, the other dimensions at 256, hide): seconds per call;
* ``[bandwidth] l3``, ``dram``: one core copying 64 KiB tiles (``memcpy``, as the kernel loads a tile into its
  arena) out of an array of 8 MiB (in L3) and of 512 MiB (in DRAM), bytes per second.

Beside the table, in the JSON and the printout only (the model does not read it): ``cblas_sgemm`` at shapes whose
two smallest dimensions are ``s ≤ t`` (each of 1, 2, 4, …, 256) and whose third is 256, every placement of the three
(``contraction_gflops_by_two_smallest``).  On the Zen 4 guest (2026-12-04,
``benchmarks/results/cpu_calibration-zen4-vm-2026-12-04-pairs.json``) ``256×16×64`` ran at 105-111 GFLOP/s, where the
backward's ``1024×16×64`` products (``B`` transposed, ``benchmarks/cpu_terms.py``) ran at 72-82: a product's two
small dimensions in cache do not explain what the kernel's products lose.  So the script also times the backward's
own product forms (:data:`KERNEL_FORMS`), ``B`` as stored and transposed (``contraction_gflops_of_kernel_forms``).

``special`` and ``general`` are written as scalar loops whose sum and maximum each wait on the previous value (no
``-ffast-math``: gcc keeps their order).  The C kernel's loops run vectorised: its sums in lanes
(``napkin_cat/codegen/c/rows.py``: ``NC_LANES`` partial results, one vector, added after the loop), its element-wise
maps as gcc vectorises them; the script times the same two loops written in lanes beside them
(``special_lanes_gflops``, ``general_lanes_gflops``, in the JSON and the printout, not in the TOML block: the model
does not read them).  On a Zen 4 guest (2026-12-04,
``benchmarks/results/cpu_calibration-zen4-vm-2026-12-04-lanes.json``) the lanes ran 3.6× (special: 4.23 against 1.17
G/s) and 9.2× (general: 33.1 against 3.61 G/s) as fast as the scalar loops: the model's special and general terms
charge the kernel's vectorised loops at a latency bound (``benchmarks/README.md``, the C backward's section).

Each number is the median of ``--repeats`` timings of at least 20 ms; the spread (min-max) is kept.  The results
(JSON: the machine named by its CPU model, sysfs caches, core count, host and date; each measurement; the TOML block
to paste into a CPU model file) go to ``--out``.

    OPENBLAS_NUM_THREADS=1 PYTHONPATH=. python benchmarks/calibrate_cpu.py [--repeats 5]
        [--out benchmarks/results/cpu_calibration.json]
"""
from __future__ import annotations

import argparse
import ctypes
import datetime
import itertools
import json
import os
import platform
import statistics
import subprocess
import tempfile
from pathlib import Path

from napkin_cat.codegen.c.openmp import EXP, FLAGS
from napkin_cat.codegen.c.rows import LANES, PRELUDE as ROWS_PRELUDE
from napkin_cat.hardware import this_cpu

SMALL = (1, 2, 4, 8, 16, 32, 64, 128, 256)
OTHER = 256
#: (m, n, k) of the attention backward's products (``benchmarks/cpu_terms.py``), each timed with B as stored and
#: transposed (``contraction_gflops_of_kernel_forms``: in the JSON and printout, not read by the model)
KERNEL_FORMS = ((1024, 16, 64), (256, 16, 64), (128, 16, 64), (1024, 64, 16))
#: the two products whose times' intercept against their FLOPs is one call's cost (the same smallest dimension)
CALL_SHAPES = ((64, 64, 64), (256, 256, 64))

SOURCE = r"""
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cblas.h>
%(exp)s

static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }

/* seconds per call of cblas_sgemm (row-major, A m×k; B k×n, or stored n×k and read transposed where bt, as the C
   kernel calls S = Q Kᵀ), repeated for at least 20 ms */
double gemm_as(int m, int n, int k, int bt) {
    float *a = malloc(sizeof(float) * m * k), *b = malloc(sizeof(float) * k * n), *c = malloc(sizeof(float) * m * n);
    for (long i = 0; i < (long)m * k; i++) a[i] = 1e-3f * (i %% 7);
    for (long i = 0; i < (long)k * n; i++) b[i] = 1e-3f * (i %% 5);
    const CBLAS_TRANSPOSE tb = bt ? CblasTrans : CblasNoTrans;
    const int ldb = bt ? k : n;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, tb, m, n, k, 1.0f, a, k, b, ldb, 0.0f, c, n);
    long calls = 0; double t0 = now(), t;
    do { cblas_sgemm(CblasRowMajor, CblasNoTrans, tb, m, n, k, 1.0f, a, k, b, ldb, 1.0f, c, n); calls++; }
    while ((t = now() - t0) < 0.02);
    volatile float keep = c[0]; (void)keep;
    free(a); free(b); free(c);
    return t / calls;
}

double gemm(int m, int n, int k) { return gemm_as(m, n, k, 0); }
double gemm_bt(int m, int n, int k) { return gemm_as(m, n, k, 1); }

/* seconds per value of SoftMax's exp loop: z += exp(x - m) over a row of n */
double special(int n) {
    float *x = malloc(sizeof(float) * n);
    for (int i = 0; i < n; i++) x[i] = -1e-3f * (i %% 101);
    long values = 0; double t0 = now(), t; float z = 0.0f;
    do { for (int i = 0; i < n; i++) z += nc_exp(x[i] - 0.5f); values += n; } while ((t = now() - t0) < 0.02);
    volatile float keep = z; (void)keep;
    free(x);
    return t / values;
}

/* seconds per value of two ALU operations: y = a x, m = max(m, y) */
double general(int n) {
    float *x = malloc(sizeof(float) * n), *y = malloc(sizeof(float) * n);
    for (int i = 0; i < n; i++) x[i] = 1e-3f * (i %% 101);
    long values = 0; double t0 = now(), t; float m = -INFINITY;
    do {
        for (int i = 0; i < n; i++) { y[i] = 0.125f * x[i]; m = y[i] > m ? y[i] : m; }
        values += n; x[values %% n] += 1e-9f;
    } while ((t = now() - t0) < 0.02);
    volatile float keep = m + y[n - 1]; (void)keep;
    free(x); free(y);
    return t / values;
}

/* the same two loops as the C kernel prints them (napkin_cat/codegen/c/rows.py): the partial results in NC_LANES
   lanes, one vector, added after the loop (a sum by the kernel's own nc_sum_lanes); reported beside the rates above,
   not read by the model */
double special_lanes(int n) {
    float *x = malloc(sizeof(float) * n);
    for (int i = 0; i < n; i++) x[i] = -1e-3f * (i %% 101);
    long values = 0; double t0 = now(), t; float z = 0.0f;
    do {
        float zl[NC_LANES] = {0};
        for (int j0 = 0; j0 + NC_LANES <= n; j0 += NC_LANES)
            #pragma omp simd
            for (int l = 0; l < NC_LANES; l++) zl[l] += nc_exp(x[j0 + l] - 0.5f);
        z += nc_sum_lanes(zl);
        values += n;
    } while ((t = now() - t0) < 0.02);
    volatile float keep = z; (void)keep;
    free(x);
    return t / values;
}

double general_lanes(int n) {
    float *x = malloc(sizeof(float) * n), *y = malloc(sizeof(float) * n);
    for (int i = 0; i < n; i++) x[i] = 1e-3f * (i %% 101);
    long values = 0; double t0 = now(), t; float m = -INFINITY;
    do {
        float ml[NC_LANES];
        for (int l = 0; l < NC_LANES; l++) ml[l] = -INFINITY;
        for (int j0 = 0; j0 + NC_LANES <= n; j0 += NC_LANES)
            #pragma omp simd
            for (int l = 0; l < NC_LANES; l++) {
                float v = 0.125f * x[j0 + l];
                y[j0 + l] = v;
                ml[l] = v > ml[l] ? v : ml[l];
            }
        for (int l = 0; l < NC_LANES; l++) m = ml[l] > m ? ml[l] : m;
        values += n; x[values %% n] += 1e-9f;
    } while ((t = now() - t0) < 0.02);
    volatile float keep = m + y[n - 1]; (void)keep;
    free(x); free(y);
    return t / values;
}

/* seconds per byte of memcpy of `tile` bytes at a time out of an array of `total` bytes into one tile buffer */
double copy(long total, long tile) {
    char *src = malloc(total), *dst = malloc(tile);
    memset(src, 1, total);
    long bytes = 0; double t0 = now(), t; long at = 0;
    do {
        memcpy(dst, src + at, tile); bytes += tile; at += tile; if (at + tile > total) at = 0;
    } while ((t = now() - t0) < 0.02 || at != 0);
    volatile char keep = dst[tile - 1]; (void)keep;
    free(src); free(dst);
    return t / bytes;
}
"""


def build(folder: Path) -> ctypes.CDLL:
    """The calibration's C functions, compiled with the C kernel's flags and OpenBLAS."""
    src = folder / "calibrate.c"
    src.write_text(ROWS_PRELUDE.format(lanes=LANES, real="float") + SOURCE % {"exp": EXP["float"]})
    lib = folder / "calibrate.so"
    subprocess.run([os.environ.get("CC", "cc"), *FLAGS, str(src), "-o", str(lib), "-lopenblas", "-lm"], check=True)
    out = ctypes.CDLL(str(lib))
    for name, args in (("gemm", [ctypes.c_int] * 3), ("gemm_bt", [ctypes.c_int] * 3),
                       ("special", [ctypes.c_int]), ("general", [ctypes.c_int]),
                       ("special_lanes", [ctypes.c_int]), ("general_lanes", [ctypes.c_int]),
                       ("copy", [ctypes.c_long] * 2)):
        getattr(out, name).restype = ctypes.c_double
        getattr(out, name).argtypes = args
    return out


def timed(fn, repeats: int) -> dict:
    """Median and spread of ``repeats`` calls of ``fn`` (each a rate already)."""
    values = [fn() for _ in range(repeats)]
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def machine() -> dict:
    model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), platform.processor())
    return {"cpu": model, "cores": os.cpu_count(), "caches_sysfs": this_cpu(), "host": platform.node(),
            "kernel": platform.release(), "date": datetime.date.today().isoformat(),
            "openblas_num_threads": os.environ.get("OPENBLAS_NUM_THREADS")}


def call_cost(lib) -> float:
    """Microseconds one ``cblas_sgemm`` call costs beyond its FLOPs: with ``t = F / r + c`` for both
    :data:`CALL_SHAPES` (one rate ``r``: the same smallest dimension), ``c = (t₁ F₂ − t₂ F₁) / (F₂ − F₁)``."""
    (f1, t1), (f2, t2) = ((2 * m * n * k, lib.gemm(m, n, k)) for m, n, k in CALL_SHAPES)
    return max(0.0, (t1 * f2 - t2 * f1) / (f2 - f1)) * 1e6


def calibrate(repeats: int) -> dict:
    with tempfile.TemporaryDirectory() as folder:
        lib = build(Path(folder))
        lib_threads = getattr(lib, "openblas_set_num_threads", None)
        if lib_threads is not None:
            lib_threads(1)
        contraction = {}
        for s in SMALL:
            placements = {}
            for where, shape in (("m", (s, OTHER, OTHER)), ("n", (OTHER, s, OTHER)), ("k", (OTHER, OTHER, s))):
                flops = 2 * shape[0] * shape[1] * shape[2]
                placements[where] = timed(lambda: flops / lib.gemm(*shape) / 1e9, repeats)
            contraction[s] = {"placements": placements,
                              "gflops": statistics.median(p["median"] for p in placements.values())}
        pairs = {}
        for a, b in itertools.combinations_with_replacement(SMALL, 2):
            placements = {}
            for shape in sorted(set(itertools.permutations((a, b, OTHER)))):
                flops = 2 * shape[0] * shape[1] * shape[2]
                placements["x".join(map(str, shape))] = timed(lambda: flops / lib.gemm(*shape) / 1e9, repeats)
            pairs[f"{a}x{b}"] = {"placements": placements,
                                 "gflops": statistics.median(p["median"] for p in placements.values())}
        forms = {}
        for m, n, k in KERNEL_FORMS:
            for name, fn in (("plain", lib.gemm), ("b_transposed", lib.gemm_bt)):
                forms[f"{m}x{n}x{k} {name}"] = timed(lambda: 2 * m * n * k / fn(m, n, k) / 1e9, repeats)
        call = timed(lambda: call_cost(lib), repeats)
        special = timed(lambda: 1 / lib.special(4096) / 1e9, repeats)
        general = timed(lambda: 2 / lib.general(4096) / 1e9, repeats)
        lanes = {"special_lanes_gflops": timed(lambda: 1 / lib.special_lanes(4096) / 1e9, repeats),
                 "general_lanes_gflops": timed(lambda: 2 / lib.general_lanes(4096) / 1e9, repeats)}
        l3 = timed(lambda: 1 / lib.copy(8 << 20, 64 << 10) / 1e9, repeats)
        dram = timed(lambda: 1 / lib.copy(512 << 20, 64 << 10) / 1e9, repeats)
    return {"contraction_gflops_by_smallest_dimension": contraction, "contraction_gflops_by_two_smallest": pairs,
            "contraction_gflops_of_kernel_forms": forms,
            "contraction_call_us": call,
            "special_gflops": special,
            "general_gflops": general, "l3_copy_gbs": l3, "dram_copy_gbs": dram, **lanes}


def _call_line(us: float) -> str:
    """The model's ``contraction_call`` line for an intercept of ``us`` microseconds; where the fit found none (``0``:
    the small product ran at least as fast per FLOP as the large one, :func:`call_cost`'s ``max(0, c)``) a comment
    instead, since a model's quantities are positive and a model without the line charges no call cost (0).

    >>> _call_line(3.8), _call_line(0.0)
    ('contraction_call = "3.8 us"\\n', "# contraction_call left out (0): the fit's intercept was not positive\\n")
    """
    if us > 0:
        return f'contraction_call = "{us:.3g} us"\n'
    return "# contraction_call left out (0): the fit's intercept was not positive\n"


def toml_block(m: dict, where: str) -> str:
    """The ``[bandwidth]`` and ``[compute]`` tables of a format-2 CPU model (:mod:`napkin_cat.hardware.cpu`) from the
    measurements ``m`` (:func:`calibrate`'s), each rate the median of its repeats; ``where`` names the script."""
    c = m["contraction_gflops_by_smallest_dimension"]
    rows = ", ".join(f'"{s}" = "{c[s]["gflops"]:.3g} GFLOP/s"' for s in c)
    return (f'[bandwidth]      # one core copying 64 KiB tiles (memcpy); measured by {where}\n'
            f'l3 = "{m["l3_copy_gbs"]["median"]:.3g} GB/s"\n'
            f'dram = "{m["dram_copy_gbs"]["median"]:.3g} GB/s"\n\n'
            f'[compute]        # one core, fp32; measured by {where}\n'
            f'contraction = {{ {rows} }}\n'
            + _call_line(m["contraction_call_us"]["median"])
            + f'special = "{m["special_gflops"]["median"]:.3g} GFLOP/s"\n'
            f'general = "{m["general_gflops"]["median"]:.3g} GFLOP/s"\n')


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", default="benchmarks/results/cpu_calibration.json")
    args = ap.parse_args(argv)
    measured = calibrate(args.repeats)
    out = {"machine": machine(), "repeats": args.repeats, "measured": measured,
           "toml": toml_block(measured, "benchmarks/calibrate_cpu.py")}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(out["machine"], indent=1))
    c = measured["contraction_gflops_by_smallest_dimension"]
    print("| smallest dimension | GFLOP/s (median of placements) | m small | n small | k small |")
    print("| ---: | ---: | ---: | ---: | ---: |")
    for s, row in c.items():
        p = row["placements"]
        print(f"| {s} | {row['gflops']:.2f} | " + " | ".join(
            f"{p[w]['median']:.2f} ({p[w]['min']:.2f}-{p[w]['max']:.2f})" for w in "mnk") + " |")
    pairs = measured["contraction_gflops_by_two_smallest"]
    print("two smallest dimensions, GFLOP/s (median of placements; the third 256): " +
          ", ".join(f"{k} {v['gflops']:.1f}" for k, v in pairs.items()))
    print("the backward's product forms, GFLOP/s: " + ", ".join(
        f"{k} {v['median']:.1f}" for k, v in measured["contraction_gflops_of_kernel_forms"].items()))
    for key in ("contraction_call_us", "special_gflops", "general_gflops", "l3_copy_gbs", "dram_copy_gbs",
                "special_lanes_gflops", "general_lanes_gflops"):
        v = measured[key]
        print(f"{key}: {v['median']:.3g} ({v['min']:.3g}-{v['max']:.3g})")
    print()
    print(out["toml"])


if __name__ == "__main__":
    main()
