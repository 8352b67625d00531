"""Issue 35 checked from outside, fourth pass: ``nc.derive`` on programs, shapes and names that neither the issue nor
the earlier outside benches (``bench_outside.py``, ``bench_outside_modes.py``, ``bench_outside_35e.py``) use.

Run with ``OPENBLAS_NUM_THREADS=1 python benchmarks/bench_outside_35f.py`` (``--only NAME …``, ``--kind
num|sym|hw|err|scale``, ``--list``).  Every derive row is the first ``nc.derive`` in a **fresh interpreter** (import
and building f not timed; CPU seconds ``time.process_time`` and wall seconds), one sample each: a survey read with
the load it states.  Only the public surface is used.  Kinds of row:

* **num** (memories at the least that works, a middle one, and 2**50): at each memory ``H`` = the plan runner's
  count on random inputs = ``nc.cost`` of the answer at its tiles, the algorithm computes f (``nc.equivalent``),
  and ``H`` ≥ the compulsory transfers; the least memory is the one the refusal of ``memory=least − 1`` names
  (both directions are checked: ``least − 1`` raises MemoryLimitError naming ``least``, ``least`` derives);
* **cost** (a row whose runner would loop too long): ``H`` = ``nc.cost`` at the answer's tiles ≥ compulsory;
* **sym** (``memory="M"``, ``reference=`` the row's sizes): at a memory inside every piece, the envelope's ``H``
  against a numeric derive there.  The envelope minimises over real tiles, so it is a lower bound of the numeric
  answer of the same candidates: ``sym ≤ num`` (``ABOVE NUMERIC`` flags the opposite), ``sym ≥`` the
  compulsory transfers (``BELOW COMPULSORY``), and it does not rise as the memory grows (``RISES WITH M``);
* **hw** (``hardware=`` a shipped GPU or CPU model): tiles divide their axes, each kernel fits the GPU model
  (``bench_outside_modes.gpu_check``), ``H`` = runner = cost functor, algorithm = f;
* **err** (bad input): the error's type and message (typed errors name the fault and what is legal);
* **scale** (in this process, not a derive): the cost functor's time per box at about 50, 200, 800 and 2,000 boxes
  on diagram shapes ``bench_cost.py`` does not use (a deep MLP whose every layer has its own width axis, the same
  unfused, and a balanced tree of matrix products), symbolic and at concrete sizes: flat when it is linear in boxes.

Programs: grouped-query attention with 2 KV heads of 5 groups each at q = 33, x = 90; encoder-decoder cross attention
with a padding mask from data (key x kept iff x < len[q], len an int32 input); a deep narrow MLP (16 layers, a width
axis of its own per layer); LLaMA's FFN half-block (RMSNorm, SwiGLU, residual) at primes n 31 e 23 f 59; a softmax
over a vocabulary of 131,072 then the target's probability (gather); an MLP with a residual on a 2-D token stream
b × t; document attention across q ≠ x (segment ids from data); the backward (``nc.grad``) of a bias-free 2-layer
tanh MLP on axes named t u v w; a transformer block whose five axes all have names of their own (tok emb head hd ffn)
against the same block with the library's names.
"""
from __future__ import annotations

import os
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import json  # noqa: E402
import subprocess  # noqa: E402

