"""The CPU time model's terms against the C kernel's own statements: which assumption a miss refutes.

The time model (``napkin_cat/hardware/cputime.py``) predicts each kernel as ``T_io + T_c + T_s + T_g``: its
level-1 transfers at one core's copy bandwidth, its contractions at the rate table's rate for their smallest
dimension, its special and general FLOPs at the calibrated rates.  A kernel's total time checks the sum;
``nc.codegen.c(plan, profile=True)`` (``napkin_cat/codegen/c/profile.py``) times each statement of the printed
kernel, so each term is checked on its own:

* **transfers**: the loads, stores and copies between level 0 and a block's arena (a load the cache makes, a
  pointer into the input, takes no time of its own: its reads are paid by the statements that read it);
* **contractions**: the computes whose box runs on the tensor pipeline (one ``cblas_sgemm`` per batch index);
* **element loops**: every other compute, fill and combine (the model's special and general terms together: a
  fused statement runs an ``exp`` and its ``sub`` and ``scale`` in one loop);
* **unattributed**: the run's wall time less the statements' (loops, the block's decode, the arena's allocation;
  on one thread, where the statements' seconds are wall seconds).

Per configuration (mask × N, eight heads, d = 64, fp32): attention's backward from the saved forward
(``nc.grad(attention(lse=True), wrt=[0, 1, 2], saved=True, aux=1)``, the causal attention's for causal), derived
for the CPU model by its predicted time (``nc.derive(g, sizes=, hardware=cpu, threads=T)``), printed with
``profile=True`` and run ``--repeats`` times on O and L from numpy; medians of each kernel's terms, beside the
model's (``predict_cpu`` at the kernel's tiles: ``--set`` sets some of them, to see a term move with a tile).
The unprofiled kernel is timed in alternation with the profiled one: the clock reads' overhead is the ratio of
their medians.  Results: ``benchmarks/results/cpu_terms-<commit>.json`` and ``.md``.  ``--quick``:
N = 128, two heads, one round (the pipeline, not a measurement; what ``tests/test_cpu_terms_benchmark.py`` runs).

    OPENBLAS_NUM_THREADS=1 python benchmarks/cpu_terms.py [--masks dense causal] [--sizes 1024 2048 4096]
        [--heads 8] [--threads 1] [--cpu benchmarks/results/cpu-zen4-vm-2026-12-04.toml] [--repeats 5]
        [--set g_q=512 ...] [--out benchmarks/results] [--quick]
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from attention_cpu import functions, git  # noqa: E402  (also puts the repository on sys.path)

import napkin_cat as nc  # noqa: E402
from napkin_cat.cost.boxes import box_pieces  # noqa: E402

#: the model's terms each measured category checks
TERMS = {"transfers": ("io",), "contractions": ("tensor",), "element loops": ("special", "general")}


def category(t) -> str:
    """The model's term a timed statement (:class:`~napkin_cat.codegen.c.profile.StatementTime`) is part of."""
    if t.kind in ("Load", "Store", "Copy"):
        return "transfers"
    if t.kind == "Compute" and any(p == "tensor" for p, _ in box_pieces(t.statement.box)[2]):
        return "contractions"
    return "element loops"


def saved_forward(Q, K, V, causal: bool):
    """O and the log-sum-exp L of ``softmax(Q Kᵀ/√d [+ causal −∞]) V`` in float64, head by head, as float32."""
    O, L = np.empty_like(Q), np.empty(Q.shape[:2], np.float32)
    for h in range(Q.shape[0]):
        S = Q[h].astype(np.float64) @ K[h].T.astype(np.float64) / np.sqrt(Q.shape[-1])
        if causal:
            S[np.triu_indices(S.shape[0], 1)] = -np.inf
        m = S.max(axis=1, keepdims=True)
        P = np.exp(S - m)
        s = P.sum(axis=1, keepdims=True)
        O[h], L[h] = (P / s) @ V[h], (m + np.log(s))[:, 0]
    return O, L


