"""Random streamable chains the library has never named, partitioned and printed by every backend.

A chain: a contraction, then elementwise maps (with a broadcast bias), then a contraction, a reduction
or a softmax followed by a contraction, over axis names drawn at random.  It is streamed along an axis
it is streamable along and grouped along another, at random (ragged) sizes; the C kernel (with and
without BLAS) and the Triton kernel under the interpreter give the numpy runner's results, and the
CUDA kernel compiles with the plan's shared memory."""
from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, assume, given, settings, strategies as st

import napkin_cat as nc
from napkin_cat.errors import NapkinError
from napkin_cat.syntax.builder import Builder

from kernels_common import HAVE_CC, HAVE_NVCC, HAVE_TRITON, assert_close, inputs, needs_cc

MAPS = ["relu", "gelu", "tanh", "sigmoid", "silu", "square", "scale", "bias"]


@st.composite
def chains(draw):
    i, j, k, l = draw(st.lists(st.sampled_from(list("uvwkmprtyz")), min_size=4, max_size=4, unique=True))
    maps = draw(st.lists(st.sampled_from(MAPS), max_size=3))
    end = draw(st.sampled_from(["contract", "sum", "max", "softmax"]))
    b = Builder(nc.types(f"{i} {j}, {j} {k}, {k}, {k} {l}"))
    X, W, c, V = b.inputs
    h = b(nc.einsum(f"{i} {j}, {j} {k} -> {i} {k}"), X, W)
    for m in maps:
        if m == "bias":
            h = b(nc.elementwise("add", f"{i} {k}, {k} -> {i} {k}"), h, c)
        elif m == "scale":
            h = b(nc.elementwise("scale", f"{i} {k}", const=0.5), h)
        else:
            h = b(nc.elementwise(m, f"{i} {k}"), h)
    if end == "contract":
        y = b(nc.einsum(f"{i} {k}, {k} {l} -> {i} {l}"), h, V)
    elif end == "softmax":
        y = b(nc.einsum(f"{i} {k}, {k} {l} -> {i} {l}"), b(nc.softmax(f"{i} {k}", over=k), h), V)
    else:
        y = b(nc.reduce(end, f"{i} {k} -> {i}"), h)
    function = b.build(y)
    stream = draw(st.sampled_from([k, j]))
    group = draw(st.sampled_from([i, l]))
    try:
        algorithm = nc.stream(function, stream, f"s_{stream}")
    except NapkinError:
        assume(False)
    try:
        algorithm = nc.group(algorithm, group, f"g_{group}")
    except NapkinError:
        pass
    sizes = {a: draw(st.integers(1, 7), label=a) for a in (i, j, k, l)
             if any(a in arr.names for arr in function.dom.inside)}
    from napkin_cat.syntax.sizes import symbols_of
    found = symbols_of(algorithm)
    for sym in sorted(found, key=str):
        name = str(sym)
        if name.startswith(("s_", "g_")):
            sizes[name] = draw(st.integers(1, sizes[name[2:]]), label=name)
    return function, algorithm, {a: v for a, v in sizes.items() if any(a == str(s) for s in found)}


@needs_cc
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(chain=chains(), seed=st.integers(0, 99))
def test_every_backend_runs_a_random_chain(chain, seed):
    function, algorithm, sizes = chain
    p = nc.plan(algorithm, sizes)
    xs = inputs(p, seed=seed)
    want = p(*xs)
    assert_close(want, nc.evaluate(function, *[x.astype(float) for x in xs]), rtol=1e-4, atol=1e-5)
    if HAVE_CC:
        assert_close(nc.codegen.c(p)(*xs), want)
        assert_close(nc.codegen.c(p, blas=False)(*xs), want)
    if HAVE_TRITON:
        assert_close(nc.codegen.triton(p)(*xs), want)
    if HAVE_NVCC:
        assert nc.codegen.cuda(p).compile(arch="sm_90")["smem"] == p.smem_bytes
    assert np.all(np.isfinite(np.asarray(want if not isinstance(want, tuple) else want[0])))
