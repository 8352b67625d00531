"""``nc.torch.flex_attention`` against ``torch.nn.attention.flex_attention`` (eager) on a zoo of mods: outputs,
log-sum-exp and gradients; an unsupported op in a mod is a typed error naming it."""
from __future__ import annotations

import math
import os

import pytest

torch = pytest.importorskip("torch")
flex = pytest.importorskip("torch.nn.attention.flex_attention")

import napkin_cat as nc  # noqa: E402

B, H, N, D = 1, 2, 16, 4
G = torch.Generator().manual_seed(0)
DOC = torch.tensor([0] * 5 + [1] * 7 + [2] * 4)          # document ids, captured
SLOPE = torch.tensor([0.5, 0.25], dtype=torch.float64)    # ALiBi's per-head slope, captured
TABLE = torch.randn(2 * N - 1, dtype=torch.float64, generator=G)   # a relative bias table, captured

MASKS = {
    "causal": lambda b, h, q, x: x <= q,
    "sliding": lambda b, h, q, x: (x <= q) & (q - x < 4),
    "prefix": lambda b, h, q, x: (x <= q) | (x < 5),
    "document": lambda b, h, q, x: DOC[q] == DOC[x],
    "dilated": lambda b, h, q, x: ((q - x) % 2 == 0) & (x // 4 <= q // 4),
    "window": lambda b, h, q, x: (x < q) & (q - x <= 4),      # query 0 has no key: O = 0, L = −∞
}
SCORES = {
    "alibi": lambda s, b, h, q, x: s + SLOPE[h] * (x - q),
    "softcap": lambda s, b, h, q, x: 2.0 * torch.tanh(s / 2.0),
    "relative": lambda s, b, h, q, x: s + TABLE[q - x + N - 1],
}


def qkv(requires_grad=False):
    return [torch.randn(B, H, N, D, dtype=torch.float64, generator=G).requires_grad_(requires_grad)
            for _ in range(3)]


def dense(q, k, v, score_mod=None, mask_mod=None):
    """The maths by plain torch (a second route, differentiable on the CPU where FlexAttention's backward is not):
    the mods applied to the full index grids, the scores masked to −∞, softmax, times V."""
    b, h, i, x = (torch.arange(n).view([-1 if j == p else 1 for j in range(4)]) for p, n in enumerate((B, H, N, N)))
    s = q @ k.transpose(-1, -2) / math.sqrt(D)
    s = s if score_mod is None else score_mod(s, b, h, i, x)
    s = s if mask_mod is None else s.masked_fill(~mask_mod(b, h, i, x), float("-inf"))
    return torch.softmax(s, -1) @ v


def reference(q, k, v, score_mod=None, mask_mod=None):
    block = flex.create_block_mask(mask_mod, B, H, N, N, device="cpu") if mask_mod else None
    return flex.flex_attention(q, k, v, score_mod=score_mod, block_mask=block, return_lse=True)


#: the cheap variant runs in CI (each case derives and compiles attention's kernels: seconds to tens of seconds on
#: two shared cores), each case at its search depth: the window (a row with no key) searches the diagram as written
#: (``depth=0``: 1.9 s of CPU, against 5.3 s at the default 2 and 4.8 s at 1; what it computes is the same) and the
#: softcap at the default, as tests/torch/test_flex_known.py's and test_flex_literals.py's masks; the whole zoo with
#: NAPKIN_SLOW=1, at the default
CHEAP = {("window", None): 0, (None, "softcap"): 2}
CASES = [*((m, None) for m in MASKS), *((None, s) for s in SCORES), ("causal", "alibi")]


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("mask,score", [c if c in CHEAP else pytest.param(*c, marks=pytest.mark.skipif(
    not os.environ.get("NAPKIN_SLOW"), reason="the whole zoo of mods: NAPKIN_SLOW=1")) for c in CASES])
def test_equals_flex_attention(mask, score):
    torch.set_num_threads(1)
    q, k, v = qkv()
    mods = {"score_mod": SCORES.get(score), "mask_mod": MASKS.get(mask)}
    O, L = nc.torch.flex_attention(q, k, v, **mods, return_lse=True, memory=64, depth=CHEAP.get((mask, score), 2))
    O2, L2 = reference(q, k, v, **mods)
    assert torch.allclose(O, O2, atol=1e-12) and torch.allclose(L, L2, atol=1e-12)
    assert torch.equal(torch.isneginf(L), torch.isneginf(L2)) and (O[torch.isneginf(L2)] == 0).all()


WINDOW = MASKS["window"]


def safe_dense(q, k, v, score_mod, mask_mod):
    """The maths by plain torch with FlexAttention's empty-row convention written out (a second route): a row with
    no allowed key gets O = 0 through a 0/1 factor, its scores replaced by 0 first so that no NaN is made."""
    b, h, i, x = (torch.arange(n).view([-1 if j == p else 1 for j in range(4)]) for p, n in enumerate((B, H, N, N)))
    allowed = mask_mod(b, h, i, x).expand(B, H, N, N)
    empty = ~allowed.any(-1, keepdim=True)
    s = score_mod(q @ k.transpose(-1, -2) / math.sqrt(D), b, h, i, x)
    s = torch.where(empty, torch.zeros((), dtype=s.dtype), s.masked_fill(~allowed, float("-inf")))
    return (torch.softmax(s, -1) @ v) * ~empty


@pytest.mark.filterwarnings("ignore")
@pytest.mark.skipif(not os.environ.get("NAPKIN_SLOW"), reason="deriving the backward: 1.5 min (99 s with the "
                    "table) on two shared cores: NAPKIN_SLOW=1")
@pytest.mark.parametrize("biased", [False, True])
def test_gradients_equal_torch_with_an_empty_row(biased):
    """Gradients w.r.t. q, k, v (and, biased, a captured learnable bias table: the derived backward) equal plain
    torch's, with query 0 allowed no key: its O is 0, L is −∞, and every gradient is finite (its q gradient 0)."""
    torch.set_num_threads(1)
    q, k, v = qkv(requires_grad=True)
    table = (TABLE if biased else torch.zeros_like(TABLE)).clone().requires_grad_(biased)
    mods = {"score_mod": (lambda s, b, h, i, x: s + table[i - x + N - 1]) if biased else (lambda s, b, h, i, x: s),
            "mask_mod": WINDOW}
    O, L = nc.torch.flex_attention(q, k, v, **mods, memory=64, return_lse=True)
    (O.square().sum()).backward()
    q2, k2, v2, table2 = (t.detach().requires_grad_() for t in (q, k, v, table))
    mods2 = {"score_mod": lambda s, b, h, i, x: s + table2[i - x + N - 1], "mask_mod": WINDOW}
    O2 = safe_dense(q2, k2, v2, **mods2)    # FlexAttention has no backward on the CPU: the maths by plain torch
    (O2.square().sum()).backward()
    O3, L3 = reference(*(t.detach() for t in (q, k, v)), **mods2)
    assert torch.allclose(O3, O2, atol=1e-12) and torch.allclose(O, O3, atol=1e-12)
    assert torch.equal(O[:, :, 0], torch.zeros_like(O[:, :, 0])) and torch.isneginf(L[:, :, 0]).all()
    assert torch.equal(torch.isneginf(L), torch.isneginf(L3)) and torch.allclose(L[:, :, 1:], L3[:, :, 1:])
    for a, b in ((q, q2), (k, k2), (v, v2), *(((table, table2),) if biased else ())):
        assert torch.isfinite(a.grad).all() and torch.allclose(a.grad, b.grad, atol=1e-10)
    assert torch.equal(q.grad[:, :, 0], torch.zeros_like(q.grad[:, :, 0]))


def test_an_index_outside_a_captured_table_is_refused_at_call_time():
    """``table[q − x + N]`` reads row 2N − 1 of a table of 2N − 1 rows: refused, naming the table and the legal range;
    a captured index table changed in place is checked on its new values at the next call (the trace is cached)."""
    q, k, v = qkv()
    with pytest.raises(nc.IndexingError, match=r"'score_mod\.TABLE' of shape \(31,\) takes the values 1 … 31 .*"
                                                r"legal range of dimension 0 is 0 … 30"):
        nc.torch.flex_attention(q, k, v, score_mod=lambda s, b, h, i, x: s + TABLE[i - x + N], memory=64)
    with pytest.raises(nc.IndexingError, match=r"takes the values -47 … -17 .*legal range of dimension 0 is -31 … 30"):
        nc.torch.flex_attention(q, k, v, score_mod=lambda s, b, h, i, x: s + TABLE[i - x - 2 * N], memory=64)
    rows = DOC.clone() + 3                     # rows of SLOPE (2 of them) read by document: 3 … 5, out of range
    alibi = lambda s, b, h, i, x: s + SLOPE[rows[i]] * (x - i)      # noqa: E731
    with pytest.raises(nc.IndexingError, match=r"'score_mod\.SLOPE' of shape \(2,\) takes the values 3 … 5"):
        nc.torch.flex_attention(q, k, v, score_mod=alibi, memory=64)
    rows.sub_(4)                               # in place: −1 … 1 now, read afresh by the cached trace
    with pytest.raises(nc.IndexingError, match=r"takes the values -1 … 1"):
        nc.torch.flex_attention(q, k, v, score_mod=alibi, memory=64)


def test_the_traced_mods_are_cached_on_what_they_depend_on(monkeypatch):
    """A second call with the same mods and shapes exports nothing; a captured number changed, or a captured tensor
    rebound to one of another shape, exports again (the key holds them).  (The mod reads its table one row past the
    end, so that each call stops at the index check, after the trace and before the kernels.)"""
    exports = []
    real = torch.export.export
    monkeypatch.setattr(torch.export, "export", lambda *a, **kw: exports.append(1) or real(*a, **kw))
    q, k, v = qkv()
    width, bias = 3, TABLE.clone()
    mod = lambda s, b, h, i, x: s + bias[i - x + N] * (i - x < width)      # noqa: E731

    def call():
        with pytest.raises(nc.IndexingError, match=rf"shape \({bias.shape[0]},\) takes the values"):
            nc.torch.flex_attention(q, k, v, score_mod=mod, memory=64)
    call()
    call()
    assert len(exports) == 1
    width = 5                                  # a captured number: another diagram
    call()
    assert len(exports) == 2
    bias = torch.zeros(2 * N + 1, dtype=torch.float64)       # another shape: another diagram (now N − 1 … 2N − 1 … )
    with pytest.raises(AssertionError):       # in range now: the index check passes; stop before the kernels
        monkeypatch.setattr(nc.torch.flexop.FlexOp, "arrays", lambda *a: (_ for _ in ()).throw(AssertionError))
        nc.torch.flex_attention(q, k, v, score_mod=mod, memory=64)
    assert len(exports) == 3 and width == 5


def test_unsupported_op_in_a_mod_is_named():
    q, k, v = qkv()
    with pytest.raises(nc.UnsupportedOperationError, match=r"aten\.atan"):
        nc.torch.flex_attention(q, k, v, score_mod=lambda s, b, h, q_, x: s + torch.atan(q_ - x), memory=64)


def test_a_relative_bias_table_is_read_by_index_inside_the_diagram():
    """``s + table[q − x + N − 1]``: the table is one input read by a gather (not woven over q and x, never a q×x
    array), so the FLOPs of the traced attention do not depend on the table's length: a table 4× as long (read at
    the same entries) costs the same; a one-hot contraction over its entries would cost 2·B·H·N²·length."""
    from napkin_cat.torch.exported import translate
    from napkin_cat.torch.flex import NAMES, POSITIONS, Scores
    index = tuple(torch.arange(n).view([-1 if j == p else 1 for j in range(4)]) for p, n in enumerate((B, H, N, N)))
    found = []
    for length in (2 * N - 1, 8 * N):
        table = torch.randn(length, dtype=torch.float64, generator=G)
        module = Scores(lambda s, b, h, i, x: s + table[i - x + N - 1], None, 0.5)
        example = (*qkv(), *index)
        r = translate(torch.export.export(module, example), module, example, None, NAMES, positions=POSITIONS)
        (read,) = [b for b in r.diagram.boxes if getattr(b.data, "kind", None) == "gather"]
        assert [len(a.axes) for a in read.dom.inside] == [1, 2] and len(read.cod.inside[0].axes) == 2
        found.append(nc.cost(r.diagram).flops)
    assert found[0] == found[1]


@pytest.mark.filterwarnings("ignore")
@pytest.mark.skipif(not os.environ.get("NAPKIN_SLOW"), reason="derives and compiles attention: 30 s on two shared "
                    "cores: NAPKIN_SLOW=1")
def test_the_fused_kernel_reads_the_bias_table_by_index():
    """At a memory where the search fuses the table read into attention (one kernel, the gather inside), the op's
    one C kernel reads the table at the index (``nc_t``) and equals the maths by plain torch."""
    torch.set_num_threads(1)
    q, k, v = qkv()
    mod = SCORES["relative"]
    O = nc.torch.flex_attention(q, k, v, score_mod=mod, memory=1024)
    assert torch.allclose(O, dense(q, k, v, score_mod=mod), atol=1e-12)
    (traced,) = [t for t in nc.torch.flex.TRACES.entries.values() if t.op.forward.memory == 1024]
    (fused,) = [d.variant for d in traced.op.forward.derivations.values()]
    assert fused.kind == "fully fused" and "gather" in fused.kernels[0].ops
    (kernel,) = traced.op.forward.kernels.values()
    assert kernel.source.count("static void nc_kernel") == 1 and "const int nc_t = (int)" in kernel.source


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("memory", [256, pytest.param(4096, marks=pytest.mark.skipif(
    not os.environ.get("NAPKIN_SLOW"), reason="a second memory, the same path: NAPKIN_SLOW=1"))])
def test_causal_where_the_keys_fit_the_memory_whole(memory):
    """At memory=256 (and 4096) every key fits level 1: the derived forward keeps online softmax's Initialize
    outside a stream along x (issue 33: the C printer refused it, UnknownKindError); its C kernel writes
    (μ′, z′) = (−∞, 0) and equals FlexAttention's output and log-sum-exp."""
    torch.set_num_threads(1)
    q, k, v = (torch.randn(1, 1, N, D, dtype=torch.float64, generator=G) for _ in range(3))
    O, L = nc.torch.flex_attention(q, k, v, mask_mod=MASKS["causal"], memory=memory, return_lse=True)
    block = flex.create_block_mask(MASKS["causal"], 1, 1, N, N, device="cpu")
    O2, L2 = flex.flex_attention(q, k, v, block_mask=block, return_lse=True)
    assert torch.allclose(O, O2, rtol=0, atol=1e-12) and torch.allclose(L, L2, rtol=0, atol=1e-12)
    (traced,) = [t for t in nc.torch.flex.TRACES.entries.values() if t.op.forward.memory == memory]
    (kernel,) = traced.op.forward.kernels.values()
    assert "← Initialize(" in kernel.source and "= -INFINITY;" in kernel.source


def _recording(monkeypatch):
    """Every run of a C kernel: (kernel, the block tables it was given, or None, and the ``block_mask`` it was
    given)."""
    from napkin_cat.codegen.c.openmp import CKernel
    seen, real = [], CKernel.__call__

    def spy(self, *arrays, block_mask=None, blocks=None, **options):
        seen.append((self, blocks, block_mask))
        return real(self, *arrays, block_mask=block_mask, blocks=blocks, **options)
    monkeypatch.setattr(CKernel, "__call__", spy)
    return seen


def _expected(kernel, allowed):
    """The states of each table of ``kernel`` by the mask of numpy's ``allowed`` (q × x), at the kernel's trips."""
    from napkin_cat.algorithms.blockmask import BlockMask
    return [t.states(BlockMask.of(allowed, "q x")) for t in kernel.printer.block_tables.values()]


@pytest.mark.filterwarnings("ignore")
def test_a_document_mask_gives_the_kernel_the_data_block_tables(monkeypatch):
    """A mask reading captured document ids: the op is passed its kernel's block tables (as its ``blocks``
    argument, int8, derived at the tiles it picks), which are the blocks of numpy's ``DOC[q] == DOC[x]`` at the
    kernel's trips, with blocks none (skipped) and full (run unmasked); O and L equal FlexAttention's."""
    import numpy as np
    from napkin_cat.algorithms.blockmask import FULL, NONE
    torch.set_num_threads(1)
    seen = _recording(monkeypatch)
    q, k, v = qkv()
    O, L = nc.torch.flex_attention(q, k, v, mask_mod=MASKS["document"], return_lse=True, memory=64, depth=1)
    O2, L2 = reference(q, k, v, mask_mod=MASKS["document"])
    assert torch.allclose(O, O2, rtol=0, atol=1e-12) and torch.allclose(L, L2, rtol=0, atol=1e-12)
    allowed = (DOC[:, None] == DOC[None, :]).numpy()
    seen = [(kernel, tables, mask) for kernel, tables, mask in seen if kernel.printer.block_tables]
    assert seen and all(tables is not None and mask is None for _, tables, mask in seen)
    for kernel, tables, _ in seen:
        for got, want in zip(tables, _expected(kernel, allowed), strict=True):
            assert got.dtype == np.int8 and np.array_equal(got, want)
            assert np.count_nonzero(got == NONE) and np.count_nonzero(got == FULL)


@pytest.mark.filterwarnings("ignore")
@pytest.mark.skipif(not os.environ.get("NAPKIN_SLOW"), reason="derives the backward: minutes on two shared cores: "
                    "NAPKIN_SLOW=1")
def test_the_backward_kernels_get_block_tables_of_their_own(monkeypatch):
    """Differentiated under a document mask: the gradients equal plain torch's (FlexAttention has no backward on
    the CPU), and each backward kernel whose stream skips by the mask is given its own tables (the blocks of
    numpy's mask at its trips), the others none.  (At memory=64 the derived backward stores dS through level 0: its
    streams write a slice on every trip and skip nothing; tests/codegen/test_c_block_mask_backward.py checks the
    backward whose streams do skip.)"""
    import numpy as np
    from napkin_cat.algorithms.blockmask import FULL, NONE
    torch.set_num_threads(1)
    mask = MASKS["document"]
    q, k, v = qkv(requires_grad=True)
    O = nc.torch.flex_attention(q, k, v, mask_mod=mask, memory=64, depth=1)
    seen = _recording(monkeypatch)
    O.square().sum().backward()
    q2, k2, v2 = (t.detach().requires_grad_() for t in (q, k, v))
    O2 = dense(q2, k2, v2, mask_mod=mask)
    O2.square().sum().backward()
    assert torch.allclose(O, O2, atol=1e-12)
    for a, b in ((q, q2), (k, k2), (v, v2)):
        assert torch.allclose(a.grad, b.grad, atol=1e-10)
    allowed = (DOC[:, None] == DOC[None, :]).numpy()
    assert seen and all(mask is None for _, _, mask in seen)
    for kernel, tables, _ in seen:
        assert (tables is not None) == bool(kernel.printer.block_tables)
        for got, want in zip(tables or (), _expected(kernel, allowed), strict=True):
            assert np.array_equal(got, want) and np.count_nonzero(got == NONE) and np.count_nonzero(got == FULL)
