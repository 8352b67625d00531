"""Shared fixtures for the unit tests of napkin_cat.

Plain-numpy references live here so that every test compares the library with
code that does not go through napkin_cat; ``helpers`` is session-scoped so that
hypothesis tests may use it.
"""
from __future__ import annotations

import math
from types import SimpleNamespace
from typing import TYPE_CHECKING

import numpy as np
import pytest

if TYPE_CHECKING:
    from napkin_cat.syntax.adapter import Diagram

# napkin_cat is imported where it is used, not here: pytest loads this file in every process of a run, the xdist
# controller among them, which runs no test and imported the package (2.5 s of CPU) before it started the workers


def softmax_reference(z, axis=-1):
    """Numerically stable softmax in float64 (max subtracted)."""
    z = np.asarray(z, dtype=np.float64)
    z = z - np.max(z, axis=axis, keepdims=True)
    e = np.exp(z)
    return e / np.sum(e, axis=axis, keepdims=True)


def attention_reference(Q, K, V):
    """softmax(Q Kᵀ / √d) V over the last two axes, batch axes in front."""
    d = Q.shape[-1]
    S = np.matmul(Q, np.swapaxes(K, -1, -2)) / math.sqrt(d)
    return np.matmul(softmax_reference(S), V)


def gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def silu(x):
    return x / (1.0 + np.exp(-x))


def relu(x):
    return np.maximum(x, 0.0)


def layer_norm_reference(X, gamma, beta, eps):
    mu = X.mean(axis=-1, keepdims=True)
    var = ((X - mu) ** 2).mean(axis=-1, keepdims=True)
    return (X - mu) / np.sqrt(var + eps) * gamma + beta


def rms_norm_reference(X, gamma, eps):
    return X / np.sqrt((X ** 2).mean(axis=-1, keepdims=True) + eps) * gamma


def assert_well_typed(diagram: Diagram):
    """Every layer's box takes exactly the wires in front of it (re-scanned, not trusted)."""
    from napkin_cat.syntax.flat import layers
    wires = list(diagram.dom.inside)
    for k, (offset, box) in enumerate(layers(diagram)):
        n = len(box.dom)
        got = wires[offset:offset + n]
        assert got == list(box.dom.inside), (
            f"layer {k}: box {box.name!r} takes {[str(a) for a in box.dom.inside]} "
            f"but the wires at offset {offset} carry {[str(a) for a in got]}")
        wires[offset:offset + n] = list(box.cod.inside)
    assert wires == list(diagram.cod.inside), (
        f"the last layer ends in {[str(a) for a in wires]}, the diagram claims {diagram.cod}")


def weave_sizes(box, env=None):
    """The product of the sizes of a primitive box's weaved axes (read off its outputs)."""
    env = env or {}
    total = 1
    arr = box.cod.inside[0]
    for name in box.data.weave_names:
        size = arr.axis(name).size
        total = total * (size if isinstance(size, int) else size.subs(env))
    return total


def box_flops(box, env=None):
    """FLOPs per pipeline of one primitive box: the kind's item count times its weave sizes."""
    from napkin_cat.syntax.primitive import kind_of
    from napkin_cat.syntax.weave import core_of
    spec = box.data
    core = core_of(spec, box.dom, box.cod, env or {})
    per_item = kind_of(spec.kind).item_flops(core)
    n = weave_sizes(box, env)
    return {pipe: per_item[pipe] * n for pipe in per_item}


def diagram_flops(diagram):
    """Sum of :func:`box_flops` over the primitive boxes of a flat diagram."""
    from napkin_cat.syntax.flat import is_structural, layers
    total = {}
    for _, box in layers(diagram):
        if is_structural(box) is not None:
            continue
        for pipe, n in box_flops(box).items():
            total[pipe] = total.get(pipe, 0) + n
    return total


