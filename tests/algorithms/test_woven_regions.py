"""A region woven over a new axis at other positions in its inputs than in its outputs, or over inputs that some of
its outputs do not read (found by the proofs' random variants, issue 31):

* the kernel's Load then moves the axis as well as the level: the plan's run, kernel fusion (which drops the
  Loads between fused kernels) and sibling fusion keep that permutation;
* an output that reads no woven input is copied along the axis after the kernel, which moves what it computes;

each against numpy written from the definition (``exp`` then a row sum per index of the woven axis)."""
from __future__ import annotations

import numpy as np

import napkin_cat as nc
from rewrites import kernel_fusion

SIZES = {"q": 3, "x": 4, "h": 2}


def reference(X):
    """``h×q``: for each index t of the woven (last) axis of X (q×x×h), the row sums of exp(X[:, :, t])."""
    return np.stack([np.exp(X[:, :, t]).sum(axis=1) for t in range(X.shape[2])], axis=0)


def woven_kernel():
    k = nc.kernel(nc.elementwise("exp", "q x") >> nc.reduce("sum", "q x -> q"))
    return nc.weave(k, "h", inputs={0: 2}, position=0)        # h last in the input, first in the output


def test_a_kernel_woven_at_other_positions_runs_as_its_function():
    w = woven_kernel()
    load = w.boxes[0].arg.boxes[0]
    assert [a.names for a in (*load.dom.inside, *load.cod.inside)] == [("q", "x", "h"), ("h", "q", "x")]
    X = np.random.default_rng(0).normal(size=(3, 4, 2))
    want = reference(X)
    assert np.allclose(nc.evaluate(w, X), want)
    for d, sizes in ((w, SIZES), (nc.stream(w, "x", "s_x"), {**SIZES, "s_x": 3})):   # one tile, then ragged ones
        p = nc.plan(d, sizes)
        got, counters = p.run(X)
        assert np.allclose(got, want) and np.allclose(p(X), want)
        # it loads X once and stores the h×q sums once: q·x·h + h·q values
        assert counters.transfers == nc.cost(d, sizes=sizes).H == {1: 3 * 4 * 2 + 2 * 3}


def test_fusing_woven_kernels_keeps_the_permutation_of_their_loads():
    unfused = nc.weave(nc.unfused(nc.elementwise("exp", "q x") >> nc.reduce("sum", "q x -> q")), "h",
                       inputs={0: 2}, position=0)
    fused = kernel_fusion.apply(unfused)
    assert len(fused.boxes) == 1
    X = np.random.default_rng(1).normal(size=(3, 4, 2))
    assert np.allclose(nc.evaluate(unfused, X), reference(X))
    assert np.allclose(nc.evaluate(fused, X), reference(X))
    assert np.allclose(nc.plan(fused, SIZES).run(X)[0], reference(X))


def test_an_output_that_reads_no_woven_input_is_copied_after_the_kernel():
    k = nc.kernel(nc.elementwise("exp", "q") @ nc.elementwise("tanh", "x"))
    w = nc.weave(k, "h", inputs=[0], position=0, h=2)
    kernel, copy = w.boxes
    assert [a.names for a in kernel.cod.inside] == [("h", "q"), ("x",)]      # tanh(x) computed once, saved once
    assert [a.names for a in copy.cod.inside] == [("h", "x")] and copy.data.kind == "id"
    assert nc.cost(w, sizes={"q": 3, "x": 5}).H == {1: 2 * (2 * 3) + 2 * 5}   # not 2·(2·5) for tanh
    Q, X = np.random.default_rng(2).normal(size=(2, 3)), np.random.default_rng(3).normal(size=5)
    got = nc.evaluate(w, Q, X)
    assert np.allclose(got[0], np.exp(Q)) and np.allclose(got[1], np.stack([np.tanh(X)] * 2))
