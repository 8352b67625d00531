"""Where the search cut at its seams and the search of the whole form answer apart (a finding for a future issue).

Run with ``OPENBLAS_NUM_THREADS=1 python benchmarks/seam_gap.py`` (options: ``--memories 65536 131072 …``,
``--blocks 1``).

``nc.derive`` searches a form of more than :data:`~napkin_cat.search.segments.SEGMENT_AT` operations segment by
segment (:mod:`napkin_cat.search.segments`: cut where a value passes through global memory anyway, the kernels
at each seam joined afterwards where that saves); below, the whole form.  Both are searches of kernel splits the
library builds, so the lesser ``H`` of the two is an algorithm ``nc.derive`` could have answered.  This prints,
per memory, ``H`` of each (the cut one is ``nc.derive``'s answer), their ratio and the variants, on
``k`` pre-norm transformer blocks (``nc.library.transformer_block``, n = 512, e = 256, h = 4, d = 64,
f = 1024, as ``bench_scale.py``).  The whole search is run by raising ``SEGMENT_AT`` past the form's size, so
``--blocks`` above 1 is slow (its split space grows with the square of the blocks).
"""
from __future__ import annotations

import argparse
import os
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import napkin_cat as nc  # noqa: E402
import napkin_cat.search.segments as segments  # noqa: E402
from bench_scale import STACK  # noqa: E402
from bench_targets import commit  # noqa: E402

TB = {"n": 512, "e": 256, "h": 4, "d": 64, "f": 1024}


def derived(f, memory: int, whole: bool):
    """``(H, variant, seconds)`` of ``nc.derive(f, memory=memory, sizes=TB)``, cut at the seams or searched whole."""
    kept = segments.SEGMENT_AT
    segments.SEGMENT_AT = 10 ** 9 if whole else kept
    try:
        t0 = time.perf_counter()
        r = nc.derive(f, memory=memory, sizes=TB)
        return r.H, r.variant, time.perf_counter() - t0
    finally:
        segments.SEGMENT_AT = kept


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--memories", type=int, nargs="*", default=[2 ** 16, 2 ** 17, 2 ** 18, 400_000, 2 ** 20])
    ap.add_argument("--blocks", type=int, default=1)
    args = ap.parse_args(argv)
    scope = {"nc": nc}
    exec(STACK, scope)
    f = scope["stack"](args.blocks)
    print(f"{args.blocks} transformer block(s) at {TB}, commit {commit(ROOT)}; SEGMENT_AT = {segments.SEGMENT_AT}")
    print(f"{'M':>9} {'H cut (derive)':>15} {'H whole':>12} {'cut / whole':>11} {'s cut':>6} {'s whole':>7}")
    rows = []
    for m in args.memories:
        hc, vc, tc = derived(f, m, whole=False)
        hw, vw, tw = derived(f, m, whole=True)
        rows.append((m, vc, vw))
        print(f"{m:>9} {hc:>15,} {hw:>12,} {hc / hw:>11.3f} {tc:>6.2f} {tw:>7.2f}")
    for m, vc, vw in rows:
        print(f"\nM = {m}\n  cut:   {vc}\n  whole: {vw}")


if __name__ == "__main__":
    main()