def live_columns(diagram):
    """Level → the columns of a region-free diagram by their definition, in order: after every layer,
    the sum of the distinct values on the wires, expanded (a copied value is one variable), but for a value
    a box makes and nothing reads (only discarded: dead as it is made, never held).  Swaps, copies and
    discards are read off the boxes' types here, not through ``napkin_cat.syntax.wiring``."""
    import sympy
    from discopy import markov

    from napkin_cat.syntax.flat import layers

    def run(on_layer):
        wires, fresh = list(enumerate(diagram.dom.inside)), len(diagram.dom)
        on_layer(wires, None)
        for offset, box in layers(diagram):
            k = len(box.dom)
            ins = wires[offset:offset + k]
            if isinstance(box, markov.Swap):
                outs = ins[len(box.left):] + ins[:len(box.left)]
            elif isinstance(box, markov.Copy):        # a discard is a copy with no outputs
                outs = ins * len(box.cod)
            else:
                outs = [(fresh + j, arr) for j, arr in enumerate(box.cod.inside)]
                fresh += len(outs)
            wires[offset:offset + k] = outs
            on_layer(wires, None if isinstance(box, (markov.Swap, markov.Copy)) else ins)
        return wires

    used = set()
    used |= {vid for vid, _ in run(lambda wires, ins: used.update(vid for vid, _ in ins or ()))}
    cols = {}

    def read(wires, _):
        seen, col = set(), {}
        for vid, arr in wires:
            if vid >= len(diagram.dom) and vid not in used:
                continue
            if vid not in seen:
                seen.add(vid)
                size = sympy.Integer(1)
                for a in arr.axes:
                    size *= a.size
                col[arr.level] = col.get(arr.level, 0) + size
        for lvl, v in col.items():
            v = sympy.expand(v)
            if v != 0 and v not in cols.setdefault(lvl, []):
                cols[lvl].append(v)
    run(read)
    return cols


def residual_stack(k: int = 3):
    """``k`` residual blocks ``x + relu(x W_i)`` (n = 64, e = f = 32): a seam at every block's output, read by the
    product and the add; the search cuts it into ``k`` alike segments."""
    import napkin_cat as nc
    b = nc.Builder(nc.types(", ".join(["n e"] + ["e f"] * k), n=64, e=32, f=32))
    x = b.inputs[0]
    for i in range(k):
        y = b(nc.elementwise("relu", "n f", n=64, f=32), b(nc.einsum("n e, e f -> n f", n=64, e=32, f=32), x,
                                                            b.inputs[1 + i]))
        x = b(nc.elementwise("add", "n e, n e -> n e", n=64, e=32), x, b(nc.renaming("n f -> n e", n=64, f=32), y))
    return b.build(x)


@pytest.fixture(scope="session")
def helpers():
    return SimpleNamespace(
        softmax=softmax_reference, attention=attention_reference, gelu_tanh=gelu_tanh, silu=silu,
        relu=relu, layer_norm=layer_norm_reference, rms_norm=rms_norm_reference,
        well_typed=assert_well_typed, weave_sizes=weave_sizes, box_flops=box_flops,
        diagram_flops=diagram_flops, live_columns=live_columns, residual_stack=residual_stack)


@pytest.fixture
def rng():
    return np.random.default_rng(20240611)


@pytest.fixture
def scratch_kinds():
    """Names of primitive kinds declared by a test; they are removed afterwards."""
    from napkin_cat.syntax.primitive import KINDS
    before = set(KINDS)
    yield
    for name in set(KINDS) - before:
        del KINDS[name]


@pytest.fixture(scope="session")
def tagged_class():
    from napkin_cat.algorithms.bubbles import Region

    class Tagged(Region):
        """A test-only region: checks that serialisation is generic over ``REGIONS``."""

        region = "test_tagged"

    return Tagged


@pytest.fixture
def tagged_region(tagged_class):
    """A user's region, registered as a region (syntax) and by its numpy meaning (it runs its inside)."""
    from napkin_cat.algorithms.bubbles import REGIONS
    from napkin_cat.semantics.regions import REGION_SEMANTICS, run_kernel
    Tagged = tagged_class
    REGIONS[Tagged.region] = Tagged
    REGION_SEMANTICS[Tagged.region] = run_kernel
    yield Tagged
    del REGIONS[Tagged.region], REGION_SEMANTICS[Tagged.region]
