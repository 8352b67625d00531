"""A rename is a view: the search leaves it in global memory between the kernels that make and read its value, so
each is partitioned along its own name for the axis (issue 37 item 5: the transformer block's K/V rename
``h n d → h m d`` kept a whole column of ``n`` in one kernel, since a partition cannot enter a rename).

The law (a tile of a rename's input is a tile of its output; the rename moves nothing):
``kernel(f ; rename_{n→m}) ≡ Grid_n(kernel(f)) ; rename_{n→m}`` with the rename at level 0.

Second routes: numpy from the maths (``exp``, a matmul, softmax attention written out), the transfers counted by
the plan's runner against the cost functor and against the count from the maths (each operand read once, each
result written once, where the tiles allow), and the smallest memory that works against the tiles' arithmetic.
"""
from __future__ import annotations

import numpy as np
import pytest

import napkin_cat as nc
from napkin_cat.library.sizing import Sized, given_sizes
from napkin_cat.syntax.builder import Builder
from napkin_cat.syntax.primitive import is_view


def exp_renamed():
    """``exp`` of ``h × n``, its row axis renamed ``n → m``."""
    k = Sized(given_sizes(n=None, h=None, m=None))
    b = Builder(k.types("h n"))
    (x,) = b.inputs
    return b.build(b(k.rename("h n -> h m"), b(k.elementwise("exp", "h n"), x)))


def renamed_matmul_chain():
    """An MLP-like chain with a rename before a matmul: ``gelu(rename_{n→m}(X) W₁) W₂`` (``X: n e``)."""
    k = Sized(given_sizes(n=None, e=None, f=None, m="n"))
    b = Builder(k.types("n e, e f, f e"))
    X, W1, W2 = b.inputs
    Xm = b(k.rename("n e -> m e"), X)
    H = b(k.elementwise("gelu", "m f"), b(k.einsum("m e, e f -> m f"), Xm, W1))
    return b.build(b(k.einsum("m f, f e -> m e"), H, W2))


def self_attention():
    """One head of self-attention from its projections: ``Q = X W_q``, ``K, V = rename_{n→m}(X W_k), … (X W_v)``."""
    k = Sized(given_sizes(n=None, e=None, d=None, m="n"))
    b = Builder(k.types("n e, e d, e d, e d"))
    X, Wq, Wk, Wv = b.inputs
    Q, K, V = (b(k.einsum("n e, e d -> n d"), X, W) for W in (Wq, Wk, Wv))
    K, V = (b(k.rename("n d -> m d"), t) for t in (K, V))
    att = nc.rename_axis(nc.rename_axis(nc.library.attention(), "q", "n"), "x", "m", "n")
    return b.build(b(att, Q, K, V))


def gelu(x):
    """GELU, tanh form (the library's ``gelu``)."""
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))


def tiles_of(r) -> dict:
    return {str(k): v for k, v in r.optimum.exact_sizes.items()}


def views_between_kernels(diagram) -> int:
    """The renames of an algorithm that stand at level 0, outside every kernel."""
    return sum(1 for box in diagram.boxes if is_view(box) and box.cod.inside[0].level == 0)


@pytest.mark.parametrize("n,h,memory", [(96, 3, 32), (80, 2, 16)])
def test_a_renamed_row_is_cut_along_its_axis(n, h, memory):
    f = exp_renamed()
    sizes = {"n": n, "h": h}
    r = nc.derive(f, memory=memory, sizes=sizes)      # below one row: the rename kept the whole row in one kernel
    assert views_between_kernels(r.diagram) == 1
    assert r.H == 2 * h * n                           # the maths: each value read once and written once
    x = np.random.default_rng(n).standard_normal((h, n)).astype(np.float32)
    assert np.allclose(nc.evaluate(r.diagram, x, sizes=tiles_of(r)), np.exp(x), rtol=1e-5)
    out, counted = nc.plan(r.diagram, dict(r.optimum.sizes)).run(x)
    assert np.allclose(out, np.exp(x), rtol=1e-5) and counted.transfers[1] == r.H


def test_a_rename_before_a_matmul_leaves_the_matmul_its_tiles():
    f = renamed_matmul_chain()
    sizes = {"n": 48, "e": 16, "f": 32}
    r = nc.derive(f, memory=256, sizes=sizes)
    assert views_between_kernels(r.diagram) == 1
    rng = np.random.default_rng(5)
    X, W1, W2 = (rng.standard_normal(s).astype(np.float32) * 0.3 for s in ((48, 16), (16, 32), (32, 16)))
    want = gelu(X @ W1) @ W2
    assert np.allclose(nc.evaluate(r.diagram, X, W1, W2, sizes=tiles_of(r)), want, atol=1e-4)
    out, counted = nc.plan(r.diagram, dict(r.optimum.sizes)).run(X, W1, W2)
    assert np.allclose(out, want, atol=1e-4)
    assert counted.transfers[1] == int(nc.cost(r.diagram, sizes=r.optimum.sizes).H[1]) == r.H


