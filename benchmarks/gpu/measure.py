"""What ``run.py`` measures: the device and its ceilings, inputs and fp32 references, the generated kernels,
torch's baselines, and the table and plot of the results.  On ``dry`` (CPU) nothing is timed."""
from __future__ import annotations

import importlib.util
import statistics
import time

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
    x = torch.empty(2 ** 30, dtype=torch.uint8, device="cuda").random_()
    y = torch.empty_like(x)
    copy = 2 * x.numel() / bench(lambda: y.copy_(x))
    del x, y
    a, b = (torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    mm = 2 * 8192 ** 3 / bench(lambda: a @ b)
    env["ceilings"] = {"hbm": copy, "tensor:bf16": mm}
    return env


def _reference_attention(Q, K, V):
    """fp32 SoftMax(QKᵀ/√d)V, in chunks of heads (no N² array of all heads at once)."""
    out = torch.empty(Q.shape, dtype=torch.float32, device=Q.device)
    step = max(1, 2 ** 28 // (Q.shape[-2] * K.shape[-2]))
    for h in range(0, Q.shape[0], step):
        out[h:h + step] = torch.nn.functional.scaled_dot_product_attention(
            Q[h:h + step].float(), K[h:h + step].float(), V[h:h + step].float())
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
    return (Q, K, V), _reference_attention(Q, K, V)


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
    for name, be in backends:
        def run(be=be):
            if be is None:
                return F.scaled_dot_product_attention(Q, K, V)
            with sdpa_kernel(be):
                return F.scaled_dot_product_attention(Q, K, V)
        attempt(f"sdpa {name}, 4-D", run)
    return out


def label(row) -> str:
    if row["kind"] == "matmul":
        return f"matmul {row['a']}×{row['b']}×{row['c']}"
    heads = f"{row['heads']}/{row['kv_heads']}" if row["kind"] == "gqa" else str(row["heads"])
    return f"{row['kind']} N={row['N']} d={row['d']} B={row['batch']} H={heads}"


def table(result) -> str:
    """A markdown table: our fastest candidate, torch's fastest path, the model's predictions."""
    lines = ["| configuration | tiles (ours, fastest) | ours ms | TFLOP/s | torch fastest path | torch ms | "
             "torch / ours | predicted ms (datasheet) | predicted ms (measured ceilings) | error |",
             "| --- | --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: |"]
    for row in result["rows"]:
        if "failed" in row:
            lines.append(f"| {label(row)} | failed: {row['failed'][:80]} | | | | | | | | |")
            continue
        timed = [c for c in row["candidates"] if c.get("time_s")]
        c = min(timed, key=lambda c: c["time_s"]) if timed else row["candidates"][0]
        b = row.get("baseline", {})

        def ms(t):
            return f"{t * 1e3:.3f}" if t else "—"
        tiles = ", ".join(f"{k}={v}" for k, v in c["tiles"].items())
        lines.append(f"| {label(row)} | {tiles} | {ms(c.get('time_s'))} | "
                     f"{c.get('tflops', 0):.0f} | {b.get('path', '—')} | {ms(b.get('time_s'))} | "
                     f"{row.get('speedup', 0):.2f} | {ms(c['predicted_s'])} | "
                     f"{ms(c.get('predicted_measured_ceilings_s'))} | {c.get('error', float('nan')):.1e} |")
    return "\n".join(lines)


def plot(result, path):
    """Left: TFLOP/s of ours and torch's fastest path per attention size; right: predicted against measured."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (a, b) = plt.subplots(1, 2, figsize=(12, 4.5))
    for d, colour in ((64, "tab:blue"), (128, "tab:red"), (16, "tab:blue")):
        rows = [r for r in result["rows"] if r.get("kind") == "attention" and r.get("d") == d and "failed" not in r]
        if not rows:
            continue
        ns = [r["N"] for r in rows]
        ours = [max((c.get("tflops") or 0) for c in r["candidates"]) for r in rows]
        base = [r["flops"] / r["baseline"]["time_s"] / 1e12 if r.get("baseline", {}).get("time_s") else 0
                for r in rows]
        pred = [r["flops"] / r["candidates"][0]["predicted_s"] / 1e12 for r in rows]
        a.plot(ns, ours, "o-", color=colour, label=f"napkin-cat Triton, d={d}")
        a.plot(ns, base, "s--", color=colour, alpha=0.6, label=f"torch fastest, d={d}")
        a.plot(ns, pred, ":", color=colour, alpha=0.6, label=f"model, d={d}")
    a.set_xscale("log", base=2)
    a.set_xlabel("sequence length N")
    a.set_ylabel("TFLOP/s")
    a.set_title(f"attention forward, bf16 — {result['device']}")
    a.legend(fontsize=7)
    pts = [(c["predicted_s"], c["time_s"], c.get("predicted_measured_ceilings_s")) for r in result["rows"]
           if "failed" not in r for c in r["candidates"] if c.get("time_s")]
    if pts:
        lo, hi = min(min(p[:2]) for p in pts) / 1.5, max(max(p[:2]) for p in pts) * 1.5
        b.plot([lo, hi], [lo, hi], "k-", lw=0.8)
        b.fill_between([lo, hi], [lo / 1.25, hi / 1.25], [lo * 1.25, hi * 1.25], color="0.9", label="±25 %")
        b.loglog([p[1] for p in pts], [p[0] for p in pts], "o", label="datasheet rates")
        b.loglog([p[1] for p in pts if p[2]], [p[2] for p in pts if p[2]], "x", label="measured ceilings")
        b.set_xlabel("measured s")
        b.set_ylabel("predicted s")
        b.legend(fontsize=7)
    b.set_title("time model: predicted against measured")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
