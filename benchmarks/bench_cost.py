"""Cost functor and optimal tile sizes: time for attention and for growing unfused chains.

Run: OPENBLAS_NUM_THREADS=1 python benchmarks/bench_cost.py
Reports medians of several runs; the per-box time should stay flat (near-linear cost functor).
"""
import statistics
import time

import napkin_cat as nc


def median_time(fn, runs=5):
    ts = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts)


def chain(n):
    """An unfused chain of n elementwise kernels on q×d (n boxes, n kernels)."""
    boxes = [nc.elementwise("exp" if k % 2 else "relu", "q d") for k in range(n)]
    return nc.unfused(nc.Diagram.id(boxes[0].dom).then(*boxes))


def main():
    flash = nc.group(nc.stream(nc.library.attention(), "x", "s_x"), "q", "g_q")
    mm = nc.group(nc.group(nc.stream(nc.library.matmul(), "b", "s_b"), "a", "g_a"), "c", "g_c")
    rows = [
        ("cost(flash attention)", median_time(lambda: nc.cost(flash))),
        ("optimal(flash attention), symbolic", median_time(lambda: nc.optimal(nc.cost(flash)), 3)),
        ("optimal(tiled matmul), symbolic", median_time(lambda: nc.optimal(nc.cost(mm)), 3)),
        ("optimal(tiled matmul), integer 1024^3, M=16384",
         median_time(lambda: nc.optimal(nc.cost(mm), memory=16384, sizes={"a": 1024, "b": 1024, "c": 1024}), 3)),
    ]
    print(f"{'what':55s} {'median s':>10s}")
    for name, t in rows:
        print(f"{name:55s} {t:10.4f}")
    print()
    print(f"{'unfused chain boxes':>20s} {'cost median s':>14s} {'ms per box':>12s}")
    for n in (125, 250, 500, 1000):
        d = chain(n)
        t = median_time(lambda: nc.cost(d), 3)
        print(f"{n:20d} {t:14.4f} {1000 * t / n:12.3f}")


if __name__ == "__main__":
    main()
