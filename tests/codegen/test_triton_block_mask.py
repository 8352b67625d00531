"""The Triton kernel reads the data's block tables as the C kernel does (the shared printer's trip variants): a none
trip runs nothing, a full one runs without its mask; run under Triton's interpreter against numpy."""
import os
import tempfile

import numpy as np
import pytest

import napkin_cat as nc
from napkin_cat.algorithms.blockmask import FULL, NONE, PARTIAL
from napkin_cat.codegen.triton.kernel import worker

from kernels_common import needs_triton

pytestmark = needs_triton

N, D = 48, 4


def _reference(Q, K, V, allowed):
    S = np.where(allowed, Q.astype(np.float64) @ K.T / np.sqrt(D), -np.inf)
    P = np.exp(S - S.max(1, keepdims=True))
    return (P / P.sum(1, keepdims=True)) @ V


def _raw(k, arrays, tables):
    """``nc_run`` called with ``tables`` as they are (what the kernel does with them, unchecked)."""
    xs = k.check(arrays) + list(tables)
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for j, x in enumerate(xs):
            paths.append(os.path.join(tmp, f"x{j}.npy"))
            np.save(paths[-1], x)
        answer = worker(interpret=True).ask({"op": "run", "source": str(k.path()), "arrays": paths, "out": tmp})
        return np.load(answer["outputs"][0])


def test_the_triton_kernel_reads_the_tables():
    """Document ∧ causal at ragged tiles (13 × 11): the printed kernel takes the table and tests each trip's state;
    with the data's tables it equals numpy; tables that lie (a partial block said full, live ones said none) give
    the attention of the mask they describe; the launcher's default (no tables) runs every trip masked."""
    seg = np.repeat(np.arange(2), [30, 18]).astype(np.int32)
    i, j = np.arange(N)[:, None], np.arange(N)[None, :]
    allowed = (seg[:, None] == seg[None, :]) & (j <= i)
    rng = np.random.default_rng(5)
    Q, K, V = (rng.normal(size=(N, D)).astype(np.float32) for _ in range(3))
    flash = nc.group(nc.stream(nc.kernel(nc.library.document_attention(causal=True)), "x", "s_x"), "q", "g_q")
    k = nc.codegen.triton(nc.plan(flash, {"q": N, "x": N, "d": D, "g_q": 13, "s_x": 11}))
    assert "nc_blocks0" in k.source and "== 2:" in k.source
    xs = (Q, K, V, seg, seg)
    (states,) = k.block_arguments(xs, "data")
    assert {NONE, PARTIAL, FULL} <= set(states.ravel().tolist())
    want = _reference(Q, K, V, allowed)
    np.testing.assert_allclose(k(*xs, block_mask="data"), want, rtol=2e-4, atol=2e-5)
    np.testing.assert_allclose(k(*xs), want, rtol=2e-4, atol=2e-5)
    lied, lie = states.copy(), allowed.copy()
    for a, b in list(zip(*np.nonzero(states == PARTIAL)))[::2]:
        lied[a, b] = FULL
        lie[a * 13:(a + 1) * 13, b * 11:(b + 1) * 11] = True
    for a, b in list(zip(*np.nonzero(states == FULL)))[::2]:
        lied[a, b] = NONE
        lie[a * 13:(a + 1) * 13, b * 11:(b + 1) * 11] = False
    assert (lie != allowed).any() and lie.any(axis=1).all()
    np.testing.assert_allclose(_raw(k, xs, [lied]), _reference(Q, K, V, lie), rtol=2e-4, atol=2e-5)


def test_a_runtime_size_that_indexes_a_table_is_refused():
    flash = nc.group(nc.stream(nc.kernel(nc.library.document_attention()), "x", "s_x"), "q", "g_q")
    p = nc.plan(flash, {"q": N, "x": N, "d": D, "g_q": 16, "s_x": 8})
    with pytest.raises(nc.CodegenError, match=r"runtime sizes \['q'\] index a block table"):
        nc.codegen.triton(p, runtime=["q"])
