"""The GPU time search reads each kernel's form once per call (``timed.kernel_forms``, issue 35): the structures of
one derive that share a kernel, and a kernel timed alone (``legal_partitions``), read one
:class:`~napkin_cat.hardware.predict.KernelForm`.

Second route: the same timings with every form read afresh (``forms=None``, as before the memo): every row (exact
time, transfers, tiles, each kernel's time) must be equal, and the memo must have been read at least once (a test
that never hits it proves nothing).  Programs: attention and causal attention, each derived at three memories,
each structure timed whole and then each of its kernels alone.
"""
from __future__ import annotations

import pytest

import napkin_cat as nc
from napkin_cat.errors import LoweringError
from napkin_cat.hardware import timed
from napkin_cat.hardware.errors import HardwareError
from napkin_cat.hardware.predict import LAUNCH, KernelForm, environment, kernels_of
from napkin_cat.syntax.adapter import Diagram


def rows(d, gpu, env, forms):
    try:
        return timed.structure_timings(d, gpu, env, overlap="sequential", ceilings={}, level=1,
                                       largest=timed.LARGEST, launch=LAUNCH, forms=forms)
    except (HardwareError, LoweringError) as e:
        return type(e).__name__


@pytest.mark.parametrize("f, sizes", [
    (nc.library.attention, {"q": 256, "x": 512, "d": 64}),
    (nc.library.causal_attention, {"q": 256, "x": 256, "d": 64}),
])
def test_one_form_per_kernel_times_as_fresh_forms(f, sizes):
    gpu = nc.hardware.load("h100-sxm5")
    env = environment(sizes)
    r = nc.derive(f(), memory=[2 ** 12, 2 ** 14, 2 ** 16], sizes=sizes)
    programs = list({str(g.variant): g.diagram for g in r.regimes}.values())
    programs += [Diagram.id(k.dom).then(k) for d in programs for k in kernels_of(d)]    # each kernel alone
    forms = {}
    shared = [rows(d, gpu, env, forms) for d in programs]
    fresh = [rows(d, gpu, env, None) for d in programs]
    assert shared == fresh
    assert any(isinstance(x, list) and x for x in fresh)
    read = sum(len(kernels_of(d)) for d in programs)
    built = [f for f in forms.values() if isinstance(f, KernelForm)]
    assert len(built) < read       # the memo was hit: at least each kernel timed alone read its structure's form


def test_equal_kernels_share_a_form_and_others_do_not():
    """Two equal kernels built apart read one form; a kernel of the same name with another inside, or the same kernel
    planned at other sample sizes, its own."""
    gpu = nc.hardware.load("h100-sxm5")

    def tiled(f):
        return nc.group(nc.group(nc.stream(nc.kernel(f), "b", "s_b"), "a", "g_a"), "c", "g_c")
    mm = nc.einsum("a b, b c -> a c", dtype="bf16", out_dtype="fp32")
    relu = nc.einsum("a b, b c -> a c", dtype="bf16", out_dtype="fp32") >> nc.elementwise("relu", "a c")
    (k1,), (k2,), (k3,) = (kernels_of(tiled(f)) for f in (mm, mm, relu))
    assert k1 is not k2 and k1 == k2 and k1.name == k3.name and k1 != k3
    sample = {nc.symbol(n): v for n, v in {"a": 256, "b": 256, "c": 256, "g_a": 64, "g_c": 64, "s_b": 64}.items()}
    other = {**sample, nc.symbol("g_a"): 128}
    memo = {}
    opts = dict(overlap="sequential", ceilings={}, level=1, density={})
    a, b, c = timed.kernel_forms([k1, k2, k3], gpu, memo, sample=sample, **opts)
    (d,) = timed.kernel_forms([k1], gpu, memo, sample=other, **opts)
    assert a is b and a is not c and d is not a and len([f for f in memo.values() if isinstance(f, KernelForm)]) == 3
    assert all(isinstance(x, KernelForm) for x in (a, c, d))
    env = {**sample}
    assert a.at(env).flops != c.at(env).flops     # the relu's kernel is timed as itself, not as the product's
