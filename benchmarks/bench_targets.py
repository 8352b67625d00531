"""Issue 35's five targets, this checkout against a baseline checkout, interleaved in one run.

Run with ``OPENBLAS_NUM_THREADS=1 python benchmarks/bench_targets.py --baseline /path/to/other/checkout``
(options: ``--runs 3``, ``--only block backward gpu-backward attention stack``).

Every sample is the first ``nc.derive`` in a fresh interpreter (import and building the function not timed; each
checkout's compiled modules cached apart, after one untimed sample per case, so no sample compiles a module), the
baseline's and this checkout's samples alternating, so a busy machine slows both alike; each row prints the medians,
the spread (min … max), the ratio baseline / this, the answers (``H``, which must agree) and the peak resident
memory of the process (``ru_maxrss``).  A first line times a fixed Python loop (:data:`MACHINE`): the targets are
absolute seconds, and machines differ:

* **block**: one transformer block (``bench_scale.py --only stack --blocks 1``: n = 512, e = 256, h = 4, d = 64,
  f = 1024, memory 2¹⁶), target ≤ 2 s;
* **backward**: attention's backward from the saved forward (``nc.grad(attention(lse=True), wrt=[0, 1, 2],
  saved=True, aux=1)``), q = x = 4096, d = 128, memory 2¹⁶, target ≤ 1 s;
* **gpu-backward**: the same backward with a GPU model (``hardware="h100-sxm5"``: the structures derived at the
  memories up to its shared memory and above, up to one holding f's inputs and outputs, with and without its SM
  count as a requirement, each timed at its legal tiles),
  target ≤ 10 s;
* **attention**: attention at eleven memories 2¹⁰ … 2²⁰ (``bench_search.py``'s curve), target ≤ 0.3 s;
* **stack**: 32 transformer blocks, as ``block``, target ≤ 10 s; its peak memory is the issue's "memory stated";
* **symbolic**: one transformer block's symbolic derive (``nc.derive(nc.library.transformer_block(), memory="M")``,
  the envelope in ``M`` at the reference sizes), target ≤ 5 s; its ``H`` (a ``Piecewise``) is compared by a sha1 of
  its ``srepr``.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from bench_scale import STACK  # noqa: E402  (this folder: a script's first path)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SETUP = '''
import hashlib, resource, time
import sympy
import napkin_cat as nc
''' + STACK + '''
TB = {"n": 512, "e": 256, "h": 4, "d": 64, "f": 1024}

def answer(H):
    """H as one token: a number, the sum of a sweep's, or a sha1 of a symbolic H's srepr."""
    if isinstance(H, dict):
        return sum(H.values())
    return H if isinstance(H, int) or getattr(H, "is_Integer", False) else \
        hashlib.sha1(sympy.srepr(H).encode()).hexdigest()[:12]
'''

CASES = {
    "block": ("f = stack(1)", "memory=2 ** 16, sizes=TB", 2.0),
    "backward": ("f = nc.grad(nc.library.attention(lse=True), wrt=[0, 1, 2], saved=True, aux=1)",
                 "memory=2 ** 16, sizes={'q': 4096, 'x': 4096, 'd': 128}", 1.0),
    "gpu-backward": ("f = nc.grad(nc.library.attention(lse=True), wrt=[0, 1, 2], saved=True, aux=1)",
                     "hardware='h100-sxm5', sizes={'q': 4096, 'x': 4096, 'd': 128}", 10.0),
    "attention": ("f = nc.library.attention()",
                  "memory=[2 ** k for k in range(10, 21)], sizes={'q': 4096, 'x': 4096, 'd': 128}", 0.3),
    "stack": ("f = stack(32)", "memory=2 ** 16, sizes=TB", 10.0),
    "symbolic": ("f = nc.library.transformer_block()", "memory='M'", 5.0),
}


def sample(root: str, case: str) -> tuple:
    """``(seconds, CPU seconds, H, peak MiB)`` of the case's first derive in a fresh interpreter importing ``root``'s
    package (``H``: an int, or a symbolic H's sha1 as a string)."""
    build, call, _ = CASES[case]
    code = (SETUP + build + "\nt0, c0 = time.perf_counter(), time.process_time()\n" + f"r = nc.derive(f, {call})\n"
            "t, c = time.perf_counter() - t0, time.process_time() - c0\n"
            "print(t, c, answer(r.H),"
            " resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root, env=_env(root))
    if done.returncode:
        raise RuntimeError(f"{case} at {root}: {done.stderr.strip().splitlines()[-1]}")
    t, c, h, mem = done.stdout.split()[-4:]
    return float(t), float(c), int(h) if h.isdigit() else h, float(mem)


def _env(root: str) -> dict:
    """The environment of a sample: ``root`` first on the path, and its compiled modules kept in a cache of its own
    (``PYTHONPYCACHEPREFIX``, written even where the machine sets ``PYTHONDONTWRITEBYTECODE``), so that neither
    checkout compiles a module it imports during the derive it times (the first, untimed sample fills the cache)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = root
    env["PYTHONPYCACHEPREFIX"] = os.path.join(tempfile.gettempdir(), "bench_targets_pycache",
                                              root.strip(os.sep).replace(os.sep, "_"))
    return env


#: a fixed pure-Python workload, timed as the cases are (fresh interpreters): how fast this machine runs Python, so
#: that rows measured on machines of different speeds can be read side by side (the targets are absolute seconds;
#: between two sessions the same commit's symbolic derive measured 5.2 s and 8.3 s: the machines differ)
MACHINE = "import time\nc0 = time.process_time()\ns = 0\nfor i in range(10 ** 7):\n    s += i * i\n" \
          "print(time.process_time() - c0)"


def machine(runs: int) -> list:
    """CPU seconds of :data:`MACHINE`, one fresh interpreter per run."""
    out = []
    for _ in range(runs):
        done = subprocess.run([sys.executable, "-c", MACHINE], capture_output=True, text=True, check=True)
        out.append(float(done.stdout.split()[-1]))
    return out


def commit(root: str) -> str:
    out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=root)
    return out.stdout.strip() or "?"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", required=True, help="a checkout of the commit to compare against")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--only", nargs="*", choices=list(CASES), default=list(CASES))
    args = ap.parse_args(argv)
    base = os.path.abspath(args.baseline)
    print(f"baseline {commit(base)} ({base}) against {commit(ROOT)} ({ROOT}); medians of {args.runs}, fresh "
          f"interpreters, alternating")
    speed = machine(max(3, args.runs))
    print(f"machine: a Python loop of 10^7 multiply-adds takes {statistics.median(speed):.2f} CPU s "
          f"({min(speed):.2f}-{max(speed):.2f}, {len(speed)} fresh interpreters)")
    print(f"{'case':10} {'wall s: baseline (min-max)':>27} {'this (min-max)':>20} {'ratio':>6} "
          f"{'cpu s: baseline (min-max)':>26} {'this (min-max)':>20} {'ratio':>6} {'target':>6} {'H same':>6} "
          f"{'peak MiB':>11}")
    for case in args.only:
        runs = {base: [], ROOT: []}
        for root in (base, ROOT):     # untimed: each checkout's modules compiled into its cache
            sample(root, case)
        for _ in range(args.runs):
            for root in (base, ROOT):
                runs[root].append(sample(root, case))
        cells = []
        for field in (0, 1):
            b, r = ([s[field] for s in runs[x]] for x in (base, ROOT))
            mb, mr = statistics.median(b), statistics.median(r)
            cells.append(f"{mb:8.2f} ({min(b):6.2f}-{max(b):6.2f}) {mr:7.2f} ({min(r):5.2f}-{max(r):5.2f}) "
                         f"{mb / mr:6.2f}")
        same = len({s[2] for x in runs.values() for s in x}) == 1
        mem_b, mem_r = (max(s[3] for s in runs[x]) for x in (base, ROOT))
        print(f"{case:10} {cells[0]} {cells[1]} {CASES[case][2]:6.1f} {str(same):>6} {mem_b:5.0f}/{mem_r:<5.0f}",
              flush=True)


if __name__ == "__main__":
    main()
