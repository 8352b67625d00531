"""Issue 35's symbolic target checked from outside: ``nc.derive(f, memory="M")`` on programs, shapes and names that
neither the issue nor the earlier outside benches (``bench_outside*.py``) use.

Run with ``OPENBLAS_NUM_THREADS=1 python benchmarks/bench_outside_35s.py`` (``--only NAME …``, ``--list``,
``--timeout S``, ``--baseline PATH [--pairs K]``).  Every row is the first ``nc.derive(f, memory="M",
reference=sizes)`` in a **fresh interpreter** (import and building f not timed): CPU seconds (``time.process_time``),
wall seconds and peak MiB (ru_maxrss), one sample; then its checks (untimed).  Only the public surface is used.

Checks, each of which could fail (flags in capitals):

* the first piece starts at the least memory a numeric derive names (``memory=1`` refused by a MemoryLimitError
  naming it): below it the answer is ``nan``, "nothing fits" (``STARTS ABOVE THE LEAST MEMORY``);
* over **every** piece, H at the piece's start, a point inside and just before its end: finite and real (``NOT
  FINITE``), and never rising as M grows (``RISES WITH M``): more memory never costs transfers;
* at one memory m inside each of up to 4 pieces (all where there are ≤ 4, else the first, the last and two spread
  between): the envelope's H against a numeric ``nc.derive(f, memory=m, sizes=reference)``: the envelope minimises
  over real tiles, so ``sym ≤ num`` (``ABOVE NUMERIC``), and ``sym ≥`` the compulsory transfers, each input and
  output once (``BELOW COMPULSORY``);
* at the same m, the piece's algorithm at its tiles rounded down to legal integers (the largest divisor of the
  tile's axis not above the tile): ``nc.cost`` at those sizes = the piece's symbolic cost record at the same numbers
  (``SYMBOLIC COST ≠ SIZED``) = the plan runner's count on random inputs (``RUNNER ≠ COST``); its memory is within
  2·m (``OVER MEMORY``: envelope.py promises M plus terms of lower degree only; noted where it is over m); it
  computes f (``nc.equivalent``: ``NOT f``); its H ≥ the envelope there (the envelope is the least over real tiles:
  ``ENVELOPE ABOVE ITS OWN ALGORITHM``) and, where it fits m, ≥ the numeric optimum at m (``BEATS NUMERIC``: the
  numeric search missed an algorithm that fits).

A derive that raises is a failed row (``RAISED``, with its untyped/typed class).  ``--baseline PATH`` runs each row's
derive also with another worktree's code (PYTHONPATH=PATH), K pairs in alternating order, and prints the paired
CPU-s ratios (this / baseline: median [min-max]) and whether the two answers' H are the same expression.
"""
from __future__ import annotations

import os
import sys

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402

