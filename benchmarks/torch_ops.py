"""napkin-cat's PyTorch ops against torch's fastest CPU attention, forward and forward+backward (issue 33, item 8).

**What is timed**, per mask × N × threads, fp32, d = 64, B = 1, H = 8 (batch·heads = 8), ``(B, H, N, d)`` tensors:

* ours: ``nc.torch.flex_attention(q, k, v, mask_mod=...)`` (the mods traced into masked attention, derived for
  this CPU at the call's sizes and threads, the forward and the derived backward run as C/OpenMP kernels), and for
  the dense mask also ``nc.torch.compile`` of the library's attention (``attention(lse=True)`` woven over heads and
  batch, ``aux=1``): the op of issue 33 item 1, the natural path where no mod is needed;
* torch's ``scaled_dot_product_attention`` on 4-D inputs (so that it fuses), with the aten kernel it ran named by
  torch's profiler: for the causal mask both ``is_causal=True`` and an explicit boolean ``attn_mask``, for the
  window and document masks an explicit boolean ``attn_mask``, for dense none;
* ``torch.nn.attention.flex_attention`` compiled by ``torch.compile`` (inductor's CPU template) with its
  ``BlockMask`` from ``create_block_mask``: forward only, torch has no FlexAttention backward on the CPU (the
  error it raises is recorded in the results); where compiling fails, the error is recorded and eager
  flex_attention's forward is timed instead.

Masks: ``dense``; ``causal`` (``kv ≤ q``); ``window`` (``|q − kv| ≤ w``, ``--window``, 256, the library's
``window_mask``); ``document`` (``doc[q] = doc[kv]``, document lengths drawn uniformly in 64 … N/4 with a fixed
seed, the last one cut at N).

**Threads.**  ``torch.set_num_threads(t)`` sets torch's intra-op threads; the C kernels take the same count (the
op passes ``torch.get_num_threads()`` to the kernel's ``nc_threads``, OpenMP's ``num_threads`` over the Grid
blocks, with one OpenBLAS thread inside a tile); inductor bakes the thread count into the kernels it compiles,
so the compiled flex_attention is compiled afresh (``torch._dynamo.reset()``) at each thread count.
Run with ``OPENBLAS_NUM_THREADS=1`` (set here if unset).

**Correctness gate.**  Before anything is timed, every path's forward output (and gradients of q, k, v for a
cotangent ``dO`` drawn once, where the path has a backward) is compared with torch's ``scaled_dot_product_attention``
in float64 on the same inputs and mask: the error is ``max |y − y₆₄| / max |y₆₄|`` per tensor, and a path whose
error exceeds ``--tolerance`` (1e-4) is reported with its errors and not timed.

**Timing.**  ``--repeats`` rounds; in each round every path runs once, in turn (a busy machine's drift hits all
alike), after one untimed warm-up call each.  Reported per path: median, min, max and quartiles (ms).  First calls
are timed apart: ours = trace + derive + compile of the forward (the first forward) and of the backward (the first
backward), torch.compile's = its first forward.  The derivation is made per (mask, sizes, threads): the op
derives each call's sizes by the CPU model's predicted time on ``torch.get_num_threads()`` threads
(``napkin_cat/torch/kernels.py``), and caches it for the process; a first call (the forward's, then the
backward's) that runs longer than ``--derive-timeout`` seconds (300) is stopped, recorded as such, and that op is
not timed at that configuration.

**Results**: ``benchmarks/results/torch_ops-<commit>.json`` and ``.md`` (rewritten after every configuration, so
that an interrupted run keeps what it measured): the commit and whether the tree was dirty, torch's version, the
threads, the machine and its load averages, every time and error.  The target of the issue: forward+backward
within 1.5× the fastest torch path.

    OPENBLAS_NUM_THREADS=1 python benchmarks/torch_ops.py [--sizes 1024 2048 4096 8192]
        [--masks dense causal window document] [--threads 1 2] [--repeats 5] [--quick] [--ops flex library]
"""
from __future__ import annotations

import argparse
import contextlib
import datetime
import gc
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.nn.attention.flex_attention import create_block_mask  # noqa: E402
from torch.nn.attention.flex_attention import flex_attention as torch_flex  # noqa: E402

import napkin_cat as nc  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
MASKS = ("dense", "causal", "window", "document")
SIZES = (1024, 2048, 4096, 8192)
B, H, D = 1, 8, 64
#: the issue's target: ours / fastest torch path, forward+backward
TARGET = 1.5


