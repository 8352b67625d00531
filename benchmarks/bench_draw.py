"""Drawing speed: layout, PNG, SVG and TikZ of chained transformer blocks (about 100 and 300 boxes).

Run with ``OPENBLAS_NUM_THREADS=1 python benchmarks/bench_draw.py``; prints medians of several runs.
"""
from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import napkin_cat as nc  # noqa: E402
from napkin_cat.syntax.adapter import Diagram, Ty  # noqa: E402
from napkin_cat.syntax.flat import compose_all, layers  # noqa: E402
from napkin_cat.algorithms.partitions import unfused  # noqa: E402
from napkin_cat.render.draw import draw  # noqa: E402
from napkin_cat.render.layout import layout  # noqa: E402
from napkin_cat.render.tikz import to_tikz  # noqa: E402


def chained_blocks(n_blocks: int) -> Diagram:
    """``n_blocks`` transformer blocks in sequence, each with its own 12 weight inputs."""
    block = nc.library.transformer_block()
    x, weights = block.dom.inside[0], block.dom.inside[1:]
    dom = Ty(x, *(weights * n_blocks))
    steps = []
    for k in range(n_blocks):
        rest = Ty(*(weights * (n_blocks - k - 1)))
        steps.append(block @ Diagram.id(rest))
    return compose_all(dom, *steps)


def count_boxes(diagram) -> int:
    total = 0
    for _, box in layers(diagram):
        total += 1 + (count_boxes(box.arg) if hasattr(box, "arg") and isinstance(box.arg, Diagram) else 0)
    return total


def median_seconds(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main(repeats: int = 5) -> None:
    cases = {"2 transformer blocks": chained_blocks(2), "6 transformer blocks": chained_blocks(6),
             "unfused, 2 blocks (regions)": unfused(chained_blocks(2))}
    print(f"{'diagram':<30} {'boxes':>6} {'layout':>9} {'png':>9} {'svg':>9} {'tikz':>9}")
    with tempfile.TemporaryDirectory() as tmp:
        for name, d in cases.items():
            png, svg = os.path.join(tmp, "d.png"), os.path.join(tmp, "d.svg")
            row = [median_seconds(lambda: layout(d), repeats),
                   median_seconds(lambda: draw(d, png, dpi=100), repeats),
                   median_seconds(lambda: draw(d, svg), repeats),
                   median_seconds(lambda: to_tikz(d), repeats)]
            print(f"{name:<30} {count_boxes(d):>6} " + " ".join(f"{t * 1000:>7.0f}ms" for t in row))


if __name__ == "__main__":
    main()
