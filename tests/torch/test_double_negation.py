"""``¬¬m = m`` in translation: ``masked_fill(~m, v)`` (FlexAttention's way to apply a ``mask_mod``) and ``~~m`` carry no
negation box, so a mask of positions stays the comparison the tile skipping reads (issue 33)."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is the `kernels` extra (pip install 'napkin-cat[kernels]')")

import napkin_cat as nc  # noqa: E402
from napkin_cat.syntax.flat import layers  # noqa: E402
from torch import nn  # noqa: E402


class FillOutside(nn.Module):
    """``x`` where ``x > c`` and ``c·0 − 1`` elsewhere: the mask negated once by ``~`` and once by ``masked_fill``."""

    def forward(self, x, y):
        keep = x > y
        return x.masked_fill(~keep, -1.0), torch.where(~~keep, y, x), x.masked_fill(keep, 0.0)


def negations(d) -> int:
    return sum(1 for _, b in layers(d) if b.name == "¬")


def test_no_negation_of_a_negation_survives_and_the_function_is_kept():
    g = torch.Generator().manual_seed(3)
    x, y = (torch.randn(4, 5, generator=g, dtype=torch.float64) for _ in range(2))
    r = nc.from_torch(FillOutside(), x, y)
    # masked_fill(~keep) is where(keep); where(~~keep) is where(keep); masked_fill(keep) negates once
    assert negations(r.diagram) == 1
    x2, y2 = (torch.randn(4, 5, generator=g, dtype=torch.float64) for _ in range(2))
    got = r.evaluate(x=x2, y=y2)
    want = (np.where(x2 > y2, x2, -1.0), np.where(x2 > y2, y2, x2), np.where(x2 > y2, 0.0, x2))
    for a, b in zip(got, want, strict=True):
        np.testing.assert_array_equal(a, b)
