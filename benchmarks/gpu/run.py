"""The GPU benchmark: kernels derived for the machine's hardware model, against torch, beside the time model.

    python benchmarks/gpu/run.py [--out DIR] [--quick] [--dry-run] [--only KINDS] [--derived DIR]
    python benchmarks/gpu/run.py --prederive --derived DIR [--models M ...] [--quick] [--dry-run] [--only KINDS]

For each configuration (attention forward at d = 64 and 128, N = 1,024 … 16,384, bf16, batch × heads
filling the GPU as in FlashAttention-2's benchmark: batch·N = 16k tokens, 2,048/d heads; grouped-query
attention; decoding, one query row per head against N = 4,096 … 131,072 keys, and grouped-query decoding; a
4096³ matrix product and a skinny one; the training step's rows, forward+backward, in ``training.py`` (dense
attention and the mask zoo of ``zoo.py``: sliding window, prefix-LM, document with a block mask from data, ALiBi,
softcap, FlexAttention compiled beside each) and ``losses.py`` (fused linear cross-entropy at a 128k vocabulary,
Liger-Kernel beside it)):

1. ``nc.derive(f, sizes=..., hardware=<the machine's model>)`` picks the variant and tiles of least
   predicted time (``nc.hardware.timed``): that pick (``"pick": "derived"``) is the library's result (read from
   ``--derived DIR`` where it was searched before for this tree, ``--prederive``: :mod:`prederived`).  Beside
   it, the next fastest tile assignments of the same structure by the model (``"pick": "autotune"``; k = 3 in
   all, one with ``--quick``) are timed too: the fastest of the k is *autotuning* (the measurement picks,
   not the model), reported as such, and it tests the model's ranking;
2. each is printed as a Triton kernel (``nc.codegen.triton``: bf16 tensor cores, fp32 accumulators,
   runtime sizes) and run once; its relative L2 error against torch in fp32 must be within the stated
   tolerance (``measure.TOLERANCE``) or it is not timed (``"gate"`` says why); then it is timed
   (``triton.testing.do_bench``: the median and the spread of every run); the CUDA backend (a reference,
   scalar fp32) is built, run, checked and its shared memory confirmed by the driver on one small plan;
3. the baselines run in the same process, gated the same way: ``scaled_dot_product_attention`` on 4-D
   tensors under each backend torch has (flash, cuDNN, efficient, default dispatch; the fastest is the
   comparison) and ``torch.matmul`` (cuBLAS);
4. the model predicts each kernel twice: from the model's datasheet rates, and from the ceilings this
   run measures first (device-to-device copy bandwidth, an 8192³ bf16 ``torch.matmul``).

Writes ``DIR/<device>-<date>.json`` and ``DIR/<device>-<date>.png``.  The JSON (``"schema": 2``) holds the
device, the commit measured (and whether tracked files differed from it), the driver and clocks (before and
after the cases), torch, Triton, CUDA and Python versions, the tolerance and timing method, the ceilings, and
every configuration with each kernel's error, time and spread, and predicted times.  ``--dry-run`` runs the
whole pipeline on the CPU at tiny sizes (Triton's interpreter, the CUDA kernel compiled only), untimed; CI
runs it.
"""
from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))
sys.path.insert(0, str(HERE))
if "--dry-run" in sys.argv:
    os.environ["TRITON_INTERPRET"] = "1"

import napkin_cat as nc   # noqa: E402
import measure            # noqa: E402
import prederived         # noqa: E402
import report             # noqa: E402
import training           # noqa: E402
from picks import candidates, neighbours   # noqa: E402,F401  (run.candidates, run.neighbours: the rows' picks)
import losses             # noqa: E402

FORMATS = {"Q": "bf16", "K": "bf16", "S": "fp32", "P": "bf16", "V": "bf16", "O": "bf16"}