from bench_outside import CHECK, SETUP  # noqa: E402  (this folder: a script's first path)
from bench_outside_modes import MORE  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PROGRAMS = r'''
NAMES = (("n", "seq"), ("e", "dm"), ("h", "nh"), ("d", "dh"), ("f", "hid"))

def renamed(f, names=NAMES):
    """f with its axes renamed: the library's n e h d f → seq dm nh dh hid."""
    for a, b_ in names:
        f = nc.rename_axis(f, a, b_)
    return f

def rms_swiglu_block():
    """A pre-norm block with RMSNorm and SwiGLU: y = x + MHA(RMS₁(x)) W_o, out = y + SwiGLU(RMS₂(y))."""
    rms = nc.rename_axis(L.rms_norm(), "d", "e")
    mha = nc.rename_axis(nc.rename_axis(L.multi_head_attention(), "q", "n"), "x", "m", nc.symbol("n"))
    mlp = nc.rename_axis(L.swiglu_mlp(), "o", "e")
    b = nc.Builder(nc.types("n e, e, e h d, e h d, e h d, h d e, e, e f, e f, f e"))
    X, g1, Wq, Wk, Wv, Wo, g2, W1, W3, W2 = b.inputs
    x1 = b(rms, X, g1)
    Q = b(nc.einsum("n e, e h d -> h n d"), x1, Wq)
    K = b(nc.renaming("h n d -> h m d"), b(nc.einsum("n e, e h d -> h n d"), x1, Wk))
    V = b(nc.renaming("h n d -> h m d"), b(nc.einsum("n e, e h d -> h n d"), x1, Wv))
    Y = b(nc.elementwise("add", "n e, n e -> n e"), X, b(nc.einsum("h n d, h d e -> n e"), b(mha, Q, K, V), Wo))
    return b.build(b(nc.elementwise("add", "n e, n e -> n e"), Y, b(mlp, b(rms, Y, g2), W1, W3, W2)))

def gqa_proj():
    """Grouped-query attention, then its output projection: out[q e] = Σ_{h g d} GQA(Q, K, V)[h g q d] W_o[h g d e]."""
    att = L.grouped_query_attention()
    b = nc.Builder(nc.Ty(*att.dom.inside, *nc.types("h g d e").inside))
    Q, K, V, Wo = b.inputs
    return b.build(b(nc.einsum("h g q d, h g d e -> q e"), b(att, Q, K, V), Wo))

def cross_attn():
    """Encoder-decoder cross attention with its projections and residual: Y + attn(Y W_q, Z W_k, Z W_v) W_o
    (decoder Y: q c, encoder Z: x c)."""
    b = nc.Builder(nc.types("q c, x c, c d, c d, c d, d c"))
    Y, Z, Wq, Wk, Wv, Wo = b.inputs
    Q = b(nc.einsum("q c, c d -> q d"), Y, Wq)
    K = b(nc.einsum("x c, c d -> x d"), Z, Wk)
    V = b(nc.einsum("x c, c d -> x d"), Z, Wv)
    O = b(L.attention(), Q, K, V)
    return b.build(b(nc.elementwise("add", "q c, q c -> q c"), Y, b(nc.einsum("q d, d c -> q c"), O, Wo)))

def mlp3_res():
    """Three residual bottleneck layers: x ← x + act_i(x U_i) V_i, U_i: e f_i, V_i: f_i e (relu, tanh, gelu)."""
    b = nc.Builder(nc.types("n e, e f1, f1 e, e f2, f2 e, e f3, f3 e"))
    x, ws = b.inputs[0], b.inputs[1:]
    for i, act in enumerate(("relu", "tanh", "gelu")):
        f = f"f{i + 1}"
        h = b(nc.elementwise(act, f"n {f}"), b(nc.einsum(f"n e, e {f} -> n {f}"), x, ws[2 * i]))
        x = b(nc.elementwise("add", "n e, n e -> n e"), x, b(nc.einsum(f"n {f}, {f} e -> n e"), h, ws[2 * i + 1]))
    return b.build(x)

def moe_top1():
    """A top-1 gated mixture of k gelu experts: p = softmax_k(X W_g), gate = p where p = max_k p (else 0),
    y = Σ_k gate[n k] · (gelu(X W1[k]) W2[k])."""
    b = nc.Builder(nc.types("n e, e k, k e f, k f e"))
    X, Wg, W1, W2 = b.inputs
    p = b(nc.softmax("n k", over="k"), b(nc.einsum("n e, e k -> n k"), X, Wg))
    top = b(nc.compare("eq", "n k, n -> n k", dtype=nc.FP32), p, b(nc.reduce("max", "n k -> n"), p))
    gate = b(nc.where("n k, n k -> n k", other=0.0), top, p)
    h = b(nc.elementwise("gelu", "n k f"), b(nc.einsum("n e, k e f -> n k f"), X, W1))
    return b.build(b(nc.einsum("n k e, n k -> n e"), b(nc.einsum("n k f, k f e -> n k e"), h, W2), gate))

def qk_norm_attention():
    """layer_norm → attention: LN over d of the queries and of the keys (each its own γ, β), then attention."""
    lq = nc.rename_axis(L.layer_norm(), "n", "q")
    lk = nc.rename_axis(L.layer_norm(), "n", "x")
    b = nc.Builder(nc.types("q d, d, d, x d, d, d, x d"))
    Q, gq, bq, K, gk, bk, V = b.inputs
    return b.build(b(L.attention(), b(lq, Q, gq, bq), b(lk, K, gk, bk), V))
'''