from bench_outside import CHECK, SETUP  # noqa: E402  (this folder: a script's first path)
from bench_outside_35e import MINE  # noqa: E402
from bench_outside_modes import MORE, cli  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PROGRAMS = r'''
def pad_mask():
    """Key x is kept iff x < len[q]: the padding of an encoder's batch row, from data (len: int32 over q)."""
    b = nc.Builder(nc.types("q", dtype=nc.INT32))
    xi = b(nc.position("x"))
    return b.build(b(nc.compare("lt", "x, q -> q x"), xi, b.inputs[0]))

def xattn_pad():
    """Cross attention (decoder queries q, encoder keys x) under the padding mask from data; inputs Q, K, V, len."""
    return L.masked_attention(pad_mask())

from napkin_cat.testing.scaling import deep_mlp

def rms_swiglu_block():
    """LLaMA's FFN half-block: y = x + SwiGLU-MLP(RMSNorm(x)) over e (the MLP's output axis is e)."""
    rms = nc.rename_axis(L.rms_norm(), "d", "e")
    mlp = nc.rename_axis(L.swiglu_mlp(), "o", "e")
    b = nc.Builder(nc.types("n e, e, e f, e f, f e"))
    X, g, W1, W3, W2 = b.inputs
    y = b(mlp, b(rms, X, g), W1, W3, W2)
    return b.build(b(nc.elementwise("add", "n e, n e -> n e"), X, y))

def vocab_prob():
    """p[i] = softmax(L[i, :])[t_i]: a softmax over the vocabulary v, then the target's probability (a gather)."""
    b = nc.Builder(nc.types("n v") @ nc.types("n", dtype=nc.INT32))
    logits, t = b.inputs
    return b.build(b(nc.gather("n v, n -> n"), b(nc.softmax("n v", over="v"), logits), t))

def stream2d():
    """An MLP with a residual on a 2-D token stream (batch b × time t): y = X + gelu(X W1) W2, X: b t e."""
    b = nc.Builder(nc.types("b t e, e f, f e"))
    X, W1, W2 = b.inputs
    h = b(nc.elementwise("gelu", "b t f"), b(nc.einsum("b t e, e f -> b t f"), X, W1))
    return b.build(b(nc.elementwise("add", "b t e, b t e -> b t e"), X, b(nc.einsum("b t f, f e -> b t e"), h, W2)))

def mlp2(act="tanh"):
    """A bias-free 2-layer MLP on axes of its own names: act(X W1) W2, X: t u, W1: u v, W2: v w."""
    b = nc.Builder(nc.types("t u, u v, v w"))
    X, W1, W2 = b.inputs
    h = b(nc.elementwise(act, "t v"), b(nc.einsum("t u, u v -> t v"), X, W1))
    return b.build(b(nc.einsum("t v, v w -> t w"), h, W2))

OWN = (("n", "tok"), ("e", "emb"), ("h", "head"), ("d", "hd"), ("f", "ffn"))

def own_block():
    """transformer_block with every axis renamed: n→tok, e→emb, h→head, d→hd, f→ffn."""
    f = L.transformer_block()
    for a, b_ in OWN:
        f = nc.rename_axis(f, a, b_)
    return f

def pad_inputs(f, sizes, rng):
    """Q, K, V normal; len[q] in 1 … x (every query keeps at least one key)."""
    q, x, d = sizes["q"], sizes["x"], sizes["d"]
    return [rng.normal(size=(q, d)), rng.normal(size=(x, d)), rng.normal(size=(x, d)),
            rng.integers(1, x + 1, size=q).astype(np.int32)]

def least_check(f, sizes, least):
    """memory = least − 1 refused by a MemoryLimitError naming least; memory = least derives (peak ≤ least)."""
    notes, ok = [], True
    try:
        nc.derive(f, memory=least - 1, sizes=sizes)
        ok = False
        notes.append(f"memory {least - 1} (least − 1) NOT REFUSED")
    except nc.MemoryLimitError as e:
        if f"is {least} values" not in str(e):
            ok = False
            notes.append(f"memory {least - 1} refused, naming another least: {str(e)[:160]}")
    return ok, notes
'''

NUM, COST, SYM, HW, ERR, SCALE = "num", "cost", "sym", "hw", "err", "scale"

GQA = "{'q': 11, 'x': 45, 'd': 8, 'h': 2, 'g': 5}"
PAD = "{'q': 29, 'x': 83, 'd': 16}"
DEEP = "{'n': 24, **{f'c{i}': 4 + 4 * (i % 3) for i in range(17)}}"
RMSW = "{'n': 13, 'e': 11, 'f': 29}"
VOC = "{'n': 3, 'v': 8192}"
S2D = "{'b': 3, 't': 10, 'e': 12, 'f': 20}"
DOC = "{'q': 21, 'x': 34, 'd': 8}"
MLP2 = "{'t': 18, 'u': 10, 'v': 22, 'w': 6}"
OWNS = "{'tok': 10, 'emb': 18, 'head': 3, 'hd': 6, 'ffn': 30}"
LIBS = "{'n': 10, 'e': 18, 'h': 3, 'd': 6, 'f': 30}"
BIG = 2 ** 50

