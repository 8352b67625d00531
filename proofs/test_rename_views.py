"""The obligation of a rename left in global memory as a view (``napkin_cat.search.blocks.OpGraph``): a partition
along the renamed axis passes it, since the rename is the identity on values (a tile of its input is a tile of its
output) and moves nothing.

Law, for a function ``f`` weaved over ``n`` and any tile ``g``::

    f ; rename_{n→m}  ≡  Grid_n(g)(kernel(f)) ; rename_{n→m}        (values)
    H(Grid_n(g)(kernel(f)) ; rename_{n→m}) = H(Grid_n(g)(kernel(f)))  (the rename moves nothing)

checked on random sizes and tiles (ragged ones too) against numpy from the maths, and the plan's runner counting the
transfers the cost functor states, with the rename in the program.
"""
from __future__ import annotations

import numpy as np
import pytest
import sympy

import napkin_cat as nc
from napkin_cat.library.sizing import Sized, given_sizes
from napkin_cat.syntax.builder import Builder


def _renamed(make, sig_in: str, sig_out: str, types: str):
    """``make(k)`` (a function of ``types``, its output ``sig_in``) followed by the rename ``sig_in → sig_out``, and
    the same function partitioned along ``n`` (tile ``g_n``) before the rename, at level 0."""
    k = Sized(given_sizes(n=None, e=None, d=None, m="n"))
    f = make(k)
    whole = Builder(k.types(types))
    out = whole.build(whole(k.rename(f"{sig_in} -> {sig_out}"), whole(f, *whole.inputs)))
    cut = Builder(k.types(types))
    tiled = nc.group(nc.kernel(f), "n", "g_n")
    return out, cut.build(cut(k.rename(f"{sig_in} -> {sig_out}"), cut(tiled, *cut.inputs))), tiled


def _softmax(x):
    p = np.exp(x - x.max(1, keepdims=True))
    return p / p.sum(1, keepdims=True)


FUNCTIONS = {
    "exp": (lambda k: k.elementwise("exp", "n e"), "n e", "m e", "n e",
            lambda x: np.exp(x)),
    "projection": (lambda k: k.einsum("n e, e d -> n d"), "n d", "m d", "n e, e d",
                   lambda x, w: x @ w),
    "softmax rows": (lambda k: k.softmax("n e", over="e"), "n e", "m e", "n e",
                     _softmax),
}


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_partition_passes_a_rename_in_global_memory(name, seed):
    make, sig_in, sig_out, types, maths = FUNCTIONS[name]
    rng = np.random.default_rng(seed)
    n, e, d = (int(v) for v in rng.integers(2, 12, size=3))
    g = int(rng.integers(1, n + 1))                       # any tile: a ragged last group where g does not divide n
    whole, cut, tiled = _renamed(make, sig_in, sig_out, types)
    shapes = {a: v for a, v in {"n": n, "e": e, "d": d}.items() if a in types}
    args = [rng.standard_normal(tuple(shapes[a.name] for a in arr.axes)) for arr in whole.dom.inside]
    want = maths(*args)
    assert np.allclose(nc.evaluate(whole, *args), want)
    assert np.allclose(nc.evaluate(cut, *args, sizes={"g_n": g}), want)
    sizes = {**shapes, "g_n": g}
    c = nc.cost(cut, sizes=sizes)
    assert c.H == nc.cost(tiled, sizes=sizes).H             # the rename moves nothing
    out, counted = nc.plan(cut, sizes).run(*args)
    assert np.allclose(out, want) and counted.transfers[1] == c.H[1]
    assert sympy.expand(nc.cost(cut).H[1] - nc.cost(tiled).H[1]) == 0
