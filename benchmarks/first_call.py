"""The first call of ``nc.torch.flex_attention`` with a cold cache, forward and backward, by stage (issue 33).

A fresh ``$NAPKIN_CACHE`` (no compiled kernel, no stored derivation) and a fresh process: the first forward traces
the mods (``torch.export``), translates them, derives the forward for this CPU, plans it, prints and compiles its C
kernel, then runs it; the first backward derives, plans, prints and compiles the backward.  Each is timed (wall,
this process's CPU, the compiler's CPU: a child process) and profiled (cProfile); the stages are the cumulative
times of the functions that make them::

    python benchmarks/first_call.py [--masks window document] [--n 1024] [--threads 1]
"""
from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import resource
import sys
import tempfile
import time

os.environ["NAPKIN_CACHE"] = tempfile.mkdtemp(prefix="napkin-cold-")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import torch  # noqa: E402

import napkin_cat as nc  # noqa: E402

B, H, D = 1, 8, 64
#: stage → the functions whose cumulative time it is (file suffix, function name)
STAGES = {
    "trace (torch.export)": [("torch/export/_trace.py", "_export")],
    "translate": [("napkin_cat/torch/exported.py", "translate")],
    "derive": [("napkin_cat/search/derivation.py", "derive"),
               ("napkin_cat/hardware/cputime.py", "derive_for_cpu_time")],
    "grad (backward diagram)": [("napkin_cat/autodiff/grad.py", "grad")],
    "plan": [("napkin_cat/plan/program.py", "plan")],
    "print C": [("napkin_cat/codegen/c/openmp.py", "doprint_plan")],
    "compile C (cc)": [("napkin_cat/codegen/c/kernel.py", "library_path")],
}


def mask_mod(mask: str, n: int):
    if mask == "window":
        return lambda b, h, q, kv: (q - kv).abs() <= 256
    if mask == "document":
        g = torch.Generator().manual_seed(0)
        lengths, total = [], 0
        while total < n:
            lengths.append(int(torch.randint(64, max(65, n // 4), (1,), generator=g)))
            total += lengths[-1]
        doc = torch.repeat_interleave(torch.arange(len(lengths)), torch.tensor(lengths))[:n]
        return lambda b, h, q, kv: doc[q] == doc[kv]
    raise ValueError(mask)


def stages(profile) -> dict:
    stats = pstats.Stats(profile)
    out = {}
    for stage, fns in STAGES.items():
        total = 0.0
        for (file, line, name), (cc, nc_, tt, ct, callers) in stats.stats.items():
            if any(file.endswith(f) and name == fn for f, fn in fns):
                # the outermost calls only: a recursive function's cumulative time counts once
                if not any(c[2] == name and c[0] == file for c in callers):
                    total += ct
        out[stage] = total
    return out


def timed(fn):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu0, t0 = time.process_time(), time.perf_counter()
    prof = cProfile.Profile()
    prof.enable()
    value = fn()
    prof.disable()
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    children = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return value, {"wall_s": wall, "cpu_s": cpu, "children_cpu_s": children, "stages": stages(prof), "profile": prof}


def top(prof, k=25) -> str:
    s = io.StringIO()
    pstats.Stats(prof, stream=s).sort_stats("cumulative").print_stats(k)
    return s.getvalue()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--masks", nargs="+", default=["window", "document"])
    ap.add_argument("--n", type=int, default=1024)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--top", type=int, default=0, help="print the top functions by cumulative time")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    print(f"NAPKIN_CACHE={os.environ['NAPKIN_CACHE']} (cold), N = {args.n}, B·H = {B * H}, d = {D}, "
          f"threads {args.threads}, load {os.getloadavg()}")
    for mask in args.masks:
        g = torch.Generator().manual_seed(1)
        q, k, v = (torch.randn(B, H, args.n, D, generator=g, requires_grad=True) for _ in range(3))
        dO = torch.randn(B, H, args.n, D, generator=g)
        mod = mask_mod(mask, args.n)
        O, fwd = timed(lambda: nc.torch.flex_attention(q, k, v, mask_mod=mod))
        _, bwd = timed(lambda: torch.autograd.grad(O, (q, k, v), dO))
        for what, r in (("forward", fwd), ("backward", bwd)):
            st = ", ".join(f"{s} {t:.2f}" for s, t in r["stages"].items() if t > 0.005)
            print(f"{mask} {what}: wall {r['wall_s']:.2f} s, CPU {r['cpu_s']:.2f} s + cc {r['children_cpu_s']:.2f} s; "
                  f"stages (cumulative s): {st}")
            if args.top:
                print(top(r["profile"], args.top))
        sys.stdout.flush()


if __name__ == "__main__":
    main()
