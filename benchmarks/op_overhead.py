"""A napkin-cat op's per-call overhead and a process's first call with a warm cache (issue 33, issue 35).

**Per call** (µs): ``nc.torch.compile`` of the library's ``rms_norm`` (x: n×d, γ: d) and of ``attention(lse=True)``
(``aux=1``) at N = 64, d = 16, float32, one thread, forward and forward+backward (``y.sum().backward()``), beside
the same maths in plain torch eager (``x * rsqrt(mean(x²) + ε) * γ``; ``softmax(QKᵀ/√d) V`` with its log-sum-exp).
Each path runs ``--calls`` times per block after a warm-up; ``--blocks`` blocks, the paths in turn inside a block
(a busy machine's drift hits all alike); reported per path: median, min and max of the blocks' µs per call, and
per op the ratio of napkin-cat's to torch's time in the same block (the load cancels in it).

**First call** (s): a fresh process with a warm ``$NAPKIN_CACHE`` (a process before it ran the same ops, so their
derivations are stored and their kernels compiled), split into: import (``import torch``; ``import napkin_cat``
and ``nc.torch``), and the first forward+backward of each op, profiled (cProfile, cumulative seconds of the
outermost calls) into the code fingerprint (``searched_code.fingerprint``), the derivation read
(``stored.DerivationStore.load``), the kernel build (``plan`` + printing the C source + loading the compiled
library), the backward's diagram (``nc.grad``) and making the ops (``nc.torch.compile``); stages may nest (the
fingerprint inside the derivation read), and the rest of the first call is imports of the modules they load.

**Paired**: ``--trees A B`` runs each measurement in child processes with ``PYTHONPATH`` set to each source tree in
turn (alternating, ``--rounds`` times), each tree with its own warm cache folder, on the same load::

    OPENBLAS_NUM_THREADS=1 python benchmarks/op_overhead.py [--trees /path/to/baseline .] [--rounds 3]
        [--calls 200] [--blocks 7] [--depth 0] [--only percall first]

Every op's output is checked against the torch maths before it is timed.  Results: printed, and written to
``benchmarks/results/op_overhead-<commit>.json`` (``--out`` to change), naming each tree's commit.
"""
from __future__ import annotations

import argparse
import cProfile
import json
import os
import platform
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

N, D, EPS = 64, 16, 1e-6
#: stage of a first call → the functions whose outermost cumulative time it is (file suffix, function name)
STAGES = {
    "fingerprint": [("napkin_cat/torch/searched_code.py", "fingerprint")],
    "derivation read": [("napkin_cat/torch/stored.py", "load")],
    "derivation search": [("napkin_cat/torch/kernels.py", "search")],
    "kernel build": [("napkin_cat/plan/program.py", "plan"), ("napkin_cat/codegen/c/openmp.py", "c"),
                     ("napkin_cat/codegen/c/kernel.py", "function")],
    "backward diagram (nc.grad)": [("napkin_cat/autodiff/grad.py", "grad")],
    "op made (nc.torch.compile)": [("napkin_cat/torch/ops.py", "compile")],
}


def commit(tree: Path) -> str:
    try:
        head = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=tree, capture_output=True,
                              text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=tree,
                               capture_output=True, text=True).stdout.strip()
        return head + ("-dirty" if dirty else "")
    except (subprocess.CalledProcessError, OSError):
        marker = tree / ".commit"
        return marker.read_text().strip() if marker.exists() else f"unknown ({tree})"


# ---------------------------------------------------------------------- in the child process
def ops(depth: int):
    import torch

    import napkin_cat as nc
    g = torch.Generator().manual_seed(0)
    x = torch.randn(N, D, generator=g, requires_grad=True)
    gamma = torch.randn(D, generator=g, requires_grad=True)
    q, k, v = (torch.randn(N, D, generator=g, requires_grad=True) for _ in range(3))
    rms = nc.torch.compile(nc.library.rms_norm(eps=EPS), depth=depth, name="bench_rms_norm")
    att = nc.torch.compile(nc.library.attention(lse=True), aux=1, depth=depth, name="bench_attention")

    def rms_torch(x, gamma):
        return x * torch.rsqrt(x.square().mean(-1, keepdim=True) + EPS) * gamma

    def att_torch(q, k, v):
        s = q @ k.T / D ** 0.5
        return torch.softmax(s, -1) @ v, torch.logsumexp(s, -1)

    return {"rms_norm": ((x, gamma), lambda *a: rms(*a), rms_torch),
            "attention": ((q, k, v), lambda *a: att(*a)[0], lambda *a: att_torch(*a)[0])}


def checked(cases):
    import torch
    for name, (xs, ours, theirs) in cases.items():
        a, b = ours(*xs), theirs(*xs)
        if not torch.allclose(a, b, rtol=1e-4, atol=1e-5):
            raise SystemExit(f"{name}: the op's output differs from torch's by {float((a - b).abs().max())}")