#: name → (build f and sizes, the derive's CPU-s limit or None: a row over it is reported 'over', not checked)
CASES = {
    "block renamed": ("f = renamed(L.transformer_block()); sizes = {'seq': 12, 'dm': 20, 'nh': 4, 'dh': 5, "
                      "'hid': 44}", None),
    "block renamed wide": ("f = renamed(L.transformer_block()); sizes = {'seq': 20, 'dm': 48, 'nh': 3, 'dh': 16, "
                           "'hid': 96}", None),
    "block renamed issue": ("f = renamed(L.transformer_block()); sizes = {'seq': 64, 'dm': 64, 'nh': 4, 'dh': 16, "
                            "'hid': 128}", None),
    "block rms+swiglu": ("f = rms_swiglu_block(); sizes = {'n': 10, 'e': 24, 'h': 2, 'd': 12, 'f': 36}", None),
    "gqa + W_o": ("f = gqa_proj(); sizes = {'q': 20, 'x': 36, 'd': 6, 'h': 2, 'g': 3, 'e': 16}", None),
    "cross attn proj": ("f = cross_attn(); sizes = {'q': 15, 'x': 40, 'c': 12, 'd': 8}", None),
    "mlp3 residual": ("f = mlp3_res(); sizes = {'n': 18, 'e': 10, 'f1': 24, 'f2': 16, 'f3': 30}", None),
    "moe top-1": ("f = moe_top1(); sizes = {'n': 16, 'e': 12, 'k': 4, 'f': 20}", None),
    "qk-norm attn": ("f = qk_norm_attention(); sizes = {'q': 24, 'x': 30, 'd': 10}", None),
    "alibi grad": ("f = nc.grad(L.alibi_attention(0.25, causal=False), wrt=[0, 1, 2]); "
                   "sizes = {'q': 12, 'x': 20, 'd': 6}", None),
    "2 blocks renamed": ("f = renamed(L.transformer_stack(2)); sizes = {'seq': 8, 'dm': 12, 'nh': 2, 'dh': 6, "
                         "'hid': 24}", 90.0),
}