#: name → (kind, build f and sizes, nc.derive's keywords[, extra: the least memory (num), the model (hw)])
CASES = {
    "gqa h2 g5": (NUM, f"f = L.grouped_query_attention(); sizes = {GQA}", f"memory=[6, 1024, {BIG}], sizes=sizes", 6),
    "xattn pad": (NUM, f"f = xattn_pad(); sizes = {PAD}", f"memory=[6, 700, {BIG}], sizes=sizes", 6),
    "deep mlp 16": (NUM, f"f = deep_mlp(16); sizes = {DEEP}", f"memory=[3, 300, {BIG}], sizes=sizes", 3),
    "rms+swiglu primes": (NUM, f"f = rms_swiglu_block(); sizes = {RMSW}", f"memory=[4, 300, {BIG}], sizes=sizes", 4),
    "vocab softmax+gather": (NUM, f"f = vocab_prob(); sizes = {VOC}", f"memory=[3, 4096, {BIG}], sizes=sizes", 3),
    "2-D stream mlp": (NUM, f"f = stream2d(); sizes = {S2D}", f"memory=[3, 200, {BIG}], sizes=sizes", 3),
    "doc cross q≠x": (NUM, f"f = L.document_attention(); sizes = {DOC}", f"memory=[6, 300, {BIG}], sizes=sizes", 6),
    "mlp2 grad": (NUM, f"f = nc.grad(mlp2(), wrt=[0, 1, 2]); sizes = {MLP2}", f"memory=[3, 300, {BIG}], sizes=sizes",
                  3),
    "block own names": (NUM, f"f = own_block(); sizes = {OWNS}", f"memory=[7, 1500, {BIG}], sizes=sizes", 7),
    "block lib names": (NUM, f"f = L.transformer_block(); sizes = {LIBS}", f"memory=[7, 1500, {BIG}], sizes=sizes",
                        7),
    "vocab v=131072": (COST, "f = vocab_prob(); sizes = {'n': 3, 'v': 131072}",
                       f"memory=[3, 4096, {BIG}], sizes=sizes"),
    "vocab v=131071": (COST, "f = vocab_prob(); sizes = {'n': 3, 'v': 131071}",
                       f"memory=[3, 4096, {BIG}], sizes=sizes"),
    "block issue sizes": (COST, "f = L.transformer_block(); sizes = {'n': 64, 'e': 64, 'h': 4, 'd': 16, 'f': 128}",
                          f"memory=[4096, 65536, {BIG}], sizes=sizes"),
    # symbolic
    "sym xattn pad": (SYM, f"f = xattn_pad(); sizes = {PAD}", "memory='M', reference=sizes"),
    "sym rms+swiglu": (SYM, f"f = rms_swiglu_block(); sizes = {RMSW}", "memory='M', reference=sizes"),
    "sym 2-D stream": (SYM, f"f = stream2d(); sizes = {S2D}", "memory='M', reference=sizes"),
    "sym mlp2 grad": (SYM, f"f = nc.grad(mlp2(), wrt=[0, 1, 2]); sizes = {MLP2}", "memory='M', reference=sizes"),
    "sym vocab": (SYM, "f = vocab_prob(); sizes = {'n': 3, 'v': 4096}", "memory='M', reference=sizes"),
    "sym deep mlp 4": (SYM, "f = deep_mlp(4); sizes = {'n': 40, 'c0': 8, 'c1': 12, 'c2': 16, 'c3': 8, 'c4': 12}",
                       "memory='M', reference=sizes"),
    "sym block own names": (SYM, f"f = own_block(); sizes = {OWNS}", "memory='M', reference=sizes"),
    # hardware models
    "h100 gqa h2 g4": (HW, "f = L.grouped_query_attention(); sizes = {'q': 256, 'x': 512, 'd': 64, 'h': 2, 'g': 4}",
                       "hardware='h100-sxm5', sizes=sizes", "h100-sxm5"),
    "h200 xattn pad": (HW, "f = xattn_pad(); sizes = {'q': 128, 'x': 1024, 'd': 64}", "hardware='h200', sizes=sizes",
                       "h200"),
    "a100 rms+swiglu": (HW, "f = rms_swiglu_block(); sizes = {'n': 256, 'e': 128, 'f': 384}",
                        "hardware='a100', sizes=sizes", "a100"),
    "h800 2-D stream": (HW, "f = stream2d(); sizes = {'b': 4, 't': 64, 'e': 128, 'f': 256}",
                        "hardware='h800', sizes=sizes", "h800"),
    "h100-pcie mlp2 grad": (HW, "f = nc.grad(mlp2(), wrt=[0, 1, 2]); sizes = {'t': 128, 'u': 128, 'v': 256, 'w': 64}",
                            "hardware='h100-pcie', sizes=sizes", "h100-pcie"),
    "zen3 deep mlp 16": (HW, "f = deep_mlp(16); sizes = {'n': 256, **{f'c{i}': 64 for i in range(17)}}",
                         "hardware='epyc-zen3-dev', sizes=sizes", "epyc-zen3-dev"),
    "zen3 vocab": (HW, "f = vocab_prob(); sizes = {'n': 16, 'v': 32768}", "hardware='epyc-zen3-dev', sizes=sizes",
                   "epyc-zen3-dev"),
    # bad input
    "err size lib name": (ERR, f"f = own_block(); sizes = {LIBS}", "memory=4096, sizes=sizes"),
    "err size float": (ERR, "f = xattn_pad(); sizes = {'q': 29, 'x': 83.0, 'd': 16}", "memory=512, sizes=sizes"),
    "err size negative": (ERR, f"f = mlp2(); sizes = {{**{MLP2}, 'v': -44}}", "memory=512, sizes=sizes"),
    "err M least-1": (ERR, f"f = own_block(); sizes = {OWNS}", "memory=6, sizes=sizes"),
    "err M zero": (ERR, f"f = stream2d(); sizes = {S2D}", "memory=0, sizes=sizes"),
    "err M negative list": (ERR, f"f = stream2d(); sizes = {S2D}", "memory=[512, -1], sizes=sizes"),
    "err M float whole": (ERR, f"f = stream2d(); sizes = {S2D}", "memory=512.0, sizes=sizes"),
    "err M nan": (ERR, f"f = stream2d(); sizes = {S2D}", "memory=float('nan'), sizes=sizes"),
    "err M inf": (ERR, f"f = stream2d(); sizes = {S2D}", "memory=float('inf'), sizes=sizes"),
    "err M numpy int": (ERR, f"f = stream2d(); sizes = {S2D}", "memory=np.int64(512), sizes=sizes"),
    "err M digit str": (ERR, f"f = stream2d(); sizes = {S2D}", "memory='512', reference=sizes"),
    "err M 2**70": (ERR, f"f = stream2d(); sizes = {S2D}", "memory=2**70, sizes=sizes"),
    "err hw unknown": (ERR, f"f = stream2d(); sizes = {S2D}", "hardware='h100', sizes=sizes"),
    "err hw cpu typo": (ERR, f"f = stream2d(); sizes = {S2D}", "hardware='epyc-zen5', sizes=sizes"),
    "err hw zen4 format 1": (ERR, f"f = deep_mlp(16); sizes = {DEEP}", "hardware='epyc-zen4', sizes=sizes"),
    "err hw primes": (ERR, f"f = rms_swiglu_block(); sizes = {RMSW}", "hardware='h100-sxm5', sizes=sizes"),
    "err level 17": (ERR, f"f = stream2d(); sizes = {S2D}", "memory=512, level=17, sizes=sizes"),
    "err level 2": (ERR, f"f = stream2d(); sizes = {S2D}", "memory=512, level=2, sizes=sizes"),
    "scale": (SCALE, "", "in this process"),
}

