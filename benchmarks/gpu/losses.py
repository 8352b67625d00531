"""The fused linear cross-entropy rows of the GPU benchmark: the loss of a language model's last layer over a 128k
vocabulary, forward and backward, derived for the machine's hardware model, against Liger-Kernel's
``LigerFusedLinearCrossEntropyLoss`` and torch's unfused path.

For hidden states H (n × e, bf16), the output layer's weight W (v × e, bf16) and targets t (n, int32):

    loss = mean_i (logsumexp_v (H Wᵀ)ᵢ − (H Wᵀ)[i, tᵢ])            (the logits fp32: the product's accumulator)

``f = nc.library.linear_cross_entropy(dtype="bf16")`` (the per-row losses) and ``nc.grad(f, wrt=[0, 1])`` (dH, dW
for the cotangent 1/n of every row: the mean) are each derived by ``nc.derive(..., hardware=)``, planned at their
tiles, printed as Triton and run: no n × v array is written by either.  The float64 reference is torch.autograd on
the same bf16 inputs; the gate is the largest relative L2 error of the losses, dH and dW (``measure.TOLERANCE``).
The baselines, gated and timed the same way (forward and backward in one timed function): Liger-Kernel's fused
loss (where it is installed; its Triton kernels run under the interpreter in the dry run), and torch's logits
materialised in fp32 then ``cross_entropy``.  On a GPU each path's peak memory is recorded
(``torch.cuda.max_memory_allocated`` over one step, the inputs included).

>>> [c["v"] for c in configurations(dry=False, quick=True)]
[128256]
"""
from __future__ import annotations

import importlib.util
import time

import torch

import napkin_cat as nc
import measure
from training import Pass

OUTPUTS = ("loss", "dH", "dW")


def configurations(dry: bool, quick: bool) -> list[dict]:
    """Llama 3's vocabulary (v = 128,256) at e = 4,096 over n = 8,192 tokens (and 4,096 unless ``quick``)."""
    if dry:
        return [{"kind": "flce", "n": 128, "e": 32, "v": 512}]
    return [{"kind": "flce", "n": n, "e": 4096, "v": 128256} for n in ((8192,) if quick else (4096, 8192))]


def functions(cfg) -> tuple:
    """``((f, g), sizes)``: the per-row losses and their gradient in H and W, and the sizes."""
    f = nc.library.linear_cross_entropy(dtype="bf16")
    return (f, nc.grad(f, wrt=[0, 1])), {a: cfg[a] for a in ("n", "e", "v")}


def inputs(cfg, env) -> dict:
    dev = env["where"]
    g = torch.Generator(device=dev).manual_seed(0)
    n, e, v = cfg["n"], cfg["e"], cfg["v"]
    H = torch.randn(n, e, generator=g, device=dev).to(torch.bfloat16)
    W = (torch.randn(v, e, generator=g, device=dev) / e ** 0.5).to(torch.bfloat16)
    t = torch.randint(0, v, (n,), generator=g, device=dev, dtype=torch.int64)
    return {"H": H, "W": W, "t": t, "dy": torch.full((n,), 1.0 / n, device=dev)}


def reference(x) -> dict:
    """float64 per-row losses, and dH, dW of their mean (torch.autograd)."""
    H, W = (x[a].detach().double().requires_grad_(True) for a in ("H", "W"))
    logits = H @ W.T
    loss = torch.logsumexp(logits, -1) - logits.gather(1, x["t"][:, None]).squeeze(1)
    dH, dW = torch.autograd.grad(loss.mean(), (H, W))
    return {"loss": loss.detach(), "dH": dH, "dW": dW}


def errors(got, ref) -> dict:
    return {k: measure.error(got[k].double(), ref[k]) for k in OUTPUTS if k in got}


