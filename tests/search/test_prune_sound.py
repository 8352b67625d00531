"""The search's prune is sound: a block's compulsory transfers are at most what any of its partitions moves, at every
memory, also where a mask read from data runs a fraction ``density`` < 1 of a stream's trips (issue 35).

``shortest_splits`` skips an edge, and ``best_join`` stops costing joins, on ``Choice.compulsory_at``: a lower bound
of every partition of the block.  Dense, that is the block's inputs read once and its outputs written once.  At
``density`` < 1 a stream whose mask reads data runs that fraction of its trips, so it reads that fraction of what it
reads per trip: a fused document attention at q = 4, x = 32, d = 64 and density 1/16 moves 774 values at M = 1,024,
below its inputs' and outputs' 4,644, and the prune kept the unfused split (1,294) that beat 4,644 (the bound now
counts only the outputs there, as for masks from positions).

Checked by two routes that share nothing with the bound: every partition of every block the search may cost,
evaluated at several memories (its H* from the cost functor), is at least the block's bound; and ``nc.derive``
with the prune equals ``nc.derive`` with a bound of 0 (nothing skipped: an exhaustive search of the same space),
by H and by the sha1 of the serialised algorithm, on document attention at three densities and on random
programs with masks from data (:func:`napkin_cat.testing.programs.random_program`, shape ``"data mask"``) and
from positions.
"""
import hashlib
from fractions import Fraction

import pytest

import napkin_cat as nc
from napkin_cat.rewriting.registry import rulebook
from napkin_cat.search.context import KernelCache, search_of
from napkin_cat.search.forms import prepared_forms
from napkin_cat.search.paths import Choice, playable
from napkin_cat.testing.programs import random_program

MEMORIES = [64, 256, 1024, 2 ** 14]
#: random programs (concrete sizes) whose masks read data (shape "data mask")
DATA_MASKED = [1, 10, 13, 97]
#: random programs whose masks are made from positions (causal, a band, a block-causal one)
POSITION_MASKED = [3, 24, 26]


def _document():
    return nc.library.document_attention(), {"q": 4, "x": 32, "d": 64}


def _positional(seed):
    p = random_program(seed, concrete=True)
    assert {"position", "mask"} <= p.shapes, (seed, sorted(p.shapes))
    return p.diagram, {str(k): int(v) for k, v in p.sizes.items()}


def _random(seed):
    p = random_program(seed, concrete=True)
    assert "data mask" in p.shapes, (seed, sorted(p.shapes))     # the generator still draws what this test needs
    return p.diagram, {str(k): int(v) for k, v in p.sizes.items()}


CASES = {"document attention": _document,
         "causal attention": lambda: (nc.library.causal_attention(), {"q": 4, "x": 32, "d": 64}),   # keys 4 … 31 unseen
         **{f"random_program({s})": (lambda s=s: _random(s)) for s in DATA_MASKED}}


def _violations(diagram, sizes, density) -> list:
    """``(block, H, bound, M)`` for each partition of a block the search may cost that moves less than the bound."""
    book, given = rulebook(), nc.Sizes(sizes)
    ok = playable(book.roles)
    search = search_of(1, KernelCache(), density)
    out, seen = [], set()
    for form in prepared_forms(diagram, book, 2, sizes=sizes):
        if form.cut is not None or not len(form.graph):
            continue
        for edges in form.space.into.values():
            for _, block in edges:
                ch = search.choice(form.graph, block)
                if id(ch) in seen:
                    continue
                seen.add(id(ch))
                bound = ch.compulsory_at(given)
                for _, curve in ch.options:
                    if not ok(curve):
                        continue
                    for m, (h, _) in zip(MEMORIES, curve.at_all(sizes, MEMORIES)):
                        if h is not None and h < bound:
                            out.append((form.graph.name(block) if block & (block - 1) == 0 else bin(block), h,
                                        bound, m))
    return out


@pytest.mark.parametrize("density", [Fraction(1, 16), 1])
@pytest.mark.parametrize("name", CASES)
def test_the_bound_is_below_every_partition(name, density):
    diagram, sizes = CASES[name]()
    assert _violations(diagram, sizes, density) == [], (name, density)


def _fingerprint(r):
    return r.H, str(r.variant), hashlib.sha1(nc.dumps(r.diagram).encode()).hexdigest()


def test_derive_pruned_equals_unpruned_on_a_mask_from_data(monkeypatch):
    density = Fraction(1, 16)
    diagram, sizes = _document()
    pruned = nc.derive(diagram, memory=MEMORIES, sizes=sizes, density=density, cache=KernelCache())
    monkeypatch.setattr(Choice, "compulsory_at", lambda self, given: 0)     # nothing skipped: every edge costed
    unpruned = nc.derive(diagram, memory=MEMORIES, sizes=sizes, density=density, cache=KernelCache())
    for m in MEMORIES:
        assert _fingerprint(pruned.at(m)) == _fingerprint(unpruned.at(m)), (density, m)
    # the fused kernel at 1/16 moves less than its inputs and outputs: the case the bound must allow
    inputs_and_outputs = nc.cost(nc.kernel(diagram), sizes=sizes).H[1]     # one kernel, no tiles: each once
    assert pruned.at(2 ** 14).H < inputs_and_outputs


@pytest.mark.parametrize("seed, density", [*((s, Fraction(1, 8)) for s in DATA_MASKED),
                                           *((s, 1) for s in POSITION_MASKED)])
def test_derive_pruned_equals_unpruned_on_random_programs(seed, density, monkeypatch):
    diagram, sizes = _random(seed) if seed in DATA_MASKED else _positional(seed)
    pruned = nc.derive(diagram, memory=MEMORIES, sizes=sizes, density=density, cache=KernelCache())
    monkeypatch.setattr(Choice, "compulsory_at", lambda self, given: 0)
    unpruned = nc.derive(diagram, memory=MEMORIES, sizes=sizes, density=density, cache=KernelCache())
    for m in MEMORIES:
        assert _fingerprint(pruned.at(m)) == _fingerprint(unpruned.at(m)), (seed, m)


@pytest.mark.parametrize("name, diagram, density", [
    ("document", nc.library.document_attention(), Fraction(1, 16)),
    ("causal, fewer queries than keys", nc.library.causal_attention(), 1)])
def test_the_reported_bound_lies_below_the_algorithm(name, diagram, density):
    """``derive``'s bound (``lower_bound``) is no more than what its algorithm moves, counted by the cost functor at
    its tiles: a causal mask with 4 queries and 32 keys never loads keys 4 … 31, and a document mask at density 1/16
    loads 1/16 of the key tiles (the bound was the inputs' and outputs' 4,644 and 4,608 values, above H = 774 and
    1,024)."""
    sizes = {"q": 4, "x": 32, "d": 64}
    r = nc.derive(diagram, memory=MEMORIES, sizes=sizes, density=density, cache=KernelCache())
    for g in r.regimes:
        counted = nc.cost(g.diagram, sizes={**sizes, **{str(k): int(v) for k, v in g.optimum.exact_sizes.items()}},
                          density=None if density == 1 else density).H[1]
        assert counted == g.H, (name, g.memory)
        assert g.H >= r.bound.at({**sizes, "M": g.memory}), (name, g.memory, g.H)
