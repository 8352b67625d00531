"""What the search's kernel cache pays for axis names: a stack of k equal blocks with shared axis names against the
same blocks each with its own names (``d0``, ``f0``, ``d1``, … at equal sizes: the same function up to renaming,
the same H).

Run with ``OPENBLAS_NUM_THREADS=1 python benchmarks/bench_renamed_kernels.py [k …] [--reps N]``.  Each sample is the
first ``nc.derive(f, 4096, sizes=…, cache=KernelCache())`` in a fresh interpreter (import and building f not timed;
CPU seconds, ``time.process_time``), shared and own names alternating; medians and min–max are printed, with one
counted run per program: the kernels the cache costs (``new``: a block key not met before) and how many of those
a key up to renaming (:func:`napkin_cat.search.relabelling.relabelled`, sizes by value) would have found (``alike``).
"""
from __future__ import annotations

import os
import statistics
import subprocess
import sys

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CHILD = r'''
import sys, time
import napkin_cat as nc
from napkin_cat import library as L
from napkin_cat.search.context import KernelCache
from napkin_cat.search.relabelling import relabelled

which, k, counted = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
if which == "shared":
    f, sizes = L.transformer_stack(k), {"n": 24, "e": 40, "h": 2, "d": 16, "f": 72}
else:
    blocks = [nc.rename_axis(nc.rename_axis(L.transformer_block(), "d", f"d{i}"), "f", f"f{i}") for i in range(k)]
    b = nc.Builder(nc.Ty(blocks[0].dom.inside[0], *[a for tb in blocks for a in tb.dom.inside[1:]]))
    x, w = b.inputs[0], b.inputs[1:]
    for i, tb in enumerate(blocks):
        x = b(tb, x, *w[12 * i:12 * (i + 1)])
    f = b.build(x)
    sizes = {"n": 24, "e": 40, "h": 2, **{f"d{i}": 16 for i in range(k)}, **{f"f{i}": 72 for i in range(k)}}
met, alike, counts = set(), set(), {"new": 0, "alike": 0}
if counted:
    plain = KernelCache.choice
    def choice(self, graph, block, level, density=1):
        key = (graph.key(block), level, density)
        if key not in met:
            met.add(key)
            counts["new"] += 1
            up_to = relabelled(graph, block, sizes)
            if up_to is not None:
                counts["alike"] += (up_to, level, density) in alike
                alike.add((up_to, level, density))
        return plain(self, graph, block, level, density)
    KernelCache.choice = choice
t = time.process_time()
r = nc.derive(f, 4096, sizes=sizes, cache=KernelCache())
print(time.process_time() - t, r.H, counts["new"], counts["alike"])
'''


def sample(which: str, k: int, counted: bool = False):
    out = subprocess.run([sys.executable, "-c", CHILD, which, str(k), "1" if counted else "0"], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout.split()
    return float(out[0]), int(out[1]), int(out[2]), int(out[3])


def main(argv):
    reps = 3
    if "--reps" in argv:
        at = argv.index("--reps")
        reps, argv = int(argv[at + 1]), argv[:at] + argv[at + 2:]
    ks = [int(a) for a in argv] or [4, 8]
    for k in ks:
        times = {"shared": [], "own names": []}
        for _ in range(reps):
            for which in times:
                times[which].append(sample(which.split()[0], k)[0])
        for which, ts in times.items():
            _, H, new, alike = sample(which.split()[0], k, counted=True)
            print(f"stack-{k} {which:9s} H {H}  cpu s median {statistics.median(ts):.2f} "
                  f"(min {min(ts):.2f}, max {max(ts):.2f}, n={len(ts)})  kernels costed {new}, "
                  f"of which alike up to renaming {alike}")


if __name__ == "__main__":
    main(sys.argv[1:])
