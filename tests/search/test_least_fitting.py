"""The least memory a derive names (:func:`napkin_cat.search.paths.least_fitting_memory`, the bottleneck shortest
path over the down-sets) read with the fewest partitions costed: an edge that cannot improve its target is not
read, and a block's partitions whose uncosted lower bound (``Curve.least ≤ smallest``) reaches the least found are
not costed.  Checked against the exact route (every bound 0: every partition costed) and, as a second route,
against the numeric derive itself: it runs at the memory named and refuses one below."""
import math
import random

import pytest

import napkin_cat as nc
from napkin_cat.errors import MemoryLimitError
from napkin_cat.rewriting.registry import rulebook
from napkin_cat.search import curves
from napkin_cat.search.context import KernelCache, search_of
from napkin_cat.search.envelope import reference_sizes
from napkin_cat.search.forms import Preparation
from napkin_cat.search.paths import least_need
from napkin_cat.search.space import smallest_memory

from shared import ln_matmul

L = nc.library


PROGRAMS = {
    "attention": (L.attention, {"q": 32, "x": 48, "d": 8}),
    "causal": (L.causal_attention, None),
    "mlp": (L.mlp, None),
    "ln matmul": (ln_matmul, {"n": 24, "d": 16, "e": 20}),
    "swiglu": (L.swiglu, None),
    "mha": (L.multi_head_attention, None),
}


def _named(f, sizes, monkeypatch, exact):
    """The least memory :func:`~napkin_cat.search.space.smallest_memory` names in a fresh kernel cache, and how
    many partitions it costed (``curves.cost`` calls) for it; ``exact``: every lower bound 0."""
    calls = [0]
    cost = curves.cost

    def counting(*a, **k):
        calls[0] += 1
        return cost(*a, **k)

    forms = Preparation().forms(f, rulebook(None), 2, sizes)
    search = search_of(1, KernelCache())
    with monkeypatch.context() as m:
        m.setattr(curves, "cost", counting)
        if exact:
            m.setattr(curves.Curve, "least", lambda self, s: 0)
        named = min(smallest_memory(form, search, sizes) for form in forms)
    return named, calls[0]


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_the_least_memory_is_the_exact_routes_and_the_derives(name, monkeypatch):
    make, given = PROGRAMS[name]
    f = make()
    sizes = dict(given or reference_sizes(f))
    fast, fast_calls = _named(f, sizes, monkeypatch, exact=False)
    exact, exact_calls = _named(f, sizes, monkeypatch, exact=True)
    assert fast == exact
    assert fast_calls <= exact_calls
    assert nc.derive(f, memory=int(fast), sizes=sizes).H > 0      # an algorithm fits the memory named ...
    with pytest.raises(MemoryLimitError) as e:                     # ... and none one below, the refusal naming it
        nc.derive(f, memory=int(fast) - 1, sizes=sizes)
    assert e.value.smallest == fast


def test_fewer_partitions_costed_for_the_least_memory(monkeypatch):
    """The work saved, counted: for the transformer block's least memory fewer partitions are costed than by the
    exact route (a fused kernel whose uncosted bound reaches the least found is not costed)."""
    f = L.transformer_block()
    sizes = dict(reference_sizes(f))
    fast, fast_calls = _named(f, sizes, monkeypatch, exact=False)
    exact, exact_calls = _named(f, sizes, monkeypatch, exact=True)
    assert fast == exact
    assert fast_calls < exact_calls


class _Part:
    """A stand-in partition: an uncosted bound ``least`` and its least memory ``smallest`` (counted when read)."""

    def __init__(self, least, smallest):
        self.bound, self.need, self.costed = least, smallest, False

    def least(self, sizes):
        return self.bound

    def smallest(self, sizes):
        self.costed = True
        return self.need


@pytest.mark.parametrize("seed", range(200))
def test_least_need_is_the_minimum_over_every_partition(seed):
    """``least_need`` = ``min(int(smallest))`` over every partition below ``above`` (else ≥ ``above``), on random
    partitions whose bound is at most their need (ties, zero bounds and fractional needs included)."""
    rng = random.Random(seed)
    parts = []
    for _ in range(rng.randint(0, 8)):
        need = rng.choice([rng.randint(1, 40), rng.randint(1, 40) + 0.5])
        parts.append(_Part(rng.choice([0, rng.randint(0, int(need)), int(need)]), need))
    above = rng.choice([math.inf, rng.randint(1, 45)])
    got = least_need([(None, p) for p in parts], {}, above)
    want = min([int(p.need) for p in parts] + [above])
    assert got == want if want < above else got >= above
    for p in parts:     # none costed whose bound reaches the least found among those of smaller bound (or above)
        found = min([int(q.need) for q in parts if q.bound < p.bound] + [above])
        assert not (p.costed and p.bound >= found)
