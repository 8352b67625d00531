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

**The backward** (issue 36 item 5), per mask (dense, causal) × N × threads, fp32, ``(1, H, N, d)``: the derived
backward ``nc.grad(attention(lse=True), wrt=[0, 1, 2], saved=True, aux=1)`` (the causal attention's for causal;
woven over the heads) derived for the CPU model (``--backward-cpu``, default ``this-cpu``: this machine's caches
with the shipped rates; ``nc.derive(g, sizes=, hardware=cpu, threads=T)``, by its predicted time) as the forward
``attention(lse=True)`` is, each printed by ``nc.codegen.c`` and the backward run on the forward kernel's own O
and log-sum-exp; against torch's backward of ``scaled_dot_product_attention`` on the same 4-D inputs (``is_causal``
for causal) with each SDPA backend that runs on the CPU (``sdpa_kernel``: flash and math here; the others'
refusals recorded), its forward and backward aten kernels named by torch's profiler.  Only the backward is
timed: ours one call of the backward kernel, torch's ``torch.autograd.grad(O, (q, k, v), dO, retain_graph=True)``
on a graph its forward recorded once.  **Gate** before timing: every path's dq, dk, dv (and our O and L) against
torch.autograd in float64 on the explicit formula ``softmax(q kᵀ/√d [+ causal −∞]) v``, head by head; error
``max |y − y₆₄| / max |y₆₄|``, a path over ``--tolerance`` (1e-4) is recorded and not timed.  **Threads pinned**:
``OMP_PROC_BIND=close`` and ``OMP_PLACES=cores`` (set before torch and the C kernels load OpenMP, unless given),
each OpenMP thread on its own core; the threads' affinities are read back from ``/proc`` and recorded.
The masks of one N, heads and threads are timed together: every path of every mask in one alternation, so a
mask's backward over dense attention's is measured under the same load as ours over torch's (rows timed apart, under
a load that moved from 7.7 to 2.8, once read causal 4,096 at 0.41× dense where paired it is 0.70×).
Results: ``benchmarks/results/attention_cpu_backward-<commit>.json`` and ``.md`` (rewritten after each N, heads and
threads): medians, quartiles, min–max of ``--repeats`` alternated rounds, ours / the fastest torch path (target
≤ 1.5×), the model's predicted time, and (``"paired"``) each mask's predicted and measured time and ratio to the
first mask's, the commit, the load averages.  ``--quick``: the backward only, N = 128, two heads,
derived by transfers at 2^14 values (depth 1: seconds), two rounds, torch's kernels named by its autograd graph
only (the profiler imports inductor): the pipeline and its gate, not a measurement.

    OPENBLAS_NUM_THREADS=1 python benchmarks/attention_cpu.py [--c-sizes 4096 8192] [--heads 1 8]
        [--threads 1 2] [--repeats 5] [--cpu epyc-zen4] [--sizes 1024 4096 8192] [--no-math]
        [--backward-sizes 1024 2048 4096] [--masks dense causal] [--backward-heads 8] [--backward-cpu this-cpu]
        [--derive time|transfers] [--tolerance 1e-4] [--note ...] [--out benchmarks/results] [--quick]
