"""The time model's blocks per SM against the compiler's: each kernel printed as Triton, compiled for sm_90 here (no
GPU), its occupancy worked out from what the compiler gives it, beside the residency the time model states.

    python benchmarks/gpu/residency.py [--model h200] [--out benchmarks/results] [--quick]

The time model (:mod:`napkin_cat.hardware.predict`) times every kernel at ``r`` thread blocks per SM, from the bytes
its tiles take (shared memory, and registers at half of each thread's); a kernel's waves and its tail are read off
``r``.  The compiler knows the truth for the kernel it builds: its registers per thread (read off the cubin,
``TritonKernel.compile``), its shared memory, its warps.  From those, CUDA's occupancy rules give the blocks that fit
on one SM (:func:`compiled_residency`).  Each row prints both, and the registers spilled to local memory, which the
model does not know.

The kernels: FlashDecoding at q = 1 (a split stream, no ``tl.dot``: its tiles held in registers) at 16 … 128-key
tiles, the derived forward of dense attention and its backward (dQ; dK with dV) at the tiles GPU run 7 swept, and
the derived picks of causal attention, grouped-query decoding and attention, and the two matrix products of
``run.py``.  Writes
``residency-<commit>.md`` and ``.json`` under ``--out``, naming the Triton that compiled them (a device's Triton of
another version may allocate registers otherwise).  Needs triton (the ``kernels`` extra).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))
sys.path.insert(0, str(HERE))

import napkin_cat as nc   # noqa: E402
import training           # noqa: E402

FORMATS = {"Q": "bf16", "K": "bf16", "S": "fp32", "P": "bf16", "V": "bf16", "O": "bf16"}

#: CUDA's occupancy rules for compute capability 8.x and 9.x (the CUDA occupancy calculator's "GPU data"): registers
#: are allocated per warp in units of 256, shared memory per block with 1 KiB reserved by the system, and an SM holds
#: at most 32 blocks
REGISTER_UNIT, SMEM_RESERVED, MOST_BLOCKS = 256, 1024, 32


def compiled_residency(gpu, *, registers: int, smem: int, warps: int) -> dict:
    """Blocks per SM of a compiled kernel (``registers`` per thread, ``smem`` bytes, ``warps``) on ``gpu`` by CUDA's
    occupancy rules, and each limit apart.

    >>> h = nc.hardware.load("h200")
    >>> compiled_residency(h, registers=252, smem=1024, warps=8)["blocks"]     # 256 registers x 256 threads: the file
    1
    >>> compiled_residency(h, registers=64, smem=128, warps=4)["blocks"]
    8
    """
    per_warp = -(-registers * gpu.warp // REGISTER_UNIT) * REGISTER_UNIT
    limits = {"registers": gpu.registers_per_sm // (per_warp * warps) if registers else MOST_BLOCKS,
              "smem": gpu.smem_per_sm // (smem + SMEM_RESERVED),
              "threads": gpu.max_threads_per_sm // (warps * gpu.warp),
              "blocks": MOST_BLOCKS}
    return {"blocks": min(limits.values()), "limits": limits}


def kernels(quick: bool) -> list:
    """``(label, diagram, sizes, tiles)`` of each kernel set audited."""
    out = []
    decode = {"q": 1, "x": 32768, "d": 128, "h": 32}
    r = nc.derive(nc.library.multi_head_attention(formats=FORMATS), sizes=decode, hardware="h200")
    base = {str(k): int(v) for k, v in r.optimum.exact_sizes.items()}
    for s in (16, 32, 64, 128):
        out.append((f"decode N = 32,768, s_x = {s}", r.diagram, decode, {**base, "s_x": s, "p_x": 8}))
    if quick:
        return out
    (f, g), sizes = training.functions({"kind": "backward", "N": 4096, "d": 128, "batch": 1, "heads": 64})
    rf = nc.derive(f, sizes=sizes, hardware="h200")
    for gq, sx in ((128, 64), (64, 64), (128, 32)):
        out.append((f"forward d = 128, N = 4,096, g_q = {gq}, s_x = {sx}", rf.diagram, sizes,
                    {str(k): int(v) for k, v in rf.optimum.exact_sizes.items()} | {"g_q": gq, "s_x": sx}))
    rb = nc.derive(g, sizes=sizes, hardware="h200")
    bt = {str(k): int(v) for k, v in rb.optimum.exact_sizes.items()}
    for change in ({}, {"g_q": 64}, {"s_x": 16}):        # run 7's sweep: the pick, and g_q and s_x one step away
        t = {**bt, **change}
        out.append((f"backward d = 128, N = 4,096, {', '.join(f'{k} = {v}' for k, v in t.items() if v != 1)}",
                    rb.diagram, sizes, t))
    import run          # (the forward rows' diagrams: run.py's; imported here, it imports the benchmark's modules)
    for cfg in ({"kind": "causal", "d": 128, "N": 4096, "batch": 4, "heads": 16},
                {"kind": "gqa", "q": 1, "d": 128, "N": 32768, "batch": 1, "heads": 32, "kv_heads": 8},
                {"kind": "gqa", "d": 128, "N": 4096, "batch": 4, "heads": 32, "kv_heads": 8},
                {"kind": "matmul", "a": 4096, "b": 4096, "c": 4096},
                {"kind": "matmul", "a": 128, "b": 8192, "c": 8192}):
        diagram, sz = run.diagram_of(cfg)
        r = nc.derive(diagram, sizes=sz, hardware="h200")
        label = f"{cfg['kind']} " + ", ".join(f"{k} = {v:,}" for k, v in sz.items())
        out.append((f"{label} (the pick)", r.diagram, sz, {str(k): int(v) for k, v in r.optimum.exact_sizes.items()}))
    return out


def audit(label, diagram, sizes, tiles, gpu) -> list[dict]:
    """Per launched kernel of the plan: the model's residency (and what it charges), the compiler's resources and
    residency."""
    p = nc.plan(diagram, {**sizes, **tiles})
    predicted = nc.hardware.predict(p, gpu)
    k = nc.codegen.triton(p)
    info = k.compile(arch=90, num_warps=k.printer.num_warps, num_stages=k.printer.num_stages, kernels=k.launched())
    compiled = list(info["kernels"].items())
    rows, at = [], 0
    for kt in predicted.kernels:     # (a split's combine is a launch of its own, after its parts)
        launches = [kt, kt.combine] if kt.combine is not None else [kt]
        for m in launches:
            name, c = compiled[at]
            at += 1
            occ = compiled_residency(gpu, registers=c["registers"] or 0, smem=c["smem"], warps=c["num_warps"])
            rows.append({"row": label, "kernel": name, "model_resident": m.resident,
                         "model_threads": m.bytes.get("threads"),
                         "model_on_chip": m.bytes.get("on_chip_per_block"),
                         "model_registers_bytes": m.bytes.get("registers_per_block"),
                         "warps": c["num_warps"], "stages": c["num_stages"], "registers": c["registers"],
                         "stack": c["stack"], "smem": c["smem"], "compiled_resident": occ["blocks"],
                         "limits": occ["limits"], "resources_from": c["resources_from"],
                         "combine": m is not kt})
    return rows


def table(rows) -> str:
    head = ("| kernels | launch | model: r (threads, staged B, register B) | compiled: r (warps, registers/thread, "
            "spilled B/thread, shared B) | r's limit |\n| --- | --- | --- | --- | --- |")
    out = [head]
    for x in rows:
        lim = min(x["limits"], key=x["limits"].get)
        model = (f"{x['model_resident']} ({x['model_threads']}, {x['model_on_chip']}, {x['model_registers_bytes']})"
                 if not x["combine"] else "not modelled (combine)")
        out.append(f"| {x['row']} | {x['kernel']} | {model} | {x['compiled_resident']} ({x['warps']}, "
                   f"{x['registers']}, {x['stack']}, {x['smem']}) | {lim} |")
    return "\n".join(out)


def summary(rows) -> str:
    """How many launches the model gives the compiler's blocks per SM, more, fewer; which spill."""
    timed = [x for x in rows if not x["combine"]]
    more = sum(x["model_resident"] > x["compiled_resident"] for x in timed)
    fewer = sum(x["model_resident"] < x["compiled_resident"] for x in timed)
    spills = [f"{x['row']} {x['kernel']} ({x['stack']} B)" for x in rows if x["stack"]]
    return (f"Of {len(timed)} launches the model times, it gives {len(timed) - more - fewer} the compiler's blocks per "
            f"SM, {more} more and {fewer} fewer. Spilling (bytes a thread): {'; '.join(spills) or 'none'}.")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="h200")
    ap.add_argument("--out", default=str(HERE.parent / "results"))
    ap.add_argument("--quick", action="store_true", help="the decoding kernels only")
    args = ap.parse_args(argv)
    gpu = nc.hardware.load(args.model)
    rows = [x for k in kernels(args.quick) for x in audit(*k, gpu)]
    commit = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True,
                            cwd=HERE).stdout.strip() or "unknown"
    text = table(rows) + "\n\n" + summary(rows)
    print(text)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    import triton
    (out / f"residency-{commit}.json").write_text(json.dumps({"commit": commit, "model": args.model,
                                                              "triton": triton.__version__, "rows": rows}, indent=1))
    (out / f"residency-{commit}.md").write_text(
        f"# Blocks per SM: the time model's and the compiler's ({args.model}, sm_90, Triton {triton.__version__}, at "
        f"{commit})\n\n`python benchmarks/gpu/residency.py`. The compiler is this machine's Triton: a device's "
        f"Triton of another version may allocate registers otherwise.\n\n{text}\n")


if __name__ == "__main__":
    main()
