"""What ``run.py`` measures: the device, its state and ceilings, inputs and float64 references, the generated kernels
and torch's baselines.  On ``dry`` (CPU) nothing is timed.  (Tables and plots: ``report.py``.)

Nothing is timed whose output is wrong: every kernel and every torch path is run once, its relative L2 error
against the float64 reference computed, and it is timed only if that error is within :data:`TOLERANCE` for its
operands' format (:func:`gated`).  A time is the median of ``do_bench``'s runs, recorded with its spread.

>>> spread([3e-3, 1e-3, 2e-3, 5e-3, 4e-3])["median"], spread([3e-3, 1e-3, 2e-3, 5e-3, 4e-3])["n"]
(0.003, 5)
>>> gated(0.5, "bf16")
'error 5.0e-01 > tolerance 1.0e-02 (bf16 operands): not timed'
"""
from __future__ import annotations

import importlib.metadata
import importlib.util
import math
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import torch

import napkin_cat as nc

#: the hardware model of a device, by what its name contains (first match)
DEVICES = (("H200", "h200"), ("H800", "h800"), ("H100 PCIe", "h100-pcie"), ("H100", "h100-sxm5"),
           ("A100", "a100"))


def model_for(name: str) -> str:
    for key, model in DEVICES:
        if key.lower() in name.lower():
            return model
    raise SystemExit(f"no hardware model for device {name!r}; models: {nc.hardware.models()} "
                     "(docs/adding-a-hardware-model.md)")


#: the largest relative L2 error (against float64) a kernel or torch path may have and still be timed, by the format of
#: its operands: bf16 rounds each operand to 8 bits of mantissa (attention's errors are 2.6e-3 to 3.2e-3, the
#: products' 1.7e-3 in the committed runs); fp32 (the CUDA reference backend) is exact to 1e-6 here
TOLERANCE = {"bf16": 1e-2, "fp32": 1e-4}
#: how a time is measured (recorded in every results file)
TIMING = ("triton.testing.do_bench(warmup=25, rep=100, return_mode='all'): CUDA events, L2 flushed before each "
          "run; the median of the runs, with min, 10th and 90th percentile, max and count")
ROOT = Path(__file__).resolve().parent.parent.parent


def searched(f, sizes: dict, model: str, density: float = 1.0) -> tuple:
    """``(nc.derive(f, sizes=sizes, hardware=model[, density=]), where)``: a row's derivation searched in this
    process (``where`` says so, and how long it took); ``env["derive"]`` where a run reads derivations searched
    before (``prederived.py``)."""
    t0 = time.perf_counter()
    r = nc.derive(f, sizes=sizes, hardware=model, **({"density": density} if density < 1 else {}))
    return r, {"from": "searched in this run", "seconds": time.perf_counter() - t0}


def spread(times_s) -> dict:
    """The runs' distribution: ``{"median", "min", "p10", "p90", "max", "n"}`` in seconds (p10/p90 interpolated)."""
    t = sorted(float(x) for x in times_s)
    if not t:
        raise ValueError("no runs to summarise")

    def pct(p):
        k = (len(t) - 1) * p
        lo, hi = math.floor(k), math.ceil(k)
        return t[lo] + (t[hi] - t[lo]) * (k - lo)
    return {"median": statistics.median(t), "min": t[0], "p10": pct(0.1), "p90": pct(0.9), "max": t[-1],
            "n": len(t)}


def bench(fn) -> dict:
    """The spread of ``fn``'s times in seconds (Triton's do_bench, every run returned: see :data:`TIMING`)."""
    import triton.testing
    return spread(ms / 1e3 for ms in triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="all"))


def gated(err: float, fmt: str) -> str | None:
    """Why a result with relative error ``err`` is not timed (None: it is within :data:`TOLERANCE` for ``fmt``)."""
    tol = TOLERANCE[fmt]
    if math.isfinite(err) and err <= tol:
        return None
    return f"error {err:.1e} > tolerance {tol:.1e} ({fmt} operands): not timed"