def run_case(cfg, env) -> dict:
    t0 = time.perf_counter()
    derive = env.get("derive", measure.searched)        # (a run given --derived: those searched before)
    (f, g), sizes = functions(cfg)
    (rf, wf), (rb, wb) = (derive(fn, sizes, env["model"], 1.0) for fn in (f, g))
    row = {**cfg, "pass": "forward+backward", "sizes": sizes, "flops": 6.0 * cfg["n"] * cfg["e"] * cfg["v"],
           "derive_s": time.perf_counter() - t0, "derived": {"forward": wf, "backward": wb},
           "variant": f"{rf.variant} | {rb.variant}"}
    x = inputs(cfg, env)
    ref = reference(x)
    fwd, bwd = Pass("forward", rf, sizes, env), Pass("backward", rb, sizes, env)
    t32 = x["t"].to(torch.int32)
    fargs = [x["H"], x["W"], t32]
    (loss,), frun = fwd.run(fargs)
    bargs = [x["H"], x["W"], t32, x["dy"]]
    (dH, dW), brun = bwd.run(bargs)
    errs = errors({"loss": loss, "dH": dH, "dW": dW}, ref)
    cand = {"pick": "derived", "variant": row["variant"], "forward": fwd.describe(fargs),
            "backward": bwd.describe(bargs), "errors": errs, "error": max(errs.values()), "time_s": None}
    cand["tiles"] = {**cand["forward"]["tiles"], **{f"bwd.{k}": v for k, v in cand["backward"]["tiles"].items()}}
    cand["predicted_s"] = cand["forward"]["predicted_s"] + cand["backward"]["predicted_s"]
    why = measure.gated(cand["error"], "bf16")
    if why:
        cand["gate"] = why
    elif not env["dry"]:
        for p, fn in (("forward", frun), ("backward", brun)):
            cand[p]["spread"] = measure.bench(fn)
            cand[p]["time_s"] = cand[p]["spread"]["median"]
        cand["time_s"] = cand["forward"]["time_s"] + cand["backward"]["time_s"]
        cand["tflops"] = row["flops"] / cand["time_s"] / 1e12
        cand["peak_bytes"] = _peak(lambda: (frun(), brun()))
    row["candidates"] = [cand]
    print(f"  flce      derived  fwd {fwd.tiles} bwd {bwd.tiles} model {cand['predicted_s'] * 1e3:8.3f} ms  "
          f"err {cand['error']:.1e}{'  ' + cand['gate'] if cand.get('gate') else ''}", flush=True)
    row["baselines"] = baselines(x, ref, env)
    timed = [b for b in row["baselines"] if b.get("time_s")]
    if timed:
        row["baseline"] = min(timed, key=lambda b: b["time_s"])
    return row


def _peak(fn) -> int:
    """Peak bytes allocated on the GPU over one call of ``fn`` (what was allocated before it included)."""
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    fn()
    torch.cuda.synchronize()
    return int(torch.cuda.max_memory_allocated())


def baselines(x, ref, env) -> list[dict]:
    F = torch.nn.functional
    out = []

    def attempt(name, loss_fn):
        leaves = [x[a].detach().requires_grad_(True) for a in ("H", "W")]

        def step():
            loss = loss_fn(*leaves)
            return loss, torch.autograd.grad(loss, leaves)
        try:
            loss, (dH, dW) = step()
        except Exception as e:        # a path that refuses these inputs is reported, not fatal
            out.append({"path": name, "time_s": None, "refused": f"{type(e).__name__}: {str(e)[:200]}"})
            return
        errs = {"mean loss": measure.error(loss.detach().double().reshape(1), ref["loss"].mean().reshape(1)),
                **errors({"dH": dH, "dW": dW}, ref)}
        row = {"path": name, "errors": errs, "error": max(errs.values()), "time_s": None}
        why = measure.gated(row["error"], "bf16")
        if why:
            row["gate"] = why
        elif not env["dry"]:
            row["spread"] = measure.bench(step)
            row["time_s"] = row["spread"]["median"]
            row["peak_bytes"] = _peak(step)
        out.append(row)
    if importlib.util.find_spec("liger_kernel"):
        from liger_kernel.transformers import LigerFusedLinearCrossEntropyLoss
        liger = LigerFusedLinearCrossEntropyLoss()
        attempt("liger_kernel LigerFusedLinearCrossEntropyLoss (mean)", lambda H, W: liger(W, H, x["t"]))
    else:
        out.append({"path": "liger_kernel", "time_s": None, "refused": "not installed (pip install liger-kernel)"})
    attempt("torch: logits in fp32, then cross_entropy (mean)", lambda H, W: F.cross_entropy((H @ W.T).float(), x["t"]))
    return out
