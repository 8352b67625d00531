"""Issue 35 checked from outside, second pass: symbolic, GPU-model and odd-size derives ``bench_outside.py`` left out.

Run with ``OPENBLAS_NUM_THREADS=1 python benchmarks/bench_outside_modes.py`` (``--only NAME …``, ``--list``,
``--kind sym|gpu|odd``).  Every row is the first ``nc.derive`` in a **fresh interpreter** (import and building
the function not timed; CPU seconds, ``time.process_time``), one sample each: a survey, read with the load it
states.  Only the public surface is used (``nc.derive``, ``nc.grad``, ``nc.cost``, ``nc.plan``, ``nc.library``,
``nc.equivalent``, ``nc.hardware.load``).  Three kinds of row:

* **sym** (``memory="M"``, ``reference=`` the row's sizes, or none: the library's default reference): the
  envelope ``H(M)`` is read at three memories inside its regimes and compared with a numeric derive at that
  memory and the reference sizes (``num``: integer tiles dividing their axes, so the envelope, over real tiles,
  may be lower; ``sym/num`` printed), and with the compulsory transfers (every input and output moved once,
  from the types; masked programs may skip inputs a mask never reads: marked ``mask``).
* **gpu** (``hardware=`` a shipped GPU model): the chosen plan's tiles divide their axes, its kernels' on-chip
  bytes, registers and threads fit the model, and ``H`` = the plan runner's count = the cost functor's at its
  tiles, the algorithm equal to f on random inputs (``bench_outside.CHECK``).
* **odd** (numeric, sizes that are primes, 1, or not powers of two; memories ``2**40``; a memory below the
  smallest legal one): ``H`` = runner = cost functor, algorithm = f; where an error is expected, its type and
  message are printed.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from bench_outside import CHECK, SETUP  # noqa: E402  (this folder: a script's first path)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

MORE = r'''
def norm_chain(first, second):
    """second(first(X)) over d, then X W: two row norms in a chain before a matmul."""
    a, c = first(), second()
    b = nc.Builder(nc.Ty(*a.dom.inside, *c.dom.inside[1:], *nc.types("d o").inside))
    h = b(a, *b.inputs[:len(a.dom.inside)])
    h = b(c, h, *b.inputs[len(a.dom.inside):-1])
    return b.build(b(nc.einsum("n d, d o -> n o"), h, b.inputs[-1]))

def compulsory(f, env):
    """Values every algorithm moves: each input and output once (from the types)."""
    return sum(int(sympy.prod([sympy.sympify(a.size).subs(env) for a in arr.axes]))
               for arr in (*f.dom.inside, *f.cod.inside))

def sym_check(f, r, sizes, masked):
    env = {nc.symbol(k): v for k, v in sizes.items()}
    M = nc.symbol("M")
    bounds = []
    for reg in r.regimes:
        lo, hi = (sympy.sympify(b).subs(env) if b is not None else None for b in (reg.lower, reg.upper))
        h = sympy.sympify(reg.H).subs(env)
        if h.has(sympy.nan):
            continue
        bounds.append((float(lo) if lo is not None and lo.is_finite else 1.0,
                       float(hi) if hi is not None and hi.is_finite else None, h))
    lo0 = bounds[0][0]
    last = max(b for b in (bounds[-1][0], bounds[-2][1] if len(bounds) > 1 else None) if b is not None)
    samples = sorted({int(2 * lo0 + 8), int((lo0 * max(last, 2 * lo0)) ** 0.5) + 1, int(4 * last + 64)})
    comp = compulsory(f, env)
    notes, ok_comp, worst = [], True, 0.0
    for m in samples:
        hs = next(float(h.subs(M, m)) for lo, hi, h in bounds if lo <= m and (hi is None or m < hi))
        try:
            hn = nc.derive(f, memory=m, sizes=sizes).H
        except nc.NapkinError as e:
            notes.append(f"M = {m}: sym {hs:.0f}, numeric refused: {type(e).__name__}: {str(e)[:80]}")
            continue
        ratio = hs / hn
        worst = max(worst, abs(ratio - 1))
        if hs < comp * (1 - 1e-9):
            ok_comp = masked
        notes.append(f"M = {m}: sym {hs:.0f} num {hn} sym/num {ratio:.3f} compulsory {comp}"
                     + (" (below: mask)" if hs < comp and masked else ""))
    return len(bounds), ok_comp, worst, notes

def gpu_check(f, r, sizes, hardware):
    """Tiles divide axes; each kernel's on-chip bytes, registers, threads fit the model; H counted."""
    gpu = nc.hardware.load(hardware)
    notes, legal = [], True
    tiles = {k: int(v) for k, v in r.prediction.sizes.items() if k not in sizes}
    for k, v in tiles.items():
        axis = k.split("_")[1]
        if axis in sizes and sizes[axis] % v:
            legal = False
            notes.append(f"tile {k} = {v} does not divide {axis} = {sizes[axis]}")
    for kt in r.prediction.kernels:
        b = kt.bytes
        if b["on_chip_per_block"] > gpu.smem_per_block or b["threads"] > gpu.max_threads_per_block or \
                b["registers_per_block"] > gpu.registers_per_block * gpu.register_bytes:
            legal = False
            notes.append(f"{kt.label}: {b} over the model")
    notes.append(f"{len(r.prediction.kernels)} kernels, tiles {tiles}, predicted {r.prediction.time * 1e6:.1f} us "
                 "(a prediction)")
    return legal, notes
