"""Issue 35 checked from outside: ``nc.derive`` on programs the issue and ``bench_targets.py`` do not name.

Run with ``OPENBLAS_NUM_THREADS=1 python benchmarks/bench_outside.py`` (options: ``--only NAME …``,
``--list``).  Every row is the first ``nc.derive`` in a **fresh interpreter** (import and building the
function not timed), one sample each (a survey, not a comparison: ``bench_targets.py`` gives medians against a
baseline).  Columns:

* **cpu s** / **wall s**: the derive's CPU seconds (``time.process_time``) and wall seconds;
* **MiB**: the process's peak resident memory after the derive (``ru_maxrss``, the import included);
* **H**: the transfers derive reports at level 1 (a sweep: the sum over its memories; symbolic: ``H`` at the
  row's reference sizes and a memory inside each regime, summed);
* **counted**: whether every regime's ``H`` is what the plan runner counts running its algorithm at its tiles
  on random inputs (``nc.plan(r.diagram, sizes | tiles).run(*xs)[1].transfers[1]``) and what the cost functor
  counts there (``nc.cost(r.diagram, sizes=…).H[1]``): a second and third route to the number; ``sym`` for a
  symbolic row (its tiles are real numbers: nothing to run);
* **equal**: whether every regime's algorithm computes f (``nc.equivalent`` on random inputs at the row's sizes
  and the regime's tiles; symbolic rows at the reference sizes, each tile its whole axis).

The programs (none named by issue 35 or ``bench_targets.py``): library functions (norms before a matmul, gelu
and SwiGLU MLPs, cross-entropy and its linear form, grouped-query and multi-head attention, window, prefix-LM,
softcap, ALiBi, document attention with segment ids from data, a decode step q = 1), transformer blocks at sizes
that are not powers of two (and n ≪ d), stacks of 4 and 8 of them, einsum chains of 3-6 matrix products, 200
elementwise maps, the backward of rms_norm and SwiGLU (``nc.grad``), symbolic ``memory="M"`` on three and
``hardware=`` (a GPU model and a CPU model) on three.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SETUP = r'''
import json, resource, time
import numpy as np, sympy
import napkin_cat as nc
L = nc.library

def norm_matmul(norm):
    """norm(X) W: a row norm over d before a matmul d -> o."""
    nf = norm()
    b = nc.Builder(nc.Ty(*nf.dom.inside, *nc.types("d o").inside))
    h = b(nf, *b.inputs[:-1])
    return b.build(b(nc.einsum("n d, d o -> n o"), h, b.inputs[-1]))

def chain(n, sizes):
    """n matrix products a0 a1 · a1 a2 · … (the einsum chain)."""
    names = [f"c{i}" for i in range(n + 1)]
    b = nc.Builder(nc.types(", ".join(f"{names[i]} {names[i + 1]}" for i in range(n))))
    x = b.inputs[0]
    for i in range(1, n):
        x = b(nc.einsum(f"{names[0]} {names[i]}, {names[i]} {names[i + 1]} -> {names[0]} {names[i + 1]}"), x,
              b.inputs[i])
    sizes.update({names[i]: s for i, s in enumerate([40, 72, 24, 96, 56, 48, 80][:n + 1])})
    return b.build(x)

def maps(n):
    """n elementwise maps on an a × b array beside a pass-through input added at the end."""
    b = nc.Builder(nc.types("a b, a b"))
    x, y = b.inputs
    for i in range(n):
        x = b(nc.elementwise(["exp", "tanh", "neg", "relu"][i % 4], "a b"), x)
    return b.build(b(nc.elementwise("add", "a b, a b -> a b"), x, y))

def stack(k):
    tb = L.transformer_block()
    ins = list(tb.dom.inside)
    b = nc.Builder(nc.Ty(ins[0], *ins[1:] * k))
    x, w = b.inputs[0], b.inputs[1:]
    for i in range(k):
        x = b(tb, x, *w[12 * i:12 * (i + 1)])
    return b.build(x)

TB = {"n": 48, "e": 72, "h": 3, "d": 24, "f": 120}
'''

CHECK = r'''
def inputs(f, env, rng):
    xs = []
    for arr in f.dom.inside:
        shape = tuple(int(sympy.sympify(a.size).subs({nc.symbol(k): v for k, v in env.items()})) for a in arr.axes)
        if arr.dtype.family == "bool":
            xs.append(rng.random(size=shape) < 0.5)
        elif arr.dtype.is_integer:     # segment ids, targets: sorted small integers (documents in a row)
            xs.append(np.sort(rng.integers(0, 4, size=shape), axis=-1))
        else:
            xs.append(rng.normal(size=shape))
    return xs

def regimes(r):
    """The pieces to check: a hardware derive's one choice (its regimes are the transfer searches it timed)."""
    return (r,) if r.prediction is not None or not r.regimes else r.regimes