def checked_and_timed(fn, out, reference, fmt: str, env, *, timer=None) -> dict:
    """``{"error", "time_s", "spread"}`` of ``fn`` whose first output was ``out``: timed (by ``timer``, default
    :func:`bench`) only on a GPU and only if the error passes :func:`gated`; else ``"gate"`` says why not."""
    row = {"error": error(out, reference), "time_s": None}
    why = gated(row["error"], fmt)
    if why:
        row["gate"] = why
    elif not env["dry"]:
        row["spread"] = (timer or bench)(fn)
        row["time_s"] = row["spread"]["median"]
    return row


def provenance(*, dry: bool) -> dict:
    """What the results were measured on: the commit (and whether tracked files differed from it), the driver and
    the clocks; a field that cannot be read says ``"not recorded: <why>"``."""
    out = {"commit": _git("rev-parse", "HEAD")}
    status = _git("status", "--porcelain", "--untracked-files=no")
    out["dirty"] = status if status.startswith("not recorded") else bool(status.strip())
    out["tree"] = working_tree()
    if dry:
        why = "not recorded: a CPU dry run (no GPU)"
        return {**out, "driver": why, "clocks": why}
    return {**out, **gpu_state()}


def gpu_state() -> dict:
    """The driver version and the GPU's clocks now (MHz: SM and memory, current and maximum), from nvidia-smi."""
    fields = ("driver_version", "clocks.sm", "clocks.max.sm", "clocks.mem", "clocks.max.mem", "power.limit",
              "persistence_mode")
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return {"driver": "not recorded: no nvidia-smi", "clocks": "not recorded: no nvidia-smi"}
    try:
        line = subprocess.run([smi, f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits", "-i", "0"],
                              capture_output=True, text=True, timeout=30, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError) as e:
        why = f"not recorded: nvidia-smi failed ({type(e).__name__})"
        return {"driver": why, "clocks": why}
    values = dict(zip(fields, (v.strip() for v in line.split(","))))
    return {"driver": values.pop("driver_version", "not recorded"), "clocks": values}


def working_tree() -> str:
    """The git tree id of the files as they are on disk, every one git does not ignore (``git write-tree`` over a copy
    of the index with every change and new file added): equal to ``git rev-parse <commit>^{tree}`` for the commit
    whose files were measured, even where the copy's git metadata names an earlier commit (the device receives the
    working tree, not the history; files that commit added are untracked there)."""
    index = _git("rev-parse", "--git-path", "index")
    if index.startswith("not recorded"):
        return index
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "index"
        try:
            shutil.copyfile(ROOT / index if not Path(index).is_absolute() else index, copy)
        except OSError as e:
            return f"not recorded: no git index ({type(e).__name__})"
        added = _git("add", "-A", env={"GIT_INDEX_FILE": str(copy)})
        return added if added.startswith("not recorded") else _git("write-tree", env={"GIT_INDEX_FILE": str(copy)})


def _git(*args, env=None) -> str:
    try:
        run = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, timeout=30,
                             env={**os.environ, **env} if env else None)
    except (OSError, subprocess.SubprocessError) as e:
        return f"not recorded: git failed ({type(e).__name__})"
    return run.stdout.strip() if run.returncode == 0 else f"not recorded: git {args[0]} failed"


def environment(*, dry: bool) -> dict:
    # Triton's version from its installed metadata: the dry run never imports Triton here (its kernels run and
    # compile in worker processes), and a process that did reports its objects as leaked at exit once frozen
    versions = {"torch": torch.__version__, "triton": importlib.metadata.version("triton"), "napkin_cat": nc.__version__
                if hasattr(nc, "__version__") else "0.1.0"}
    if dry:
        return {"dry": True, "device": "cpu (Triton interpreter)", "slug": "dry-run", "model": "h100-sxm5",
                "ceilings": {}, "versions": versions, "where": "cpu", "provenance": provenance(dry=True)}
    name = torch.cuda.get_device_name(0)
    versions["cuda"] = torch.version.cuda
    env = {"dry": False, "device": name, "slug": name.lower().replace(" ", "-"), "model": model_for(name),
           "versions": versions, "where": "cuda", "provenance": provenance(dry=False)}
    env["ceilings"] = {"hbm": _copy_bandwidth(2 ** 30), "tensor:bf16": _matmul_rate(8192)}
    return env