def configurations(dry: bool, quick: bool) -> list[dict]:
    """The benchmark's cases (see the module docstring)."""
    if dry:
        return [{"kind": "attention", "d": 16, "N": 128, "batch": 1, "heads": 2},
                {"kind": "causal", "d": 16, "N": 128, "batch": 1, "heads": 2},
                {"kind": "gqa", "d": 16, "N": 64, "batch": 1, "heads": 4, "kv_heads": 2},
                {"kind": "decode", "q": 1, "d": 16, "N": 4096, "batch": 1, "heads": 1},
                {"kind": "matmul", "a": 64, "b": 64, "c": 128},
                {"kind": "cuda", "d": 16, "N": 64, "batch": 1, "heads": 2}] + \
            training.configurations(dry, quick) + losses.configurations(dry, quick)
    ns = (1024, 4096, 16384) if quick else (1024, 2048, 4096, 8192, 16384)
    out = [{"kind": "attention", "d": d, "N": n, "batch": max(1, 16384 // n), "heads": 2048 // d}
           for d in (64, 128) for n in ns]
    out += [{"kind": "causal", "d": d, "N": n, "batch": max(1, 16384 // n), "heads": 2048 // d}
            for d in (64, 128) for n in ns]
    out += [{"kind": "decode", "q": 1, "d": 128, "N": n, "batch": 1, "heads": 32}
            for n in ((4096, 32768, 131072) if quick else (4096, 8192, 16384, 32768, 65536, 131072))]
    out += [{"kind": "gqa", "q": 1, "d": 128, "N": 32768, "batch": 1, "heads": 32, "kv_heads": 8}]
    out += [{"kind": "gqa", "d": 128, "N": 4096, "batch": 4, "heads": 32, "kv_heads": 8},
            {"kind": "matmul", "a": 4096, "b": 4096, "c": 4096},
            {"kind": "matmul", "a": 128, "b": 8192, "c": 8192},
            {"kind": "cuda", "d": 64, "N": 1024, "batch": 1, "heads": 8}]
    return out + training.configurations(dry, quick) + losses.configurations(dry, quick)


def diagram_of(cfg):
    """The function diagram and its sizes (batch folded into the head axis: one grid axis of B·H)."""
    if cfg["kind"] == "matmul":
        return (nc.einsum("a b, b c -> a c", dtype="bf16", out_dtype="bf16"),
                {k: cfg[k] for k in ("a", "b", "c")})
    if cfg["kind"] == "gqa":
        g = cfg["heads"] // cfg["kv_heads"]
        return (nc.library.grouped_query_attention(formats=FORMATS),
                {"q": cfg.get("q", cfg["N"]), "x": cfg["N"], "d": cfg["d"], "h": cfg["batch"] * cfg["kv_heads"],
                 "g": g})
    formats = None if cfg["kind"] == "cuda" else FORMATS
    if cfg["kind"] == "causal":         # the library's causal attention (a mask from positions), one per head
        return (nc.weave(nc.library.causal_attention(formats=formats), "h", inputs=[0, 1, 2]),
                {"q": cfg["N"], "x": cfg["N"], "d": cfg["d"], "h": cfg["batch"] * cfg["heads"]})
    return (nc.library.multi_head_attention(formats=formats),      # decode: one query row (q = 1) per head
            {"q": cfg.get("q", cfg["N"]), "x": cfg["N"], "d": cfg["d"], "h": cfg["batch"] * cfg["heads"]})


def flops_of(cfg) -> float:
    if cfg["kind"] == "matmul":
        return 2.0 * cfg["a"] * cfg["b"] * cfg["c"]
    full = 4.0 * cfg["batch"] * cfg["heads"] * cfg.get("q", cfg["N"]) * cfg["N"] * cfg["d"]
    return full / 2 if cfg["kind"] == "causal" else full       # causal: the half at or below the diagonal


def timed_candidates(cfg, quick: bool, dry: bool) -> int:
    """How many tile assignments a forward row times: 1 with ``--quick``, in the dry run and for the CUDA row, else
    3 (the derived pick and the model's next two, read off the search's timings)."""
    return 1 if (quick or dry or cfg["kind"] == "cuda") else 3


def run_case(cfg, env, args) -> dict:
    if cfg["kind"] in training.KINDS:       # forward+backward: training.py
        return training.run_case(cfg, env, sweep=args.sweep)
    if cfg["kind"] == "flce":               # fused linear cross-entropy, forward+backward: losses.py
        return losses.run_case(cfg, env)
    diagram, sizes = diagram_of(cfg)
    k = args.sweep or timed_candidates(cfg, args.quick, env["dry"])
    # (k > 1: the model's next tiles are the search's timings, which a derivation searched before does not keep)
    derive = env.get("derive", measure.searched) if k == 1 else measure.searched
    t0 = time.perf_counter()
    r, where = derive(diagram, sizes, env["model"], 1.0)
    row = {**cfg, "sizes": sizes, "flops": flops_of(cfg), "derive_s": time.perf_counter() - t0, "derived": where,
           "variant": str(r.variant), "candidates": []}
    inputs, reference = measure.inputs_and_reference(cfg, env)
    for cand in (neighbours if args.sweep else candidates)(r, k):
        p = nc.plan(r.diagram, {**sizes, **cand["tiles"]})
        ceilinged = nc.hardware.predict(p, env["model"], ceilings=env["ceilings"]) if env["ceilings"] else None
        predicted = nc.hardware.predict(p, env["model"])        # once: each kernel's form is built from sympy
        cand.update(predicted_s=predicted.time, predicted_measured_ceilings_s=ceilinged.time if ceilinged else None,
                    prediction=predicted.to_dict())
        if cfg["kind"] == "cuda":
            cand.update(measure.cuda_kernel(p, inputs, reference, env))
        else:
            k = nc.codegen.triton(p)
            cand.update(num_warps=k.printer.num_warps, num_stages=k.printer.num_stages,
                        runtime_sizes=[str(s) for s in k.printer.runtime])
            cand.update(measure.triton_kernel(k, inputs, reference, env))
        if cand.get("time_s"):
            cand["tflops"] = row["flops"] / cand["time_s"] / 1e12
        row["candidates"].append(cand)
        print(f"  {cfg['kind']:9} {cand['pick']:8} {json.dumps(cand['tiles']):44} model "
              f"{cand['predicted_s'] * 1e3:8.3f} ms  measured {_ms(cand.get('time_s'))}  "
              f"err {cand.get('error', float('nan')):.1e}{'  ' + cand['gate'] if cand.get('gate') else ''}",
              flush=True)
    if cfg["kind"] != "cuda":
        row["baselines"] = measure.baselines(cfg, inputs, reference, env)
        timed = [b for b in row["baselines"] if b.get("time_s")]
        if timed:
            row["baseline"] = min(timed, key=lambda b: b["time_s"])
    return row


def functions(cfg) -> list:
    """``[(pass, f, sizes, density)]``: what a row derives (a forward row one function, a forward+backward row two;
    a mask from data at the density of the row's data)."""
    if cfg["kind"] in training.KINDS:
        (f, g), sizes = training.functions(cfg)
        rho = training.density(cfg)
        return [("forward", f, sizes, rho), ("backward", g, sizes, rho)]
    if cfg["kind"] == "flce":
        (f, g), sizes = losses.functions(cfg)
        return [("forward", f, sizes, 1.0), ("backward", g, sizes, 1.0)]
    f, sizes = diagram_of(cfg)
    return [("forward", f, sizes, 1.0)]


def prederive(args, kinds) -> int:
    """``--prederive``: the derivations of the rows a run would run (``--quick``, ``--dry-run``, ``--only``,
    ``--where``) searched for each of ``--models`` and kept in ``--derived`` (:mod:`prederived`); no GPU.  A forward
    row's are read only where it times one candidate (``--quick``, the dry run, the CUDA row): not searched
    otherwise.  Each is printed and compiled for its model's architecture (:func:`compiled`); exit status 1 where
    one cannot be, each named."""
    store, refused, where = prederived.Prederived(args.derived), [], selection(args.where)
    for model in args.models:
        for cfg in configurations(args.dry_run, args.quick):
            if (kinds and cfg["kind"] not in kinds) or not where(cfg):
                continue
            if cfg["kind"] not in (*training.KINDS, "flce") and timed_candidates(cfg, args.quick, args.dry_run) > 1:
                print(f"{model:10} {cfg['kind']:9} not kept: without --quick the row reads the search's timings",
                      flush=True)
                continue
            for name, f, sizes, rho in functions(cfg):
                try:
                    r, seconds = store.keep(f, sizes, model, rho, {"row": cfg, "pass": name})
                except nc.errors.NapkinError as e:     # nothing derivable to print here: named, the others go on
                    refused.append(f"{model} {cfg} {name}: {type(e).__name__}: {e}")
                    print(f"{model:10} {cfg['kind']:9} {name:8} not derived: {str(e)[:300]}", flush=True)
                    continue
                took = "kept already" if seconds is None else f"{seconds:6.1f} s"
                print(f"{model:10} {cfg['kind']:9} {name:8} {took}  {r.variant}", flush=True)
                if not args.dry_run and cfg["kind"] != "cuda":     # the dry run's rows compile their own
                    resources = {}
                    why = compiled(r, sizes, model, resources)
                    if why:
                        refused.append(f"{model} {cfg} {name}: {why}")
                        print(f"{'':10} {'':9} {name:8} not printable: {why[:300]}", flush=True)
                    else:          # what the compiler gives each kernel here (residency.py): spills named early
                        print(f"{'':10} {'':9} {name:8} registers a thread: " + ", ".join(
                            f"{k} {v['registers']}" + (f" ({v['stack']} B spilled)" if v["stack"] else "")
                            for k, v in resources.items()), flush=True)
    for line in refused:
        print(f"refused before the device: {line[:500]}", flush=True)
    return 1 if refused else 0


def compiled(r, sizes: dict, model: str, resources: dict | None = None) -> str | None:
    """Print ``r`` at its tiles as Triton and compile every kernel a run at ``sizes`` launches for ``model``'s
    architecture (``triton.compile`` for the GPU target, here on the CPU; no GPU): None, or why it cannot be (the
    printer's refusal, Triton's error, shared memory over the model's).  What the device would meet first, at
    no device time.  ``resources``: a dict given is filled with each compiled kernel's (its registers and spilled
    bytes a thread: ``TritonKernel.compile``)."""
    arch = nc.hardware.load(model).compute_capability.replace(".", "")
    try:
        k = training.Pass("compiled", r, sizes, env={}).kernel     # the plan and kernel a row prints
        info = k.compile(arch=int(arch), num_warps=k.printer.num_warps, num_stages=k.printer.num_stages,
                         kernels=k.launched())
    except Exception as e:        # a refusal is the answer: reported, the others go on
        return f"{type(e).__name__}: {e}"
    if resources is not None:
        resources.update(info["kernels"])
    return None


def selection(clauses: list, ap=None):
    """``--where KEY=V1,V2 ...`` as a test of a row: each KEY one of its values (an integer where it reads as one);
    a KEY no row has is an error naming the keys rows have.

    >>> where = selection(["N=4096,131072", "d=128"])
    >>> where({"N": 4096, "d": 128}), where({"N": 1024, "d": 128}), where({"N": 4096, "d": 64})
    (True, False, False)
    """
    wanted = {}
    for clause in clauses:
        key, eq, values = clause.partition("=")
        if not eq or not values:
            msg = f"--where {clause!r}: write KEY=V1,V2 (a row's key, e.g. N=4096,16384)"
            if ap is not None:
                ap.error(msg)
            raise ValueError(msg)
        wanted[key] = {int(v) if v.lstrip("-").isdigit() else v for v in values.split(",")}
    known = {k for c in configurations(False, False) + configurations(True, False) for k in c}
    unknown = sorted(set(wanted) - known)
    if unknown:
        msg = f"--where: no row has the key(s) {unknown}; rows have {sorted(known)}"
        if ap is not None:
            ap.error(msg)
        raise ValueError(msg)
    return lambda cfg: all(cfg.get(k) in vs for k, vs in wanted.items())


def _ms(t) -> str:
    return "    —    " if not t else f"{t * 1e3:8.3f} ms"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=str(HERE / "results"), help="folder for <device>-<date>.json and .png")
    ap.add_argument("--quick", action="store_true", help="fewer sizes, one candidate per configuration")
    ap.add_argument("--dry-run", action="store_true", help="CPU, tiny sizes, Triton's interpreter, untimed")
    ap.add_argument("--only", help="comma-separated kinds to run (attention, causal, decode, gqa, matmul, cuda; "
                                   f"forward+backward: {', '.join(training.KINDS)}, flce)")
    ap.add_argument("--sweep", type=int, default=0, metavar="K",
                    help="time K tile assignments around each row's derived pick, one tile changed at a time (a "
                         "forward+backward row: its backward pass's), searched in the run (neighbours())")
    ap.add_argument("--relaunch", action="store_true",
                    help="also time each backward pass with its kernels launched at the time model's threads "
                         "(relaunch.py: the printer launches every kernel of a plan with one num_warps)")
    ap.add_argument("--where", action="append", default=[], metavar="KEY=V1,V2",
                    help="run only the rows whose KEY (N, d, …) is one of the values (repeatable)")
    ap.add_argument("--tag", help="a suffix for the results file names (<device>-<date>-<tag>.json)")
    ap.add_argument("--derived", help="a folder of derivations searched before (prederived.py): each row reads "
                                      "its own there where the folder holds them for this tree, else searches")
    ap.add_argument("--prederive", action="store_true", help="search the rows' derivations for --models and keep "
                                                             "them in --derived (no GPU), instead of running them")
    ap.add_argument("--models", nargs="+", default=["h100-sxm5", "h200"], help="the GPU models --prederive "
                                                                                 "derives for")
    args = ap.parse_args(argv)
    kinds = set(args.only.split(",")) if args.only else None
    if args.prederive:
        if args.derived is None:
            ap.error("--prederive writes into the folder --derived names: give --derived DIR")
        return prederive(args, kinds)
    if args.derived is not None and not Path(args.derived).is_dir():
        ap.error(f"--derived {args.derived}: no such folder (run.py --prederive --derived {args.derived} writes one)")
    env = measure.environment(dry=args.dry_run)
    env["relaunch"] = args.relaunch
    if not args.dry_run:            # the device's probes beside the ceilings (probes.py), λ as the ceiling "wave"
        import probes               # (Triton kernels: the dry run never imports Triton in this process)
        env["probes"] = probes.probes(env["ceilings"]["hbm"])
        if isinstance(env["probes"].get("wave_s"), float) and env["probes"]["wave_s"] > 0:
            env["ceilings"]["wave"] = env["probes"]["wave_s"]
    if args.derived is not None:     # each row reads its derivations searched before (prederived.py)
        env["derive"] = prederived.Prederived(args.derived).derive
    print(f"device: {env['device']} → model {env['model']}; ceilings {env['ceilings']}; probes "
          f"{env.get('probes', {})}", flush=True)
    rows = []
    date = datetime.date.today().isoformat()
    stem = f"{'dry-run' if args.dry_run else env['slug']}-{date}" + (f"-{args.tag}" if args.tag else "")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    def result(after):
        return {"schema": 2, "device": env["device"], "model": env["model"], "date": date, "dry_run": args.dry_run,
                "provenance": {**env["provenance"], "clocks_after": after},
                "versions": {**env["versions"], "python": platform.python_version()},
                "tolerance": measure.TOLERANCE, "timing": measure.TIMING, "ceilings": env["ceilings"],
                "probes": env.get("probes", {}), "rows": rows}
    where = selection(args.where, ap)
    for cfg in configurations(args.dry_run, args.quick):
        if (kinds and cfg["kind"] not in kinds) or not where(cfg):
            continue
        print(f"{cfg}", flush=True)
        try:
            rows.append(run_case(cfg, env, args))
        except Exception as e:        # a failed case is a result too: recorded, the run goes on
            import traceback
            rows.append({**cfg, "failed": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()[-3000:]})
            print(f"  FAILED: {type(e).__name__}: {e}", flush=True)
        # written after every row: a run stopped at its time limit keeps the rows it finished
        (out / f"{stem}.json").write_text(json.dumps(result("not recorded: the run did not finish"), indent=1,
                                                     default=_jsonable))
    final = result(measure.provenance(dry=args.dry_run)["clocks"])
    (out / f"{stem}.json").write_text(json.dumps(final, indent=1, default=_jsonable))
    report.plot(final, out / f"{stem}.png")
    print(report.table(final))
    print(f"results: {out / (stem + '.json')} and {out / (stem + '.png')}")
    return 0 if not any("failed" in r for r in rows) else 1


def _jsonable(x):
    """What json cannot write itself: an integer as an int (numpy's, sympy's Integer), another number as a float
    (never truncated: a sympy Float of 6e-10 s is 6e-10, not 0), one not finite as None, anything else as text."""
    try:
        f = float(x)
    except (TypeError, ValueError):
        return str(x)
    if not math.isfinite(f):
        return None
    try:
        i = int(x)
    except (TypeError, ValueError, OverflowError):
        return f
    return i if i == x else f


if __name__ == "__main__":
    sys.exit(main())
