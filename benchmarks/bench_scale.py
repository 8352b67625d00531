"""``nc.derive`` at model scale (issue 25, family 8): time against the number of transformer blocks.

Run with ``OPENBLAS_NUM_THREADS=1 python benchmarks/bench_scale.py`` (options: ``--blocks 1 2 4 8 16 32``,
``--only stack|symbolic|chain|maps|memory``, ``--memory 65536``).

Every row is the first call in a **fresh interpreter** (import not timed; every memo empty), so a row costs
what a user's first ``nc.derive`` costs:

* **stack**: ``k`` pre-norm transformer blocks (``nc.library.transformer_block``), block ``i`` reading the
  activation and its own 12 weights, n = 512, e = 256, h = 4, d = 64, f = 1024, one memory (2¹⁶ values);
  ``H`` and ``H / k`` (exactly linear when the blocks are solved alike) beside the time;
* **symbolic**: the same stack, ``memory="M"`` (the ``Piecewise`` envelope);
* **chain**: ``n`` matrix products ``a0 a1 · a1 a2 · …`` (no seams: any run of products may be one kernel);
* **maps**: ``n`` elementwise maps in a row on a 1024 × 1024 array;
* **memory**: substituting sizes into ``nc.cost(kernel(chain)).M[1]`` (a ``Max`` over ``n`` columns).
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: ``stack(k)``: k transformer blocks in a row, their weights inputs (also read by ``bench_targets.py``)
STACK = '''
def stack(k):
    tb = nc.library.transformer_block()
    ins = list(tb.dom.inside)
    b = nc.Builder(nc.Ty(ins[0], *ins[1:] * k))
    x, w = b.inputs[0], b.inputs[1:]
    for i in range(k):
        x = b(tb, x, *w[12 * i:12 * (i + 1)])
    return b.build(x)
'''

SETUP = '''
import time, sympy
import napkin_cat as nc
''' + STACK + '''
def chain(n):
    names = [f"a{i}" for i in range(n + 1)]
    b = nc.Builder(nc.types(", ".join(f"{names[i]} {names[i + 1]}" for i in range(n))))
    x = b.inputs[0]
    for i in range(1, n):
        x = b(nc.einsum(f"{names[0]} {names[i]}, {names[i]} {names[i + 1]} -> {names[0]} {names[i + 1]}"), x,
              b.inputs[i])
    return b.build(x)

def maps(n):
    b = nc.Builder(nc.types("a b", a=1024, b=1024))
    x = b.inputs[0]
    for i in range(n):
        x = b(nc.elementwise(["exp", "tanh", "neg", "relu"][i % 4], "a b", a=1024, b=1024), x)
    return b.build(x)

TB = {"n": 512, "e": 256, "h": 4, "d": 64, "f": 1024}
'''

CASES = {
    "stack": ("d = stack({n}); sizes = TB",
              "r = nc.derive(d, memory={memory}, sizes=sizes); out = (r.H, r.H // {n})"),
    "symbolic": ("d = stack({n})", "r = nc.derive(d, memory='M'); out = (len(r.regimes), '')"),
    "chain": ("d = chain({n}); sizes = {{f'a{{i}}': 256 for i in range({n} + 1)}}",
              "r = nc.derive(d, memory={memory}, sizes=sizes); out = (r.H, '')"),
    "maps": ("d = maps({n})", "r = nc.derive(d, memory={memory}, sizes={{}}); out = (r.H, '')"),
    "memory": ("M = nc.cost(nc.kernel(chain({n}))).M[1]\n"
               "env = {{nc.symbol(f'a{{i}}'): 64 + i for i in range({n} + 1)}}",
               "out = (M.subs(env), '')"),
}
SIZES = {"stack": [1, 2, 4, 8, 16, 32], "symbolic": [1, 2, 4, 8], "chain": [2, 4, 8, 12],
         "maps": [50, 100, 200], "memory": [5, 10, 20, 50]}


def run(case: str, n: int, memory: int) -> tuple:
    """``(seconds, result, per block)`` of one case in a fresh interpreter."""
    build, call = CASES[case]
    code = (SETUP + build.format(n=n, memory=memory) + "\nt0 = time.perf_counter()\n" +
            call.format(n=n, memory=memory) + "\nprint(time.perf_counter() - t0, *out)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join([ROOT, *sys.path])})
    if done.returncode:
        return float("nan"), done.stderr.strip().splitlines()[-1], ""
    parts = done.stdout.split()
    return float(parts[0]), parts[1] if len(parts) > 1 else "", parts[2] if len(parts) > 2 else ""


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", choices=list(CASES), nargs="*", default=list(CASES))
    ap.add_argument("--blocks", type=int, nargs="*", help="sizes for the chosen cases (blocks, products, maps)")
    ap.add_argument("--memory", type=int, default=2 ** 16)
    args = ap.parse_args(argv)
    for case in args.only:
        sizes = args.blocks or SIZES[case]
        print(f"\n{case}: n | seconds | s per n | result | per block")
        for n in sizes:
            seconds, result, per = run(case, n, args.memory)
            print(f"{n:5d} | {seconds:8.2f} | {seconds / n:7.3f} | {result} | {per}", flush=True)


if __name__ == "__main__":
    main()