def _copy_bandwidth(n: int) -> float:
    """Bytes read plus written per second by a device-to-device copy of ``n`` bytes."""
    src = torch.empty(n, dtype=torch.uint8, device="cuda").random_()
    dst = torch.empty_like(src)
    return 2 * n / bench(lambda: dst.copy_(src))["median"]


def _matmul_rate(n: int) -> float:
    """FLOP/s of cuBLAS's n³ bf16 product on random data."""
    a, b = (torch.randn(n, n, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    return 2 * n ** 3 / bench(lambda: a @ b)["median"]


def _reference_attention(Q, K, V, causal=False):
    """float64 SoftMax(QKᵀ/√d)V (masked above the diagonal if ``causal``), in chunks of heads."""
    out = torch.empty(Q.shape, dtype=torch.float64, device=Q.device)
    step = max(1, 2 ** 28 // (Q.shape[-2] * K.shape[-2]))
    for h in range(0, Q.shape[0], step):
        out[h:h + step] = torch.nn.functional.scaled_dot_product_attention(
            Q[h:h + step].double(), K[h:h + step].double(), V[h:h + step].double(), is_causal=causal)
    return out


def inputs_and_reference(cfg, env):
    dev = env["where"]
    g = torch.Generator(device=dev).manual_seed(0)
    dt = torch.float32 if cfg["kind"] == "cuda" else torch.bfloat16

    def rand(*shape):
        return torch.randn(*shape, generator=g, device=dev, dtype=torch.float32).to(dt)
    if cfg["kind"] == "matmul":
        A, B = rand(cfg["a"], cfg["b"]), rand(cfg["b"], cfg["c"])
        return (A, B), A.double() @ B.double()
    n, d, m = cfg["N"], cfg["d"], cfg.get("q", cfg["N"])      # m query rows (1 when decoding) against n keys
    if cfg["kind"] == "gqa":
        hk, G = cfg["batch"] * cfg["kv_heads"], cfg["heads"] // cfg["kv_heads"]
        Q, K, V = rand(hk, G, m, d), rand(hk, n, d), rand(hk, n, d)
        ref = _reference_attention(Q.reshape(hk * G, m, d), K.repeat_interleave(G, 0), V.repeat_interleave(G, 0))
        return (Q, K, V), ref.reshape(hk, G, m, d)
    h = cfg["batch"] * cfg["heads"]
    Q, K, V = rand(h, m, d), rand(h, n, d), rand(h, n, d)
    return (Q, K, V), _reference_attention(Q, K, V, causal=cfg["kind"] == "causal")


def error(out, ref) -> float:
    out = out.float()
    if not torch.isfinite(out).all():
        return float("inf")
    return float((out - ref).norm() / ref.norm())


def printed_module(path):
    """The printed Triton module at ``path``, imported (its ``nc_run`` launches the kernels on a GPU)."""
    spec = importlib.util.spec_from_file_location(f"nc_bench_{path.stem}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def triton_kernel(k, inputs, reference, env) -> dict:
    """Correctness (relative L2 error against float64), Triton's compiled resources, and if correct the time.  The dry
    run compiles for the GPU the kernels a run at the case's sizes launches (``k.launched()``: the even variants
    where the tiles divide the sizes), as the GPU's run compiles them at their first launch; a ragged variant
    that no run launches is not compiled (``tests/codegen/test_triton.py`` compiles both)."""
    if env["dry"]:
        out = k(*[x.cpu() for x in inputs])
        info = k.compile(arch=90, num_warps=k.printer.num_warps, num_stages=k.printer.num_stages,
                         kernels=k.launched())
        return {**checked_and_timed(None, out, reference, "bf16", env), "triton_smem": info["smem"],
                "triton_compiled": sorted(info["kernels"]), "plan_smem": info["plan_smem"],
                "source_lines": len(k.source.splitlines())}
    fn = printed_module(k.path()).nc_run
    out = fn(*inputs)
    out = out[0] if isinstance(out, tuple) else out
    torch.cuda.synchronize()
    return {**checked_and_timed(lambda: fn(*inputs), out, reference, "bf16", env),
            "source_lines": len(k.source.splitlines())}


def cuda_kernel(p, inputs, reference, env) -> dict:
    """The CUDA reference backend: ptxas's report (and on a GPU the driver's), its answer, and if correct its time
    (seven launches by CUDA events, the first two discarded: a scalar kernel of milliseconds needs no more)."""
    k = nc.codegen.cuda(p, hardware=env["model"])
    report = k.compile(arch="sm_90")
    row = {"plan_smem": p.smem_bytes, "smem_static": report["smem_static"], "smem_dynamic": report["smem_dynamic"],
           "smem": report["smem"], "registers": report["registers"]}
    if env["dry"]:
        out = nc.codegen.c(p)(*[x.cpu().numpy() for x in inputs])    # the same loop nest, run on the CPU
        return {**row, **checked_and_timed(None, torch.from_numpy(out), reference.cpu(), "fp32", env)}
    out = k(*inputs)
    torch.cuda.synchronize()
    row["driver"] = k.attributes()
    outs = [torch.empty_like(out)]

    def launches(_fn):
        times = []
        for _ in range(7):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            k.run_device(list(inputs), outs)
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end) / 1e3)
        return spread(times[2:])
    return {**row, **checked_and_timed(None, out, reference, "fp32", env, timer=launches)}


def baselines(cfg, inputs, reference, env) -> list[dict]:
    """torch's paths for the same computation, each checked against the float64 reference and, if correct, timed
    (on the CPU: run once, checked, untimed)."""
    F = torch.nn.functional
    out = []

    def attempt(name, fn):
        try:
            got = fn()
            if env["where"] == "cuda":
                torch.cuda.synchronize()
        except Exception as e:        # a backend that refuses these inputs is reported, not fatal
            out.append({"path": name, "time_s": None, "refused": f"{type(e).__name__}: {str(e)[:200]}"})
            return
        out.append({"path": name, **checked_and_timed(fn, got.reshape(reference.shape), reference, "bf16", env)})
    if cfg["kind"] == "matmul":
        A, B = inputs
        attempt("torch.matmul (cuBLAS)" if not env["dry"] else "torch.matmul", lambda: A @ B)
        return out
    from torch.nn.attention import SDPBackend, sdpa_kernel
    backends = [("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION),
                ("efficient", SDPBackend.EFFICIENT_ATTENTION), ("default dispatch", None)]
    B, n, d, m = cfg["batch"], cfg["N"], cfg["d"], cfg.get("q", cfg["N"])
    if cfg["kind"] == "gqa":
        Q, K, V = inputs
        Q4 = Q.reshape(B, cfg["heads"], m, d)
        K4, V4 = K.reshape(B, cfg["kv_heads"], n, d), V.reshape(B, cfg["kv_heads"], n, d)
        G = cfg["heads"] // cfg["kv_heads"]
        Ke, Ve = K4.repeat_interleave(G, 1), V4.repeat_interleave(G, 1)
        for name, be in backends:
            def run(be=be):
                if be is None:
                    return F.scaled_dot_product_attention(Q4, K4, V4, enable_gqa=True)
                with sdpa_kernel(be):
                    return F.scaled_dot_product_attention(Q4, K4, V4, enable_gqa=True)
            attempt(f"sdpa {name}, enable_gqa, 4-D", run)
        for name, be in backends[:1]:
            def run_expanded(be=be):
                with sdpa_kernel(be):
                    return F.scaled_dot_product_attention(Q4, Ke, Ve)
            attempt(f"sdpa {name}, K/V expanded beforehand (untimed), 4-D", run_expanded)
        return out
    Q, K, V = (x.reshape(B, cfg["heads"], -1, d) for x in inputs)
    causal = cfg["kind"] == "causal"
    for name, be in backends:
        def run(be=be):
            if be is None:
                return F.scaled_dot_product_attention(Q, K, V, is_causal=causal)
            with sdpa_kernel(be):
                return F.scaled_dot_product_attention(Q, K, V, is_causal=causal)
        attempt(f"sdpa {name}{', is_causal' if causal else ''}, 4-D", run)
    if cfg["kind"] == "decode" and env["where"] == "cuda":     # FlexAttention's decoding path (compiled): GPU only
        from torch.nn.attention.flex_attention import flex_attention
        flex = torch.compile(flex_attention)
        attempt("flex_attention compiled (decoding), 4-D", lambda: flex(Q, K, V))
    return out
