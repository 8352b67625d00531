"""``nc.plan(r)`` of a derivation: its algorithm at its own tiles, counted as derive counted it."""
import numpy as np
import pytest

import napkin_cat as nc

SIZES = {"q": 48, "x": 40, "d": 8}


def inputs(f, sizes):
    rng = np.random.default_rng(1)
    return [rng.normal(size=tuple(sizes[a] for a in arr.names)) for arr in f.dom.inside]


@pytest.fixture(scope="module")
def causal():
    f = nc.library.causal_attention()
    return f, nc.derive(f, memory=[96, 400], sizes=SIZES)


@pytest.mark.parametrize("memory", [96, 400])
def test_a_derivation_plans_at_its_tiles(causal, memory):
    """The second route: the plan spelled out by hand (its diagram at sizes and tiles) moves what derive counted,
    and computes what the written program computes."""
    f, r = causal
    p = nc.plan(r, memory=memory)
    by_hand = nc.plan(r.at(memory).diagram, {**SIZES, **r.at(memory).regimes[0].tiles})
    xs = inputs(f, SIZES)
    out, counted = p.run(*xs)
    assert counted.transfers[1] == r.at(memory).H == by_hand.run(*xs)[1].transfers[1]
    assert p.peak[1] <= memory
    np.testing.assert_allclose(out, nc.evaluate(f, *xs), rtol=1e-9, atol=1e-12)


def test_sizes_may_choose_other_tiles_never_other_axes(causal):
    f, r = causal
    one = r.at(400)
    tile = next(t for t, v in one.regimes[0].tiles.items() if t.startswith("g_") and v > 1)
    p = nc.plan(one, {tile: 1})
    assert {str(k): v for k, v in p.sizes.items()}[tile] == 1 != one.regimes[0].tiles[tile]
    with pytest.raises(nc.NapkinError, match=r"q=24 \(derived at 48\)"):
        nc.plan(one, {"q": 24})


def test_what_a_derivation_cannot_plan_is_named(causal):
    f, r = causal
    with pytest.raises(nc.NapkinError, match=r"holds 2 memories \[96, 400\]"):
        nc.plan(r)
    with pytest.raises(nc.NapkinError, match="no regime for memory 100"):
        nc.plan(r, memory=100)
    with pytest.raises(nc.NapkinError, match="symbolic derivation"):
        nc.plan(nc.derive(nc.library.attention(), memory="M"))
    with pytest.raises(nc.PlanError, match="needs the sizes"):
        nc.plan(f)