SYM = r'''
import functools, math, signal

def axis_sizes(f, sizes):
    """Every axis of f's boxes (inner ones too, e.g. the block's key axis m of size n) → its size at ``sizes``."""
    env = {nc.symbol(k): v for k, v in sizes.items()}
    out = dict(sizes)
    for b in f.boxes:
        for arr in (*b.dom.inside, *b.cod.inside):
            for a in arr.axes:
                v = sympy.sympify(a.size).subs(env)
                if v.is_number:
                    out.setdefault(a.name, int(v))
    return out

def legal(tile, value, axes):
    """The largest divisor of the tile's axis (g_x_2 → x) that is not above value (at least 1)."""
    parts = tile.split("_")
    n = axes.get(parts[1]) if len(parts) > 1 else None
    v = max(1, int(math.floor(value + 1e-9)))
    if n is None:
        return v
    v = min(v, n)
    while n % v:
        v -= 1
    return v

def real(x):
    """A float of a sympy number, or None where it is not finite and real."""
    try:
        z = complex(x)
    except (TypeError, ValueError):
        return None
    return z.real if math.isfinite(z.real) and abs(z.imag) <= 1e-9 * max(1.0, abs(z.real)) else None

def spread(n, k=4):
    return list(range(n)) if n <= k else sorted({round(i * (n - 1) / (k - 1)) for i in range(k)})

def sym_checks(f, r, sizes):
    env = {nc.symbol(k): v for k, v in sizes.items()}
    M = nc.symbol("M")
    comp = compulsory(f, env)
    axes = axis_sizes(f, sizes)
    rng = np.random.default_rng(0)
    pieces, flags, notes, curve = [], [], [], []
    for i, reg in enumerate(r.regimes):
        lo, hi = (real(sympy.sympify(b).subs(env)) if b is not None else None for b in (reg.lower, reg.upper))
        lo = lo if lo is not None else 1.0
        if hi is not None and hi <= lo:
            continue
        m = int((lo * hi) ** 0.5) if hi is not None else int(4 * lo + 64)
        m = max(m, int(lo) + 1) if hi is None or int(lo) + 1 < hi else m
        Hx = sympy.sympify(reg.H).subs(env)
        for at in (lo, m) + ((hi * (1 - 1e-6),) if hi is not None else ()):
            h = real(Hx.subs(M, at))
            if h is None:
                flags.append(f"piece {i} [{lo:.0f}, {hi}): H NOT FINITE at M = {at}: {Hx.subs(M, at)}")
            else:
                curve.append((at, h, i))
        pieces.append((i, reg, lo, hi, m, Hx))
    curve.sort()
    try:                        # the numeric least memory: where the symbolic answer's first piece should start
        nc.derive(f, memory=1, sizes=sizes)
        least = 1
    except nc.MemoryLimitError as e:
        least = int(str(e).split("smallest memory that works is ")[1].split()[0]) if "works is " in str(e) else None
    first = pieces[0][2] if pieces else None
    notes.append(f"numeric least memory {least}, first piece starts at {first}")
    if least is not None and first is not None and first > least * (1 + 1e-9):
        hl = nc.derive(f, memory=int(first) - 1, sizes=sizes).H
        flags.append(f"STARTS ABOVE THE LEAST MEMORY: H is nan below M = {first:.0f}, but numeric derives from "
                     f"{least} (H {hl} at {int(first) - 1})")
    for (m0, h0, i0), (m1, h1, i1) in zip(curve, curve[1:]):
        if h1 > h0 * (1 + 1e-9) + 1e-9:
            flags.append(f"RISES WITH M: piece {i0} H {h0:.1f} at M = {m0:.1f}, piece {i1} H {h1:.1f} at {m1:.1f}")
    for k in spread(len(pieces)):
        i, reg, lo, hi, m, Hx = pieces[k]
        hs = real(Hx.subs(M, m))
        if hs is None:
            continue
        row, bad = f"piece {i} [{lo:.0f}, {hi if hi is None else round(hi)}) M = {m}: sym {hs:.0f}", []
        try:
            hn = nc.derive(f, memory=m, sizes=sizes).H
            row += f" num {hn} sym/num {hs / hn:.3f}"
            if hs > hn * (1 + 1e-9):
                bad.append("ABOVE NUMERIC")
        except nc.NapkinError as e:
            hn = None
            row += f" numeric refused {type(e).__name__}: {str(e)[:90]}"
        row += f" comp {comp}"
        if hs < comp * (1 - 1e-9):
            bad.append("BELOW COMPULSORY")
        # the piece's algorithm at its tiles, rounded down to legal integers
        tv = {t: real(sympy.sympify(v).subs(env).subs(M, m)) for t, v in reg.tiles.items() if t not in sizes}
        if any(v is None for v in tv.values()):
            bad.append(f"TILE NOT FINITE {[t for t, v in tv.items() if v is None]}")
        else:
            tiles = {t: legal(t, v, axes) for t, v in tv.items()}
            at = {**sizes, **tiles}
            try:
                sized = nc.cost(reg.diagram, sizes=at)
                c, mem = sized.H.get(1, 0), sized.M.get(1, 0)
                senv = {**env, **{nc.symbol(t): v for t, v in tiles.items()}}
                by_sym = real(sympy.sympify(reg.cost.H.get(1, 0)).subs(senv))
                row += f"; at tiles {tiles}: cost {c} mem {mem}"
                if by_sym is None or abs(by_sym - c) > 1e-6 * max(1, c):
                    bad.append(f"SYMBOLIC COST {by_sym} ≠ SIZED {c}")
                if mem > 2 * m:
                    bad.append(f"OVER MEMORY {mem} > 2·{m}")
                elif mem > m:
                    row += f" (over m by {mem - m}: lower-order terms, as envelope.py allows)"
                if c < hs * (1 - 1e-9):
                    bad.append("ENVELOPE ABOVE ITS OWN ALGORITHM")
                if hn is not None and mem <= m and c < hn:
                    bad.append(f"BEATS NUMERIC {c} < {hn}")
                if c <= 3e6:
                    xs = inputs(f, at, rng)
                    with np.errstate(all="ignore"):
                        _, ran = nc.plan(reg.diagram, at).run(*xs)
                    row += f" runner {ran.transfers.get(1, 0)}"
                    if ran.transfers.get(1, 0) != c:
                        bad.append("RUNNER ≠ COST")
                v = nc.equivalent(f, reg.diagram, sizes=at)
                if not v:
                    bad.append(f"NOT f: {v.message[:120]}")
            except nc.NapkinError as e:
                bad.append(f"ALGORITHM AT TILES RAISED {type(e).__name__}: {str(e)[:160]}")
        notes.append(row + (" " + " ".join(bad) if bad else ""))
        flags += [f"piece {i}: {b}" for b in bad]
    return len(r.regimes), flags, notes

class OverLimit(Exception):
    pass

def _over(*_):
    raise OverLimit()
'''


