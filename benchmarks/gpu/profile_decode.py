"""Decoding's kernels for Nsight Compute: the derived FlashDecoding at several split counts, each launched a few times,
so that ``ncu`` says what sets their time.

    ncu --csv --metrics "$(python benchmarks/gpu/profile_decode.py --metrics)" --kernel-name regex:nc_kernel0 \\
        python benchmarks/gpu/profile_decode.py --N 131072 --parts 4 8 16      # device_run.sh PHASES=profile
    python benchmarks/gpu/profile_decode.py --dry-run                          # the CPU's check (CI)

Run 6 and 7 timed the pick at N = 131,072 (128-key tiles, one query row per head, 32 heads): p_x = 4 (128 blocks)
0.876 ms, p_x = 8 (256 blocks) 0.614 ms, p_x = 16 0.614 ms, where the time model gives them alike (0.471-0.476 ms).
The compiler gives the 128-key block 252 registers a thread at 256 threads: one block per SM at every p_x
(``residency.py``). So it is neither residency nor waves. The metrics (:data:`METRICS`) ask what it is: the DRAM
bandwidth each reaches, the warps active, the stalls on long-latency loads, the L2 hit rate and the registers.

Each split count is derived for the machine's model once, planned with its key tile and ``p_x`` set, printed, run
once and checked against float64 (its relative L2 error printed: a wrong kernel is not worth profiling), then
launched :data:`LAUNCHES` more times (``ncu`` profiles each launch of ``nc_kernel0``, the parts; ``nc_kernel1`` is the
combine).  ``--dry-run``: tiny sizes under Triton's interpreter, nothing profiled.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))
sys.path.insert(0, str(HERE))
if "--dry-run" in sys.argv:
    os.environ["TRITON_INTERPRET"] = "1"

#: what ncu reads of each launch (Hopper's metric names): time, DRAM bytes and bandwidth, the warps active, the
#: long-scoreboard stalls (waiting on global loads), L2 hits, the registers and the occupancy the registers allow
METRICS = ("gpu__time_duration.sum", "dram__bytes_read.sum", "dram__throughput.avg.pct_of_peak_sustained_elapsed",
           "sm__warps_active.avg.pct_of_peak_sustained_active",
           "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio",
           "lts__t_sector_hit_rate.pct", "launch__registers_per_thread", "launch__occupancy_limit_registers",
           "launch__grid_size", "launch__block_size")
#: launches of each split count after its first (checked) one
LAUNCHES = 3
FORMATS = {"Q": "bf16", "K": "bf16", "S": "fp32", "P": "bf16", "V": "bf16", "O": "bf16"}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--N", type=int, default=131072, help="keys per head")
    ap.add_argument("--parts", type=int, nargs="+", default=[4, 8, 16], help="the split counts p_x")
    ap.add_argument("--keys", type=int, default=128, help="the key tile s_x")
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--metrics", action="store_true", help="print ncu's --metrics list and exit")
    ap.add_argument("--dry-run", action="store_true", help="CPU, tiny sizes, Triton's interpreter")
    args = ap.parse_args(argv)
    if args.metrics:
        print(",".join(METRICS))
        return 0
    import torch
    import napkin_cat as nc
    import measure
    if args.dry_run:
        args.N, args.heads, args.keys, args.parts = 4096, 1, None, [2, 4]     # run.py's dry decoding row
    # (no ceilings measured: their torch kernels would run under the profiler too, and nothing here is timed)
    env = {"dry": True, "model": "h100-sxm5", "where": "cpu"} if args.dry_run else \
        {"dry": False, "model": measure.model_for(torch.cuda.get_device_name(0)), "where": "cuda"}
    cfg = {"kind": "decode", "q": 1, "d": 128 if not args.dry_run else 16, "N": args.N, "batch": 1,
           "heads": args.heads}
    sizes = {"q": 1, "x": cfg["N"], "d": cfg["d"], "h": cfg["heads"]}
    r = nc.derive(nc.library.multi_head_attention(formats=FORMATS), sizes=sizes, hardware=env["model"])
    base = {str(k): int(v) for k, v in r.optimum.exact_sizes.items()}
    if "p_x" not in base:
        raise SystemExit(f"the derived decoding does not split its key axis: {r.variant} {base}")
    (Q, K, V), ref = measure.inputs_and_reference(cfg, env)
    failed = 0
    for parts in args.parts:
        tiles = {**base, "s_x": args.keys or base["s_x"], "p_x": parts}
        p = nc.plan(r.diagram, {**sizes, **tiles})
        k = nc.codegen.triton(p)
        predicted = nc.hardware.predict(p, env["model"])
        if args.dry_run:
            out = k(Q.cpu(), K.cpu(), V.cpu())
        else:
            fn = measure.printed_module(k.path()).nc_run
            out = fn(Q, K, V)
            torch.cuda.synchronize()
        out = out[0] if isinstance(out, tuple) else out
        err = measure.error(torch.as_tensor(out).to(ref.device), ref)
        why = measure.gated(err, "bf16")
        print(f"p_x = {parts}: tiles {tiles}, {k.printer.num_warps} warps, predicted {predicted.time * 1e3:.3f} ms, "
              f"error {err:.1e}{'  ' + why if why else ''}", flush=True)
        if why:
            failed += 1
            continue
        if not args.dry_run:
            for _ in range(LAUNCHES):
                fn(Q, K, V)
            torch.cuda.synchronize()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
