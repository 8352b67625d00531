"""One check of a derived answer, shared by the search's tests: it runs, counts what it states, computes the function,
and its trace replays (the second routes: the counting runner against the cost functor's ``H``, ``nc.evaluate`` of
the function as written against the algorithm's values, the rules replayed against the diagram made)."""
from __future__ import annotations

import numpy as np

import napkin_cat as nc


def assert_runs_counts_and_replays(f, r, sizes: dict, *, scale: float = 0.3, seed: int = 0):
    """``r`` (``nc.derive(f, …, sizes=sizes)``) at ``sizes`` and its chosen tiles, on random inputs (normal, times
    ``scale``): the runner's transfers at level 1 equal ``r.H``, its output equals ``nc.evaluate(f)``, and
    ``r.trace`` replays from ``f`` to ``r.diagram``.  Returns ``(at, ran)``: the sizes with the tiles, and the run's
    counts, for a caller's further checks."""
    at = {**sizes, **{str(k): int(v) for k, v in (r.optimum.exact_sizes or r.optimum.sizes).items()
                      if str(k) not in sizes}}
    rng = np.random.default_rng(seed)
    xs = [rng.normal(size=tuple(at[str(a.size)] for a in arr.axes)) * scale for arr in f.dom.inside]
    out, ran = nc.plan(r.diagram, at).run(*xs)
    assert ran.transfers.get(1, 0) == r.H
    assert np.allclose(out, nc.evaluate(f, *xs))
    assert nc.isomorphic(r.trace.replay(f), r.diagram)
    return at, ran