'''


def _sym(build, call, masked=False):
    return ("sym", build, call, masked)


#: name → (kind, build f and sizes, nc.derive's keywords, masked?)
CASES = {
    # (1) symbolic: memory='M' at reference sizes (and one at the library's default reference)
    "sym gelu-mlp": _sym("f = L.mlp(); sizes = {'n': 96, 'i': 80, 'f': 144, 'o': 72}", "memory='M', reference=sizes"),
    "sym layer_norm+matmul": _sym("f = norm_matmul(L.layer_norm); sizes = {'n': 96, 'd': 80, 'o': 56}",
                                  "memory='M', reference=sizes"),
    "sym ln>rms>matmul": _sym("f = norm_chain(L.layer_norm, L.rms_norm); sizes = {'n': 96, 'd': 80, 'o': 56}",
                              "memory='M', reference=sizes"),
    "sym swiglu": _sym("f = L.swiglu(); sizes = {'n': 96, 'e': 80, 'f': 144}", "memory='M', reference=sizes"),
    "sym mqa": _sym("f = L.grouped_query_attention(); sizes = {'q': 96, 'x': 120, 'd': 24, 'h': 1, 'g': 6}",
                    "memory='M', reference=sizes"),
    "sym mha": _sym("f = L.multi_head_attention(); sizes = {'q': 96, 'x': 120, 'd': 24, 'h': 3}",
                    "memory='M', reference=sizes"),
    "sym causal": _sym("f = L.causal_attention(); sizes = {'q': 120, 'x': 120, 'd': 24}",
                       "memory='M', reference=sizes", True),
    "sym window": _sym("f = L.sliding_window_attention(13); sizes = {'q': 120, 'x': 120, 'd': 24}",
                       "memory='M', reference=sizes", True),
    "sym prefix-lm": _sym("f = L.prefix_lm_attention(20); sizes = {'q': 120, 'x': 120, 'd': 24}",
                          "memory='M', reference=sizes", True),
    "sym cross-entropy": _sym("f = L.cross_entropy(); sizes = {'n': 96, 'v': 500}", "memory='M', reference=sizes"),
    "sym linear-ce": _sym("f = L.linear_cross_entropy(); sizes = {'n': 96, 'e': 80, 'v': 500}",
                          "memory='M', reference=sizes"),
    "sym chain-3": _sym("sizes = {}; f = chain(3, sizes)", "memory='M', reference=sizes"),
    "sym chain-5": _sym("sizes = {}; f = chain(5, sizes)", "memory='M', reference=sizes"),
    "sym rms_norm-grad": _sym("f = nc.grad(L.rms_norm(), wrt=[0, 1]); sizes = {'n': 96, 'd': 80}",
                              "memory='M', reference=sizes"),
    "sym layer_norm-grad": _sym("f = nc.grad(L.layer_norm(), wrt=[0]); sizes = {'n': 96, 'd': 80}",
                                "memory='M', reference=sizes"),
    "sym matmul default-ref": _sym("f = L.matmul(); sizes = {'a': 1024, 'b': 1088, 'c': 1152}", "memory='M'"),
    # (2) GPU models
    "h200 causal": ("gpu", "f = L.causal_attention(); sizes = {'q': 384, 'x': 384, 'd': 64}",
                    "hardware='h200', sizes=sizes", "h200"),
    "a100 gqa": ("gpu", "f = L.grouped_query_attention(); sizes = {'q': 256, 'x': 384, 'd': 64, 'h': 2, 'g': 2}",
                 "hardware='a100', sizes=sizes", "a100"),
    "h800 prefix-lm": ("gpu", "f = L.prefix_lm_attention(96); sizes = {'q': 384, 'x': 384, 'd': 64}",
                       "hardware='h800', sizes=sizes", "h800"),
    "h100-pcie gelu-mlp": ("gpu", "f = L.mlp(); sizes = {'n': 256, 'i': 192, 'f': 512, 'o': 192}",
                           "hardware='h100-pcie', sizes=sizes", "h100-pcie"),
    "h200 rms_norm-grad": ("gpu", "f = nc.grad(L.rms_norm(), wrt=[0, 1]); sizes = {'n': 256, 'd': 192}",
                           "hardware='h200', sizes=sizes", "h200"),
    "a100 swiglu-grad": ("gpu", "f = nc.grad(L.swiglu(), wrt=[0, 1, 2]); sizes = {'n': 128, 'e': 128, 'f': 256}",
                         "hardware='a100', sizes=sizes", "a100"),
    "h200 causal-grad": ("gpu", "f = nc.grad(L.causal_attention(), wrt=[0, 1, 2]); "
                         "sizes = {'q': 256, 'x': 256, 'd': 64}", "hardware='h200', sizes=sizes", "h200"),
    "h100 linear-ce": ("gpu", "f = L.linear_cross_entropy(); sizes = {'n': 256, 'e': 128, 'v': 1024}",
                       "hardware='h100-sxm5', sizes=sizes", "h100-sxm5"),
    "h200 ln+matmul": ("gpu", "f = norm_matmul(L.layer_norm); sizes = {'n': 256, 'd': 192, 'o': 320}",
                       "hardware='h200', sizes=sizes", "h200"),
    # (3) numeric at odd sizes
    "odd attn primes": ("odd", "f = L.attention(); sizes = {'q': 97, 'x': 131, 'd': 17}",
                        "memory=[60, 600, 6000], sizes=sizes", None),
    "odd attn primes any": ("odd", "f = L.attention(); sizes = {'q': 97, 'x': 131, 'd': 17}",
                            "memory=[60, 600, 6000], sizes=sizes, tiles='any'", None),
    "odd causal q=1": ("odd", "f = L.causal_attention(); sizes = {'q': 1, 'x': 1, 'd': 7}",
                       "memory=64, sizes=sizes", None),
    "odd window 7 primes": ("odd", "f = L.sliding_window_attention(7); sizes = {'q': 89, 'x': 89, 'd': 11}",
                            "memory=[300, 3000], sizes=sizes", None),
    "odd mlp n=1": ("odd", "f = L.mlp(); sizes = {'n': 1, 'i': 97, 'f': 210, 'o': 33}",
                    "memory=[500, 2**40], sizes=sizes", None),
    "odd swiglu-mlp primes": ("odd", "f = L.swiglu_mlp(); sizes = {'n': 53, 'e': 37, 'f': 101, 'o': 29}",
                              "memory=1000, sizes=sizes", None),
    "odd rms_norm d=1": ("odd", "f = L.rms_norm(); sizes = {'n': 113, 'd': 1}", "memory=[8, 2**40], sizes=sizes",
                         None),
    "odd layer_norm-grad": ("odd", "f = nc.grad(L.layer_norm(), wrt=[0, 1, 2]); sizes = {'n': 61, 'd': 45}",
                            "memory=700, sizes=sizes", None),
    "odd ce v=prime": ("odd", "f = L.cross_entropy(); sizes = {'n': 7, 'v': 1009}", "memory=[40, 400], sizes=sizes",
                       None),
    "odd gqa h=1 g=5": ("odd", "f = L.grouped_query_attention(); sizes = {'q': 3, 'x': 243, 'd': 10, 'h': 1, 'g': 5}",
                        "memory=900, sizes=sizes", None),
    "odd matmul a=1 prime": ("odd", "f = L.matmul(); sizes = {'a': 1, 'b': 389, 'c': 7}", "memory=50, sizes=sizes",
                           None),
    "odd block primes": ("odd", "f = L.transformer_block(); sizes = {'n': 29, 'e': 35, 'h': 5, 'd': 7, 'f': 67}",
                         "memory=3000, sizes=sizes", None),
    "odd attn huge M": ("odd", "f = L.attention(); sizes = {'q': 97, 'x': 131, 'd': 17}",
                        "memory=2**60, sizes=sizes", None),
    "err attn M<min": ("odd", "f = L.attention(); sizes = {'q': 97, 'x': 131, 'd': 17}", "memory=5, sizes=sizes",
                       None),
    "err block M<min": ("odd", "f = L.transformer_block(); sizes = {'n': 29, 'e': 35, 'h': 5, 'd': 7, 'f': 67}",
                        "memory=8, sizes=sizes", None),
    "err gpu primes": ("odd", "f = L.attention(); sizes = {'q': 97, 'x': 131, 'd': 17}",
                       "hardware='h200', sizes=sizes", None),
}


def sample(case: str, timeout: float) -> dict:
    """One row: the case's first derive in a fresh interpreter, then its checks (untimed)."""
    kind, build, call, extra = CASES[case]
    check = {"sym": f"sym_check(f, r, sizes, {extra!r})", "gpu": f"gpu_check(f, r, sizes, {extra!r})",
             "odd": "check(f, r, sizes, False)"}[kind]
    code = (SETUP + CHECK + MORE + build + "\nt0, c0 = time.perf_counter(), time.process_time()\n"
            "try:\n"
            f"    r = nc.derive(f, {call})\n"
            "except nc.NapkinError as e:\n"
            "    print(json.dumps({'raised': type(e).__name__ + ': ' + str(e)[:300], "
            "'cpu': time.process_time() - c0}))\n"
            "    raise SystemExit(0)\n"
            "t, c = time.perf_counter() - t0, time.process_time() - c0\n"
            "mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024\n"
            "print(json.dumps({'wall': t, 'cpu': c, 'mib': mib}), flush=True)\n"
            f"out = {check}\n"
            f"if {kind!r} == 'gpu':\n"
            "    legal, notes = out; H, counted, equal, more = check(f, r, sizes, False)\n"
            "    out = {'H': str(H), 'legal': legal, 'counted': counted, 'equal': equal, 'notes': notes + more}\n"
            f"elif {kind!r} == 'sym':\n"
            "    out = {'regimes': out[0], 'compulsory_ok': out[1], 'worst': out[2], 'notes': out[3]}\n"
            "else:\n"
            "    out = {'H': str(out[0]), 'counted': out[1], 'equal': out[2], 'notes': out[3]}\n"
            "print(json.dumps(out))\n")
    env = {**os.environ, "PYTHONPATH": ROOT}
    try:
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env,
                              timeout=timeout)
        out, why = done.stdout, (done.stderr.strip().splitlines() or ["?"])[-1][:160] if done.returncode else None
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        why = f"over {timeout:.0f} s"
    row = {k: v for x in out.strip().splitlines() if x.startswith("{") for k, v in json.loads(x).items()}
    if why:
        row["error"] = why
    return row


def line(case: str, s: dict) -> list[str]:
    kind = CASES[case][0]
    head = f"{case:24} {CASES[case][2][:40]:40}"
    if "raised" in s:
        return [f"{head} {s['cpu']:7.2f} raised {s['raised']}"]
    if "error" in s and "cpu" not in s:
        return [f"{head} ERROR {s['error']}"]
    t = f"{head} {s['cpu']:7.2f} {s['wall']:7.2f} {s['mib']:5.0f}"
    if "error" in s:
        return [f"{t} (derive done; its check) ERROR {s['error']}"]
    if kind == "sym":
        t += f"  regimes {s['regimes']}, H ≥ compulsory {s['compulsory_ok']}, max |sym/num − 1| {s['worst']:.3f}"
    else:
        t += f"  H {s['H'][:12]} counted {s['counted']} equal {s['equal']}" + \
             (f" legal {s['legal']}" if "legal" in s else "")
    return [t] + [f"{'':24}   {n}" for n in s["notes"]]


def cli(argv, cases_table: dict, kinds: list, timeout: float, sample, line, widths=(24, 40)):
    """The outside benches' command line: ``--only``/``--kind``/``--timeout``/``--list``, then one fresh-process row
    per case (``sample(case, timeout)`` → ``line(case, sample)``), headed by the commit and the machine's load."""
    ap = argparse.ArgumentParser(description=sys.modules["__main__"].__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", choices=list(cases_table), default=None)
    ap.add_argument("--kind", choices=kinds, default=None)
    ap.add_argument("--timeout", type=float, default=timeout, help="seconds a row may take (derive and checks)")
    ap.add_argument("--list", action="store_true", help="print the programs and exit")
    args = ap.parse_args(argv)
    name_w, call_w = widths
    cases = args.only or [c for c, v in cases_table.items() if args.kind in (None, v[0])]
    if args.list:
        for name in cases:
            print(f"{name:{name_w}} {cases_table[name][1]}  derive({cases_table[name][2]})")
        return
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=ROOT).stdout.strip()
    print(f"nc.derive at {commit}: first call in a fresh interpreter, one sample per row, OPENBLAS_NUM_THREADS="
          f"{os.environ['OPENBLAS_NUM_THREADS']}, load {os.getloadavg()[0]:.1f}")
    print(f"{'program':{name_w}} {'derive(...)':{call_w}} {'cpu s':>7} {'wall s':>7} {'MiB':>5}  checks")
    for case in cases:
        for x in line(case, sample(case, args.timeout)):
            print(x, flush=True)
    print(f"load at the end {os.getloadavg()[0]:.1f}")


def main(argv=None):
    cli(argv, CASES, ["sym", "gpu", "odd"], 600.0, sample, line)

if __name__ == "__main__":
    main()
