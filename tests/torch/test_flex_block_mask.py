"""FlexAttention's own mask helpers given to ``nc.torch.flex_attention``: ``and_masks``, ``or_masks``, ``noop_mask``
(built from ``new_ones`` / ``new_zeros``) and a ``BlockMask`` from ``create_block_mask`` passed where FlexAttention
takes it (fifth positional argument, or ``block_mask=``), with its batch and heads broadcast or not.

Second routes: the maths written here in float64 plain torch (scores, the mods on the full index grids, logsumexp,
softmax; an empty row's O = 0) and, for a block mask, the set of blocks counted here from the mask's values.
The mods are those of ``test_flex_lse_grad.py`` (a relative bias table, a window in which query 0 has no key) at its
sizes and options, so that the derived kernels are the ones that test derives (the derivation is stored on disk).
"""
from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")
flex = pytest.importorskip("torch.nn.attention.flex_attention")

import napkin_cat as nc  # noqa: E402
from napkin_cat.errors import ArgumentError, BlockMaskError  # noqa: E402
from napkin_cat.torch.blockmask import mask_of  # noqa: E402

B, H, N, D = 1, 2, 8, 4
G = torch.Generator().manual_seed(3)
TABLE = torch.randn(2 * N - 1, dtype=torch.float64, generator=G)
OPTIONS = {"return_lse": True, "memory": 64, "depth": 0}


def score_mod(s, b, h, q, x):
    return s + TABLE[q - x + N - 1]


def before(b, h, q, x):
    return x < q


def near(b, h, q, x):
    return q - x <= 3


def window(b, h, q, x):
    return (x < q) & (q - x <= 3)        # query 0 has no key: O = 0, L = −∞


def grid(n=N, x=N):
    return [torch.arange(m).view([-1 if j == p else 1 for j in range(4)]) for p, m in enumerate((B, H, n, x))]


def dense(q, k, v, mask):
    s = score_mod(q @ k.transpose(-1, -2) / math.sqrt(D), *grid()).masked_fill(~mask(*grid()), -math.inf)
    L = torch.logsumexp(s, -1)
    return torch.exp(s - L[..., None]).nan_to_num(0.0) @ v, L


def inputs():
    return [torch.randn(B, H, N, D, dtype=torch.float64, generator=G) for _ in range(3)]


def close(got, want):
    (O, L), (O2, L2) = got, want
    assert torch.equal(torch.isneginf(L), torch.isneginf(L2)) and bool(torch.isneginf(L[..., 0]).all())
    return max(float((O - O2).abs().max()), float((L - L2).nan_to_num(0.0, 0.0, 0.0).abs().max()))


@pytest.mark.parametrize("helper", ["and_masks", "or_masks", "noop_mask"])
def test_torchs_mask_helpers_are_the_masks_they_combine(helper):
    """``and_masks(before, near)`` is ``before ∧ near``; ``or_masks(window)`` is ``false ∨ window``;
    ``and_masks(noop_mask, window)`` is ``true ∧ window`` (torch builds them from new_ones / new_zeros)."""
    mask = {"and_masks": lambda: flex.and_masks(before, near), "or_masks": lambda: flex.or_masks(window),
            "noop_mask": lambda: flex.and_masks(flex.noop_mask, window)}[helper]()
    q, k, v = inputs()
    assert close(nc.torch.flex_attention(q, k, v, score_mod, mask, **OPTIONS), dense(q, k, v, window)) < 1e-12


@pytest.mark.parametrize("how", ["positional", "keyword", "broadcast", "unseparated"])
def test_a_block_mask_from_create_block_mask_is_its_mask(how):
    """FlexAttention's BlockMask where FlexAttention takes it: batch and heads given or broadcast (None), full
    blocks separated or not; the same outputs as the mask_mod it was made from, and as the maths."""
    q, k, v = inputs()
    sizes = (None, None) if how == "broadcast" else (B, H)
    block_mask = flex.create_block_mask(window, *sizes, N, N, device="cpu", BLOCK_SIZE=4,
                                        separate_full_blocks=how != "unseparated")
    got = nc.torch.flex_attention(q, k, v, score_mod, block_mask, **OPTIONS) if how == "positional" else \
        nc.torch.flex_attention(q, k, v, score_mod, block_mask=block_mask, **OPTIONS)
    assert close(got, dense(q, k, v, window)) < 1e-12
    assert close(got, nc.torch.flex_attention(q, k, v, score_mod, window, **OPTIONS)) == 0