CHECKS = {
    NUM: "num_rows(f, r, sizes, {extra!r})", COST: "cost_rows(f, r, sizes)", SYM: "sym_rows(f, r, sizes)",
    HW: "hw_rows(f, r, sizes, {extra!r})", ERR: "None",
}

ROWS = r'''
def num_rows(f, r, sizes, least):
    """check() with pad_inputs for the padding row (its lengths must keep a key), H ≥ compulsory, least_check."""
    comp = compulsory(f, {nc.symbol(k): v for k, v in sizes.items()})
    total, counted, equal, notes = check(f, r, sizes, False)
    below = [reg.H for reg in regimes(r) if reg.H < comp]
    if below:
        notes.append(f"H {below} BELOW COMPULSORY {comp}")
    ok, more = least_check(f, sizes, least)
    notes += more + [f"M = {reg.memory}: H {reg.H}, tiles {tiles_of(reg)}" for reg in regimes(r)] + everything(r, comp)
    return total, counted and not below and ok, equal, notes

def everything(r, comp):
    """At a memory that holds every value (2**50), one kernel moves each input and output once: H = compulsory."""
    return [f"M = {reg.memory}: H {reg.H} ABOVE COMPULSORY {comp} (one kernel of everything moves {comp})"
            for reg in regimes(r) if reg.memory >= 2 ** 50 and reg.H > comp]

def cost_rows(f, r, sizes):
    _, ok, ran, notes = cost_only(f, r, sizes)
    return None, ok, ran, notes + everything(r, compulsory(f, {nc.symbol(k): v for k, v in sizes.items()}))

def hw_rows(f, r, sizes, hardware):
    if not hardware.startswith("epyc"):
        legal, notes = gpu_check(f, r, sizes, hardware)
    else:
        legal, notes = True, [f"tiles {tiles_of(r)}, predicted {r.prediction.time * 1e6:.1f} us (a prediction)"]
    H, counted, equal, more = check(f, r, sizes, False)
    return {'H': str(H), 'legal': legal, 'counted': counted, 'equal': equal, 'notes': notes + more}

def sym_rows(f, r, sizes):
    """sym_pieces, flagging an envelope above the numeric answer (the envelope is the real-tile lower bound)."""
    n, worst, bad, rows = sym_pieces(f, r, sizes)
    last = None
    for i, row in enumerate(rows):
        if "sym/num" not in row:
            continue
        if float(row.split("sym/num ")[1].split()[0]) > 1 + 1e-9:
            rows[i] += " ABOVE NUMERIC"
            bad.append(rows[i])
        h = float(row.split(": sym ")[1].split()[0])
        if last is not None and h > last * (1 + 1e-9):
            rows[i] += " RISES WITH M"
            bad.append(rows[i])
        last = h
    return n, worst, bad, rows
'''


