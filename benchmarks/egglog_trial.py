"""A measured try of egglog (e-graphs with cost extraction) for the search's kernel-split choice.

An e-graph over the splits of a chain of n operations (fusion ``K(a,b) ; K(b,c) = K(a,c)``, ``;``
associative), each kernel's ``H*(M)`` given as a custom cost (``set_cost``; a random table standing in
for the kernels' integer optima, which egglog cannot compute: they are the same ``nc.optimal`` calls either
way), the cheapest split extracted once per memory (11 memories), against the search's shortest path over
the down-sets on the same table.  egglog is not a dependency: run it in a scratch environment,
``pip install egglog && python benchmarks/egglog_trial.py``.  The optima agree up to egglog's unit cost
of the two integer literals of each kernel node.
"""
import random
import sys
import time

t0 = time.perf_counter()
try:
    from egglog import EGraph, Expr, i64, i64Like, method, rewrite, set_cost, vars_
except ImportError:
    sys.exit("egglog is not installed (pip install egglog in a scratch environment); nothing to measure")
t_import = time.perf_counter() - t0


class K(Expr):
    def __init__(self, lo: i64Like, hi: i64Like) -> None: ...
    @method(cost=0)
    def then(self, other: "K") -> "K": ...


def run(n, table, memories):
    out = []
    for m in memories:
        eg = EGraph()
        start = K(0, 1)
        for i in range(1, n):
            start = start.then(K(i, i + 1))
        root = eg.let("root", start)
        a, b, c = vars_("a b c", i64)
        x, y, z = vars_("x y z", K)
        eg.register(
            rewrite(K(a, b).then(K(b, c))).to(K(a, c)),
            rewrite(x.then(y).then(z)).to(x.then(y.then(z))),
            rewrite(x.then(y.then(z))).to(x.then(y).then(z)),
        )
        eg.run(50)
        for lo in range(n):
            for hi in range(lo + 1, n + 1):
                eg.register(set_cost(K(lo, hi), int(table[(lo, hi)][m])))
        best, cost = eg.extract(root, include_cost=True)
        out.append(cost)
    return out


def dp(n, table, memories):
    out = []
    for m in memories:
        dist = [0] + [float("inf")] * n
        for hi in range(1, n + 1):
            for lo in range(hi):
                dist[hi] = min(dist[hi], dist[lo] + table[(lo, hi)][m])
        out.append(dist[n])
    return out

def main():
    random.seed(0)
    memories = list(range(11))
    for n in (3, 5, 8):
        table = {(lo, hi): [random.randint(1, 10 ** 6) for _ in memories]
                 for lo in range(n) for hi in range(lo + 1, n + 1)}
        t = time.perf_counter()
        e = run(n, table, memories)
        te = time.perf_counter() - t
        t = time.perf_counter()
        d = dp(n, table, memories)
        td = time.perf_counter() - t
        gap = max(a - b for a, b in zip(e, d))
        print(f"n={n}: egglog {te * 1000:.1f} ms, down-set DP {td * 1000:.3f} ms, "
              f"egglog optimum - DP optimum ≤ {gap} (its literals' unit costs)")
    print(f"import egglog: {t_import * 1000:.0f} ms")


if __name__ == "__main__":
    main()
