"""A symbolic ``nc.derive`` holds the algorithms that win only between its grid memories (symbwd-35).

The envelope's candidates were the reference search's winners at the memories ``2^k``; an algorithm that wins only
between two of them was never costed.  The 2-layer MLP's backward at ``n, i, f, o = 40, 24, 72, 24`` (found by
``benchmarks/bench_outside_35e.py``, "sym mlp-grad"): the numeric derive streams ``f`` in two kernels with ``i``
whole from ``M = 2984`` (19,272 transfers) and streams ``n`` with ``o`` and ``f`` whole from ``M = 3104`` (16,584),
where the envelope stated 23,304 up to ``3128``.  Now the envelope is probed (:mod:`napkin_cat.search.probes`).

The second route is the numeric derive (``sizes=``: integer tiles, every column of the memory model): at every
memory of a grid the symbolic ``H`` at the reference sizes is at most the numeric one, within
:data:`~napkin_cat.search.envelope.PROBE_GAIN` (a probe's algorithm joins only where it gains more than that).
"""
from __future__ import annotations

import math

import sympy

import napkin_cat as nc
from napkin_cat.search.envelope import PROBE_GAIN

L = nc.library
M = nc.symbol("M")


def chain(k):
    """``X₀ · W₁ · … · W_k``: ``k`` matrix products in a row over the axes ``a0 … ak``."""
    b = nc.Builder(nc.types(", ".join(f"a{i} a{i + 1}" for i in range(k + 1))))
    x = b.inputs[0]
    for i in range(1, k + 1):
        x = b(nc.einsum(f"a0 a{i}, a{i} a{i + 1} -> a0 a{i + 1}"), x, b.inputs[i])
    return b.build(x)


def rms_chain(k):
    """X: n×d0 → (RMSNorm over d_i, then · W_i: d_i × d_{i+1}) k times (``bench_outside_35e.py``'s)."""
    norms = [nc.rename_axis(L.rms_norm(), "d", f"d{i}") for i in range(k)]
    ins = [*norms[0].dom.inside]
    for i in range(k):
        if i:
            ins.append(norms[i].dom.inside[1])
        ins.extend(nc.types(f"d{i} d{i + 1}").inside)
    b = nc.Builder(nc.Ty(*ins))
    x, rest = b.inputs[0], list(b.inputs[1:])
    for i in range(k):
        x = b(norms[i], x, rest[2 * i])
        x = b(nc.einsum(f"n d{i}, d{i} d{i + 1} -> n d{i + 1}"), x, rest[2 * i + 1])
    return b.build(x)


def symbolic_against_numeric(f, sizes, memories=None, points=40, more=()):
    """``[(m, symbolic H, numeric H)]`` at ``memories`` (default: ``points`` memories spaced evenly in log from the
    envelope's first memory to twice its last piece's lower end, every piece's first memory, and ``more``)."""
    r = nc.derive(f, memory="M", reference=sizes)
    env = {nc.symbol(k): v for k, v in sizes.items()}
    H = sympy.sympify(r.H).subs(env)
    if memories is None:
        los = [float(sympy.sympify(g.lower).subs(env)) for g in r.regimes]
        lo, hi = max(1.0, los[0]), max(2 * los[-1], 4 * los[0])
        memories = sorted({round(lo * (hi / lo) ** (k / (points - 1))) for k in range(points)}
                          | {math.ceil(x) for x in los} | set(more))
    num = {g.memory: g.H for g in nc.derive(f, memory=list(memories), sizes=sizes).regimes}
    return [(m, float(H.subs(M, m)), num[m]) for m in memories if num.get(m) is not None]


def above(rows) -> list:
    """The rows where the symbolic H is above the numeric one by more than PROBE_GAIN: an algorithm it missed."""
    return [(m, s, n) for m, s, n in rows if s > n * (1 + PROBE_GAIN)]


def test_the_mlp_backward_holds_what_wins_between_2_11_and_2_12():
    f = nc.grad(L.mlp(), wrt=[0, 1, 3])
    rows = symbolic_against_numeric(f, {"n": 40, "i": 24, "f": 72, "o": 24}, [2984, 3000, 3103, 3104, 3127])
    # the numeric derive's answers (before: the symbolic H was 23,304 at each)
    assert [n for *_, n in rows] == [19272, 19272, 19272, 16584, 16584]
    # constant pieces whose algorithms fit there: the same counts, exactly
    assert [s for _, s, _ in rows] == [19272, 19272, 19272, 16584, 16584]


def test_the_chain_of_two_products_over_a_grid_of_memories():
    """Before: the envelope stated 20,570 at M = 9553 where the search moves 19,584 (1.05×: the fused kernel streamed
    along ``a2`` rather than ``a1``, every other tile whole: it wins at no memory 2^k, so it was no candidate)."""
    rows = symbolic_against_numeric(chain(2), {"a0": 64, "a1": 68, "a2": 72, "a3": 76}, more=(9553,))
    assert len(rows) >= 30
    assert above(rows) == []


def test_an_algorithm_that_starts_just_below_another_is_probed():
    """RMSNorm→matmul ×3: the search at the last memory of the piece [1600, 3649) (20,024) finds an algorithm that
    starts at 3648 and wins only there; just below it another wins (17,520), found by probing below where the first
    starts.  Before: 20,024 at M = 3049 against 17,520 (1.14×)."""
    sizes = {"n": 40, "d0": 56, "d1": 24, "d2": 88, "d3": 40}
    rows = symbolic_against_numeric(rms_chain(3), sizes, [3049, 3501, 3647])
    assert [n for *_, n in rows] == [17520] * 3
    assert above(rows) == []