def blocks(rows, indices, full=None, full_indices=None, size=4):
    as_int = (lambda t: None if t is None else torch.tensor(t, dtype=torch.int32))
    return flex.BlockMask.from_kv_blocks(as_int(rows), as_int(indices), as_int(full), as_int(full_indices),
                                         BLOCK_SIZE=size, mask_mod=window)


def test_blocks_that_say_what_the_mask_says_pass_and_others_are_refused_naming_the_block():
    """The window over 2×2 blocks of 4: block (0, 0) partial, (1, 0) partial, (1, 1) partial (the diagonal block
    (1, 1) allows some pairs, block (0, 1) none).  Marking (0, 1) partial too is harmless (the mask computes it);
    dropping (1, 1), or marking (1, 0) full (it allows only some pairs), says another mask."""
    shape = (B, H, N, N)
    assert mask_of(blocks([[[1, 2]]], [[[[0, 0], [0, 1]]]]), shape) is window
    causal = flex.create_block_mask(before, None, None, N, N, "cpu", BLOCK_SIZE=4)     # block (1, 0) listed full only
    assert bool(causal.full_kv_num_blocks.sum() == 1) and mask_of(causal, shape) is before
    assert mask_of(blocks([[[2, 2]]], [[[[0, 1], [0, 1]]]]), shape) is window
    with pytest.raises(BlockMaskError, match=r"queries 4…7, keys 4…7\) is empty \(skipped\), but its mask_mod "
                                             r"allows only some"):
        mask_of(blocks([[[1, 1]]], [[[[0, 0], [0, 0]]]]), shape)
    with pytest.raises(BlockMaskError, match=r"queries 4…7, keys 0…3\) is full"):
        mask_of(blocks([[[1, 1]]], [[[[0, 0], [1, 0]]]], [[[0, 1]]], [[[[0, 0], [0, 0]]]]), shape)


def test_a_block_mask_of_other_lengths_or_given_twice_is_refused():
    q, k, v = inputs()
    with pytest.raises(BlockMaskError, match="made for 16 queries and 16 keys; this call has 8 queries and 8 keys"):
        nc.torch.flex_attention(q, k, v, score_mod, block_mask=flex.create_block_mask(window, 1, 1, 16, 16, "cpu"))
    with pytest.raises(BlockMaskError, match="batch 1 or 1, heads 1 or 2"):
        nc.torch.flex_attention(q, k, v, score_mod, flex.create_block_mask(window, 1, 3, N, N, "cpu", BLOCK_SIZE=4))
    with pytest.raises(ArgumentError, match="a mask_mod or a block_mask, not both"):
        nc.torch.flex_attention(q, k, v, score_mod, window, block_mask=flex.create_block_mask(window, 1, 1, N, N))


@pytest.mark.filterwarnings("ignore")
def test_a_block_mask_under_torch_compile_fullgraph():
    """Inside ``torch.compile(fullgraph=True)`` the blocks' values are not known while the graph is captured: the
    block mask's lengths and tables are checked, its mask_mod is the mask; the outputs are the eager call's."""
    q, k, v = inputs()
    block_mask = flex.create_block_mask(window, B, H, N, N, device="cpu", BLOCK_SIZE=4)
    attend = torch.compile(lambda q, k, v: nc.torch.flex_attention(q, k, v, score_mod, block_mask=block_mask,
                                                                   **OPTIONS), fullgraph=True, backend="aot_eager")
    assert close(attend(q, k, v), dense(q, k, v, window)) < 1e-12


def test_return_aux_is_return_lse_in_flex_attentions_newer_spelling():
    q, k, v = inputs()
    O, aux = nc.torch.flex_attention(q, k, v, score_mod, window, return_aux=flex.AuxRequest(lse=True),
                                     memory=64, depth=0)
    assert isinstance(aux, flex.AuxOutput) and aux.max_scores is None
    assert close((O, aux.lse), dense(q, k, v, window)) < 1e-12
    with pytest.raises(ArgumentError, match="max_scores"):
        nc.torch.flex_attention(q, k, v, score_mod, window, return_aux=flex.AuxRequest(max_scores=True))
    with pytest.raises(ArgumentError, match="return_lse or return_aux, not both"):
        nc.torch.flex_attention(q, k, v, return_lse=True, return_aux=flex.AuxRequest(lse=True))
