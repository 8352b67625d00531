"""grid_scores.exponents: the product ``logs @ ET`` in slices of PRODUCT_ROWS rows (so the BLAS runs each on one
thread) gives the same floats as the product in one call, so the scores, staircases and answers of the integer search
are those of the unsliced product.

Second route: numpy's product in one call (threaded by OpenBLAS where the environment allows).  Mutations caught:
the last row left unwritten (``starts[1:] + [n - 1]``), the ragged scores' trip product dropped
(``+ exponents(logc, trips.T)`` removed).  (Slices of PRODUCT_ROWS with a last slice of one row, this module's first
version, failed test_sliced_product_is_the_product at 4,097 rows of 6 tiles and 2 terms: numpy multiplies one row as
a vector, which rounds otherwise; hence the last slice takes the rest.)
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np

from napkin_cat.cost import grid_scores
from napkin_cat.cost.grid_scores import PRODUCT_ROWS, exponents, posynomial_scores, posynomial_scores_ragged


def _case(rng, n):
    k, t = int(rng.integers(1, 7)), int(rng.integers(1, 9))
    logs = np.log(rng.integers(1, 5000, (n, k)).astype(float))
    ET = rng.integers(-3, 4, (k, t)).astype(float)
    return logs, ET


def test_sliced_product_is_the_product():
    rng = np.random.default_rng(35)
    for n in (1, 7, PRODUCT_ROWS + 1, 2 * PRODUCT_ROWS - 1, 2 * PRODUCT_ROWS, 2 * PRODUCT_ROWS + 1,
              3 * PRODUCT_ROWS + 1,
              3 * PRODUCT_ROWS + 17, 40656):
        for _ in range(4):
            logs, ET = _case(rng, n)
            got = exponents(logs, ET)
            assert got.shape == (n, ET.shape[1])
            assert np.array_equal(got, logs @ ET), (n, ET.shape)
    logs, ET = _case(rng, 4 * PRODUCT_ROWS + 3)           # rows about each slice's ends, as in one product
    got, whole = exponents(logs, ET), logs @ ET
    for r in (0, PRODUCT_ROWS - 1, PRODUCT_ROWS, 3 * PRODUCT_ROWS - 1, 3 * PRODUCT_ROWS, 4 * PRODUCT_ROWS + 2):
        assert np.array_equal(got[r], whole[r])


def test_scores_as_before():
    """posynomial_scores and its ragged form on grids of up to 3 slices: the floats of the unsliced formulas."""
    rng = np.random.default_rng(36)
    for n in (5, 2 * PRODUCT_ROWS + 1, 5 * PRODUCT_ROWS + 100):
        logs, ET = _case(rng, n)
        k, t = ET.shape
        exps = tuple(tuple(int(e) for e in ET[:, j]) for j in range(t))
        coeffs = tuple(Fraction(int(rng.integers(1, 50)), int(rng.integers(1, 9))) for _ in range(t))
        alpha = np.array([float(a) for a in coeffs])
        E = np.array(exps, dtype=float)
        assert np.array_equal(posynomial_scores((coeffs, exps), logs), np.exp(logs @ E.T) @ alpha)
        logc = np.log(rng.random((n, k)) + 0.5)
        trips = (E == -1).astype(float)
        before = np.exp(logs @ (E + trips).T + logc @ trips.T) @ alpha
        assert np.array_equal(posynomial_scores_ragged((coeffs, exps), logs, logc), before)
    assert grid_scores.PRODUCT_ROWS == PRODUCT_ROWS