def child(build: str, limit, check: bool) -> str:
    """The fresh interpreter's program: build f, time its first symbolic derive, then (check) its checks."""
    arm = (f"signal.signal(signal.SIGPROF, _over); signal.setitimer(signal.ITIMER_PROF, {limit})\n" if limit else "")
    return (SETUP + CHECK + MORE + PROGRAMS + SYM + build + "\n" + arm +
            "t0, c0 = time.perf_counter(), time.process_time()\n"
            "try:\n"
            "    r = nc.derive(f, memory='M', reference=sizes)\n"
            "except OverLimit:\n"
            "    print(json.dumps({'over': time.process_time() - c0, 'wall': time.perf_counter() - t0}))\n"
            "    raise SystemExit(0)\n"
            "except Exception as e:\n"
            "    print(json.dumps({'raised': type(e).__name__ + ('' if isinstance(e, nc.NapkinError) else ' (untyped)')"
            " + ': ' + str(e)[:300], 'cpu': time.process_time() - c0, 'wall': time.perf_counter() - t0}))\n"
            "    raise SystemExit(0)\n"
            "t, c = time.perf_counter() - t0, time.process_time() - c0\n"
            "signal.setitimer(signal.ITIMER_PROF, 0)\n"
            "mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024\n"
            "import hashlib\n"
            "print(json.dumps({'wall': t, 'cpu': c, 'mib': mib, 'pieces': len(r.regimes), "
            "'sha': hashlib.sha1(str(r.H).encode()).hexdigest()[:10]}), flush=True)\n"
            + ("n, flags, notes = sym_checks(f, r, sizes)\n"
               "print(json.dumps({'flags': flags, 'notes': notes}))\n" if check else ""))


def run(case: str, timeout: float, path: str = ROOT, check: bool = True) -> dict:
    build, limit = CASES[case]
    env = {**os.environ, "PYTHONPATH": path}
    try:
        done = subprocess.run([sys.executable, "-c", child(build, limit, check)], capture_output=True, text=True,
                              cwd=path, env=env, timeout=timeout)
        out = done.stdout
        why = (done.stderr.strip().splitlines() or ["?"])[-1][:300] if done.returncode else None
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        why = f"over {timeout:.0f} s (wall)"
    row = {k: v for x in out.strip().splitlines() if x.startswith("{") for k, v in json.loads(x).items()}
    if why:
        row["error"] = why
    return row


def line(case: str, s: dict) -> list[str]:
    head = f"{case:20}"
    if "raised" in s:
        return [f"{head} {s['cpu']:6.2f} {s['wall']:7.2f}     -  RAISED {s['raised']}"]
    if "over" in s:
        return [f"{head} >{s['over']:5.1f} {s['wall']:7.2f}     -  derive OVER its {CASES[case][1]:.0f} CPU-s limit "
                "(stopped, not checked)"]
    if "cpu" not in s:
        return [f"{head} ERROR {s.get('error')}"]
    t = f"{head} {s['cpu']:6.2f} {s['wall']:7.2f} {s['mib']:5.0f}  pieces {s['pieces']:2d}  sha {s['sha']}"
    if "flags" not in s:
        return [t + (f"  (derive done; its checks) ERROR {s['error']}" if "error" in s else "  (checks not run)")]
    t += f"  flagged {len(s['flags'])}" + (" ← CHECK FAILED" if s["flags"] else "")
    return [t] + [f"{'':22}{n}" for n in s["notes"]] + [f"{'':22}FLAG {x}" for x in s["flags"]]


