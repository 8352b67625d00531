"""The least memory of a partition counts every value a box reads and each output, not its inputs alone (select-35b).

:func:`~napkin_cat.search.least_memory.least_held` bounds the memory of every tiling of a partition from below: per
box, the values it reads held at once (inputs of the function and values other boxes made), and each output once
made, every partitioned axis at 1.  Checked against the cost functor's columns (the second route:
:meth:`~napkin_cat.search.curves.Curve.smallest`, every tile 1) on every partition of every block the search's spaces
offer, and against the bound read off the inputs alone (the one before, written again here): never below it, above
it where a block makes a large value (the scores of attention), and the search costs fewer partitions with the same
answers (the exact route, every least read as 0, is ``tests/search/test_grid_shortcuts.py``'s).
"""
from __future__ import annotations

import math

import numpy as np
import pytest
import sympy

import napkin_cat as nc
from napkin_cat.cost.exact_arithmetic import value
from napkin_cat.engine import to_netlist
from napkin_cat.search import curves
from napkin_cat.search.blocks import OpGraph
from napkin_cat.search.context import KernelCache
from napkin_cat.search.curves import Curve
from napkin_cat.search.least_memory import least_held
from napkin_cat.search.paths import Space
from napkin_cat.search.segments import cut
from napkin_cat.search.variants import variants
from napkin_cat.syntax.sizes import Sizes
from napkin_cat.syntax.wiring import trace_values
from napkin_cat.testing.programs import random_program

from fuzzing import random_function
from shared import counted_costings, ln_matmul

L = nc.library


PROGRAMS = {
    "attention": (L.attention, {"q": 64, "x": 48, "d": 16}),
    "causal": (L.causal_attention, {"q": 40, "x": 40, "d": 8}),
    "ln_matmul": (ln_matmul, {"n": 24, "d": 16, "e": 20}),
    "linear cross-entropy": (L.linear_cross_entropy, {"n": 64, "e": 32, "v": 128}),
    "block": (L.transformer_block, {"n": 32, "e": 16, "h": 2, "d": 8, "f": 32}),
}


def _axes(v) -> tuple:
    return ((v.stream,) if v.stream is not None else ()) + tuple(v.inner) + tuple(v.groups)


def _blocks(f):
    """Every block the search's spaces offer (segment by segment where the form is cut), as its kernel's function."""
    g = OpGraph(to_netlist(f))
    if not g.full:      # (no operation: nothing to split)
        return []
    parts, _ = cut(g)
    seen = {}
    for part in parts if len(parts) > 1 else [None]:
        for edges in Space(g, within=part).into.values():
            for _, block in edges:
                if block not in seen:
                    seen[block] = g.subdiagram(block)
    return list(seen.values())


def _inputs_only(f, axes, sizes, level=1) -> int:
    """The bound read off the function's inputs alone: per box, the inputs of ``f`` it reads (each once)."""
    env = Sizes(sizes).env
    ops, dom, _ = trace_values(f)
    tiles = {v: math.prod(int(value(ax.size, env)) for ax in arr.axes if ax.name not in set(axes))
             if arr.level < level else 0 for v, arr in zip(dom, f.dom.inside)}
    return max((sum(tiles[v] for v in set(ins) & set(dom)) for _, ins, _ in ops), default=0)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_at_most_the_costed_smallest_memory_on_every_block(name):
    """Every partition of every block: inputs-only bound <= least_held <= the columns at every tile 1, and above the
    inputs-only bound on some (a value made inside counts)."""
    build, sizes = PROGRAMS[name]
    checked = above = 0
    for function in _blocks(build()):
        for v in variants(function):
            least = least_held(function, _axes(v), sizes)
            smallest = sympy.sympify(Curve(v).smallest(sizes))
            assert smallest.is_number, (name, v.describe(), smallest)
            assert _inputs_only(function, _axes(v), sizes) <= least <= int(smallest), \
                (name, v.describe(), least, smallest)
            checked += 1
            above += least > _inputs_only(function, _axes(v), sizes)
    assert checked >= 6 and above >= 1, (name, checked, above)


def test_at_most_the_costed_smallest_memory_on_random_functions():
    """Random functions (both routes on each of their partitions), and some with an output made before a stream's
    trips run (the outputs are not all held at once: each counts alone)."""
    rng = np.random.default_rng(35)
    checked = 0
    programs = [(p.diagram, {str(k): int(v) for k, v in p.sizes.items()})
                for p in (random_program(seed, n_ops=2 + seed % 4, concrete=False) for seed in range(48))]
    for k in range(40):
        f = random_function(rng, 2 + k % 5, concrete=False)
        if f is not None:
            names = {a.name for arr in (*f.dom.inside, *f.cod.inside) for a in arr.axes}
            programs.append((f, {n: 6 + 5 * j for j, n in enumerate(sorted(names))}))
    for f, sizes in programs:
        for function in _blocks(f):
            for v in variants(function):
                smallest = sympy.sympify(Curve(v).smallest(sizes))
                if not smallest.is_number:
                    continue
                least = least_held(function, _axes(v), sizes)
                assert least <= int(smallest), (v.describe(), least, smallest)
                checked += 1
    assert checked > 300, checked


def test_the_search_costs_fewer_partitions_with_the_same_answers(monkeypatch):
    """The block at its reference sizes, numeric at 7 memories: the inputs-only bound (the one before) and this one
    answer the same H and tiles, and this one costs fewer partitions."""
    from napkin_cat.search.envelope import reference_sizes
    f = L.transformer_block()
    sizes = {str(k): int(v) for k, v in reference_sizes(f).items()}
    memories = [2 ** k for k in range(12, 31, 3)]
    calls = counted_costings(monkeypatch)

    def answers():
        calls[0] = 0
        r = nc.derive(f, memory=memories, sizes=sizes, cache=KernelCache())
        return ([sympy.srepr(sympy.sympify(g.H)) for g in r.regimes],
                [sorted((str(k), str(v)) for k, v in g.optimum.sizes.items()) for g in r.regimes]), calls[0]
    now, fewer = answers()
    monkeypatch.setattr(curves, "least_held", _inputs_only)
    before, more = answers()
    assert now == before
    assert fewer < more, (fewer, more)
