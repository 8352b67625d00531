"""Shared axis names across blocks do not restrict the search (issue joins-35): a stack whose blocks name their
hidden axes alike derives what the same stack with its own names per block derives (the axes renamed apart,
:mod:`napkin_cat.rewriting.apart`, by the rule book's ``apart`` rule: one more form the search compares).

Second routes: the own-names stack's derive (the answer the shared one must reach); the plan's runner counting the
transfers and the cost functor at the answer's tiles; ``nc.equivalent`` and the trace's replay.  The book without its
``apart`` role is the mutant: there the shared stack's H is worse than the own-names one's (the bug, measured).
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

import napkin_cat as nc
from napkin_cat.rewriting.registry import rulebook
from napkin_cat.search.context import KernelCache

L = nc.library


def _block(kind: str, name: str):
    if kind == "swiglu":
        m = nc.rename_axis(L.swiglu_mlp(), "o", "e")
    else:
        m = nc.rename_axis(nc.rename_axis(L.mlp(activation=kind), "i", "e"), "o", "e")
    return m if name == "f" else nc.rename_axis(m, "f", name)


def stack(kinds, *, own: bool):
    """Residual blocks in a row on ``n e`` (an MLP of the activation ``kind``, or a SwiGLU MLP), hidden axis ``f``
    in each (``own``: ``f0``, ``f1``, …, the same sizes)."""
    return L.in_a_row([_block(k, f"f{i}" if own else "f") for i, k in enumerate(kinds)], residual=True)


def own_stack(k: int):
    """k transformer blocks, block i with its own d{i} and f{i}."""
    return L.in_a_row(nc.rename_axis(nc.rename_axis(L.transformer_block(), "d", f"d{i}"), "f", f"f{i}")
                      for i in range(k))


CASES = {   # name → (the blocks' kinds, memory)
    "gelu x3": (("gelu",) * 3, 256),        # the issue's case: H 1,224 shared against 1,096 own before the fix
    "gelu x2": (("gelu",) * 2, 256),
    "relu x4": (("relu",) * 4, 512),
    "swiglu x2": (("swiglu",) * 2, 256),
    "gelu, swiglu, relu": (("gelu", "swiglu", "relu"), 256),
    "gelu x8": (("gelu",) * 8, 512),        # cut into segments (two blocks each): renamed apart within each
    "swiglu x6": (("swiglu",) * 6, 384),
}
NE = {"n": 8, "e": 8, "f": 16}


def _derive(f, sizes, memory, book=None, cache=None):
    return nc.derive(f, memory=memory, sizes=sizes, cache=KernelCache() if cache is None else cache, book=book)


def _own_sizes(k):
    return {"n": 8, "e": 8, **{f"f{i}": 16 for i in range(k)}}


@pytest.fixture(scope="module")
def derived():
    """``derived(kinds, own=, memory=, apart=)``: the stack's derive (each with a cache of its own, as before), made
    once for the module: the tests below only read the answers, and asked the same derive up to three times (the
    issue's case, the kept-names mutant and the runs read the first test's; 11 of 22 derives were repeats)."""
    made = {}

    def derive(kinds, *, own, memory, apart=True):
        key = (kinds, own, memory, apart)
        if key not in made:
            sizes = _own_sizes(len(kinds)) if own else NE
            made[key] = _derive(stack(kinds, own=own), sizes, memory, book=None if apart else _without_apart())
        return made[key]
    return derive


@pytest.mark.parametrize("case", sorted(CASES))
def test_shared_names_derive_as_own_names(case, derived):
    kinds, memory = CASES[case]
    shared = derived(kinds, own=False, memory=memory)
    own = derived(kinds, own=True, memory=memory)
    assert shared.H == own.H
    ts = shared.optimum.exact_sizes or shared.optimum.sizes
    to = own.optimum.exact_sizes or own.optimum.sizes
    assert sorted(int(v) for k, v in ts.items() if str(k) not in NE) == \
        sorted(int(v) for k, v in to.items() if str(k) not in _own_sizes(len(kinds)))


def _without_apart():
    book = rulebook()
    return replace(book, roles={r: n for r, n in book.roles.items() if r != "apart"})


@pytest.mark.parametrize("case", ["gelu x3", "swiglu x2", "gelu x8"])
def test_names_kept_restrict_the_search(case, derived):
    """The mutant (the book without ``apart``, names kept): the shared stack derives worse than the own-names one,
    so the test above fails without the renaming (and the shared stack's answer is the better one with it)."""
    kinds, memory = CASES[case]
    kept = derived(kinds, own=False, memory=memory, apart=False)
    apart = derived(kinds, own=False, memory=memory)
    own = derived(kinds, own=True, memory=memory, apart=False)
    assert apart.H == own.H < kept.H


def test_the_issue_case_numbers(derived):
    """The 3-block residual MLP (n 8, e 8, f 16, M 256): 1,096 shared and own (1,224 shared with names kept)."""
    assert derived(("gelu",) * 3, own=False, memory=256).H == 1096
    assert derived(("gelu",) * 3, own=False, memory=256, apart=False).H == 1224


@pytest.mark.parametrize("case", ["gelu x3", "gelu, swiglu, relu"])
def test_the_answer_runs_counts_and_replays(case, derived):
    """H = the runner's count = the cost functor at the tiles; the algorithm computes f; its trace (the renaming
    first) replays from f to it."""
    kinds, memory = CASES[case]
    f = stack(kinds, own=False)
    r = derived(kinds, own=False, memory=memory)
    assert r.trace.steps[0].rule == "axes_apart"
    tiles = {str(k): int(v) for k, v in (r.optimum.exact_sizes or r.optimum.sizes).items() if str(k) not in NE}
    at = {**NE, **tiles}
    rng = np.random.default_rng(0)
    xs = [rng.normal(size=tuple(at[a.name] if a.name in at else at[str(a.size)] for a in arr.axes))
          for arr in f.dom.inside]
    out, ran = nc.plan(r.diagram, at).run(*xs)
    assert ran.transfers.get(1, 0) == r.H == nc.cost(r.diagram, sizes=at).H.get(1, 0)
    assert np.allclose(out, nc.evaluate(f, *xs))
    assert nc.equivalent(f, r.diagram, sizes=at)
    assert nc.isomorphic(r.trace.replay(f), r.diagram)


@pytest.fixture(scope="module")
def transformer_kernels():
    """One kernel cache for the five memories' searches: a kernel's costed partitions and curves do not depend on
    the memory (:class:`~napkin_cat.search.context.KernelCache` keys them by form and level alone), so the later
    memories read the earlier ones' kernels instead of costing the same three stacks' kernels again."""
    return KernelCache()


@pytest.mark.parametrize("memory", [256, 384, 512, 1024, 4096])
def test_transformer_stacks_agree(memory, transformer_kernels):
    """Two transformer blocks sharing d, f (and h, m) against two with their own d, f: one H.  The search cuts them
    into segments (norm | attention | MLP) that hold no two classes of one name, so the form renames nothing; where
    seam fusion joins a kernel across the two blocks (at 512 and 1024: block 1 with block 2's attention; at 4096 the
    whole stack, for nothing) that kernel renames its own axes apart (``OpGraph.renamed_apart``, built by
    ``axes_apart`` with ``within=``): names kept, it treats the two blocks' d as one axis (1392 against 1264 at
    1024).  At 512 the names kept cost 1520 against 1392 while seam fusion refused every join whose range of kernels
    read a kernel before it (``growth.ordered`` found no holder for what it read); ordered with the kernels before
    the range computed, the names kept reach 1392 there by other joins, and 256 and 384 move less too (1840, 1392:
    were 2032, 1520).  The answer runs, counts H and replays (one cache for the module: the later searches read the
    earlier ones' kernels)."""
    ts = {"n": 8, "e": 8, "h": 2, "d": 4, "f": 16}
    own = {"n": 8, "e": 8, "h": 2, "d0": 4, "d1": 4, "f0": 16, "f1": 16}
    cache = transformer_kernels
    f = L.transformer_stack(2)
    shared = _derive(f, ts, memory, cache=cache)
    kept = _derive(f, ts, memory, book=_without_apart(), cache=cache)
    assert shared.H == _derive(own_stack(2), own, memory, cache=cache).H <= kept.H
    within = [dict(s.params).get("within") for s in shared.trace if s.rule == "axes_apart"]
    assert (memory == 1024) == (shared.H < kept.H)      # the names kept cost more there (the bug)
    assert within if shared.H < kept.H else True               # ... and a kernel renamed its own axes apart
    at = {**ts, **{str(k): int(v) for k, v in (shared.optimum.exact_sizes or shared.optimum.sizes).items()
                   if str(k) not in ts}}
    rng = np.random.default_rng(1)
    xs = [rng.normal(size=tuple(at[str(a.size)] for a in arr.axes)) * 0.3 for arr in f.dom.inside]
    out, ran = nc.plan(shared.diagram, at).run(*xs)
    assert ran.transfers.get(1, 0) == shared.H == nc.cost(shared.diagram, sizes=at).H.get(1, 0)
    assert np.allclose(out, nc.evaluate(f, *xs))
    assert nc.isomorphic(shared.trace.replay(f), shared.diagram)