class DeriveTimeout(Exception):
    """A first call (trace, derive, compile) ran past ``--derive-timeout``."""


@contextlib.contextmanager
def deadline(seconds: float):
    """Raise :class:`DeriveTimeout` in this thread after ``seconds`` (SIGALRM; the search is Python, so it stops)."""
    def fire(signum, frame):
        raise DeriveTimeout(f"past {seconds:.0f} s")
    before = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, before)


# ------------------------------------------------------------------------------------------------ masks
def documents(n: int, seed: int) -> torch.Tensor:
    """Document ids of n positions: lengths uniform in 64 … n/4 (seeded), the last document cut at n."""
    g = torch.Generator().manual_seed(seed)
    ids, start, k = torch.empty(n, dtype=torch.int64), 0, 0
    while start < n:
        length = int(torch.randint(64, max(65, n // 4) + 1, (), generator=g))
        ids[start:start + length] = k
        start, k = start + length, k + 1
    return ids


def mask_mod(mask: str, n: int, window: int, seed: int):
    """FlexAttention's ``mask_mod`` for ``mask`` (None: dense), and what it describes, for the results."""
    if mask == "dense":
        return None, "every key"
    if mask == "causal":
        return (lambda b, h, q, kv: kv <= q), "kv ≤ q"
    if mask == "window":
        return (lambda b, h, q, kv: (q - kv).abs() <= window), f"|q − kv| ≤ {window}"
    if mask == "document":
        doc = documents(n, seed)
        lengths = torch.bincount(doc).tolist()
        return (lambda b, h, q, kv: doc[q] == doc[kv]), \
            f"doc[q] = doc[kv], {len(lengths)} documents of lengths {lengths} (seed {seed})"
    raise ValueError(f"mask {mask!r}: one of {', '.join(MASKS)}")


def dense_mask(mod, n: int) -> torch.Tensor:
    """The boolean N × N mask ``mod`` allows (True: attend), as SDPA's ``attn_mask`` takes it."""
    i, j = torch.arange(n)[:, None], torch.arange(n)[None, :]
    return mod(0, 0, i, j)


def sdpa_variants(mask: str, mod, n: int) -> dict:
    """torch SDPA's ways to take the mask: name → keyword arguments."""
    if mod is None:
        return {"sdpa": {}}
    explicit = {"sdpa attn_mask": {"attn_mask": dense_mask(mod, n)}}
    return {"sdpa is_causal": {"is_causal": True}, **explicit} if mask == "causal" else explicit


# ------------------------------------------------------------------------------------------------ the paths
class Candidate:
    """One way to compute masked attention: its forward (``fwd(q, k, v)`` → O) and whether it has a backward."""

    def __init__(self, name: str, fwd, *, backward: bool | str, torch_path: bool, kernel: str = ""):
        self.name, self.fwd, self.backward, self.torch_path, self.kernel = name, fwd, backward, torch_path, kernel


def sdpa(kwargs):
    """torch's ``scaled_dot_product_attention`` with the mask's keyword arguments."""
    return lambda q, k, v: F.scaled_dot_product_attention(q, k, v, **kwargs)


def sdpa_kernel(q, k, v, kwargs) -> str:
    """The aten kernels (forward, backward) one SDPA call and its backward ran (torch's profiler)."""
    from torch.profiler import ProfilerActivity, profile
    q, k, v = (x.detach().requires_grad_() for x in (q, k, v))
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        F.scaled_dot_product_attention(q, k, v, **kwargs).sum().backward()
    names = [e.key for e in prof.key_averages() if e.key.startswith("aten::_scaled_dot_product")
             or e.key.startswith("aten::_flash_attention")]
    return ", ".join(sorted(set(names), key=len)) or "no inner kernel recorded"


def library_op():
    """``nc.torch.compile`` of the library's attention with its log-sum-exp, woven over heads and batch."""
    attention = nc.weave(nc.weave(nc.library.attention(lse=True, d=D), "h", position=0), "b", position=0)
    op = nc.torch.compile(attention, aux=1, name="attention")
    return lambda q, k, v: op(q, k, v)[0]


# ------------------------------------------------------------------------------------------------ measuring
def relative_error(y: torch.Tensor, ref: torch.Tensor) -> float:
    return float((y.double() - ref).abs().max() / ref.abs().max().clamp_min(1e-300))


def forward_backward(fwd, q, k, v, dO):
    """O and the gradients of q, k, v for the cotangent dO."""
    q, k, v = (x.detach().requires_grad_() for x in (q, k, v))
    O = fwd(q, k, v)
    O.backward(dO)
    return O.detach(), q.grad, k.grad, v.grad


def spread(times: list[float]) -> dict:
    ms = sorted(t * 1e3 for t in times)
    quartiles = statistics.quantiles(ms, n=4, method="inclusive") if len(ms) > 1 else [ms[0]] * 3
    return {"median_ms": statistics.median(ms), "min_ms": ms[0], "max_ms": ms[-1], "q1_ms": quartiles[0],
            "q3_ms": quartiles[2], "runs": len(ms)}


def alternated(fns: dict, repeats: int) -> dict:
    """Each function once untimed, then ``repeats`` rounds in which each runs once, in turn: name → spread."""
    times = {name: [] for name in fns}
    for fn in fns.values():
        fn()
    gc.collect()
    gc.freeze()     # the derivations' millions of objects: a full collection of them took ~7 s before each run
    for _ in range(repeats):
        for name, fn in fns.items():
            gc.collect()
            t = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t)
    return {name: spread(t) for name, t in times.items()}


def configuration(mask: str, n: int, threads: int, args) -> dict:
    """Gate and time every path at one mask, size and thread count."""
    torch.set_num_threads(threads)
    torch._dynamo.reset()
    mod, described = mask_mod(mask, n, args.window, args.seed)
    g = torch.Generator().manual_seed(args.seed)
    q, k, v, dO = (torch.randn(B, H, n, D, generator=g) for _ in range(4))
    row = {"mask": mask, "mask_is": described, "N": n, "threads": threads, "B": B, "H": H, "d": D, "paths": {}}
    variants = sdpa_variants(mask, mod, n)
    # the float64 reference: SDPA in double, the mask as an explicit boolean mask (is_causal for causal)
    ref_kwargs = variants.get("sdpa is_causal", next(iter(variants.values())))
    ref = forward_backward(sdpa(ref_kwargs), *(x.double() for x in (q, k, v, dO)))
    paths = []
    for name, kwargs in variants.items():
        paths.append(Candidate(name, sdpa(kwargs), backward=True, torch_path=True,
                               kernel=sdpa_kernel(q, k, v, kwargs)))
    block_mask = None if mod is None else create_block_mask(mod, None, None, n, n, device="cpu")
    row["block_mask_sparsity_percent"] = None if block_mask is None else float(block_mask.sparsity())
    compiled = torch.compile(torch_flex, dynamic=False)
    flex = Candidate("flex_attention compiled", lambda a, b_, c: compiled(a, b_, c, block_mask=block_mask),
                 backward="FlexAttention has no backward on the CPU", torch_path=True)
    t = time.perf_counter()
    try:
        with torch.no_grad():
            flex.fwd(q, k, v)
        row["paths"][flex.name] = {"first_call_s": time.perf_counter() - t}
    except Exception as e:      # noqa: BLE001 (torch.compile's failure is a result, recorded)
        row["paths"][flex.name] = {"compile_error": f"{type(e).__name__}: {str(e)[:300]}"}
        flex = Candidate("flex_attention eager", lambda a, b_, c: torch_flex(a, b_, c, block_mask=block_mask),
                     backward="FlexAttention has no backward on the CPU", torch_path=True)
    paths.append(flex)
    ours = {}
    if "flex" in args.ops:
        ours["napkin flex_attention"] = lambda a, b_, c: nc.torch.flex_attention(a, b_, c, mask_mod=mod)
    if "library" in args.ops and mask == "dense":
        ours["napkin compile(attention)"] = library_op()
    for name, fwd in ours.items():
        entry = row["paths"].setdefault(name, {})
        forward = first_call(entry, "first_forward_s", "the first forward (trace, derive, compile)",
                             lambda: forward_only(fwd, q, k, v), args.derive_timeout)
        if not forward or not first_call(entry, "first_forward_backward_s", "the first backward (derive, compile)",
                                         lambda: forward_backward(fwd, q, k, v, dO), args.derive_timeout):
            continue
        paths.append(Candidate(name, fwd, backward=True, torch_path=False))
    # the gate
    timed = []
    for p in paths:
        entry = row["paths"].setdefault(p.name, {})
        entry.update(torch_path=p.torch_path, **({"aten_kernels": p.kernel} if p.kernel else {}))
        with torch.no_grad():
            errors = {"O": relative_error(p.fwd(q, k, v), ref[0])}
        if p.backward is True:
            got = forward_backward(p.fwd, q, k, v, dO)
            errors.update({f"d{x}": relative_error(a, b_) for x, a, b_ in zip("qkv", got[1:], ref[1:])})
        else:
            entry["backward"] = p.backward
        entry["error_vs_float64"] = errors
        entry["gate"] = "pass" if max(errors.values()) <= args.tolerance else "FAIL"
        if entry["gate"] == "pass":
            timed.append(p)
    # the timing
    with torch.no_grad():
        forward = alternated({p.name: (lambda p: lambda: p.fwd(q, k, v))(p) for p in timed}, args.repeats)
    both = alternated({p.name: (lambda p: lambda: forward_backward(p.fwd, q, k, v, dO))(p)
                       for p in timed if p.backward is True}, args.repeats)
    for p in timed:
        row["paths"][p.name]["forward"] = forward[p.name]
        if p.name in both:
            row["paths"][p.name]["forward_backward"] = both[p.name]
    row["ratios"] = ratios(row)
    return row


def ratios(row) -> dict:
    """Ours over the fastest torch path, forward and forward+backward (medians), and which torch path that was."""
    out = {}
    for what in ("forward", "forward_backward"):
        torch_paths = {n: e[what]["median_ms"] for n, e in row["paths"].items() if e.get("torch_path") and what in e}
        if not torch_paths:
            continue
        fastest = min(torch_paths, key=torch_paths.get)
        out[what] = {"fastest_torch": fastest, "fastest_torch_ms": torch_paths[fastest]}
        for n, e in row["paths"].items():
            if not e.get("torch_path") and what in e:
                r = e[what]["median_ms"] / torch_paths[fastest]
                out[what][n] = r
                if what == "forward_backward":
                    out[what][f"{n} within {TARGET}x"] = r <= TARGET
    return out


# ------------------------------------------------------------------------------------------------ the report
def git(*a) -> str:
    run = subprocess.run(["git", "-C", str(ROOT), *a], capture_output=True, text=True)
    return run.stdout.strip() if run.returncode == 0 else f"not recorded ({run.stderr.strip()[:80]})"



def markdown(result) -> str:
    p = result["provenance"]
    lines = [f"# `torch_ops.py` at {p['commit'][:12]}{' (dirty tree)' if p['dirty'] else ''}", "",
             f"{p['started']}, {result['machine']}, {os.cpu_count()} cores; torch {p['torch']}, napkin-cat "
             f"C/OpenMP kernels; fp32, B = {B}, H = {H}, d = {D}; medians of {result['options']['repeats']} "
             f"alternated rounds (min–max); load average at start {p['load_start']}, at end "
             f"{p.get('load_end', 'not reached')}.  {result['options']['note']}", "",
             "Gate: error = max |y − y₆₄| / max |y₆₄| against torch SDPA in float64, O and dq, dk, dv; "
             f"tolerance {result['options']['tolerance']:g}.  Target: forward+backward ≤ {TARGET}× the fastest "
             "torch path.", "",
             "| mask | N | threads | path | gate (max error) | first call s | forward ms | fwd / fastest | "
             "fwd+bwd ms | fwd+bwd / fastest |",
             "| --- | ---: | ---: | --- | --- | ---: | ---: | ---: | ---: | ---: |"]

    def cell(e, what):
        s = e.get(what)
        return "—" if s is None else f"{s['median_ms']:.1f} ({s['min_ms']:.1f}–{s['max_ms']:.1f})"

    for row in result["rows"]:
        r = row.get("ratios", {})
        for name, e in row["paths"].items():
            errors = e.get("error_vs_float64")
            gate = "—" if errors is None else f"{e['gate']} ({max(errors.values()):.1e})"
            first = e.get("first_call_s", e.get("first_forward_s"))
            first = "—" if first is None else (f"{first:.1f}" if "first_forward_backward_s" not in e else
                                               f"{first:.1f} + {e['first_forward_backward_s']:.1f}")
            ratio = {w: ("fastest" if r.get(w, {}).get("fastest_torch") == name else
                         f"{r[w][name]:.2f}" if name in r.get(w, {}) else "—") for w in ("forward", "forward_backward")}
            note = e.get("not_timed") or e.get("compile_error") or ""
            fb = cell(e, "forward_backward") if "backward" not in e else "no CPU backward"
            lines.append(f"| {row['mask']} | {row['N']} | {row['threads']} | {name} | {gate} | {first} | "
                         f"{cell(e, 'forward')} | {ratio['forward']} | {fb} | {ratio['forward_backward']} |"
                         + (f" {note}" if note else ""))
    lines += ["", "Masks: " + "; ".join(sorted({f"{row['mask']}: {row['mask_is']}" for row in result["rows"]
                                                 if row["mask"] != "document"}))]
    lines += ["SDPA kernels: " + "; ".join(sorted({f"{n}: {e['aten_kernels']}" for row in result["rows"]
                                                    for n, e in row["paths"].items() if "aten_kernels" in e}))]
    return "\n".join(lines) + "\n"


def forward_only(fwd, q, k, v):
    with torch.no_grad():
        return fwd(q, k, v)


def first_call(entry: dict, key: str, what: str, run, timeout: float) -> bool:
    """Time ``run()``, the first call of one of our ops, into ``entry[key]``; a call past ``timeout`` or one that
    raises is recorded in ``entry["not_timed"]`` (a result, not a crash) and answers False."""
    try:
        with deadline(timeout):
            t = time.perf_counter()
            run()
            entry[key] = time.perf_counter() - t
        return True
    except DeriveTimeout as e:
        entry["not_timed"] = f"{what} ran {e} (--derive-timeout): not timed"
    except Exception as e:  # noqa: BLE001 (an op that cannot run this configuration is a result, recorded)
        entry["not_timed"] = f"{what.split(' (')[0]} failed: {type(e).__name__}: {str(e)[:300]}"
    return False


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=list(SIZES), help="sequence lengths N")
    ap.add_argument("--masks", nargs="+", choices=MASKS, default=list(MASKS))
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="the smallest of --sizes only, 2 repeats (a smoke test)")
    ap.add_argument("--ops", nargs="+", choices=("flex", "library"), default=["flex", "library"],
                    help="ours: nc.torch.flex_attention (every mask), nc.torch.compile(attention) (dense)")
    ap.add_argument("--window", type=int, default=256)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tolerance", type=float, default=1e-4)
    ap.add_argument("--derive-timeout", type=float, default=300.0,
                    help="seconds the first forward, and then the first backward, of one of our ops may take")
    ap.add_argument("--note", default="", help="a sentence for the results (say if the machine was shared)")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    args = ap.parse_args(argv)
    if args.quick:
        args.sizes, args.repeats = [min(args.sizes)], min(args.repeats, 2)
    commit = git("rev-parse", "HEAD")
    result = {"machine": nc.hardware.this_cpu_name(),
              "provenance": {"commit": commit, "dirty": bool(git("status", "--porcelain")),
                             "torch": torch.__version__, "python": platform.python_version(),
                             "started": datetime.datetime.now().isoformat(timespec="seconds"),
                             "load_start": [round(x, 2) for x in os.getloadavg()],
                             "OPENBLAS_NUM_THREADS": os.environ.get("OPENBLAS_NUM_THREADS")},
              "options": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}, "rows": []}
    args.out.mkdir(parents=True, exist_ok=True)
    stem = args.out / f"torch_ops-{commit[:12]}"
    for n in sorted(args.sizes):
        for mask in args.masks:
            for threads in args.threads:
                t = time.perf_counter()
                row = configuration(mask, n, threads, args)
                row["wall_s"] = time.perf_counter() - t
                result["rows"].append(row)
                result["provenance"]["load_now"] = [round(x, 2) for x in os.getloadavg()]
                stem.with_suffix(".json").write_text(json.dumps(result, indent=1, default=str))
                stem.with_suffix(".md").write_text(markdown(result))
                print(f"{mask} N={n} threads={threads}: {row['wall_s']:.0f} s; {json.dumps(row['ratios'])}",
                      flush=True)
    result["provenance"]["load_end"] = [round(x, 2) for x in os.getloadavg()]
    stem.with_suffix(".json").write_text(json.dumps(result, indent=1, default=str))
    stem.with_suffix(".md").write_text(markdown(result))
    print(markdown(result))
    print(f"written: {stem}.json, {stem}.md")
    return result


if __name__ == "__main__":
    sys.exit(main() and 0)