def tiles_of(reg):
    chosen = reg.optimum.exact_sizes if reg.optimum.exact_sizes is not None else reg.optimum.sizes
    return {str(k): v for k, v in chosen.items()}

def check(f, r, sizes, symbolic):
    """(H summed, counted by the runner and the cost functor?, equivalent?) over the regimes."""
    rng = np.random.default_rng(0)
    total, counted, equal, notes = 0, True, True, []
    for reg in regimes(r):
        if symbolic:
            env = {nc.symbol(k): v for k, v in sizes.items()}
            lo, hi = (sympy.sympify(b).subs(env) if b is not None else None for b in (reg.lower, reg.upper))
            lo = lo if lo is not None and lo.is_finite else 0
            M = 2 * lo + 4096 if hi is None or not hi.is_finite else (lo + hi) / 2
            h = sympy.sympify(reg.H).subs(env).subs(nc.symbol("M"), M)
            at_M = {k: round(float(sympy.sympify(v).subs(env).subs(nc.symbol("M"), M)), 1)
                    for k, v in tiles_of(reg).items() if k not in sizes}
            notes.append(f"M = {float(M):.0f}: H {float(h):.0f}, tiles {at_M}")
            total += h
            whole = {k: sizes[k.split("_")[1]] for k in tiles_of(reg) if k not in sizes}   # tiles as their axes
            v = nc.equivalent(f, reg.diagram, sizes={**sizes, **whole}, trials=1)
        else:
            tiles = {k: int(v) for k, v in tiles_of(reg).items() if k not in sizes}
            at = {**sizes, **tiles}
            xs = inputs(f, at, rng)
            with np.errstate(all="ignore"):
                _, ran = nc.plan(reg.diagram, at).run(*xs)
            by_cost = nc.cost(reg.diagram, sizes=at).H.get(1, 0)
            h = reg.H
            total += h
            if not (ran.transfers.get(1, 0) == h == by_cost):
                counted = False
                notes.append(f"H {h} ran {ran.transfers.get(1, 0)} cost {by_cost} at {tiles}")
            v = nc.equivalent(f, reg.diagram, sizes=at)
        if not v:
            equal = False
            notes.append(v.message)
    return total, counted, equal, notes
