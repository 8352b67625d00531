"""Speed of the syntax: building and evaluating long diagrams.

Run from the repository root, on one BLAS thread::

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_syntax.py            # n = 1000
    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_syntax.py --n 2000 --repeats 7

Each row is the median (and min) of ``--repeats`` runs of ``time.perf_counter``:

* ``then``      compose n boxes once: ``Diagram.id(dom).then(*boxes)``;
* ``builder``   the same chain written as straight-line code with the :class:`Builder`,
                plus every tenth step adding the input back (copies and swaps to insert);
* ``>> loop``   ``d = d >> box`` in a Python loop (napkin_cat's operator: checks the boundary only);
* ``>> loop (discopy)``  the same loop through discopy's stock ``then`` (re-scans every layer), the baseline;
* ``@ loop``     ``d = d @ box`` in a loop for ``--tensor-n`` boxes, and the same through discopy's stock ``tensor``;
* ``evaluate``  the flat interpreter on the n-box chain (arrays of 16×16 float64);
* ``weave``     weaving the n-box chain over a new axis;
* ``==``        structural equality of two equal n-box chains.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402
from discopy import markov, monoidal  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import napkin_cat as nc  # noqa: E402
from napkin_cat.syntax.builder import Builder  # noqa: E402


def chain_boxes(n: int):
    """n single-input boxes on ``n d``: tanh, neg, scale, softmax in turn."""
    kinds = [lambda: nc.elementwise("tanh", "n d"), lambda: nc.elementwise("neg", "n d"),
             lambda: nc.elementwise("scale", "n d", const=0.5), lambda: nc.softmax("n d", over="d")]
    return [kinds[k % len(kinds)]() for k in range(n)]


def build_then(boxes):
    return nc.Diagram.id(boxes[0].dom).then(*boxes)


def build_loop(boxes):
    d = nc.Diagram.id(boxes[0].dom)
    for box in boxes:
        d = d >> box
    return d


def build_loop_stock(boxes):
    """The baseline: discopy's own ``then`` (every call re-validates every layer)."""
    d = nc.Diagram.id(boxes[0].dom)
    for box in boxes:
        d = markov.Diagram.then(d, box)
    return d


def tensor_loop(boxes, *, stock: bool):
    d = boxes[0]
    for box in boxes[1:]:
        d = monoidal.Diagram.tensor(d, box) if stock else d @ box
    return d


def build_builder(boxes):
    add = nc.elementwise("add", "n d")
    b = Builder(boxes[0].dom)
    (x,) = b.inputs
    y = x
    for k, box in enumerate(boxes):
        y = b(box, y)
        if k % 10 == 9:
            y = b(add, y, x)
    return b.build(y)


def timed(fn, repeats):
    times, result = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), min(times), result


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=1000, help="boxes in the long diagrams (default 1000)")
    parser.add_argument("--loop-n", type=int, default=800, help="boxes for the >> loops (default 800)")
    parser.add_argument("--tensor-n", type=int, default=100, help="boxes for the @ loops (default 100)")
    parser.add_argument("--repeats", type=int, default=5, help="runs per row (default 5)")
    args = parser.parse_args(argv)

    boxes = chain_boxes(args.n)
    X = np.random.default_rng(0).normal(size=(16, 16))
    rows = []

    med, low, chain = timed(lambda: build_then(boxes), args.repeats)
    rows.append(("then", args.n, len(chain.boxes), med, low))
    med, low, built = timed(lambda: build_builder(boxes), args.repeats)
    rows.append(("builder", args.n, len(built.boxes), med, low))
    small = boxes[:args.loop_n]
    med, low, looped = timed(lambda: build_loop(small), max(1, min(args.repeats, 3)))
    assert looped == build_then(small)
    rows.append((">> loop", args.loop_n, len(looped.boxes), med, low))
    med, low, stock = timed(lambda: build_loop_stock(small), max(1, min(args.repeats, 3)))
    assert stock == looped
    rows.append((">> loop (discopy)", args.loop_n, len(stock.boxes), med, low))
    parallel = [nc.elementwise("exp", f"a{k}") for k in range(args.tensor_n)]
    med, low, wide = timed(lambda: tensor_loop(parallel, stock=False), max(1, min(args.repeats, 3)))
    rows.append(("@ loop", args.tensor_n, len(wide.boxes), med, low))
    med, low, wide_stock = timed(lambda: tensor_loop(parallel, stock=True), 1)
    assert wide_stock == wide
    rows.append(("@ loop (discopy)", args.tensor_n, len(wide_stock.boxes), med, low))
    med, low, _ = timed(lambda: nc.evaluate(chain, X), args.repeats)
    rows.append(("evaluate", args.n, len(chain.boxes), med, low))
    med, low, _ = timed(lambda: nc.evaluate(built, X), args.repeats)
    rows.append(("evaluate builder", args.n, len(built.boxes), med, low))
    med, low, woven = timed(lambda: nc.weave(chain, "h"), args.repeats)
    rows.append(("weave", args.n, len(woven.boxes), med, low))
    other = build_then(chain_boxes(args.n))
    med, low, same = timed(lambda: chain == other, args.repeats)
    assert same
    rows.append(("==", args.n, len(chain.boxes), med, low))

    print(f"napkin_cat syntax benchmark  (OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS')}, "
          f"repeats={args.repeats}, python {sys.version.split()[0]}, numpy {np.__version__})")
    print(f"{'operation':<20}{'n ops':>7}{'boxes':>7}{'median ms':>12}{'min ms':>10}")
    for name, n, nboxes, med, low in rows:
        print(f"{name:<20}{n:>7}{nboxes:>7}{med * 1e3:>12.2f}{low * 1e3:>10.2f}")


if __name__ == "__main__":
    main()