"""
from __future__ import annotations

import argparse
import datetime
import gc
import json
import os
import statistics
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))   # the rewrites package beside napkin_cat, from any working folder

import napkin_cat as nc  # noqa: E402
from rewrites import flash_attention  # noqa: E402


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


# ------------------------------------------------------------------------------------------------ the backward
#: the issue's target: our backward / the fastest torch backward (medians)
TARGET = 1.5
MASKS = {"dense": nc.library.attention, "causal": nc.library.causal_attention}
PIN = {"OMP_PROC_BIND": "close", "OMP_PLACES": "cores"}


def functions(mask: str, heads: int, d: int):
    """The forward ``attention(lse=True)`` (``mask``'s; woven over ``h`` for several heads) and its backward
    ``nc.grad(f, wrt=[0, 1, 2], saved=True, aux=1)``: ``(q, k, v, O, L, dO) → (dq, dk, dv)``."""
    f = MASKS[mask](lse=True, d=d)
    if heads > 1:
        f = nc.weave(f, "h", position=0)
    return f, nc.grad(f, [0, 1, 2], saved=True, aux=1)


def derived(function, name, cpu, sizes: dict, threads: int, args) -> dict:
    """``function`` derived for ``cpu`` at ``sizes`` on ``threads`` threads: by the model's predicted time
    (``nc.derive(f, sizes=, hardware=cpu, threads=)``), or by transfers at ``--memory`` (``--derive transfers``,
    its own tiles); read back from the store of derivations where an earlier run made it
    (``napkin_cat.torch.stored``, ``NAPKIN_DERIVATION_CACHE=off`` to search afresh).  Answers the algorithm, its
    tiles, the predicted seconds (time) and the seconds the derivation took; made once per ``name`` (what the
    function is), sizes and memory in this process, and per thread count where the derivation reads it (time)."""
    from napkin_cat.torch import stored
    by_time = args.derive == "time"
    memory = cpu if by_time else args.memory or cpu.memory(1)
    depth = 2 if by_time else args.depth
    memo = (name, tuple(sorted(sizes.items())), cpu.name if by_time else memory, depth, threads if by_time else None)
    if memo in DERIVED:
        return {**DERIVED[memo], "derive_s": 0.0, "recalled": "this process"}
    disk = stored.store()
    key = None if disk is None else disk.key(function, sizes, memory, depth=depth,
                                             **({"threads": threads, "value_bytes": 4} if by_time else {}))
    t = time.perf_counter()
    r = None if disk is None else disk.load(key, function)
    recalled = r is not None
    if r is None:
        r = nc.derive(function, sizes=sizes, hardware=cpu, threads=threads) if by_time else \
            nc.derive(function, memory=memory, sizes=sizes, depth=depth)
        if disk is not None:
            disk.save(key, r)
    chosen = r.optimum.exact_sizes if r.optimum.exact_sizes is not None else r.optimum.sizes
    DERIVED[memo] = {"diagram": r.diagram, "tiles": {str(k): int(v) for k, v in chosen.items() if str(k) not in sizes},
                     "predicted_s": r.prediction.time if by_time else None, "derive_s": time.perf_counter() - t,
                     "recalled": "stored" if recalled else False, "kernels": len(r.variant.kernels)}
    return DERIVED[memo]


#: the derivations this process made: (what, sizes, memory, depth, threads) → :func:`derived`'s answer
DERIVED: dict = {}


def reference(q, k, v, dO, causal: bool) -> dict:
    """O, L, dq, dk, dv in float64 by torch.autograd on ``softmax(q kᵀ/√d [+ −∞ above the diagonal]) v``, one
    head at a time (``(H, N, d)`` tensors; the N × N scores of one head only)."""
    import torch
    out = {name: [] for name in ("O", "L", "dq", "dk", "dv")}
    for h in range(q.shape[0]):
        qh, kh, vh = (x[h].double().requires_grad_() for x in (q, k, v))
        S = (qh @ kh.T) * qh.shape[-1] ** -0.5
        if causal:
            S = S.masked_fill(torch.ones_like(S, dtype=torch.bool).triu(1), float("-inf"))
        O = torch.softmax(S, dim=-1) @ vh
        O.backward(dO[h].double())
        for name, value in zip(out, (O, torch.logsumexp(S, dim=-1), qh.grad, kh.grad, vh.grad)):
            out[name].append(value.detach())
    return {name: torch.stack(values) for name, values in out.items()}


def relative_error(got, want) -> float:
    import torch
    got = torch.as_tensor(got).double().reshape(want.shape)
    return float((got - want).abs().max() / want.abs().max().clamp_min(1e-300))


def torch_backends(torch) -> dict:
    """SDPA's backends that run on the CPU, by name (``sdpa flash_attention``, ``sdpa math``), and the refusals of
    the others (name → torch's message), each tried once on a small input (ERROR aside)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    if not BACKENDS:
        x = torch.ones(1, 1, 8, 8, requires_grad=True)
        for name, b in SDPBackend.__members__.items():
            if name == "ERROR":
                continue
            try:
                with sdpa_kernel([b]):
                    torch.nn.functional.scaled_dot_product_attention(x, x, x).sum().backward()
                BACKENDS[f"sdpa {name.lower()}"] = b
            except RuntimeError as e:
                BACKENDS[f"sdpa {name.lower()}"] = str(e).splitlines()[0][:200]
    return dict(BACKENDS)


#: SDPA's backends on this CPU: name → the backend, or torch's refusal (:func:`torch_backends`)
BACKENDS: dict = {}
#: the aten kernels each SDPA backend ran, by (backend, causal): named on its first row by torch's profiler
KERNELS_RUN: dict = {}
#: the C kernels printed, by (mask, heads, sizes and tiles): [(algorithm, kernel)], shared by thread counts
PRINTED: dict = {}


def torch_backward(torch, name, backend, q, k, v, dO, causal: bool, profiled: bool = True):
    """SDPA's forward on ``backend`` recorded once; answers ``run()`` (its backward: dq, dk, dv), and what it ran:
    the aten kernels of the forward and the backward named by torch's profiler on the first call of (backend,
    causal) (the CPU's dispatch of fp32 4-D inputs reads neither N nor the threads), and the backward's steps (the
    autograd graph's nodes).  ``profiled=False``: the graph's nodes only (torch's profiler imports inductor:
    seconds, once)."""
    from torch.nn.attention import sdpa_kernel
    xs = [x.detach().requires_grad_() for x in (q, k, v)]
    with sdpa_kernel([backend]):
        O = torch.nn.functional.scaled_dot_product_attention(*xs, is_causal=causal)
    steps, todo = set(), [O.grad_fn]
    while todo:
        node = todo.pop()
        if node is not None and node.name() not in steps:
            steps.add(node.name())
            todo.extend(f for f, _ in node.next_functions)
    if profiled and (name, causal) not in KERNELS_RUN:
        from torch.profiler import ProfilerActivity, profile
        with sdpa_kernel([backend]), profile(activities=[ProfilerActivity.CPU]) as prof:
            torch.autograd.grad(torch.nn.functional.scaled_dot_product_attention(*xs, is_causal=causal), xs, dO)
        KERNELS_RUN[name, causal] = ", ".join(sorted({e.key for e in prof.key_averages() if e.key.startswith(
            ("aten::_scaled_dot_product", "aten::_flash_attention"))}, key=len))
    kernels = KERNELS_RUN.get((name, causal), "not profiled (--quick)")
    return (lambda: torch.autograd.grad(O, xs, dO, retain_graph=True)), \
        f"{kernels}; backward steps {', '.join(sorted(steps - {'torch::autograd::AccumulateGrad'}))}"


def printed(key, diagram, at: dict):
    """The C kernel of ``diagram`` at sizes and tiles ``at`` (``nc.codegen.c``), printed once per ``key`` and
    algorithm (the thread counts' derivations may agree)."""
    for other, kernel in PRINTED.setdefault(key, []):
        if other == diagram:
            return kernel
    kernel = nc.codegen.c(nc.plan(diagram, at))
    PRINTED[key].append((diagram, kernel))
    return kernel


def pinning() -> dict:
    """The CPUs each thread of this process may run on (``/proc/self/task/*/status``): CPU list → threads."""
    found: dict = {}
    for status in Path("/proc/self/task").glob("*/status"):
        try:
            line = next(x for x in status.read_text().splitlines() if x.startswith("Cpus_allowed_list"))
        except (OSError, StopIteration):
            continue
        cpus = line.split(":", 1)[1].strip()
        found[cpus] = found.get(cpus, 0) + 1
    return found


def spread(times) -> dict:
    ms = sorted(t * 1e3 for t in times)
    quartiles = statistics.quantiles(ms, n=4, method="inclusive") if len(ms) > 1 else [ms[0]] * 3
    return {"median_ms": statistics.median(ms), "q1_ms": quartiles[0], "q3_ms": quartiles[2], "min_ms": ms[0],
            "max_ms": ms[-1], "runs": len(ms)}


def backward_row(mask: str, n: int, heads: int, threads: int, cpu, args, torch) -> dict:
    """Derive, gate and time one configuration's backward: ours and each torch path that runs on the CPU."""
    row, runs = prepared_row(mask, n, heads, threads, cpu, args, torch)
    return timed_rows([(row, runs)], args.repeats)[0]


def prepared_row(mask: str, n: int, heads: int, threads: int, cpu, args, torch) -> tuple:
    """One configuration's backward derived and gated, not timed: ``(row, {path: function})`` (the paths that pass
    the gate)."""
    torch.set_num_threads(threads)
    d, causal = args.d, mask == "causal"
    f, g = functions(mask, heads, d)
    sizes = {"q": n, "x": n, **({"h": heads} if heads > 1 else {})}
    fwd, bwd = (derived(fn, (mask, heads, kind), cpu, sizes, threads, args)
                for fn, kind in ((f, "forward"), (g, "backward")))
    kf, kb = (printed((mask, heads, kind, tuple(sorted({**sizes, **r["tiles"]}.items()))), r["diagram"],
                      {**sizes, **r["tiles"]}) for kind, r in (("forward", fwd), ("backward", bwd)))
    gen = torch.Generator().manual_seed(args.seed)
    q, k, v, dO = (torch.randn(1, heads, n, d, generator=gen) for _ in range(4))
    shape = (n, d) if heads == 1 else (heads, n, d)
    Q, K, V, dOut = (x.reshape(shape).numpy() for x in (q, k, v, dO))
    want = reference(*(x[0] for x in (q, k, v, dO)), causal)
    O, L = kf(Q, K, V, threads=threads)             # the forward's saved O and log-sum-exp
    ours = "napkin C backward"
    row = {"mask": mask, "N": n, "heads": heads, "threads": threads, "d": d, "paths": {ours: {
        "torch_path": False, "forward_tiles": fwd["tiles"], "backward_tiles": bwd["tiles"],
        "backward_kernels": bwd["kernels"], "derive_s": {"forward": fwd["derive_s"], "backward": bwd["derive_s"]},
        "recalled": {"forward": fwd["recalled"], "backward": bwd["recalled"]},
        "predicted_ms": None if bwd["predicted_s"] is None else bwd["predicted_s"] * 1e3}}}
    runs = {ours: lambda: kb(Q, K, V, O, L, dOut, threads=threads)}
    errors = {"O": relative_error(O, want["O"]), "L": relative_error(L, want["L"])}
    errors.update({f"d{x}": relative_error(y, want[f"d{x}"]) for x, y in zip("qkv", runs[ours]())})
    row["paths"][ours]["error_vs_float64"] = errors
    for name, backend in torch_backends(torch).items():
        if isinstance(backend, str):
            row["paths"][name] = {"torch_path": True, "not_run": backend}
            continue
        run, kernel = torch_backward(torch, name, backend, q, k, v, dO, causal, profiled=not args.quick)
        runs[name] = run
        row["paths"][name] = {"torch_path": True, "aten_kernels": kernel, "error_vs_float64": {
            f"d{x}": relative_error(y, want[f"d{x}"][None]) for x, y in zip("qkv", run())}}
    for name, entry in row["paths"].items():
        if "error_vs_float64" in entry:
            entry["gate"] = "pass" if max(entry["error_vs_float64"].values()) <= args.tolerance else "FAIL"
    return row, {name: run for name, run in runs.items() if row["paths"][name]["gate"] == "pass"}


def timed_rows(prepared: list, repeats: int) -> list:
    """The rows of ``prepared`` (``[(row, {path: function})]``, one thread count) timed together: every path of
    every row in one alternation, so that ratios between rows (a mask's backward over dense attention's) are
    measured under the same load as those within a row."""
    fns = [(row, name, run) for row, runs in prepared for name, run in runs.items()]
    gc.collect()
    for (row, name, _), times in zip(fns, alternated([f for _, _, f in fns], repeats)):
        row["paths"][name]["backward"] = spread(times)
    for row, _ in prepared:
        row["pinning"] = pinning()
        row["ratio"] = ratio(row)
    return [row for row, _ in prepared]


def paired(rows) -> list:
    """Per (N, heads, threads) timed together: each mask's C backward, predicted and measured, and its ratio to the
    first mask's (dense attention's), predicted and measured (the time model's claim about what a mask saves)."""
    groups: dict = {}
    for row in rows:
        groups.setdefault((row["N"], row["heads"], row["threads"]), []).append(row)
    out = []
    for (n, heads, threads), group in groups.items():
        ours = [(row["mask"], next((e for e in row["paths"].values() if not e["torch_path"]), None)) for row in group]
        ours = [(m, e) for m, e in ours if e and e.get("backward") and e.get("predicted_ms")]
        if not ours:
            continue
        base_p, base_m = ours[0][1]["predicted_ms"], ours[0][1]["backward"]["median_ms"]
        for mask, e in ours:
            p, m = e["predicted_ms"], e["backward"]["median_ms"]
            out.append({"N": n, "heads": heads, "threads": threads, "mask": mask, "predicted_ms": p, "measured_ms": m,
                        "predicted_over_measured": p / m, "base": ours[0][0], "predicted_ratio": p / base_p,
                        "measured_ratio": m / base_m})
    return out


def ratio(row) -> dict:
    """Ours over the fastest torch backward (medians), which torch path that was, and whether it is within the
    target; empty where a side was not timed."""
    times = {name: e["backward"]["median_ms"] for name, e in row["paths"].items() if "backward" in e}
    torch_paths = {name: t for name, t in times.items() if row["paths"][name]["torch_path"]}
    ours = [name for name in times if not row["paths"][name]["torch_path"]]
    if not torch_paths or not ours:
        return {}
    fastest = min(torch_paths, key=torch_paths.get)
    r = times[ours[0]] / torch_paths[fastest]
    return {"fastest_torch": fastest, "fastest_torch_ms": torch_paths[fastest], "ours_over_fastest": r,
            f"within {TARGET}x": r <= TARGET}


def backward_markdown(result) -> str:
    p = result["provenance"]
    lines = [f"# `attention_cpu.py`: the backward at {p['commit'][:12]}{' (dirty tree)' if p['dirty'] else ''}", "",
             f"{p['started']}, {result['machine']}, {p['cores']} cores; torch {p['torch']} ({p['torch_parallel']}); "
             f"CPU model {result['options']['backward_cpu']}, derived by {result['options']['derive']}; fp32, B = 1, "
             f"d = {result['options']['d']}; medians of {result['options']['repeats']} alternated rounds (q1–q3, "
             f"min–max); pinned: {p['pin']}; load average at start {p['load_start']}, at end "
             f"{p.get('load_end', 'not reached')}.  {result['options']['note']}", "",
             f"Gate: error = max |y − y₆₄| / max |y₆₄| against torch.autograd in float64 (dq, dk, dv; ours also O and "
             f"L); tolerance {result['options']['tolerance']:g}.  Target: ours ≤ {TARGET}× the fastest torch "
             "backward.", "",
             "| mask | N | heads | threads | path | tiles / kernels | gate (max error) | backward ms: median (q1–q3; "
             "min–max) | predicted ms | / fastest |",
             "| --- | ---: | ---: | ---: | --- | --- | --- | ---: | ---: | ---: |"]
    for row in result["rows"]:
        r = row["ratio"]
        for name, e in row["paths"].items():
            if "not_run" in e:
                continue
            errors = e.get("error_vs_float64", {})
            gate = f"{e['gate']} ({max(errors.values()):.1e})" if errors else "—"
            s = e.get("backward")
            timed = "not timed" if s is None else \
                f"{s['median_ms']:.1f} ({s['q1_ms']:.1f}–{s['q3_ms']:.1f}; {s['min_ms']:.1f}–{s['max_ms']:.1f})"
            what = e.get("aten_kernels") or ", ".join(f"{k}={v}" for k, v in e["backward_tiles"].items()) + \
                f" ({e['backward_kernels']} kernels)"
            predicted = "—" if e.get("predicted_ms") is None else f"{e['predicted_ms']:.1f}"
            versus = "fastest" if r.get("fastest_torch") == name else \
                f"{r['ours_over_fastest']:.2f}" if not e["torch_path"] and r else "—"
            lines.append(f"| {row['mask']} | {row['N']} | {row['heads']} | {row['threads']} | {name} | {what} | "
                         f"{gate} | {timed} | {predicted} | {versus} |")
    refused = sorted({f"{name}: {e['not_run']}" for row in result["rows"] for name, e in row["paths"].items()
                      if "not_run" in e})
    pins = sorted({f"{row['threads']} thread(s): {row['pinning']}" for row in result["rows"]})
    pairs = result.get("paired", [])
    if pairs:
        lines += ["", "The time model on the masks (each (N, heads, threads)'s masks timed in one alternation): the C "
                  "backward predicted and measured, and its ratio to the first mask's, predicted and measured.", "",
                  "| N | heads | threads | mask | predicted ms | measured ms | predicted / measured | ratio to "
                  "the first: predicted | measured |",
                  "| ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: |"]
        lines += [f"| {e['N']} | {e['heads']} | {e['threads']} | {e['mask']} | {e['predicted_ms']:.1f} | "
                  f"{e['measured_ms']:.1f} | {e['predicted_over_measured']:.2f} | {e['predicted_ratio']:.2f} | "
                  f"{e['measured_ratio']:.2f} |" for e in pairs]
    lines += ["", "Not run on the CPU: " + ("; ".join(refused) or "none"), "",
              "Threads' CPUs (from /proc, CPU list → threads): " + "; ".join(pins)]
    return "\n".join(lines) + "\n"


def backward_table(args, torch) -> dict:
    """Every backward configuration, its results written after each (JSON and markdown under ``--out``)."""
    cpu = nc.hardware.load_cpu(args.backward_cpu)
    commit = git("rev-parse", "HEAD")
    result = {"machine": nc.hardware.this_cpu_name(),
              "provenance": {"commit": commit, "dirty": bool(git("status", "--porcelain", "--untracked-files=no")),
                             "torch": torch.__version__, "cores": os.cpu_count(),
                             "torch_parallel": torch.__config__.parallel_info().splitlines()[-1].strip(),
                             "started": datetime.datetime.now().isoformat(timespec="seconds"),
                             "load_start": [round(x, 2) for x in os.getloadavg()],
                             "pin": ", ".join(f"{k}={os.environ.get(k)}" for k in PIN),
                             "OPENBLAS_NUM_THREADS": os.environ.get("OPENBLAS_NUM_THREADS")},
              "options": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}, "rows": []}
    args.out.mkdir(parents=True, exist_ok=True)
    stem = args.out / f"attention_cpu_backward-{commit[:12]}"
    for n in sorted(args.backward_sizes):
        for heads in args.backward_heads:
            for threads in args.threads:
                t = time.perf_counter()
                rows = timed_rows([prepared_row(mask, n, heads, threads, cpu, args, torch) for mask in args.masks],
                                  args.repeats)
                for row in rows:
                    row["wall_s"] = time.perf_counter() - t
                    row["load"] = [round(x, 2) for x in os.getloadavg()]
                    result["rows"].append(row)
                    print(f"backward {row['mask']} N={n} heads={heads} threads={threads}: {row['wall_s']:.0f} s; "
                          f"{json.dumps(row['ratio'])}", flush=True)
                result["paired"] = paired(result["rows"])
                stem.with_suffix(".json").write_text(json.dumps(result, indent=1, default=str))
                stem.with_suffix(".md").write_text(backward_markdown(result))
    result["provenance"]["load_end"] = [round(x, 2) for x in os.getloadavg()]
    result["paired"] = paired(result["rows"])
    stem.with_suffix(".json").write_text(json.dumps(result, indent=1, default=str))
    stem.with_suffix(".md").write_text(backward_markdown(result))
    print(backward_markdown(result))
    print(f"written: {stem}.json, {stem}.md")
    return result


def git(*a) -> str:
    run = subprocess.run(["git", "-C", str(ROOT), *a], capture_output=True, text=True)
    return run.stdout.strip() if run.returncode == 0 else f"not recorded ({run.stderr.strip()[:80]})"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--c-sizes", type=int, nargs="*", default=[4096, 8192],
                    help="sizes for the forward C kernel's table (none: skip it)")
    ap.add_argument("--heads", type=int, nargs="+", default=[1, 8])
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--d", type=int, default=64)
    ap.add_argument("--cpu", default="epyc-zen4", help="a shipped CPU model's name or a .toml file")
    ap.add_argument("--sizes", type=int, nargs="*", default=[1024, 4096, 8192],
                    help="sizes for the plan runner's table (none: skip it)")
    ap.add_argument("--no-math", dest="math", action="store_false", help="do not time torch's 3-D (math) path")
    ap.add_argument("--backward-sizes", type=int, nargs="*", default=[1024, 2048, 4096],
                    help="sizes for the backward's table (none: skip it)")
    ap.add_argument("--masks", nargs="+", choices=sorted(MASKS), default=["dense", "causal"])
    ap.add_argument("--backward-heads", type=int, nargs="+", default=[8])
    ap.add_argument("--backward-cpu", default="this-cpu", help="the CPU model the backward is derived for")
    ap.add_argument("--derive", choices=("time", "transfers"), default="time",
                    help="the backward's derivation: by the CPU model's predicted time, or by transfers at --memory")
    ap.add_argument("--memory", type=int, default=None,
                    help="values at level 1 for --derive transfers (default: the CPU model's L2)")
    ap.add_argument("--depth", type=int, default=2, help="the prepare rewrites --derive transfers chains")
    ap.add_argument("--tolerance", type=float, default=1e-4, help="the gate: largest relative error vs float64")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-pin", dest="pin", action="store_false",
                    help=f"leave OpenMP's binding alone (default: {', '.join(f'{k}={v}' for k, v in PIN.items())})")
    ap.add_argument("--note", default="", help="a sentence for the results (say if the machine was shared)")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    ap.add_argument("--quick", action="store_true",
                    help="the backward only: N = 128, two heads, by transfers at 2^14 values, depth 1, two rounds, "
                         "torch's kernels named by the autograd graph (not the profiler)")
    args = ap.parse_args(argv)
    if args.quick:
        args.c_sizes, args.sizes, args.backward_sizes, args.backward_heads = [], [], [128], [2]
        args.derive, args.memory, args.depth, args.repeats = "transfers", args.memory or 2 ** 14, 1, 2
    if args.pin:    # before torch and the C kernels load OpenMP (a process that loaded it already keeps its own)
        for k, v in PIN.items():
            os.environ.setdefault(k, v)
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
    if args.backward_sizes:
        return backward_table(args, torch)
    return None


def _blas() -> bool:
    from napkin_cat.codegen.c import blas_available
    return blas_available()


if __name__ == "__main__":
    sys.exit(main() and 0)
