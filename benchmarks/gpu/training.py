"""The training step's rows of the GPU benchmark: attention's forward and backward (dense, and every mask of
:mod:`zoo`), derived for the machine's hardware model, against torch's paths for the same step.

For a row of kind ``k`` (``cfg``: ``d``, ``N``, ``batch``, ``heads``):

1. ``f = zoo.forward(k)`` (O and L = logsumexp, over ``h`` = batch·heads) and its backward
   ``nc.grad(f, wrt=[0, 1, 2], saved=True, aux=1)`` (Q, K, V, the mask's inputs, the saved O and L, dO → dQ, dK,
   dV: FlashAttention-2's backward, P recomputed from L) are each derived by ``nc.derive(..., hardware=)`` (a
   mask from data at the fraction of pairs it lets through: ``density=``), planned at their tiles and printed as
   Triton (bf16 operands, fp32 accumulation; a split reduction where the derivation asks for one);
2. the forward runs on the inputs, the backward on its O and L (as a training step runs them); O, dQ, dK and dV
   are each compared with the float64 reference (:func:`zoo.reference`, torch.autograd); the largest relative
   L2 error is the row's gate (``measure.TOLERANCE``): nothing wrong is timed;
3. the time is the forward's median plus the backward's (each ``do_bench``, spreads kept apart), the prediction
   the time model's for the two plans (the data's block tables give a mask from data its density at the kernel's
   tiles);
4. the baselines, gated the same way: ``scaled_dot_product_attention`` forward+backward under each backend
   (dense rows), and FlexAttention (``torch.compile(flex_attention)`` with its ``BlockMask`` from the same
   ``mask_mod``) forward+backward.  On the CPU (the dry run) flex_attention runs uncompiled, which checks the mods
   the GPU's run compiles.

>>> [k for k in KINDS]
['backward', 'window', 'prefix-lm', 'document', 'alibi', 'softcap']
"""
from __future__ import annotations

import time

import numpy as np
import torch

import napkin_cat as nc
import measure
import zoo
from picks import neighbours
from relaunch import model_shapes, relaunched

KINDS = zoo.MASKS
FORMATS = {"Q": "bf16", "K": "bf16", "S": "fp32", "P": "bf16", "V": "bf16", "O": "bf16"}
OUTPUTS = ("O", "dQ", "dK", "dV")


