"""Sibling fusion in the search: two independent operations that read one value share a kernel, which loads the
value once, where that moves less (the rule playing ``join``, :mod:`rewrites.siblings`).

``x ↦ (x·A, x·B)`` at n = 256, e = f = g = 64: with M = 2^14 both products fit one kernel sweeping the rows, which
reads X, A and B once and writes both results (the compulsory n·e + e·f + e·g + n·f + n·g = 57,344); two kernels
read X twice (73,728).  At M = 2^12 the joined kernel's tiles are smaller than each alone, and the two kernels
win.  Nothing in the search names the function: attention's backward gets dK and dV in one kernel the same way
(tests/search/test_derive_backward.py)."""
from __future__ import annotations

import numpy as np
import pytest

import napkin_cat as nc
from napkin_cat.cost.numeric import at
from napkin_cat.rewriting.registry import Rulebook
from rewrites import RULEBOOK
from rewrites.siblings import two_products

SIZES = {"n": 256, "e": 64, "f": 64, "g": 64}
NO_JOIN = Rulebook("no join", RULEBOOK.rules, dict(RULEBOOK.derivations),
                   roles={k: v for k, v in RULEBOOK.roles.items() if k != "join"})


def kernels(d):
    return [b for b in d.boxes if isinstance(b, nc.Region)]


@pytest.fixture(scope="module")
def derived():
    return {book.name: nc.derive(two_products(), [2 ** 12, 2 ** 14], sizes=SIZES, book=book)
            for book in (RULEBOOK, NO_JOIN)}


def test_the_two_products_share_one_kernel_where_that_moves_less(derived):
    joined, apart = derived[RULEBOOK.name], derived[NO_JOIN.name]
    n, e, f, g = SIZES.values()
    assert joined.H[2 ** 14] == n * e + e * f + e * g + n * f + n * g == 57_344          # X read once
    assert apart.H[2 ** 14] == 2 * n * e + e * f + e * g + n * f + n * g == 73_728       # X read by each kernel
    big = joined.regimes[1]
    assert len(kernels(big.diagram)) == 1 and len(kernels(big.diagram)[0].cod) == 2
    assert [s.rule for s in big.trace if s.rule in ("sibling_fusion", "shared_load")] == ["sibling_fusion",
                                                                                         "shared_load"]
    assert joined.H[2 ** 12] == apart.H[2 ** 12]                  # smaller memory: two kernels, as without the rule
    assert len(kernels(joined.regimes[0].diagram)) == 2


def test_the_joined_plan_runs_at_ragged_sizes(derived):
    """The winner at 2^14, at n = 7, e = 5, f = 3, g = 4: X·A and X·B (numpy), counts equal to the cost."""
    r = derived[RULEBOOK.name].regimes[1]
    sizes = {"n": 7, "e": 5, "f": 3, "g": 4, **{str(k): 2 for k in r.optimum.sizes if str(k) not in SIZES}}
    rng = np.random.default_rng(0)
    X, A, B = rng.normal(size=(7, 5)), rng.normal(size=(5, 3)), rng.normal(size=(5, 4))
    (y, z), counted = nc.plan(r.diagram, sizes).run(X, A, B)
    np.testing.assert_allclose(y, X @ A, rtol=1e-12)
    np.testing.assert_allclose(z, X @ B, rtol=1e-12)
    assert counted.transfers == at(r.diagram, sizes).H
    assert nc.isomorphic(r.trace.replay(two_products()), r.diagram)
