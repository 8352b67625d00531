"""What ``run.py`` measures: the device and its ceilings, inputs and fp32 references, the generated kernels and
torch's baselines.  On ``dry`` (CPU) nothing is timed.  (Tables and plots: ``report.py``.)"""
from __future__ import annotations

import importlib.util
import statistics

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


def bench(fn) -> float:
    """Median seconds of ``fn`` (Triton's do_bench: CUDA events, warm-up, L2 flushed between runs)."""
    import triton.testing
    return triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median") / 1e3


def environment(*, dry: bool) -> dict:
    import triton
    versions = {"torch": torch.__version__, "triton": triton.__version__, "napkin_cat": nc.__version__
                if hasattr(nc, "__version__") else "0.1.0"}
    if dry:
        return {"dry": True, "device": "cpu (Triton interpreter)", "slug": "dry-run", "model": "h100-sxm5",
                "ceilings": {}, "versions": versions, "where": "cpu"}
    name = torch.cuda.get_device_name(0)
    versions["cuda"] = torch.version.cuda
    env = {"dry": False, "device": name, "slug": name.lower().replace(" ", "-"), "model": model_for(name),
           "versions": versions, "where": "cuda"}
    env["ceilings"] = {"hbm": _copy_bandwidth(2 ** 30), "tensor:bf16": _matmul_rate(8192)}
    return env


def _copy_bandwidth(n: int) -> float:
    """Bytes read plus written per second by a device-to-device copy of ``n`` bytes."""
    src = torch.empty(n, dtype=torch.uint8, device="cuda").random_()
    dst = torch.empty_like(src)
    return 2 * n / bench(lambda: dst.copy_(src))


def _matmul_rate(n: int) -> float:
    """FLOP/s of cuBLAS's n³ bf16 product on random data."""
    a, b = (torch.randn(n, n, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    return 2 * n ** 3 / bench(lambda: a @ b)


def _reference_attention(Q, K, V, causal=False):
    """fp32 SoftMax(QKᵀ/√d)V (masked above the diagonal if ``causal``), in chunks of heads."""
    out = torch.empty(Q.shape, dtype=torch.float32, device=Q.device)
    step = max(1, 2 ** 28 // (Q.shape[-2] * K.shape[-2]))
    for h in range(0, Q.shape[0], step):
        out[h:h + step] = torch.nn.functional.scaled_dot_product_attention(
            Q[h:h + step].float(), K[h:h + step].float(), V[h:h + step].float(), is_causal=causal)
    return out


def inputs_and_reference(cfg, env):
    dev = env["where"]
    g = torch.Generator(device=dev).manual_seed(0)
    dt = torch.float32 if cfg["kind"] == "cuda" else torch.bfloat16

    def rand(*shape):
        return torch.randn(*shape, generator=g, device=dev, dtype=torch.float32).to(dt)
    if cfg["kind"] == "matmul":
        A, B = rand(cfg["a"], cfg["b"]), rand(cfg["b"], cfg["c"])
        return (A, B), A.float() @ B.float()
    n, d = cfg["N"], cfg["d"]
    if cfg["kind"] == "gqa":
        hk, G = cfg["batch"] * cfg["kv_heads"], cfg["heads"] // cfg["kv_heads"]
        Q, K, V = rand(hk, G, n, d), rand(hk, n, d), rand(hk, n, d)
        ref = _reference_attention(Q.reshape(hk * G, n, d), K.repeat_interleave(G, 0), V.repeat_interleave(G, 0))
        return (Q, K, V), ref.reshape(hk, G, n, d)
    h = cfg["batch"] * cfg["heads"]
    Q, K, V = rand(h, n, d), rand(h, n, d), rand(h, n, d)
    return (Q, K, V), _reference_attention(Q, K, V, causal=cfg["kind"] == "causal")


def error(out, ref) -> float:
    out = out.float()
    if not torch.isfinite(out).all():
        return float("inf")
    return float((out - ref).norm() / ref.norm())


def _module(path):
    spec = importlib.util.spec_from_file_location(f"nc_bench_{path.stem}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def triton_kernel(k, inputs, reference, env) -> dict:
    """Correctness (relative L2 error against fp32), Triton's compiled resources, median time."""
    if env["dry"]:
        out = k(*[x.cpu() for x in inputs])
        info = k.compile(arch=90, num_warps=k.printer.num_warps, num_stages=k.printer.num_stages)
        return {"error": error(out, reference), "time_s": None, "triton_smem": info["smem"],
                "plan_smem": info["plan_smem"], "source_lines": len(k.source.splitlines())}
    fn = _module(k.path()).nc_run
    out = fn(*inputs)
    out = out[0] if isinstance(out, tuple) else out
    torch.cuda.synchronize()
    row = {"error": error(out, reference), "source_lines": len(k.source.splitlines())}
    row["time_s"] = bench(lambda: fn(*inputs))
    return row


def cuda_kernel(p, inputs, reference, env) -> dict:
    """The CUDA reference backend: ptxas's report (and on a GPU the driver's), its answer, its time."""
    k = nc.codegen.cuda(p, hardware=env["model"])
    report = k.compile(arch="sm_90")
    row = {"plan_smem": p.smem_bytes, "smem_static": report["smem_static"], "smem_dynamic": report["smem_dynamic"],
           "smem": report["smem"], "registers": report["registers"], "time_s": None}
    if env["dry"]:
        out = nc.codegen.c(p)(*[x.cpu().numpy() for x in inputs])    # the same loop nest, run on the CPU
        row["error"] = error(torch.from_numpy(out), reference.cpu())
        return row
    out = k(*inputs)
    torch.cuda.synchronize()
    row["error"] = error(out, reference)
    row["driver"] = k.attributes()
    outs = [torch.empty_like(out)]
    times = []
    for _ in range(7):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        k.run_device(list(inputs), outs)
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    row["time_s"] = statistics.median(times[2:])
    return row


def baselines(cfg, inputs, env) -> list[dict]:
    """torch's paths for the same computation, each timed (on the CPU: run once, untimed)."""
    F = torch.nn.functional
    out = []

    def attempt(name, fn):
        try:
            fn()
            if env["where"] == "cuda":
                torch.cuda.synchronize()
            out.append({"path": name, "time_s": None if env["dry"] else bench(fn)})
        except Exception as e:        # a backend that refuses these inputs is reported, not fatal
            out.append({"path": name, "time_s": None, "refused": f"{type(e).__name__}: {str(e)[:200]}"})
    if cfg["kind"] == "matmul":
        A, B = inputs
        attempt("torch.matmul (cuBLAS)" if not env["dry"] else "torch.matmul", lambda: A @ B)
        return out
    from torch.nn.attention import SDPBackend, sdpa_kernel
    backends = [("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION),
                ("efficient", SDPBackend.EFFICIENT_ATTENTION), ("default dispatch", None)]
    B, n, d = cfg["batch"], cfg["N"], cfg["d"]
    if cfg["kind"] == "gqa":
        Q, K, V = inputs
        Q4 = Q.reshape(B, cfg["heads"], n, d)
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
    Q, K, V = (x.reshape(B, cfg["heads"], n, d) for x in inputs)
    causal = cfg["kind"] == "causal"
    for name, be in backends:
        def run(be=be):
            if be is None:
                return F.scaled_dot_product_attention(Q, K, V, is_causal=causal)
            with sdpa_kernel(be):
                return F.scaled_dot_product_attention(Q, K, V, is_causal=causal)
        attempt(f"sdpa {name}{', is_causal' if causal else ''}, 4-D", run)
    return out