def configurations(dry: bool, quick: bool) -> list[dict]:
    """Dense forward+backward at d = 64 and 128, N = 1,024 … 16,384 (batch·N = 16k tokens, 2,048/d heads, as the
    forward's rows); every mask at d = 128 over the same N; the dry run at one tiny size each (dense attention at
    N = 512, one head: the smallest where the model derives FlashAttention-2's two kernels, each streaming)."""
    if dry:
        return [{"kind": "backward", "d": 16, "N": 512, "batch": 1, "heads": 1}] + \
            [{"kind": k, "d": 16, "N": 128, "batch": 1, "heads": 2} for k in KINDS[1:]]
    ns = (1024, 4096, 16384) if quick else (1024, 2048, 4096, 8192, 16384)
    out = [{"kind": "backward", "d": d, "N": n, "batch": max(1, 16384 // n), "heads": 2048 // d}
           for d in (64, 128) for n in ns]
    out += [{"kind": k, "d": 128, "N": n, "batch": max(1, 16384 // n), "heads": 16}
            for k in KINDS[1:] for n in ((4096,) if quick else ns)]
    return out


def flops_of(cfg, allowed: float) -> float:
    """Forward 4·B·H·N²·d, backward 2.5 times that (FlashAttention-2's count: five N²·d products against two),
    times the fraction of pairs the mask allows."""
    return 3.5 * 4.0 * cfg["batch"] * cfg["heads"] * cfg["N"] ** 2 * cfg["d"] * allowed


def inputs(cfg, env) -> dict:
    """Q, K, V, dO (bf16, h × N × d), and the document ids (int32, N) where the kind reads them."""
    dev = env["where"]
    g = torch.Generator(device=dev).manual_seed(0)
    h, n, d = cfg["batch"] * cfg["heads"], cfg["N"], cfg["d"]
    Q, K, V, dO = (torch.randn(h, n, d, generator=g, device=dev).to(torch.bfloat16) for _ in range(4))
    out = {"Q": Q, "K": K, "V": V, "dO": dO}
    if cfg["kind"] == "document":
        out["ids"] = zoo.documents(cfg).to(dev)
    return out


def reference(cfg, x) -> dict:
    """The float64 reference, a few heads at a time (:func:`zoo.reference`)."""
    h = x["Q"].shape[0]
    step = max(1, 2 ** 26 // (x["Q"].shape[1] * x["K"].shape[1]))
    parts = [zoo.reference(cfg["kind"], cfg, x["Q"][i:i + step], x["K"][i:i + step], x["V"][i:i + step],
                           x["dO"][i:i + step], x.get("ids")) for i in range(0, h, step)]
    return {k: torch.cat([p[k] for p in parts]) for k in parts[0]}


def errors(got: dict, ref: dict) -> dict:
    """Relative L2 error of each of O, dQ, dK, dV (``measure.error``, against float64)."""
    return {k: measure.error(got[k].double(), ref[k]) for k in OUTPUTS if k in got}


def functions(cfg) -> tuple:
    """``((f, g), sizes)``: the row's forward (O and L over ``h`` = batch·heads) and its backward, and the sizes."""
    f = zoo.forward(cfg["kind"], cfg, FORMATS)
    sizes = {"q": cfg["N"], "x": cfg["N"], "d": cfg["d"], "h": cfg["batch"] * cfg["heads"]}
    return (f, nc.grad(f, wrt=[0, 1, 2], saved=True, aux=1)), sizes


def density(cfg, ids=None) -> float:
    """The fraction of pairs the row's mask lets through, on its document ids (:func:`zoo.documents` where not
    given)."""
    if ids is None and cfg["kind"] == "document":
        ids = zoo.documents(cfg)
    return zoo.allowed(cfg["kind"], cfg, ids)


def derived(cfg, model, rho, derive=measure.searched) -> tuple:
    """``(forward derivation, backward derivation, where each came from, sizes)`` for ``model``: ``derive(f, sizes,
    model, rho)`` (searched; a run given ``--derived`` reads those searched before, ``prederived.py``)."""
    (f, g), sizes = functions(cfg)
    (rf, wf), (rb, wb) = (derive(fn, sizes, model, rho) for fn in (f, g))
    return rf, rb, {"forward": wf, "backward": wb}, sizes


class Pass:
    """One derived pass (forward or backward): its plan, Triton kernel, prediction, and how to run it."""

    def __init__(self, name, r, sizes, env, tiles=None):
        self.name, self.r = name, r
        self.tiles = tiles or {str(a): int(v) for a, v in r.optimum.exact_sizes.items()}
        self.plan = nc.plan(r.diagram, {**sizes, **self.tiles})
        self.kernel = nc.codegen.triton(self.plan)
        self.env = env

    def tables(self, args) -> list:
        """The block tables of a mask from data on ``args`` at this kernel's tiles (none without)."""
        if not self.kernel.printer.block_tables:
            return []
        return self.kernel.block_arguments([a.detach().float().cpu().numpy() for a in args], "data")

    def run(self, args):
        """The kernel's outputs on ``args`` (torch), under the interpreter on the CPU, else on the GPU, with a
        function that runs it again (timing)."""
        tables = self.tables(args)
        if self.env["dry"]:
            out = self.kernel(*[a.cpu() for a in args], **({"block_mask": "data"} if tables else {}))
            return (out if isinstance(out, tuple) else (out,)), None
        fn = measure.printed_module(self.kernel.path()).nc_run
        ts = [torch.from_numpy(np.asarray(t)).to(args[0].device) for t in tables]
        out = fn(*args, *ts)
        torch.cuda.synchronize()
        return (out if isinstance(out, tuple) else (out,)), (lambda: fn(*args, *ts))

    def relaunch(self, args, ref) -> dict:
        """This pass with each kernel launched at the time model's threads (:mod:`relaunch`): its launch shapes,
        and on a GPU its errors (gated against ``ref`` as the pass is) and time; in the dry run its source only."""
        shapes, why = model_shapes(self.plan, self.kernel, self.env["model"])
        if shapes is None:
            return {"skipped": why}
        printed = {n: (self.kernel.printer.num_warps, self.kernel.printer.num_stages) for n in shapes}
        rec = {"launch_shapes": {n: list(ws) for n, ws in shapes.items()},
               "printed_shapes": {n: list(ws) for n, ws in printed.items()}, "time_s": None}
        if shapes == printed:
            rec["same"] = True
            return rec
        source = relaunched(self.kernel.source, shapes)
        rec["changed_lines"] = sum(a != b for a, b in zip(source.splitlines(), self.kernel.source.splitlines()))
        if self.env["dry"]:
            return rec
        path = self.kernel.path().with_name(self.kernel.path().stem + "_relaunched.py")
        path.write_text(source)
        fn = measure.printed_module(path).nc_run
        tables = [torch.from_numpy(np.asarray(t)).to(args[0].device) for t in self.tables(args)]
        out = fn(*args, *tables)
        torch.cuda.synchronize()
        errs = errors(dict(zip(("dQ", "dK", "dV"), out)), ref)
        rec.update(errors=errs, error=max(errs.values()))
        why = measure.gated(rec["error"], "bf16")
        if why:
            rec["gate"] = why
            return rec
        rec["spread"] = measure.bench(lambda: fn(*args, *tables))
        rec["time_s"] = rec["spread"]["median"]
        return rec

    def describe(self, args) -> dict:
        """What the row records of this pass: variant, tiles, launch shape, prediction (the tables' density)."""
        tables = self.tables(args)
        density = float(np.mean([np.mean(np.asarray(t) != 0) for t in tables])) if tables else None
        pred = nc.hardware.predict(self.plan, self.env["model"], **({"density": density} if tables else {}))
        ceil = (nc.hardware.predict(self.plan, self.env["model"], ceilings=self.env["ceilings"],
                                    **({"density": density} if tables else {})) if self.env["ceilings"] else None)
        out = {"variant": str(self.r.variant), "tiles": self.tiles, "kernels": len(self.r.variant.kernels),
               "model_s": self.r.prediction.time, "H": int(self.r.H), "predicted_s": pred.time,
               "predicted_measured_ceilings_s": ceil.time if ceil else None, "prediction": pred.to_dict(),
               "num_warps": self.kernel.printer.num_warps, "num_stages": self.kernel.printer.num_stages,
               "block_tables": len(tables), "table_density": density,
               "source_lines": len(self.kernel.source.splitlines())}
        if self.env["dry"]:
            info = self.kernel.compile(arch=90, num_warps=self.kernel.printer.num_warps,
                                       num_stages=self.kernel.printer.num_stages, kernels=self.kernel.launched())
            out.update(triton_smem=info["smem"], triton_compiled=sorted(info["kernels"]), plan_smem=info["plan_smem"])
        return out


def run_case(cfg, env, sweep: int = 0) -> dict:
    """One forward+backward row (see the module docstring); ``sweep``: also time that many tile assignments of the
    backward pass around its pick (:func:`picks.neighbours`; searched in the run, which keeps the search's timings)."""
    kind = cfg["kind"]
    x = inputs(cfg, env)
    allowed = density(cfg, None if "ids" not in x else x["ids"].cpu())
    t0 = time.perf_counter()
    rf, rb, where, sizes = derived(cfg, env["model"], allowed,
                                   measure.searched if sweep else env.get("derive", measure.searched))
    row = {**cfg, "pass": "forward+backward", "sizes": sizes, "allowed": allowed, "flops": flops_of(cfg, allowed),
           "derive_s": time.perf_counter() - t0, "derived": where, "variant": f"{rf.variant} | {rb.variant}"}
    ref = reference(cfg, x)
    try:
        cand, saved = _derived_pick(cfg, row, rf, rb, sizes, x, ref, env)
    except Exception as e:      # a pick that cannot be printed or run is a result: recorded, the baselines still run
        import traceback
        cand = {"pick": "derived", "variant": row["variant"], "time_s": None,
                "failed": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()[-3000:]}
        print(f"  {kind:9} derived  failed: {cand['failed'][:300]}", flush=True)
    row["candidates"] = [cand]
    if sweep and cand.get("forward"):
        row["candidates"] += swept(cfg, rb, sizes, x, ref, env, sweep, saved)
    row["baselines"] = baselines(cfg, x, ref, env)
    timed = [b for b in row["baselines"] if b.get("time_s")]
    if timed:
        row["baseline"] = min(timed, key=lambda b: b["time_s"])
    return row


def swept(cfg, rb, sizes, x, ref, env, k: int, saved) -> list[dict]:
    """The backward pass at the tile assignments around its pick (:func:`picks.neighbours`, the pick itself left
    out), each on what the derived forward saved (``saved``: its O and L, as the pick's backward read them), gated
    on dQ, dK, dV and timed: ``{"pick": "sweep:backward", "backward": ...}``."""
    ids = [x["ids"], x["ids"]] if "ids" in x else []
    O, L = saved
    bargs = [x["Q"], x["K"], x["V"], *ids, O.to(torch.bfloat16), L.float(), x["dO"]]
    out = []
    for c in neighbours(rb, k)[1:]:
        c["pick"] = "sweep:backward"
        try:
            bwd = Pass("backward", rb, sizes, env, tiles=c["tiles"])
            (dQ, dK, dV), brun = bwd.run(bargs)
            errs = errors({"dQ": dQ, "dK": dK, "dV": dV}, ref)
            c.update(backward=bwd.describe(bargs), errors=errs, error=max(errs.values()), time_s=None)
            why = measure.gated(c["error"], "bf16")
            if why:
                c["gate"] = why
            elif not env["dry"]:
                c["backward"]["spread"] = measure.bench(brun)
                c["backward"]["time_s"] = c["backward"]["spread"]["median"]
            if env.get("relaunch") and not why:
                c["backward"]["relaunched"] = bwd.relaunch(bargs, ref)
        except Exception as e:      # an assignment that cannot be printed or run is recorded, the others go on
            c["failed"] = f"{type(e).__name__}: {str(e)[:500]}"
        b = c.get("backward", {})
        print(f"  {cfg['kind']:9} sweep    bwd {c['tiles']} model {c['model_s'] * 1e3:8.3f} ms  measured "
              f"{(b.get('time_s') or float('nan')) * 1e3:8.3f} ms  {c.get('gate') or c.get('failed') or ''}",
              flush=True)
        out.append(c)
    return out


def _derived_pick(cfg, row, rf, rb, sizes, x, ref, env) -> tuple:
    """``(candidate, (O, L))``: the derived pick, both passes printed as Triton, run, gated against ``ref``, timed on
    a GPU; and what its forward saved, which the sweep's backward passes read (:func:`swept`)."""
    ids = [x["ids"], x["ids"]] if "ids" in x else []
    fwd, bwd = Pass("forward", rf, sizes, env), Pass("backward", rb, sizes, env)
    fargs = [x["Q"], x["K"], x["V"], *ids]
    (O, L), frun = fwd.run(fargs)
    bargs = [x["Q"], x["K"], x["V"], *ids, O.to(torch.bfloat16), L.float(), x["dO"]]
    (dQ, dK, dV), brun = bwd.run(bargs)
    errs = errors({"O": O, "dQ": dQ, "dK": dK, "dV": dV}, ref)
    cand = {"pick": "derived", "variant": row["variant"], "forward": fwd.describe(fargs),
            "backward": bwd.describe(bargs), "errors": errs, "error": max(errs.values()), "time_s": None}
    cand["tiles"] = {**cand["forward"]["tiles"], **{f"bwd.{k}": v for k, v in cand["backward"]["tiles"].items()}}
    cand["predicted_s"] = cand["forward"]["predicted_s"] + cand["backward"]["predicted_s"]
    if all(cand[p]["predicted_measured_ceilings_s"] for p in ("forward", "backward")):
        cand["predicted_measured_ceilings_s"] = sum(cand[p]["predicted_measured_ceilings_s"]
                                                    for p in ("forward", "backward"))
    why = measure.gated(cand["error"], "bf16")
    if why:
        cand["gate"] = why
    elif not env["dry"]:
        for p, fn in (("forward", frun), ("backward", brun)):
            cand[p]["spread"] = measure.bench(fn)
            cand[p]["time_s"] = cand[p]["spread"]["median"]
        cand["time_s"] = cand["forward"]["time_s"] + cand["backward"]["time_s"]
        cand["tflops"] = row["flops"] / cand["time_s"] / 1e12
    if env.get("relaunch") and not why:
        cand["backward"]["relaunched"] = bwd.relaunch(bargs, ref)
    print(f"  {cfg['kind']:9} derived  fwd {fwd.tiles} bwd {bwd.tiles} model {cand['predicted_s'] * 1e3:8.3f} ms  "
          f"err {cand['error']:.1e}{'  ' + cand['gate'] if cand.get('gate') else ''}", flush=True)
    return cand, (O, L)


def baselines(cfg, x, ref, env) -> list[dict]:
    """torch's forward+backward of the same step, each gated on O, dQ, dK, dV like the derived kernels and timed
    (forward and backward in one timed function) where correct and on a GPU."""
    F = torch.nn.functional
    B, H, n, d = cfg["batch"], cfg["heads"], cfg["N"], cfg["d"]
    q, k, v, dO = (x[a].reshape(B, H, n, d) for a in ("Q", "K", "V", "dO"))
    out = []

    def attempt(name, forward, backward=True):
        leaves = [t.detach().requires_grad_(backward) for t in (q, k, v)]

        def step():
            o = forward(*leaves)
            return o, (torch.autograd.grad(o, leaves, dO) if backward else ())
        try:
            o, grads = step()
            if env["where"] == "cuda":
                torch.cuda.synchronize()
        except Exception as e:        # a path that refuses these inputs is reported, not fatal
            out.append({"path": name, "time_s": None, "refused": f"{type(e).__name__}: {str(e)[:200]}"})
            return
        got = {"O": o.detach().reshape(-1, n, d), **{a: t.reshape(-1, n, d) for a, t in zip(OUTPUTS[1:], grads)}}
        errs = errors(got, ref)
        row = {"path": name, "errors": errs, "error": max(errs.values()), "time_s": None}
        why = measure.gated(row["error"], "bf16")
        if why:
            row["gate"] = why
        elif not env["dry"]:
            row["spread"] = measure.bench(step)
            row["time_s"] = row["spread"]["median"]
        out.append(row)
    if cfg["kind"] == "backward":
        from torch.nn.attention import SDPBackend, sdpa_kernel
        for name, be in (("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION),
                         ("efficient", SDPBackend.EFFICIENT_ATTENTION), ("default dispatch", None)):
            def sdpa(a, b, c, be=be):
                if be is None:
                    return F.scaled_dot_product_attention(a, b, c)
                with sdpa_kernel(be):
                    return F.scaled_dot_product_attention(a, b, c)
            attempt(f"sdpa {name}, forward+backward, 4-D", sdpa)
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention
    m = zoo.mods(cfg["kind"], cfg, x["ids"].long() if "ids" in x else None)
    if env["where"] == "cuda":
        flex = torch.compile(flex_attention)
        mask = create_block_mask(m["mask_mod"], None, None, n, n, device="cuda") if m["mask_mod"] else None
        name = "flex_attention compiled, block mask, forward+backward, 4-D"
    else:                             # the CPU checks the mods (and the block mask) the GPU compiles: forward only,
        flex = flex_attention         # FlexAttention has no backward on the CPU
        mask = create_block_mask(m["mask_mod"], None, None, n, n, device="cpu") if m["mask_mod"] else None
        name = "flex_attention (uncompiled, forward only: the CPU's check of the mods), block mask, 4-D"
    attempt(name, lambda a, b, c: flex(a, b, c, score_mod=m["score_mod"], block_mask=mask),
            backward=env["where"] == "cuda")
    return out