def commit_of(path: str) -> str:
    return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                          cwd=path).stdout.strip()


def paired(case: str, baseline: str, pairs: int, timeout: float) -> str:
    """K pairs of timing-only fresh runs, order alternating (this, base), (base, this), …: CPU-s ratio this / base."""
    mine, base, ratios, shas = [], [], [], set()
    for k in range(pairs):
        order = [(ROOT, mine), (baseline, base)][::1 if k % 2 == 0 else -1]
        got = {}
        for path, into in order:
            s = run(case, timeout, path, check=False)
            if "cpu" in s and "over" not in s and "raised" not in s:
                into.append(s["cpu"])
                got[path] = s["cpu"]
                shas.add((path == ROOT, s["sha"]))
            else:
                got[path] = None
                into.append(None)
                shas.add((path == ROOT, s.get("raised", s.get("over", s.get("error")))))
        if got[ROOT] is not None and got[baseline] is not None:
            ratios.append(got[ROOT] / got[baseline])

    def med(xs):
        xs = [x for x in xs if x is not None]
        return f"{statistics.median(xs):.2f} [{min(xs):.2f}-{max(xs):.2f}]" if xs else "-"
    same = len({v for _, v in shas}) == 1
    r = f"{statistics.median(ratios):.2f} [{min(ratios):.2f}-{max(ratios):.2f}]" if ratios else "-"
    return (f"{case:20} this {med(mine)}  base {med(base)}  ratio {r}  "
            f"{'same H' if same else 'H DIFFERS ' + str(sorted(shas, key=str))}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", choices=list(CASES), default=None)
    ap.add_argument("--timeout", type=float, default=900.0, help="wall seconds a row may take (derive and checks)")
    ap.add_argument("--list", action="store_true", help="print the programs and exit")
    ap.add_argument("--baseline", default=None, help="another worktree: time each row's derive there too, paired")
    ap.add_argument("--pairs", type=int, default=3, help="pairs per row with --baseline")
    ap.add_argument("--no-checks", action="store_true", help="only the timed derive (no checks)")
    args = ap.parse_args(argv)
    cases = args.only or list(CASES)
    if args.list:
        for name in cases:
            print(f"{name:20} {CASES[name][0]}" + (f"  (derive limit {CASES[name][1]:.0f} CPU s)"
                                                  if CASES[name][1] else ""))
        return
    print(f"nc.derive(f, memory='M', reference=sizes) at {commit_of(ROOT)}: the first derive in a fresh interpreter, "
          f"one sample per row, OPENBLAS_NUM_THREADS={os.environ['OPENBLAS_NUM_THREADS']}, load "
          f"{os.getloadavg()[0]:.1f}")
    print(f"{'program':20} {'cpu s':>6} {'wall s':>7} {'MiB':>5}  pieces, sha1 of str(H), flags (checks: the module "
          "docstring)")
    for case in cases:
        for x in line(case, run(case, args.timeout, check=not args.no_checks)):
            print(x, flush=True)
    print(f"load at the end {os.getloadavg()[0]:.1f}")
    if args.baseline:
        for path in (ROOT, args.baseline):     # .pyc made before timing: a derive imports modules lazily
            subprocess.run([sys.executable, "-m", "compileall", "-q", os.path.join(path, "napkin_cat")],
                           capture_output=True)
        print(f"\npaired CPU s of the first derive: this {commit_of(ROOT)} against {commit_of(args.baseline)} "
              f"({args.baseline}), {args.pairs} pairs alternating, median [min-max]")
        for case in cases:
            print(paired(case, args.baseline, args.pairs, args.timeout), flush=True)
        print(f"load at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
