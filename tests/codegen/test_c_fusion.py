"""The C kernel fuses elementwise maps into their reader, and a full trip drops its mask's ``where`` (issue 33).

Checked by routes the printer does not share: masked attention from its definition in float64 (numpy) for a mask
from positions (causal, a window), a mask from data (documents, with the data's block mask) and a random mask given
as an input, at even and ragged tiles, with the arena poisoned (NaN until written: a fused map whose inputs the
layout let die early reads NaN or another value); the runner's counts against the cost functor (the plan it runs
is the one as written); a chain through a half-precision format against ``nc.evaluate`` (the conversion a stored
value makes, kept where it is fused); and the printed text: the where's variable never written, and on the
trips the mask allows whole no select left.
"""
import re

import numpy as np
import pytest

import napkin_cat as nc
from napkin_cat.plan.ir import Compute, walk

N, D, WINDOW = 40, 8, 5
TILINGS = [(16, 8), (13, 11)]


def _random_mask_attention():
    """Attention masked by a q×x boolean input (a mask from data with no formula)."""
    b = nc.Builder(nc.types("q x", dtype=nc.BOOL))
    return nc.library.masked_attention(b.build(*b.inputs))


def _case(name, rng):
    """(diagram, extra inputs, allowed pairs, block mask argument) of a mask."""
    q, x = np.arange(N)[:, None], np.arange(N)[None, :]
    if name == "causal":
        return nc.library.causal_attention(), [], x <= q, None
    if name == "window":
        return nc.library.sliding_window_attention(WINDOW), [], abs(q - x) <= WINDOW, None
    if name == "document":
        seg = np.repeat(np.arange(N), rng.integers(3, 12, N))[:N].astype(np.int32)
        return nc.library.document_attention(), [seg, seg], seg[:, None] == seg[None, :], "data"
    m = rng.random((N, N)) < 0.4
    m[:, 0] = True                      # no empty row (0/0 in the maths)
    return _random_mask_attention(), [m], m, None


def _reference(Q, K, V, allowed):
    Q, K, V = (a.astype(np.float64) for a in (Q, K, V))
    S = np.where(allowed, Q @ K.T / np.sqrt(D), -np.inf)
    P = np.exp(S - S.max(axis=1, keepdims=True))
    return (P / P.sum(axis=1, keepdims=True)) @ V


def _flash(d):
    return nc.group(nc.stream(nc.kernel(d), "x", "s_x"), "q", "g_q")


def _where_variables(p) -> list:
    return [s.outs[0].var for s in walk(p.body) if isinstance(s, Compute) and s.kind == "where"]


def _full_branches(src: str) -> list[list[str]]:
    """The lines of every branch a trip runs when its mask allows every pair (the printer's comment says so)."""
    lines, out = src.splitlines(), []
    for k, line in enumerate(lines):
        if "read as true" in line and line.rstrip().split("//")[0].rstrip().endswith("{"):
            indent = len(line) - len(line.lstrip())
            end = next(j for j in range(k + 1, len(lines))
                       if lines[j].startswith(" " * indent + "}") and len(lines[j]) - len(lines[j].lstrip()) == indent)
            out.append(lines[k + 1:end])
    return out


@pytest.mark.parametrize("g,s", TILINGS)
@pytest.mark.parametrize("mask", ["causal", "window", "document", "random"])
def test_fused_kernels_equal_the_maths_and_write_no_where(mask, g, s):
    rng = np.random.default_rng(len(mask) * 100 + g)
    d, extra, allowed, bm = _case(mask, rng)
    p = nc.plan(_flash(d), {"q": N, "x": N, "d": D, "g_q": g, "s_x": s})
    Q, K, V = (rng.standard_normal((N, D)).astype(np.float32) for _ in range(3))
    k = nc.codegen.c(p, poison=True)
    out = k(Q, K, V, *extra, block_mask=bm) if bm else k(Q, K, V, *extra)
    np.testing.assert_allclose(out, _reference(Q, K, V, allowed), rtol=2e-4, atol=2e-5)
    (where,) = _where_variables(p)
    assert not re.search(rf"\b{where}\b", k.source), f"{where} is still written: the where was not fused"


@pytest.mark.parametrize("mask", ["causal", "window", "document"])
def test_a_trip_the_mask_allows_whole_has_no_select(mask):
    """The scores are read as they are on a full trip: the where's select (``m != 0 ? s : −∞``) and the mask's
    ``1.0f`` are gone from the branch, and the SoftMax's maxima fold the scaled scores themselves."""
    d, _, _, _ = _case(mask, np.random.default_rng(0))
    src = nc.codegen.c(nc.plan(_flash(d), {"q": N, "x": N, "d": D, "g_q": 8, "s_x": 4})).source
    branches = _full_branches(src)
    assert branches, "no trip is printed as full"
    for branch in branches:
        text = "\n".join(branch)
        assert "!= 0.0f ?" not in text and "= 1.0f;" not in text, text
        assert re.search(r"nc_m = nc_fold_max\(nc_m, [0-9.e+-]+f \* \w+\[[^\]]+\]\);", text), text


@pytest.mark.parametrize("mask", ["causal", "window"])
def test_the_runner_still_counts_what_the_cost_functor_predicts(mask):
    """The plan the runner runs is the one as written (fusion is the C printer's): its counts are the cost's."""
    d, _, allowed, _ = _case(mask, np.random.default_rng(1))
    sizes = {"q": N, "x": N, "d": D, "g_q": 16, "s_x": 8}
    p = nc.plan(_flash(d), sizes)
    Q, K, V = (np.random.default_rng(2).standard_normal((N, D)).astype(np.float32) for _ in range(3))
    y, n = p.run(Q, K, V)
    c = nc.cost(_flash(d), sizes=sizes)
    assert n.transfers == c.H and n.flops == c.flops
    np.testing.assert_allclose(y, _reference(Q, K, V, allowed), rtol=2e-4, atol=2e-5)


def test_a_fused_chain_keeps_the_conversion_its_stored_value_made():
    """``exp(fp32(fp16(x/3)))`` as one loop: the value is rounded to half precision as the stored fp16 tile would
    round it (``nc.evaluate``: numpy's float16), not carried in float."""
    n = 37
    b = nc.Builder(nc.types("n", sizes={"n": n}))
    (x,) = b.inputs
    y = b(nc.elementwise("scale", "n", const=1 / 3, n=n), x)
    y = b(nc.cast("n", to=nc.FP16, n=n), y)
    y = b(nc.elementwise("exp", "n", n=n), b(nc.cast("n", to=nc.FP32, dtype=nc.FP16, n=n), y))
    chain = b.build(y)
    p = nc.plan(nc.group(nc.kernel(chain), "n", "g_n"), {"g_n": 8})
    k = nc.codegen.c(p, poison=True)
    X = np.random.default_rng(3).standard_normal(n).astype(np.float32) * 3
    want = nc.evaluate(chain, X)
    assert np.abs(np.exp(X / 3) - want).max() > 1e-4          # the half-precision rounding is visible
    np.testing.assert_allclose(k(X), want, rtol=1e-6)
    loops = [line for line in k.source.splitlines() if line.strip().startswith("for (int j_n")]
    assert len(loops) == 2, loops                                # the chain, then the store
