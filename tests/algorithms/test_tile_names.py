"""A partition's tile is a size of its own: never the name of another axis's size, never changed behind the caller.

Found from outside (issue 31, checked again): ``nc.group(k, "a", "b")`` on a matmul ``a b, b c -> a c`` was
accepted and named the tile of ``a`` by the symbol of axis ``b``'s size, so one symbol meant two sizes: the cost
functor reported ``a·(b² + 2bc)/b`` (its tile ``x0_1[b×b]``), ``nc.equivalent(k, nc.stream(k, "b", "a"),
sizes={"a": 6, ...})`` silently ran at ``a = 4`` (the "tile" brought down to its axis), and a tile the caller fixed
past its axis (``g = 10`` for ``a = 6``) was brought down to 6 without a word.  Now: a typed
:class:`~napkin_cat.errors.AxisError` naming the tile, the axis whose size it repeats, and what is legal.
"""
from __future__ import annotations

import numpy as np
import pytest

import napkin_cat as nc

SIZES = {"a": 6, "b": 4, "c": 3}


def _kernel():
    return nc.kernel(nc.einsum("a b, b c -> a c"))


@pytest.mark.parametrize("make, tile, axis", [
    (lambda k: nc.group(k, "a", "b"), "b", "b"),
    (lambda k: nc.group(k, "c", "a"), "a", "a"),
    (lambda k: nc.stream(k, "b", "a"), "a", "a"),
    (lambda k: nc.stream(k, "b", "s_b", parts="c"), "c", "c"),
])
def test_a_tile_named_as_another_axis_is_refused_naming_both(make, tile, axis):
    with pytest.raises(nc.AxisError, match=rf"named '{tile}', which is the size of the diagram's axis '{axis}'"):
        make(_kernel())


def test_a_fresh_tile_is_costed_as_its_own_size():
    """The legal neighbour of the refusal: the tile ``g`` of ``a`` costs ``ab + (a/g)·bc + ac`` (A read once in
    tiles, B once per group, C written once), from the maths, at a tile that does not divide ``a``."""
    g = nc.group(_kernel(), "a", "g")
    a, b, c, t = SIZES["a"], SIZES["b"], SIZES["c"], 4
    groups = -(-a // t)
    assert nc.cost(g, sizes={**SIZES, "g": t}).H[1] == a * b + groups * b * c + a * c
    # its own axis's full size is a legal tile: one group
    whole = nc.group(_kernel(), "a", "a")
    assert nc.cost(whole, sizes=SIZES).H[1] == a * b + b * c + a * c


def test_equivalent_refuses_a_fixed_tile_past_its_axis_and_keeps_a_legal_one():
    k = _kernel()
    g = nc.group(k, "a", "g")
    with pytest.raises(nc.AxisError, match=r"tile g = 10, past its axis \(a = 6\): legal tiles are 1 … 6"):
        nc.equivalent(k, g, sizes={**SIZES, "g": 10})
    v = nc.equivalent(k, g, sizes={**SIZES, "g": 5})
    assert v and [t["sizes"] for t in v.tried] == [{**SIZES, "g": 5}] * 3, v


def test_the_plan_of_a_fresh_tile_computes_the_product():
    p = nc.plan(nc.group(_kernel(), "a", "g"), {**SIZES, "g": 4})
    rng = np.random.default_rng(0)
    A, B = rng.standard_normal((6, 4)), rng.standard_normal((4, 3))
    out, _ = p.run(A, B)
    np.testing.assert_allclose(out, A @ B, rtol=1e-12)


def test_a_document_whose_partition_tile_names_another_axis_is_refused_by_the_reader():
    text = nc.dumps(nc.group(_kernel(), "a", "g"))
    assert nc.loads(text) == nc.group(_kernel(), "a", "g")
    with pytest.raises(nc.SerialisationError, match=r"the tile of 'a' is named 'c', which is the size of the "
                                                    r"diagram's axis 'c'"):
        nc.loads(text.replace('"g"', '"c"'))


@pytest.mark.parametrize("order", [[1, 0], [0, 0], {"zigzag": 1}])
def test_a_ring_order_that_is_not_a_name_is_refused_listing_the_orders(order):
    """Found with the tile names (issue 31, outside): a list as ``order=`` escaped as ``TypeError: unhashable``."""
    sharded = nc.shard(nc.library.attention(), "q", 2)
    with pytest.raises(nc.ArgumentError, match=r"ordered as one of \['contiguous', 'zigzag'\]"):
        nc.ring(sharded, "x", order=order)
    assert nc.equivalent(nc.library.attention(), nc.ring(sharded, "x", order="zigzag"),
                         sizes={"q": 4, "x": 6, "d": 2})