'''

#: name → (what the program is, build f and sizes, nc.derive's keywords)
CASES = {
    "layer_norm+matmul": ("LN over d, then X W", "f = norm_matmul(L.layer_norm); sizes = {'n': 96, 'd': 80, 'o': 56}",
                          "memory=4096, sizes=sizes"),
    "rms_norm+matmul": ("RMSNorm, then X W", "f = norm_matmul(L.rms_norm); sizes = {'n': 96, 'd': 80, 'o': 56}",
                        "memory=4096, sizes=sizes"),
    "gelu-mlp": ("gelu MLP with biases", "f = L.mlp(); sizes = {'n': 96, 'i': 80, 'f': 144, 'o': 72}",
                 "memory=[1024, 4096, 16384], sizes=sizes"),
    "swiglu-mlp": ("SwiGLU MLP", "f = L.swiglu_mlp(); sizes = {'n': 96, 'e': 80, 'f': 144, 'o': 72}",
                   "memory=4096, sizes=sizes"),
    "cross-entropy": ("rows of logits at int targets", "f = L.cross_entropy(); sizes = {'n': 96, 'v': 500}",
                      "memory=2048, sizes=sizes"),
    "linear-cross-entropy": ("H Wᵀ then cross-entropy", "f = L.linear_cross_entropy(); "
                             "sizes = {'n': 96, 'e': 80, 'v': 500}", "memory=4096, sizes=sizes"),
    "gqa": ("grouped-query attention", "f = L.grouped_query_attention(); "
            "sizes = {'q': 96, 'x': 120, 'd': 24, 'h': 3, 'g': 2}", "memory=[2048, 8192], sizes=sizes"),
    "mha": ("multi-head attention", "f = L.multi_head_attention(); sizes = {'q': 96, 'x': 120, 'd': 24, 'h': 3}",
            "memory=4096, sizes=sizes"),
    "window": ("sliding window w = 13", "f = L.sliding_window_attention(13); sizes = {'q': 120, 'x': 120, 'd': 24}",
               "memory=[1024, 4096], sizes=sizes"),
    "prefix-lm": ("prefix-LM, prefix 20", "f = L.prefix_lm_attention(20); sizes = {'q': 120, 'x': 120, 'd': 24}",
                  "memory=2048, sizes=sizes"),
    "softcap": ("softcap 30, causal", "f = L.softcap_attention(30.0, mask=L.causal_mask()); "
                "sizes = {'q': 120, 'x': 120, 'd': 24}", "memory=2048, sizes=sizes"),
    "alibi": ("ALiBi, causal", "f = L.alibi_attention(0.25); sizes = {'q': 120, 'x': 120, 'd': 24}",
              "memory=2048, sizes=sizes"),
    "document": ("document + causal, ids from data", "f = L.document_attention(causal=True); "
                 "sizes = {'q': 120, 'x': 120, 'd': 24}", "memory=2048, sizes=sizes"),
    "decode": ("attention at q = 1", "f = L.attention(); sizes = {'q': 1, 'x': 1000, 'd': 40}",
               "memory=[512, 4096], sizes=sizes"),
    "block-odd": ("block n48 e72 h3 d24 f120", "f = L.transformer_block(); sizes = dict(TB)",
                  "memory=4096, sizes=sizes"),
    "block-n<<d": ("block n6 e120 h5 d24 f360", "f = L.transformer_block(); "
                   "sizes = {'n': 6, 'e': 120, 'h': 5, 'd': 24, 'f': 360}", "memory=4096, sizes=sizes"),
    "stack-4": ("4 odd blocks", "f = stack(4); sizes = dict(TB)", "memory=4096, sizes=sizes"),
    "stack-8": ("8 odd blocks", "f = stack(8); sizes = dict(TB)", "memory=4096, sizes=sizes"),
    "chain-3": ("3 matmuls", "sizes = {}; f = chain(3, sizes)", "memory=2048, sizes=sizes"),
    "chain-4": ("4 matmuls", "sizes = {}; f = chain(4, sizes)", "memory=2048, sizes=sizes"),
    "chain-6": ("6 matmuls", "sizes = {}; f = chain(6, sizes)", "memory=2048, sizes=sizes"),
    "maps-200": ("200 maps + add", "f = maps(200); sizes = {'a': 24, 'b': 20}", "memory=2048, sizes=sizes"),
    "rms_norm-grad": ("∂ rms_norm wrt X, γ", "f = nc.grad(L.rms_norm(), wrt=[0, 1]); sizes = {'n': 96, 'd': 80}",
                      "memory=2048, sizes=sizes"),
    "swiglu-grad": ("∂ swiglu wrt X, W₁, W₃", "f = nc.grad(L.swiglu(), wrt=[0, 1, 2]); "
                    "sizes = {'n': 96, 'e': 80, 'f': 144}", "memory=4096, sizes=sizes"),
    "sym rms_norm+matmul": ("memory='M'", "f = norm_matmul(L.rms_norm); sizes = {'n': 96, 'd': 80, 'o': 56}",
                            "memory='M', reference=sizes"),
    "sym swiglu-mlp": ("memory='M'", "f = L.swiglu_mlp(); sizes = {'n': 96, 'e': 80, 'f': 144, 'o': 72}",
                       "memory='M', reference=sizes"),
    "sym gqa": ("memory='M'", "f = L.grouped_query_attention(); sizes = {'q': 96, 'x': 120, 'd': 24, 'h': 3, 'g': 2}",
                "memory='M', reference=sizes"),
    "h100 mha": ("hardware=h100-sxm5", "f = L.multi_head_attention(); sizes = {'q': 384, 'x': 384, 'd': 64, 'h': 3}",
                 "hardware='h100-sxm5', sizes=sizes"),
    "h100 swiglu-mlp": ("hardware=h100-sxm5", "f = L.swiglu_mlp(); sizes = {'n': 192, 'e': 160, 'f': 448, 'o': 160}",
                        "hardware='h100-sxm5', sizes=sizes"),
    "h100 window": ("hardware=h100-sxm5", "f = L.sliding_window_attention(40); sizes = {'q': 384, 'x': 384, 'd': 64}",
                    "hardware='h100-sxm5', sizes=sizes"),
    "cpu mha": ("hardware=epyc-zen3-dev", "f = L.multi_head_attention(); sizes = {'q': 384, 'x': 384, 'd': 64, 'h': 3}",
                "hardware='epyc-zen3-dev', sizes=sizes"),
    "cpu swiglu-mlp": ("hardware=epyc-zen3-dev", "f = L.swiglu_mlp(); "
                       "sizes = {'n': 192, 'e': 160, 'f': 448, 'o': 160}", "hardware='epyc-zen3-dev', sizes=sizes"),
    "cpu window": ("hardware=epyc-zen3-dev", "f = L.sliding_window_attention(40); "
                   "sizes = {'q': 384, 'x': 384, 'd': 64}", "hardware='epyc-zen3-dev', sizes=sizes"),
}


def sample(case: str, timeout: float) -> dict:
    """One row: the case's first derive in a fresh interpreter, then its checks (untimed)."""
    _, build, call = CASES[case]
    code = (SETUP + CHECK + build + "\nt0, c0 = time.perf_counter(), time.process_time()\n" +
            f"r = nc.derive(f, {call})\n"
            "t, c = time.perf_counter() - t0, time.process_time() - c0\n"
            "mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024\n"
            "print(json.dumps({'wall': t, 'cpu': c, 'mib': mib, 'regimes': len(regimes(r))}), flush=True)\n"
            f"H, counted, equal, notes = check(f, r, sizes, {'memory=' + chr(39) + 'M' in call})\n"
            "print(json.dumps({'H': str(H), 'counted': counted, 'equal': equal, 'notes': notes}))\n")
    env = {**os.environ, "PYTHONPATH": ROOT}
    try:
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env,
                              timeout=timeout)
        out, why = done.stdout, (done.stderr.strip().splitlines() or ["?"])[-1][:110] if done.returncode else None
    except subprocess.TimeoutExpired as e:
        out, why = (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or ""), \
            f"over {timeout:.0f} s"
    lines = [json.loads(x) for x in out.strip().splitlines() if x.startswith("{")]
    row = {k: v for x in lines for k, v in x.items()}
    if why:
        row["error"] = why if "cpu" not in row else f"(derive done; its check) {why}"
    return row


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", choices=list(CASES), default=list(CASES))
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds a row may take (derive and checks)")
    ap.add_argument("--list", action="store_true", help="print the programs and exit")
    args = ap.parse_args(argv)
    if args.list:
        for name, (what, build, call) in CASES.items():
            print(f"{name:22} {what:34} {build}  derive({call})")
        return
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=ROOT).stdout.strip()
    print(f"nc.derive at {commit}: first call in a fresh interpreter, one sample per row, OPENBLAS_NUM_THREADS="
          f"{os.environ['OPENBLAS_NUM_THREADS']}")
    print(f"{'program':22} {'what':34} {'cpu s':>7} {'wall s':>7} {'MiB':>5} {'reg':>3} {'H':>12} "
          f"{'counted':>7} {'equal':>5}")
    for case in args.only:
        s = sample(case, args.timeout)
        if "error" in s:
            done = f"{s['cpu']:7.2f} {s['wall']:7.2f} {s['mib']:5.0f} " if "cpu" in s else ""
            print(f"{case:22} {CASES[case][0]:34} {done}ERROR {s['error']}", flush=True)
            continue
        counted = "sym" if "memory='M'" in CASES[case][2] else str(s["counted"])
        print(f"{case:22} {CASES[case][0]:34} {s['cpu']:7.2f} {s['wall']:7.2f} {s['mib']:5.0f} {s['regimes']:3d} "
              f"{s['H'][:12]:>12} {counted:>7} {str(s['equal']):>5}", flush=True)
        for note in s["notes"]:
            print(f"{'':22}   {note}", flush=True)


if __name__ == "__main__":
    main()
