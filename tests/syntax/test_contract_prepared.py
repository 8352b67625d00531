"""The contraction's prepared BLAS call (what the plan runner calls for two operands with no shared batch axis):
equal to numpy's einsum of the same subscripts, for summed axes in any position of either operand, several or
none summed (an outer product), and an output in any order of the kept axes."""
from __future__ import annotations

import numpy as np
import pytest

import napkin_cat as nc
from napkin_cat.syntax.primitive import kind_of

SIZES = {"a": 2, "b": 3, "c": 4, "d": 5}


@pytest.mark.parametrize("spec", ["a b, b c -> a c", "b a, b c -> a c", "a b, c b -> c a", "a b d, d c b -> c a",
                                  "b d a, c d b -> a c", "a, c -> c a", "a b, b -> a", "b, b -> ", "a d, c -> d c a",
                                  "b, c b d -> c d", "a b, d b c -> a c d", "a b, d b c -> d a c"])
def test_the_prepared_contraction_is_einsums(spec):
    box = nc.einsum(spec).boxes[0]
    run = kind_of("contract").prepared(box)
    assert run is not None, spec
    rng = np.random.default_rng(0)
    ins, out = spec.split("->")
    xs = [rng.standard_normal([SIZES[n] for n in arg.split()]) for arg in ins.split(",")]
    subscripts = ",".join("".join(arg.split()) for arg in ins.split(",")) + "->" + "".join(out.split())
    (y,) = run(xs)
    np.testing.assert_allclose(y, np.einsum(subscripts, *xs), rtol=1e-12, atol=1e-12)