def test_self_attention_from_its_projections_fits_below_one_column():
    f = self_attention()
    n, e, d = 32, 8, 4
    sizes = {"n": n, "e": e, "d": d}
    # the kernel that renamed K held its whole column and a slice of X's: 2n + 1 values at the least tiles
    r = nc.derive(f, memory=2 * n, sizes=sizes)
    assert views_between_kernels(r.diagram) == 2
    assert nc.cost(r.diagram, sizes=r.optimum.sizes).M[1] <= 2 * n
    rng = np.random.default_rng(7)
    X, Wq, Wk, Wv = (rng.standard_normal(s).astype(np.float32) * 0.3 for s in ((n, e), (e, d), (e, d), (e, d)))
    Q, K, V = X @ Wq, X @ Wk, X @ Wv
    S = Q @ K.T / np.sqrt(d)
    P = np.exp(S - S.max(axis=1, keepdims=True))
    want = (P / P.sum(axis=1, keepdims=True)) @ V
    assert np.allclose(nc.evaluate(r.diagram, X, Wq, Wk, Wv, sizes=tiles_of(r)), want, atol=1e-4)
    out, counted = nc.plan(r.diagram, dict(r.optimum.sizes)).run(X, Wq, Wk, Wv)
    assert np.allclose(out, want, atol=1e-4) and counted.transfers[1] == r.H


def test_the_time_search_times_a_rename_as_nothing():
    """On a GPU model the algorithm's rename is no kernel: the prediction times the kernels alone (one here)."""
    f = exp_renamed()
    r = nc.derive(f, sizes={"n": 1536, "h": 4}, hardware="h100-sxm5")
    assert views_between_kernels(r.diagram) == 1 and len(r.prediction.kernels) == 1
    assert r.prediction.time > 0



def test_cost_guided_fusion_of_a_capped_space_makes_the_kernel_it_chose(monkeypatch):
    """Where every kernel fits, cost-guided fusion past a capped space (:func:`~napkin_cat.search.growth.grow`) makes
    one kernel of everything, both renames held inside (sym-35: it chose one kernel of both ends of a view, which
    the rules could not make then; fuse-35: the rename is folded into the kernel), moving the compulsory traffic."""
    from napkin_cat.search import paths
    monkeypatch.setattr(paths, "BUDGET", 2)
    f = self_attention()
    n, e, d = 16, 8, 4
    r = nc.derive(f, memory=2 ** 20, sizes={"n": n, "e": e, "d": d})
    assert views_between_kernels(r.diagram) == 0 and r.H == n * e + 3 * e * d + n * d
    rng = np.random.default_rng(11)
    X, Wq, Wk, Wv = (rng.standard_normal(s).astype(np.float32) * 0.3 for s in ((n, e), (e, d), (e, d), (e, d)))
    S = (X @ Wq) @ (X @ Wk).T / np.sqrt(d)
    P = np.exp(S - S.max(axis=1, keepdims=True))
    want = (P / P.sum(axis=1, keepdims=True)) @ (X @ Wv)
    out, counted = nc.plan(r.diagram, dict(r.optimum.sizes)).run(X, Wq, Wk, Wv)
    assert np.allclose(out, want, atol=1e-4) and counted.transfers[1] == r.H


def test_seam_fusion_makes_the_kernel_it_chose():
    """The transformer block, searched segment by segment, where every kernel fits: seam fusion joins the kernel
    that makes K (or V) with the one that reads its view only into a kernel the rules make, the rename inside it (the
    block's derive at 2⁴⁰ and its symbolic derive failed there before sym-35, which kept the views between kernels;
    fuse-35 folds them in: one kernel).  Second route: the function itself evaluated, the plan's transfers counted."""
    f = nc.library.transformer_block()
    sizes = {"n": 8, "e": 8, "h": 2, "d": 4, "f": 16}
    r = nc.derive(f, memory=2 ** 30, sizes=sizes)
    assert views_between_kernels(r.diagram) == 0 and r.H == nc.cost(nc.kernel(f), sizes=sizes).H[1]
    rng = np.random.default_rng(13)
    args = [rng.standard_normal(tuple(int(nc.Sizes(sizes).env[a.size]) for a in arr.axes)).astype(np.float32) * 0.3
            for arr in f.dom.inside]
    out, counted = nc.plan(r.diagram, dict(r.optimum.sizes)).run(*args)
    assert np.allclose(out, nc.evaluate(f, *args, sizes=sizes), atol=1e-4) and counted.transfers[1] == r.H