def child_percall(args) -> dict:
    import torch
    torch.set_num_threads(1)
    cases = ops(args.depth)
    checked(cases)
    paths = {}
    for name, (xs, ours, theirs) in cases.items():
        for who, fn in (("napkin-cat", ours), ("torch eager", theirs)):
            paths[f"{name} forward, {who}"] = (fn, xs, False)
            paths[f"{name} forward+backward, {who}"] = (fn, xs, True)

    def run(fn, xs, backward):
        if backward:
            fn(*xs).sum().backward()
        else:
            with torch.no_grad():
                fn(*xs)
    for fn, xs, backward in paths.values():      # warm-up: first calls derive and compile
        for _ in range(3):
            run(fn, xs, backward)
    times = {p: [] for p in paths}
    for _ in range(args.blocks):
        for p, (fn, xs, backward) in paths.items():
            t = time.perf_counter()
            for _ in range(args.calls):
                run(fn, xs, backward)
            times[p].append((time.perf_counter() - t) / args.calls * 1e6)
    for name in cases:                   # the same block's torch time: a ratio the machine's load cancels in
        for what in ("forward", "forward+backward"):
            ours, theirs = times[f"{name} {what}, napkin-cat"], times[f"{name} {what}, torch eager"]
            times[f"{name} {what}, napkin-cat / torch eager"] = [a / b for a, b in zip(ours, theirs)]
    return times


def stages(profile) -> dict:
    stats = pstats.Stats(profile)
    out = {}
    for stage, fns in STAGES.items():
        total = 0.0
        for (file, _, name), (_, _, _, ct, callers) in stats.stats.items():
            if any(file.endswith(f) and name == fn for f, fn in fns):
                if not any(c[2] in {fn for _, fn in fns} and c[0].endswith(tuple(f for f, _ in fns))
                           for c in callers):
                    total += ct
        out[stage] = total
    return out


def child_first(args) -> dict:
    t0 = time.perf_counter()
    import torch
    t1 = time.perf_counter()
    import napkin_cat as nc
    nc.torch.compile      # noqa: B018  (loads nc.torch)
    t2 = time.perf_counter()
    torch.set_num_threads(1)
    out = {"import torch": t1 - t0, "import napkin_cat": t2 - t1}
    prof = cProfile.Profile()
    t = time.perf_counter()
    prof.enable()
    cases = ops(args.depth)
    for xs, ours, _ in cases.values():
        ours(*xs).sum().backward()
    prof.disable()
    out["first forward+backward (both ops)"] = time.perf_counter() - t
    out.update(stages(prof))
    return out


# ---------------------------------------------------------------------- the parent
def spread(xs) -> dict:
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "n": len(xs)}


def run_child(tree: Path, cache: Path, what: str, args) -> dict:
    env = {**os.environ, "PYTHONPATH": str(tree), "NAPKIN_CACHE": str(cache), "OPENBLAS_NUM_THREADS": "1"}
    cmd = [sys.executable, __file__, "--child", what, "--calls", str(args.calls), "--blocks", str(args.blocks),
           "--depth", str(args.depth)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=tree)
    if done.returncode != 0:
        raise SystemExit(f"{what} in {tree} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trees", nargs="+", default=[str(Path(__file__).resolve().parents[1])])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--blocks", type=int, default=7)
    ap.add_argument("--depth", type=int, default=0, help="the ops' search depth (0: fast first derivations)")
    ap.add_argument("--only", nargs="+", default=["percall", "first"], choices=["percall", "first"])
    ap.add_argument("--out")
    ap.add_argument("--child", choices=["percall", "first"], help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        found = child_percall(args) if args.child == "percall" else child_first(args)
        print(json.dumps(found))
        return
    trees = [Path(t).resolve() for t in args.trees]
    caches = {t: Path(tempfile.mkdtemp(prefix="napkin-op-overhead-")) for t in trees}
    for t in trees:                      # warm each tree's cache: derivations stored, kernels compiled
        run_child(t, caches[t], "first", args)
    results = {str(t): {"commit": commit(t), "percall": {}, "first": {}} for t in trees}
    for r in range(args.rounds):
        for t in trees:
            for what in args.only:
                found = run_child(t, caches[t], what, args)
                for k, v in found.items():
                    results[str(t)][what].setdefault(k, []).extend(v if isinstance(v, list) else [v])
        print(f"round {r + 1}/{args.rounds} done, load {os.getloadavg()}", file=sys.stderr)
    report = {"python": platform.python_version(), "machine": platform.machine(), "load": os.getloadavg(),
              "N": N, "d": D, "calls": args.calls, "blocks": args.blocks, "rounds": args.rounds,
              "depth": args.depth, "trees": {}}
    for t in trees:
        entry = results[str(t)]
        report["trees"][str(t)] = {"commit": entry["commit"], "samples": {w: entry[w] for w in args.only},
                                   **{w: {k: spread(v) for k, v in entry[w].items()} for w in args.only}}
    for t, entry in report["trees"].items():
        print(f"\n{t} ({entry['commit']})")
        if "percall" in entry:
            print("  µs per call (median of block medians, min … max):")
            for k, s in entry["percall"].items():
                print(f"    {k:60s} {s['median']:9.2f}  ({s['min']:.2f} … {s['max']:.2f}, {s['n']} blocks)")
        if "first" in entry:
            print("  first call, fresh process, warm cache (s: median, min … max):")
            for k, s in entry["first"].items():
                print(f"    {k:60s} {s['median']:7.2f}  ({s['min']:.2f} … {s['max']:.2f})")
    out = Path(args.out) if args.out else Path(__file__).resolve().parent / "results" / \
        f"op_overhead-{commit(trees[-1])}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1))
    print(f"\nwritten {out}")


if __name__ == "__main__":
    main()