def row(mask: str, n: int, heads: int, threads: int, cpu, repeats: int, tiles: dict | None = None) -> dict:
    """One configuration: the backward derived for ``cpu`` (its tiles, those named in ``tiles`` set as given), its
    profiled kernel's terms per kernel beside the model's at those tiles, medians of ``repeats`` runs."""
    _, g = functions(mask, heads, 64)
    sizes = {"q": n, "x": n, **({"h": heads} if heads > 1 else {})}
    r = nc.derive(g, sizes=sizes, hardware=cpu, threads=threads)
    at = {**sizes, **{str(k): int(v) for k, v in r.optimum.exact_sizes.items()}}
    unknown = sorted(set(tiles or {}) - (set(at) - set(sizes)))
    if unknown:
        raise SystemExit(f"--set {', '.join(unknown)}: not a tile of the derived {mask} backward at N = {n}; its "
                         f"tiles are {sorted(set(at) - set(sizes))}")
    at.update(tiles or {})
    plan = nc.plan(r.diagram, at)
    prediction = nc.hardware.predict_cpu(plan, cpu, threads=threads)
    profiled, plain = nc.codegen.c(plan, profile=True), nc.codegen.c(plan)
    rng = np.random.default_rng(0)
    shape = (heads, n, 64)
    Q, K, V, dO = (rng.standard_normal(shape).astype(np.float32) for _ in range(4))
    O, L = saved_forward(Q, K, V, mask == "causal")
    args = [x.reshape(x.shape[1:]) if heads == 1 else x for x in (Q, K, V, O, L, dO)]
    want = plain(*args, threads=threads)
    got = profiled(*args, threads=threads)        # (compiled, warmed; the two kernels agree)
    agree = all(np.array_equal(a, b) for a, b in zip(want, got))
    profiled.statement_times()
    launches = list(dict.fromkeys(launch for _, _, launch in profiled.printer.profiled))
    runs, walls, plains = [], [], []
    for _ in range(repeats):
        t = time.perf_counter()
        plain(*args, threads=threads)
        plains.append(time.perf_counter() - t)
        t = time.perf_counter()
        profiled(*args, threads=threads)
        walls.append(time.perf_counter() - t)
        per = {(launch, c): 0.0 for launch in launches for c in TERMS}
        for st in profiled.statement_times():
            per[(st.launch, category(st))] += st.seconds
        runs.append(per)
    kernels = []
    predicted = prediction.kernels if len(prediction.kernels) == len(launches) else [None] * len(launches)
    for launch, kt in zip(launches, predicted):
        measured = {c: statistics.median(run[(launch, c)] for run in runs) * 1e3 for c in TERMS}
        model = None if kt is None else {c: sum(kt.terms.get(p, 0.0) for p in ps) * 1e3 for c, ps in TERMS.items()}
        kernels.append({"launch": launch, "label": None if kt is None else kt.label, "measured_ms": measured,
                        "predicted_ms": model, "predicted_total_ms": None if kt is None else kt.time * 1e3,
                        "bytes_moved": None if kt is None else kt.bytes.get("moved"),
                        "flops": None if kt is None else dict(kt.flops)})
    wall = statistics.median(walls) * 1e3
    attributed = sum(sum(k["measured_ms"].values()) for k in kernels)
    return {"mask": mask, "N": n, "heads": heads, "threads": threads, "variant": str(r.variant),
            "tiles": {k: v for k, v in at.items() if k not in sizes}, "kernels": kernels,
            "profiled_wall_ms": wall, "plain_wall_ms": statistics.median(plains) * 1e3,
            "unattributed_ms": wall - attributed if threads == 1 else None,
            "set": dict(tiles or {}), "predicted_ms": prediction.time * 1e3, "profiled_equals_plain": agree,
            "runs": repeats}


def markdown(result: dict) -> str:
    lines = [f"# The CPU time model's terms against the C kernel's statements ({result['commit']})", "",
             f"{result['date']}, {result['machine']}, CPU model {result['cpu']}, load average {result['load']}.", "",
             "| mask | N | kernel | transfers ms (model) | contractions ms (model) | element loops ms (model) | "
             "kernel ms: statements (model) |", "| --- | ---: | --- | ---: | ---: | ---: | ---: |"]
    for e in result["rows"]:
        for k in e["kernels"]:
            m, p = k["measured_ms"], k["predicted_ms"] or {}
            cells = [f"{m[c]:.1f} ({p[c]:.1f})" if c in p else f"{m[c]:.1f} (—)" for c in TERMS]
            total = sum(m.values())
            model = "—" if k["predicted_total_ms"] is None else f"{k['predicted_total_ms']:.1f}"
            lines.append(f"| {e['mask']} | {e['N']} | {k['launch']} | {' | '.join(cells)} | {total:.1f} ({model}) |")
    lines += ["", "| mask | N | tiles | wall ms, profiled | wall ms, plain | unattributed ms | predicted ms | "
              "predicted / plain |", "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: |"]
    for e in result["rows"]:
        tiles = ", ".join(f"{k}={v}" for k, v in e["tiles"].items())
        un = "—" if e["unattributed_ms"] is None else f"{e['unattributed_ms']:.1f}"
        lines.append(f"| {e['mask']} | {e['N']} | {tiles} | {e['profiled_wall_ms']:.1f} | {e['plain_wall_ms']:.1f} | "
                     f"{un} | {e['predicted_ms']:.1f} | {e['predicted_ms'] / e['plain_wall_ms']:.2f} |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--masks", nargs="+", default=["dense", "causal"], choices=["dense", "causal"])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1024, 2048, 4096])
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--cpu", default=str(HERE / "results" / "cpu-zen4-vm-2026-12-04.toml"),
                    help="a CPU model with rates (format 2): a shipped name or a .toml file")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", default=str(HERE / "results"))
    ap.add_argument("--set", nargs="*", default=[], metavar="TILE=VALUE",
                    help="a tile of the derived backward set as given (e.g. g_q=512), the model's prediction at it")
    ap.add_argument("--quick", action="store_true", help="N = 128, two heads, one round: the pipeline only")
    args = ap.parse_args(argv)
    tiles = {}
    for item in args.set:
        name, _, value = item.partition("=")
        if not value.isdigit():
            ap.error(f"--set {item!r}: write TILE=VALUE, a whole number (g_q=512)")
        tiles[name] = int(value)
    if args.quick:
        args.sizes, args.heads, args.repeats = [128], 2, 1
    cpu = nc.hardware.load_cpu(args.cpu)
    commit = git("rev-parse", "--short=12", "HEAD")
    result = {"commit": commit, "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "machine": nc.hardware.this_cpu_name(), "cpu": cpu.name, "load": os.getloadavg()[0],
              "command": " ".join(sys.argv), "rows": []}
    for n in args.sizes:
        for mask in args.masks:
            e = row(mask, n, args.heads, args.threads, cpu, args.repeats, tiles)
            result["rows"].append(e)
            print(f"{mask} N={n}: plain {e['plain_wall_ms']:.1f} ms, profiled {e['profiled_wall_ms']:.1f}, "
                  f"predicted {e['predicted_ms']:.1f}", flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    label = "".join(f"-{k}{v}" for k, v in tiles.items())
    stem = out / f"cpu_terms-{'quick-' if args.quick else ''}{commit}{label}"
    stem.with_suffix(".json").write_text(json.dumps(result, indent=1))
    stem.with_suffix(".md").write_text(markdown(result))
    print(markdown(result))
    return result


if __name__ == "__main__":
    main()
