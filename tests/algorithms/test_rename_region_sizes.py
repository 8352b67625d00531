"""Renaming an axis renames its size symbol in every region parameter that is a size of it: a Ring's whole size
``full`` and its ``slot`` with the shard ``size`` (they used to keep the old symbol, so the renamed ring could not be
evaluated: "the size of … (x) is not known").  Second route: the renamed algorithm equals the renamed function
(numpy), and no parameter of any region still names the old symbol."""
import pytest
import sympy

import napkin_cat as nc
from napkin_cat.algorithms.bubbles import Region
from napkin_cat.syntax.relabel import rename_axis

SIZES = {"q": 5, "x": 7, "d": 3}


def params_of(d) -> list:
    out = []
    for b in d.boxes:
        if isinstance(b, Region):
            out.extend(b.params.values())
            out.extend(params_of(b.arg))
    return out


def symbols_in(values) -> set:
    return {s.name for v in values if isinstance(v, sympy.Basic) for s in v.free_symbols}


def algorithms():
    att, causal = nc.library.attention(), nc.library.causal_attention()
    yield "ring", att, nc.ring(nc.shard(att, "q", devices=2), "x")
    yield "ring of 3", att, nc.ring(nc.shard(att, "q", devices=3), "x")
    yield "zigzag ring", causal, nc.ring(nc.shard(causal, "q", devices=2, order="zigzag"), "x")
    yield "flash attention", att, nc.derive(att, memory=64, sizes=SIZES).diagram


@pytest.mark.parametrize("name, f, alg", list(algorithms()), ids=lambda v: v if isinstance(v, str) else "")
@pytest.mark.parametrize("old, new", [("x", "y"), ("q", "p"), ("d", "c")])
def test_a_renamed_algorithm_is_the_renamed_function(name, f, alg, old, new):
    renamed = rename_axis(alg, old, new)
    assert old not in symbols_in(params_of(renamed)), [p for p in params_of(renamed)]
    sizes = {(new if k == old else k): v for k, v in SIZES.items()}
    eq = nc.equivalent(rename_axis(f, old, new), renamed, sizes=sizes)
    assert eq, eq
