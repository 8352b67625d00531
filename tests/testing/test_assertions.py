"""``assert_equivalent``: a pytest assertion whose failure names the sizes, the tiles, the seed, the output and
the largest difference."""
from __future__ import annotations

import re

import pytest

import napkin_cat as nc
from napkin_cat.testing import assert_equivalent


def test_equal_diagrams_pass_and_return_the_verdict():
    flash = nc.group(nc.stream(nc.library.attention(), "x", "s_x"), "q", "g_q")
    v = assert_equivalent(nc.library.attention(), flash, seed=3)
    assert v and v.seed == 3 and [t["tiles"] for t in v.tried] == ["ragged", "tiles ≥ 2", "random"]


def test_a_failure_names_sizes_tiles_seed_output_and_difference():
    with pytest.raises(AssertionError) as e:
        assert_equivalent(nc.reduce("sum", "a -> "), nc.reduce("mean", "a -> "), seed=34)
    text = str(e.value)
    assert re.search(r"sizes: \{'a': \d+\}", text) and "tiles: sizes ≥ 2 (trial 0)" in text
    assert "seed: 34" in text and "output: 0" in text and re.search(r"largest difference: \d", text)


def test_a_failure_on_tiles_says_which_kind_of_tiles():
    flash = nc.stream(nc.library.attention(), "x", "s_x")
    broken = flash >> nc.elementwise("scale", "q d", const=1.001)
    with pytest.raises(AssertionError, match=r"sizes: \{.*'s_x': \d+.*\}\n  tiles: ragged \(trial 0\)"):
        assert_equivalent(nc.library.attention(), broken)


def test_types_that_differ_and_non_diagrams():
    with pytest.raises(AssertionError, match="types differ"):
        assert_equivalent(nc.einsum("a b -> b a"), nc.einsum("a b -> a"))
    with pytest.raises(nc.NapkinError, match="the second argument is a str, not a diagram"):
        assert_equivalent(nc.einsum("a b -> b a"), "attention")