def _check_inputs() -> str:
    """bench_outside's random inputs, with the padding row's lengths drawn in 1 … x (a length 0 masks every key)."""
    return CHECK.replace("def inputs(f, env, rng):\n",
                         "def inputs(f, env, rng):\n    if 'len' in FLAGS:\n        return pad_inputs(f, env, rng)\n")


def sample(case: str, timeout: float) -> dict:
    """One row: the case's first derive in a fresh interpreter, then its checks (untimed)."""
    kind, build, call = CASES[case][:3]
    extra = CASES[case][3] if len(CASES[case]) > 3 else None
    flags = "{'len'}" if "xattn" in build else "set()"
    code = (SETUP + f"FLAGS = {flags}\n" + _check_inputs() + MORE + PROGRAMS + MINE + ROWS + build +
            "\nt0, c0 = time.perf_counter(), time.process_time()\n"
            "try:\n"
            f"    r = nc.derive(f, {call})\n"
            "except Exception as e:\n"
            "    print(json.dumps({'raised': type(e).__name__ + ('' if isinstance(e, nc.NapkinError) else ' (untyped)')"
            " + ': ' + str(e)[:400], 'cpu': time.process_time() - c0}))\n"
            "    raise SystemExit(0)\n"
            "t, c = time.perf_counter() - t0, time.process_time() - c0\n"
            "mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024\n"
            "print(json.dumps({'wall': t, 'cpu': c, 'mib': mib}), flush=True)\n"
            f"out = {CHECKS[kind].format(extra=extra)}\n"
            f"if {kind!r} == 'sym':\n"
            "    out = {'regimes': out[0], 'worst': out[1], 'bad': out[2], 'notes': out[3]}\n"
            f"elif {kind!r} in ('num', 'cost'):\n"
            "    out = {'H': str(r.H), 'counted': out[1], 'equal': out[2], 'notes': out[3]}\n"
            f"elif {kind!r} == 'err':\n"
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


# ---- the cost functor's time per box, on shapes bench_cost.py does not use ----

def _programs():
    import napkin_cat as nc
    names = {"nc": nc, "np": __import__("numpy"), "L": nc.library}
    exec(PROGRAMS, names)
    return nc, names


def product_tree(n: int):
    """A balanced tree of matrix products over n + 1 axes c0 … cn: the inputs c_i c_{i+1} multiplied pairwise, level by
    level (n − 1 einsums; every level's products are live beside the next level's)."""
    import napkin_cat as nc
    b = nc.Builder(nc.types(", ".join(f"c{i} c{i + 1}" for i in range(n))))
    level = [(x, i, i + 1) for i, x in enumerate(b.inputs)]
    while len(level) > 1:
        nxt = []
        for k in range(0, len(level) - 1, 2):
            (x, a, m), (y, _, z) = level[k], level[k + 1]
            nxt.append((b(nc.einsum(f"c{a} c{m}, c{m} c{z} -> c{a} c{z}"), x, y), a, z))
        if len(level) % 2:
            nxt.append(level[-1])
        level = nxt
    return b.build(level[0][0])


def scaling():
    """ms per box of ``nc.cost`` at about 50, 200, 800, 2,000 boxes, symbolic and at concrete sizes: the first call on
    a diagram built afresh (cold: sympy's cache emptied, no column total met before) and the same call again (warm:
    the functor's memo of column totals by value answers); 'vs first': the ratio to the smallest (flat: linear)."""
    from bench_cost import clear_sympy, count_boxes
    nc, p = _programs()
    shapes = {
        "deep MLP, own width per layer": lambda n: p["deep_mlp"](max(1, n // 2)),
        "unfused deep MLP, own widths": lambda n: nc.unfused(p["deep_mlp"](max(1, n // 8))),
        "balanced tree of matrix products": lambda n: product_tree(n + 1),
    }
    nc.cost(p["deep_mlp"](2))
    print(f"{'cost functor, ms per box':34s} {'boxes':>6s} {'sym cold':>9s} {'vs':>5s} {'warm':>7s} {'vs':>5s} "
          f"{'sized cold':>10s} {'vs':>5s} {'warm':>7s} {'vs':>5s}", flush=True)
    for name, make in shapes.items():
        base = {}
        for n in (50, 200, 800, 2000):
            row = ""
            for mode in ("sym", "sized"):
                d = make(n)
                boxes = count_boxes(d)
                sizes = {a.name: 8 + 4 * (k % 5) for k, a in enumerate(
                    sorted({ax for arr in (*d.dom.inside, *d.cod.inside) for ax in arr.axes}, key=lambda a: a.name))}
                for run in ("cold", "warm"):
                    clear_sympy()
                    t = time.process_time()
                    nc.cost(d) if mode == "sym" else nc.cost(d, sizes=sizes)
                    per_box = 1000 * (time.process_time() - t) / boxes
                    base.setdefault((mode, run), per_box)
                    row += f" {per_box:{9 if run == 'cold' else 7}.3f} {per_box / base[mode, run]:5.2f}"
            print(f"{name:34s} {boxes:6d}{row}", flush=True)
    print("(sym: nc.cost(d); sized: nc.cost(d, sizes=…), every axis a number; CPU seconds, one sample each)")


def line(case: str, s: dict) -> list[str]:
    kind = CASES[case][0]
    kind = NUM if kind == COST else kind
    head = f"{case:20} {CASES[case][2][:42]:42}"
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
    return [t] + [f"{'':20}   {n}" for n in s["notes"]]


def sample_or_scale(case: str, timeout: float) -> dict:
    if CASES[case][0] == SCALE:
        scaling()
        return {"scaled": True}
    return sample(case, timeout)


def line_or_scale(case: str, s: dict) -> list[str]:
    return [] if "scaled" in s else line(case, s)


def main(argv=None):
    cli(argv, CASES, [NUM, COST, SYM, HW, ERR, SCALE], 300.0, sample_or_scale, line_or_scale, widths=(20, 42))


if __name__ == "__main__":
    main()
