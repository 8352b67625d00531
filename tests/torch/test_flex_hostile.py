"""``nc.torch.flex_attention`` with mods and inputs it cannot take: refused, typed, naming what is legal.

Found from outside (issue 31, checked again, 44 calls): a ``mask_mod`` returning ints, floats or a Python bool, or
of the wrong shape; a ``score_mod`` returning a bool, a Python float, a 0-d tensor or a slice; a mod that raises;
integer or mixed-dtype query/key/value; ``scale="a"``: each escaped as torch's or Python's own error
(``RuntimeError: expected predicate to be bool``, ``ZeroDivisionError``, ``ValueError: could not convert string to
float``); ``scale=nan`` printed the C literal ``NANf`` (``cc`` rejected the kernel) and a NaN constant anywhere did
too (``nc.elementwise("scale", ..., const=nan)``).  These refusals happen before anything is compiled (fast).
"""
from __future__ import annotations

import numpy as np
import pytest

import napkin_cat as nc

torch = pytest.importorskip("torch")
from napkin_cat.torch import flex_attention  # noqa: E402

B, H, N, E = 1, 2, 8, 4


@pytest.fixture
def qkv():
    g = torch.Generator().manual_seed(0)
    return tuple(torch.randn(B, H, N, E, generator=g) for _ in range(3))


@pytest.mark.parametrize("score_mod, mask_mod, said", [
    (None, lambda b, h, i, j: (j <= i).int(), "expected predicate to be bool"),
    (None, lambda b, h, i, j: (j <= i).float(), "invert"),
    (None, lambda b, h, i, j: True, "masked_fill"),
    (None, lambda b, h, i, j: torch.ones(3, dtype=torch.bool), "broadcast"),
    (None, lambda b, h, i, j: 1 / 0, "ZeroDivisionError"),
    (lambda s, b, h, i, j: s > 0, None, "bool"),
    (lambda s, b, h, i, j: 1.0, None, "must be Tensor, not float"),
    (lambda s, b, h, i, j: s[..., :1], None, ""),
    (lambda s, b, h, i, j: s.not_a_method(), None, "AttributeError"),
])
def test_a_mod_that_raises_or_returns_the_wrong_thing_is_a_tensor_error(qkv, score_mod, mask_mod, said):
    with pytest.raises(nc.TensorError, match=r"could not trace the mods on torch\.float32 scores of shape "
                                             r"\(1, 2, 8, 8\): .*" + said + r".*a mask_mod\(b, h, q_idx, kv_idx\) "
                                             r"returns a bool tensor"):
        flex_attention(*qkv, score_mod=score_mod, mask_mod=mask_mod)


@pytest.mark.parametrize("scale", ["a", True, float("nan"), float("inf"), None.__class__])
def test_a_scale_that_is_no_finite_real_is_refused(qkv, scale):
    with pytest.raises(nc.TensorError, match=r"scale is a finite real number"):
        flex_attention(*qkv, scale=scale)


def test_inputs_of_no_floating_dtype_or_of_two_dtypes_are_refused(qkv):
    q, k, v = qkv
    with pytest.raises(nc.TensorError, match=r"floating-point tensors; query is torch\.int32"):
        flex_attention(q.int(), k.int(), v.int())
    with pytest.raises(nc.TensorError, match=r"one dtype; query is torch\.float32, key torch\.float64"):
        flex_attention(q, k.double(), v)
    with pytest.raises(nc.TensorError, match=r"floating-point tensors; value is list"):
        flex_attention(q, k, v.tolist())


@pytest.mark.parametrize("real", ["float", "double"])
def test_a_nan_constant_prints_as_c_s_nan(real):
    """A NaN constant is C's ``NAN`` (not ``nanf``/``NANf``): the kernel compiles and computes NaN, as numpy does."""
    d = nc.kernel(nc.elementwise("scale", "a", const=float("nan")))
    p = nc.plan(d, {"a": 3})
    x = np.ones(3, dtype=np.float32 if real == "float" else np.float64)
    want = nc.evaluate(d, x)
    got = nc.codegen.c(p, real=real)(x, threads=1)
    assert np.isnan(want).all() and np.isnan(got).all() and got.shape == want.shape
    assert 'float("nan")' in nc.codegen.triton(p).source
