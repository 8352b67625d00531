"""Issue 35 checked from outside, third pass: ``nc.derive`` on programs neither the issue nor the earlier outside
benches (``bench_outside.py``, ``bench_outside_modes.py``) name.

Run with ``OPENBLAS_NUM_THREADS=1 python benchmarks/bench_outside_35e.py`` (``--only NAME …``, ``--kind
num|sym|hw|err``, ``--list``).  Every row is the first ``nc.derive`` in a **fresh interpreter** (import and
building f not timed; CPU seconds ``time.process_time`` and wall seconds), one sample each: a survey read with
the load it states.  Only the public surface is used.  Four kinds of row:

* **num** (3-4 memories): at each memory ``H`` = the plan runner's count on random inputs = ``nc.cost`` of the
  answer at its tiles, and the algorithm computes f (``nc.equivalent``; ``bench_outside.CHECK``).
* **sym** (``memory="M"``, ``reference=`` the row's sizes): at a memory inside every piece, the envelope's ``H``
  against a numeric derive there (``sym/num``), against the compulsory transfers (each input and output once),
  and every tile of the piece (a real number at that memory) against its axis (``tile > axis`` is flagged).
* **hw** (``hardware=`` a GPU model and a CPU model): tiles divide their axes, each kernel's on-chip bytes and
  threads fit the model, ``H`` = runner = cost functor, algorithm = f (``bench_outside_modes.gpu_check``).
* **err** (bad input): the error's type and message (typed errors name the fault and what is legal).

Programs: a multi-query decoder step (q = 1, one KV head, 8 query heads), cross-attention with x ≠ q both ways,
non-causal ALiBi, softcap under a window mask, a mixture of two MLPs of different widths summed, RMSNorm→matmul
chains of lengths 3 and 5 on distinct widths, a 2-layer MLP's backward, linear cross-entropy at a prime vocabulary
of 50,021, einsum chains whose axes repeat (``a b, b a``; a cyclic ``a b, b c, c a -> a``), a stack of 4 blocks each
with its own head size and MLP width, and 8 equal blocks with shared axis names against the same blocks each with its
own names (``stack-8 shared`` / ``stack-8 renamed``: same sizes, same H; the derive's time is what differs).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from bench_outside import CHECK, SETUP  # noqa: E402  (this folder: a script's first path)
from bench_outside_modes import MORE, cli  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PROGRAMS = r'''
def moe2(fa="f1", fb="f2"):
    """A mixture of two gelu MLPs of widths fa and fb on the same X, summed: mlp_a(X) + mlp_b(X)."""
    ma, mb = nc.rename_axis(L.mlp(), "f", fa), nc.rename_axis(L.mlp(), "f", fb)
    b = nc.Builder(nc.Ty(*ma.dom.inside, *mb.dom.inside[1:]))
    X = b.inputs[0]
    ya = b(ma, X, *b.inputs[1:5])
    yb = b(mb, X, *b.inputs[5:9])
    return b.build(b(nc.elementwise("add", "n o, n o -> n o"), ya, yb))

def rms_chain(k):
    """X: n×d0 → (RMSNorm over d_i, then · W_i: d_i × d_{i+1}) k times."""
    norms = [nc.rename_axis(L.rms_norm(), "d", f"d{i}") for i in range(k)]
    ins = [*norms[0].dom.inside]
    for i in range(k):
        if i:
            ins.append(norms[i].dom.inside[1])
        ins.extend(nc.types(f"d{i} d{i + 1}").inside)
    b = nc.Builder(nc.Ty(*ins))
    x, rest = b.inputs[0], list(b.inputs[1:])
    for i in range(k):
        g, w = rest[2 * i], rest[2 * i + 1]
        x = b(norms[i], x, g)
        x = b(nc.einsum(f"n d{i}, d{i} d{i + 1} -> n d{i + 1}"), x, w)
    return b.build(x)

def transposed_pair():
    """diag((A ⊙ Bᵀ) P Q) with A: a b, B: b a, P: b c, Q: c a (axes that repeat across operands)."""
    b = nc.Builder(nc.types("a b, b a, b c, c a"))
    A, B, P, Q = b.inputs
    t = b(nc.einsum("a b, b a -> a b"), A, B)             # A ⊙ Bᵀ: both axes repeat across operands
    u = b(nc.einsum("a b, b c -> a c"), t, P)
    return b.build(b(nc.einsum("a c, c a -> a"), u, Q))   # the diagonal of u Q

def cyclic3():
    return nc.einsum("a b, b c, c a -> a")

def stack_widths(k):
    """k pre-norm blocks in a row, block i with head size d_i and MLP width f_i (its own axes)."""
    blocks = [nc.rename_axis(nc.rename_axis(L.transformer_block(), "d", f"d{i}"), "f", f"f{i}")
              for i in range(k)]
    ins = [blocks[0].dom.inside[0]]
    for tb in blocks:
        ins.extend(tb.dom.inside[1:])
    b = nc.Builder(nc.Ty(*ins))
    x, w = b.inputs[0], b.inputs[1:]
    for i, tb in enumerate(blocks):
        x = b(tb, x, *w[12 * i:12 * (i + 1)])
    return b.build(x)
'''

MINE = r'''
def cost_only(f, r, sizes):
    """A row whose runner would loop too long (a prime axis: tiles 1): H = nc.cost at the tiles, H ≥ compulsory."""
    comp = compulsory(f, {nc.symbol(k): v for k, v in sizes.items()})
    ok, notes = True, []
    for reg in regimes(r):
        at = {**sizes, **{k: int(v) for k, v in tiles_of(reg).items() if k not in sizes}}
        c = nc.cost(reg.diagram, sizes=at).H.get(1, 0)
        if not (c == reg.H >= comp):
            ok = False
        notes.append(f"M = {reg.memory}: H {reg.H} cost {c} compulsory {comp} tiles "
                     f"{ {k: v for k, v in at.items() if k not in sizes} }")
    return None, ok, 'not run', notes

def sym_pieces(f, r, sizes):
    """At a memory inside every piece: sym H, numeric H, compulsory, tiles against their axes."""
    env = {nc.symbol(k): v for k, v in sizes.items()}
    M = nc.symbol("M")
    comp = compulsory(f, env)
    rows, worst, bad = [], 0.0, []
    for i, reg in enumerate(r.regimes):
        lo, hi = (sympy.sympify(b).subs(env) if b is not None else None for b in (reg.lower, reg.upper))
        lo = float(lo) if lo is not None and lo.is_finite else 1.0
        hi = float(hi) if hi is not None and hi.is_finite else None
        if hi is not None and hi <= lo:
            continue
        m = int((lo * hi) ** 0.5) if hi is not None else int(4 * lo + 64)
        m = max(m, int(lo) + 1) if hi is None or int(lo) + 1 < hi else m
        h = sympy.sympify(reg.H).subs(env).subs(M, m)
        if h.has(sympy.nan) or not h.is_finite:
            bad.append(f"piece {i} [{lo:.0f}, {hi}): H is {h} at M = {m}")
            continue
        hs = float(h)
        tiles = {str(k): float(sympy.sympify(v).subs(env).subs(M, m)) for k, v in reg.tiles.items()} \
            if reg.tiles else {}
        over = {k: round(v, 1) for k, v in tiles.items()
                if k.count("_") and k.split("_")[1] in sizes and v > sizes[k.split("_")[1]] * (1 + 1e-9)}
        try:
            hn = nc.derive(f, memory=m, sizes=sizes).H
        except nc.NapkinError as e:
            rows.append(f"piece {i} M = {m}: sym {hs:.0f}, numeric refused {type(e).__name__}: {str(e)[:90]}")
            continue
        ratio = hs / hn
        worst = max(worst, abs(ratio - 1)) if m > 4 * lo else worst
        flag = []
        if hs < comp * (1 - 1e-9):
            flag.append("BELOW COMPULSORY")
        if over:
            flag.append(f"TILES PAST AXES {over}")
        rows.append(f"piece {i} [{lo:.0f}, {hi if hi is None else round(hi)}) M = {m}: sym {hs:.0f} num {hn} "
                    f"sym/num {ratio:.3f} compulsory {comp} {' '.join(flag)}")
        if flag:
            bad.append(rows[-1])
    return len(r.regimes), worst, bad, rows
'''

NUM, SYM, HW, ERR = "num", "sym", "hw", "err"
MQA = "{'q': 1, 'x': 1021, 'd': 32, 'h': 1, 'g': 8}"
CROSS = "{'q': 37, 'x': 211, 'd': 48}"
CROSS_T = "{'q': 127, 'x': 7, 'd': 24}"
MOE = "{'n': 48, 'i': 40, 'f1': 72, 'f2': 120, 'o': 40}"
RMS3 = "{'n': 40, 'd0': 56, 'd1': 24, 'd2': 88, 'd3': 40}"
RMS5 = "{'n': 30, 'd0': 20, 'd1': 44, 'd2': 12, 'd3': 36, 'd4': 28, 'd5': 16}"
MLPG = "{'n': 40, 'i': 24, 'f': 72, 'o': 24}"
LCE = "{'n': 7, 'e': 31, 'v': 50021}"
TP = "{'a': 36, 'b': 52, 'c': 20}"
CYC = "{'a': 29, 'b': 41, 'c': 23}"
STACK = "{'n': 24, 'e': 40, 'h': 2, 'd0': 8, 'd1': 20, 'd2': 12, 'd3': 16, 'f0': 40, 'f1': 160, 'f2': 72, 'f3': 24}"
STACK_F = "f = stack_widths(4)"

#: name → (kind, build f and sizes, nc.derive's keywords, extra)
CASES = {
    "mqa-decode": (NUM, f"f = L.grouped_query_attention(); sizes = {MQA}",
                   "memory=[64, 512, 4096, 2**20], sizes=sizes"),
    "cross q<x": (NUM, f"f = L.attention(); sizes = {CROSS}", "memory=[256, 1024, 4096], sizes=sizes"),
    "cross q>>x mha": (NUM, f"f = L.multi_head_attention(); sizes = {{**{CROSS_T}, 'h': 3}}",
                       "memory=[256, 1200, 8000], sizes=sizes"),
    "alibi non-causal": (NUM, "f = L.alibi_attention(0.3, causal=False); sizes = {'q': 61, 'x': 139, 'd': 20}",
                         "memory=[256, 1400, 9000], sizes=sizes"),
    "softcap+window": (NUM, "f = L.softcap_attention(20.0, mask=L.window_mask(9)); "
                       "sizes = {'q': 61, 'x': 61, 'd': 16}", "memory=[256, 1200, 6000], sizes=sizes"),
    "moe2": (NUM, f"f = moe2(); sizes = {MOE}", "memory=[384, 1024, 8192, 65536], sizes=sizes"),
    "rms>mm x3": (NUM, f"f = rms_chain(3); sizes = {RMS3}", "memory=[256, 1024, 16384], sizes=sizes"),
    "rms>mm x5": (NUM, f"f = rms_chain(5); sizes = {RMS5}", "memory=[256, 1024, 8192], sizes=sizes"),
    "mlp-grad": (NUM, f"f = nc.grad(L.mlp(), wrt=[0, 1, 3]); sizes = {MLPG}", "memory=[384, 1024, 8192], sizes=sizes"),
    "lce v=50021": ("cost", f"f = L.linear_cross_entropy(); sizes = {LCE}", "memory=[512, 2048, 65536], sizes=sizes"),
    "lce v=50021 any": (NUM, f"f = L.linear_cross_entropy(); sizes = {LCE}",
                        "memory=[512, 2048, 65536], sizes=sizes, tiles='any'"),
    "einsum a b,b a": (NUM, f"f = transposed_pair(); sizes = {TP}", "memory=[160, 400, 5000], sizes=sizes"),
    "einsum cyclic": (NUM, f"f = cyclic3(); sizes = {CYC}", "memory=[128, 300, 4000], sizes=sizes"),
    "stack-4 widths": (NUM, f"{STACK_F}; sizes = {STACK}", "memory=4096, sizes=sizes"),
    "stack-8 shared": ("cost", "f = L.transformer_stack(8); sizes = {'n': 24, 'e': 40, 'h': 2, 'd': 16, 'f': 72}",
                       "memory=4096, sizes=sizes"),
    "stack-8 renamed": ("cost", "f = stack_widths(8); sizes = {'n': 24, 'e': 40, 'h': 2, "
                        "**{f'd{i}': 16 for i in range(8)}, **{f'f{i}': 72 for i in range(8)}}",
                        "memory=4096, sizes=sizes"),
    # symbolic
    "sym mqa-decode": (SYM, f"f = L.grouped_query_attention(); sizes = {MQA}", "memory='M', reference=sizes"),
    "sym cross q<x": (SYM, f"f = L.attention(); sizes = {CROSS}", "memory='M', reference=sizes"),
    "sym moe2": (SYM, f"f = moe2(); sizes = {MOE}", "memory='M', reference=sizes"),
    "sym rms>mm x3": (SYM, f"f = rms_chain(3); sizes = {RMS3}", "memory='M', reference=sizes"),
    "sym mlp-grad": (SYM, f"f = nc.grad(L.mlp(), wrt=[0, 1, 3]); sizes = {MLPG}", "memory='M', reference=sizes"),
    "sym lce v=50021": (SYM, f"f = L.linear_cross_entropy(); sizes = {LCE}", "memory='M', reference=sizes"),
    "sym einsum cyclic": (SYM, f"f = cyclic3(); sizes = {CYC}", "memory='M', reference=sizes"),
    # hardware models
    "h100 mqa-decode": (HW, "f = L.grouped_query_attention(); sizes = {'q': 1, 'x': 4096, 'd': 128, 'h': 1, 'g': 8}",
                        "hardware='h100-sxm5', sizes=sizes", "h100-sxm5"),
    "h100 moe2": (HW, "f = moe2(); sizes = {'n': 256, 'i': 128, 'f1': 256, 'f2': 512, 'o': 128}",
                  "hardware='h100-sxm5', sizes=sizes", "h100-sxm5"),
    "h100 cross q<x": (HW, "f = L.attention(); sizes = {'q': 128, 'x': 2048, 'd': 64}",
                       "hardware='h100-sxm5', sizes=sizes", "h100-sxm5"),
    "h100 mlp-grad": (HW, "f = nc.grad(L.mlp(), wrt=[0, 1, 3]); sizes = {'n': 128, 'i': 128, 'f': 256, 'o': 128}",
                      "hardware='h100-sxm5', sizes=sizes", "h100-sxm5"),
    "a100 rms>mm x3": (HW, "f = rms_chain(3); sizes = {'n': 256, 'd0': 128, 'd1': 256, 'd2': 64, 'd3': 128}",
                       "hardware='a100', sizes=sizes", "a100"),
    "a100 lce": (HW, "f = L.linear_cross_entropy(); sizes = {'n': 128, 'e': 128, 'v': 4096}",
                 "hardware='a100', sizes=sizes", "a100"),
    # bad input
    "err size name": (ERR, "f = L.attention(); sizes = {'q': 37, 'z': 211, 'd': 48}", "memory=512, sizes=sizes"),
    "err size missing": (ERR, "f = L.attention(); sizes = {'q': 37, 'd': 48}", "memory=512, sizes=sizes"),
    "err size zero": (ERR, "f = L.attention(); sizes = {'q': 0, 'x': 211, 'd': 48}", "memory=512, sizes=sizes"),
    "err size bool": (ERR, "f = L.attention(); sizes = {'q': True, 'x': 211, 'd': 48}", "memory=512, sizes=sizes"),
    "err M < least": (ERR, f"f = moe2(); sizes = {MOE}", "memory=2, sizes=sizes"),
    "err M list < least": (ERR, f"f = rms_chain(3); sizes = {RMS3}", "memory=[2, 4096], sizes=sizes"),
    "err M negative": (ERR, f"f = L.attention(); sizes = {CROSS}", "memory=-512, sizes=sizes"),
    "err M zero": (ERR, f"f = L.attention(); sizes = {CROSS}", "memory=0, sizes=sizes"),
    "err M bool": (ERR, f"f = L.attention(); sizes = {CROSS}", "memory=True, sizes=sizes"),
    "err M float": (ERR, f"f = L.attention(); sizes = {CROSS}", "memory=512.5, sizes=sizes"),
    "err M empty list": (ERR, f"f = L.attention(); sizes = {CROSS}", "memory=[], sizes=sizes"),
    "err M bad symbol": (ERR, f"f = L.attention(); sizes = {CROSS}", "memory='M q', reference=sizes"),
    "err hw misspelled": (ERR, "f = L.attention(); sizes = {'q': 128, 'x': 2048, 'd': 64}",
                          "hardware='h100-sxm', sizes=sizes"),
    "err hw + memory": (ERR, "f = L.attention(); sizes = {'q': 128, 'x': 2048, 'd': 64}",
                        "hardware='h100-sxm5', memory=4096, sizes=sizes"),
    "err hw no sizes": (ERR, "f = L.attention(); sizes = None", "hardware='a100'"),
    "err level 0": (ERR, f"f = L.attention(); sizes = {CROSS}", "memory=512, level=0, sizes=sizes"),
}


def sample(case: str, timeout: float) -> dict:
    """One row: the case's first derive in a fresh interpreter, then its checks (untimed)."""
    kind, build, call = CASES[case][:3]
    extra = CASES[case][3] if len(CASES[case]) > 3 else None
    check = {SYM: "sym_pieces(f, r, sizes)", HW: f"gpu_check(f, r, sizes, {extra!r})",
             NUM: "check(f, r, sizes, False)", ERR: "None", "cost": "cost_only(f, r, sizes)"}[kind]
    code = (SETUP + CHECK + MORE + PROGRAMS + MINE + build + "\nt0, c0 = time.perf_counter(), time.process_time()\n"
            "try:\n"
            f"    r = nc.derive(f, {call})\n"
            "except Exception as e:\n"
            "    print(json.dumps({'raised': type(e).__name__ + ('' if isinstance(e, nc.NapkinError) else ' (untyped)')"
            " + ': ' + str(e)[:400], 'cpu': time.process_time() - c0}))\n"
            "    raise SystemExit(0)\n"
            "t, c = time.perf_counter() - t0, time.process_time() - c0\n"
            "mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024\n"
            "print(json.dumps({'wall': t, 'cpu': c, 'mib': mib}), flush=True)\n"
            f"out = {check}\n"
            f"if {kind!r} == 'hw':\n"
            "    legal, notes = out; H, counted, equal, more = check(f, r, sizes, False)\n"
            "    out = {'H': str(H), 'legal': legal, 'counted': counted, 'equal': equal, 'notes': notes + more}\n"
            f"elif {kind!r} == 'sym':\n"
            "    out = {'regimes': out[0], 'worst': out[1], 'bad': out[2], 'notes': out[3]}\n"
            f"elif {kind!r} in ('num', 'cost'):\n"
            "    out = {'H': str(r.H), 'counted': out[1], 'equal': out[2], 'notes': out[3]}\n"
            "else:\n"
            "    out = {'H': str(r.H), 'notes': ['NO ERROR RAISED']}\n"
            "print(json.dumps(out))\n")
    env = {**os.environ, "PYTHONPATH": ROOT}
    try:
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env,
                              timeout=timeout)
        out, why = done.stdout, (done.stderr.strip().splitlines() or ["?"])[-1][:200] if done.returncode else None
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        why = f"over {timeout:.0f} s"
    row = {k: v for x in out.strip().splitlines() if x.startswith("{") for k, v in json.loads(x).items()}
    if why:
        row["error"] = why
    return row


def line(case: str, s: dict) -> list[str]:
    kind = CASES[case][0]
    kind = NUM if kind == "cost" else kind
    head = f"{case:18} {CASES[case][2][:44]:44}"
    if "raised" in s:
        return [f"{head} {s['cpu']:6.2f} raised {s['raised']}"]
    if "error" in s and "cpu" not in s:
        return [f"{head} ERROR {s['error']}"]
    t = f"{head} {s['cpu']:6.2f} {s['wall']:6.2f} {s['mib']:5.0f}"
    if "error" in s:
        return [f"{t} (derive done; its check) ERROR {s['error']}"]
    if kind == SYM:
        t += f"  pieces {s['regimes']}, max |sym/num − 1| (M > 4·lo) {s['worst']:.3f}, flagged {len(s['bad'])}"
    else:
        t += f"  H {s['H'][:60]}" + (f" counted {s['counted']} equal {s['equal']}" if "counted" in s else "") + \
             (f" legal {s['legal']}" if "legal" in s else "")
    return [t] + [f"{'':18}   {n}" for n in s["notes"]]


def main(argv=None):
    cli(argv, CASES, [NUM, SYM, HW, ERR], 150.0, sample, line, widths=(18, 44))

if __name__ == "__main__":
    main()
