"""The least memory of a partition, read off its function before it is costed (issue 35: fewer candidates costed).

``least_held(f, P, sizes)`` claims that every tiling of ``kernel(f)`` partitioned along ``P`` needs at least that
many values at the kernel's level.  Checked against the cost functor's columns (the second route): it is at most
the smallest memory the costed candidate needs (every tile and stream 1, :meth:`Curve.smallest`); a candidate it
rules out at a memory has no fitting tiling in the integer search over its costed record; and the search that
skips such candidates uncosted answers what the search costing every candidate answers (H, the algorithm).
"""
import pytest

import napkin_cat as nc
from napkin_cat.cost.sized_optimum import optimum_values
from napkin_cat.search.context import KernelCache
from napkin_cat.search.curves import Curve
from napkin_cat.search.least_memory import least_held
from napkin_cat.search.variants import variants
from napkin_cat.testing.programs import LIBRARY_FUNCTIONS, random_program

ATT = {"q": 64, "x": 48, "d": 16}
CASES = {
    "attention": (lambda: nc.library.attention(), ATT),
    "causal attention": (lambda: nc.library.causal_attention(), ATT),
    "matmul": (lambda: nc.library.matmul(), {"a": 32, "b": 48, "c": 64}),
    "linear cross-entropy": (lambda: nc.library.linear_cross_entropy(), {"n": 64, "e": 32, "v": 128}),
    "swiglu": (lambda: LIBRARY_FUNCTIONS["swiglu"](), None),
    "transformer block": (lambda: nc.library.transformer_block(), {"n": 32, "e": 16, "h": 2, "d": 8, "f": 32}),
}


def axes_of(v) -> tuple:
    return ((v.stream,) if v.stream is not None else ()) + tuple(v.inner) + tuple(v.groups)


def functions():
    for name, (build, sizes) in CASES.items():
        f = build()
        if sizes is None:
            sizes = {a.name: 8 + 4 * k for k, a in enumerate({a.name: a for arr in (*f.dom.inside, *f.cod.inside)
                                                              for a in arr.axes}.values())}
        yield name, f, sizes
    for seed in range(48):
        p = random_program(seed, n_ops=2 + seed % 4, concrete=False)
        yield p.call, p.diagram, {str(k): int(v) for k, v in p.sizes.items()}


def test_least_is_at_most_the_costed_smallest_memory():
    """The bound never passes the memory the cost functor's columns need at the smallest tiles (every tile 1)."""
    tight = checked = 0
    for what, f, sizes in functions():
        for v in variants(f):
            least = least_held(f, axes_of(v), sizes)
            smallest = int(Curve(v).smallest(sizes))
            assert 0 <= least <= smallest, (what, v.describe(), least, smallest)
            checked += 1
            tight += least == smallest
    assert checked > 80 and tight > 15, (checked, tight)    # (a bound that claims something, often all of it)


def test_a_candidate_ruled_out_fits_no_tiling():
    """Where the bound passes the memory, the curve answers "no fit" without costing the candidate, and the integer
    search over the costed record finds no tiling that fits either (the route the search took before)."""
    ruled = 0
    for what, f, sizes in functions():
        found = [(v, least_held(f, axes_of(v), sizes)) for v in variants(f)]
        memories = sorted({least for _, least in found if least > 1})
        for memory in memories[len(memories) // 2:][:2]:
            memory -= 1     # just below a candidate's bound
            for v, least in found:
                if least <= memory:
                    continue
                curve = Curve(v)
                assert curve.at_all(sizes, [memory]) == [(None, {})], (what, v.describe(), memory)
                assert curve.at(sizes, memory) == (None, {})
                assert not curve.costed, (what, "costed although ruled out")
                costed = Curve(v)
                if costed.grouped:     # the integer search over the tiles of the costed record
                    assert optimum_values(costed.search_cost, [memory], 1, sizes=sizes) == [None], \
                        (what, v.describe(), memory, least)
                else:                  # no tiles: its one column set
                    assert costed.smallest(sizes) > memory, (what, v.describe(), memory, least)
                ruled += 1
    assert ruled > 40, ruled


@pytest.mark.parametrize("name, memory", [("attention", 2 ** 9), ("linear cross-entropy", 2 ** 10),
                                          ("matmul", 2 ** 6)])
def test_the_search_answers_as_if_every_candidate_were_costed(name, memory, monkeypatch):
    """A derive with the bound and one without it (every candidate costed) choose the same algorithm."""
    build, sizes = CASES[name]
    skipped = []
    least = Curve.least

    def counted(self, sizes):
        out = least(self, sizes)
        skipped.append(out > memory)
        return out
    monkeypatch.setattr(Curve, "least", counted)
    fast = nc.derive(build(), memory=memory, sizes=sizes, cache=KernelCache())
    assert any(skipped), name        # the bound rules something out here
    monkeypatch.setattr(Curve, "least", lambda self, sizes: 0)
    slow = nc.derive(build(), memory=memory, sizes=sizes, cache=KernelCache())
    assert (fast.H, nc.dumps(fast.diagram), dict(fast.optimum.sizes)) == \
        (slow.H, nc.dumps(slow.diagram), dict(slow.optimum.sizes)), name
