"""Axes named apart (:mod:`napkin_cat.rewriting.apart`): which classes of one name are renamed, and that renaming
keeps the function, its type and its cost.

Second routes: the classes against a count by hand of the stacks' blocks; the renamed function against the original on
random inputs (numpy) and against the cost functor; random programs (``nc.testing``).
"""
from __future__ import annotations

import pytest
import sympy

import napkin_cat as nc
from napkin_cat.rewriting.apart import apart, apart_names, axis_classes
from napkin_cat.rewriting.netlist import to_netlist
from napkin_cat.testing import random_program

L = nc.library


def residual_stack(k: int, *, residual: bool = True):
    """k residual MLPs on ``n e`` in a row, each naming its hidden axis ``f``."""
    mlp = nc.rename_axis(nc.rename_axis(L.mlp(), "i", "e"), "o", "e")
    b = nc.Builder(nc.Ty(mlp.dom.inside[0], *mlp.dom.inside[1:] * k))
    x, w = b.inputs[0], b.inputs[1:]
    for i in range(k):
        y = b(mlp, x, *w[4 * i:4 * (i + 1)])
        x = b(nc.elementwise("add", "n e, n e -> n e"), x, y) if residual else y
    return b.build(x)


def _names(d) -> set:
    return {a for box in d.boxes for arr in (*box.dom.inside, *box.cod.inside) for a in arr.names}


@pytest.mark.parametrize("k", [2, 3, 4])
def test_each_block_after_the_first_gets_its_own_hidden_axis(k):
    """The k blocks' f are k classes, each wholly after the one before: k − 1 renamed, n and e (one class each, the
    residual's) kept; the inputs and the output keep their names."""
    f = residual_stack(k)
    net = to_netlist(f)
    assert sum(1 for c in axis_classes(net) if next(iter(c))[1] == "f") == k
    got = apart_names(net)
    assert sorted(set(got.values())) == [f"f'{i}" for i in range(2, k + 1)]
    d = apart(f)
    assert d.dom == f.dom and d.cod == f.cod
    assert _names(d) - _names(f) == {f"f'{i}" for i in range(2, k + 1)}
    assert [b.name for b in d.boxes].count("rename") == 3 * (k - 1)        # W₁, b₁, W₂ of each later block
    assert apart(d) is d                                                   # named apart: nothing left to rename


def test_sibling_classes_keep_their_name():
    """Q's, K's and V's projections read one X: V's d is not after Q's (the kernel joining the three may group d
    along all of them), so a transformer block renames nothing; two blocks rename the second's d, f, h, m."""
    assert apart_names(to_netlist(L.transformer_block())) == {}
    two = apart_names(to_netlist(L.transformer_stack(2)))
    assert sorted(set(two.values())) == ["d'2", "f'2", "h'2", "m'2"]


def test_an_output_axis_keeps_its_name():
    """Attention's V-side d comes after the d Q Kᵀ sums, but it is the output's: kept (so is an MLP chain's last e)."""
    att = to_netlist(L.attention())
    assert sum(1 for c in axis_classes(att) if next(iter(c))[1] == "d") == 2
    assert apart_names(att) == {}
    chain = apart_names(to_netlist(residual_stack(2, residual=False)))
    assert sorted(set(chain.values())) == ["e'2", "f'2"]                 # block 1's output e; block 2's is the output's


@pytest.mark.parametrize("make", [lambda: residual_stack(3), lambda: L.transformer_stack(2),
                                  lambda: residual_stack(2, residual=False)], ids=["mlp3", "tstack2", "chain2"])
def test_renaming_keeps_values_and_cost(make):
    """Values on random inputs and sizes (numpy, evaluate), and H, M and FLOPs at every level (the cost functor)."""
    f = make()
    d = apart(f)
    assert d is not f
    assert nc.equivalent(f, d, trials=3)
    one, two = nc.cost(f), nc.cost(d)
    for field in ("H", "M", "flops"):
        a, b = getattr(one, field), getattr(two, field)
        assert set(a) == set(b) and all(sympy.simplify(a[k] - b[k]) == 0 for k in a), field


@pytest.mark.parametrize("seed", range(12))
def test_random_programs(seed):
    """On random programs: the renamed one computes the same and costs the same; applied twice renames nothing."""
    p = random_program(seed)
    d = apart(p.diagram)
    assert apart(d) is d
    assert d.dom == p.diagram.dom and d.cod == p.diagram.cod
    if d is not p.diagram:
        assert nc.equivalent(p.diagram, d, sizes=p.sizes)
        assert nc.cost(d, sizes=p.sizes).H == nc.cost(p.diagram, sizes=p.sizes).H


def test_within_parts_alike_parts_are_named_alike():
    """Cut at the residual adds after blocks 2 and 4 (``seams``): six blocks in three parts of two, each part's second
    block renamed ``f'2`` and its first kept, so the parts read alike; without seams, f'2 … f'6."""
    f = residual_stack(6)
    net = to_netlist(f)
    adds = [nid for nid, n in net.nodes.items() if n.kind == "box" and n.box.name == "add"
            and n.dom[0].names == ("n", "e") and len(n.dom) == 2 and n.dom[1].names == ("n", "e")]
    assert len(adds) == 6
    whole = apart_names(net)
    assert sorted(set(whole.values())) == [f"f'{i}" for i in range(2, 7)]
    parts = apart_names(net, (adds[1], adds[3]))
    assert sorted(set(parts.values())) == ["f'2"]
    assert len({w for w, _ in parts}) == 3 * len({w for w, _ in whole}) // 5     # 3 of the 5 renamed classes
