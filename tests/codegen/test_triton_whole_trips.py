"""The Triton kernel runs the trips a mask from positions allows whole without the mask, as the cost, the plan's
counting runner and the GPU time model charge it (``hardware/masks.py``).

The derived causal, sliding-window and prefix-LM forwards (``nc.derive``), tiled at 8 on ``q`` and ``x`` where every
kind of trip occurs (skipped, whole, partial), printed for Triton and run under its interpreter (``k.executions``:
the times each line runs counted) at a size the tiles divide (the even kernel: the whole trips a loop of their own)
and at a ragged one (the ragged kernel: a per-trip test).  Second routes:

* the outputs against numpy's masked attention written here from the mask's formula (float64);
* the times the kernel makes the mask (the executions of the line that assigns it) against the (query tile, key
  tile) pairs on which the formula allows some pair but not every one, enumerated in numpy, and against the plan's
  counting runner (the trips it runs with the mask made);
* the printed source: the loop over whole trips never assigns the mask, the loops over partial trips do.

Mutations caught: the whole trips' loop printed with the mask left in (``full=s.full_trips if full else False`` →
``False`` in ``_print_StreamLoop``, ``codegen/triton/trips.py``: the counts become every trip that runs); a high
bound printed as the truncated quotient plus one (``(a − rest) // a`` → ``(−rest) // a + 1`` in ``index_bounds``:
on the first query tile the diagonal trip runs unmasked, the causal output differs).
"""
from __future__ import annotations

import math
import os
import re

import numpy as np
import pytest

import napkin_cat as nc
from napkin_cat.plan.ir import StreamLoop, walk
from napkin_cat.plan.runner import Machine
from napkin_cat.syntax.sizes import symbols_of
from kernels_common import needs_triton

WINDOW, PREFIX, TILE, D = 10, 12, 8, 8
EVEN, RAGGED = 32, 29
MASKS = {
    "causal": (nc.library.causal_attention, lambda q, x: x <= q),
    "window": (lambda: nc.library.sliding_window_attention(WINDOW), lambda q, x: abs(q - x) <= WINDOW),
    "prefix-lm": (lambda: nc.library.prefix_lm_attention(PREFIX), lambda q, x: (x <= q) | (x < PREFIX)),
}

def reference(Q, K, V, allowed):
    S = np.where(allowed, Q @ K.T / math.sqrt(Q.shape[1]), -np.inf)
    P = np.exp(S - S.max(axis=1, keepdims=True))
    return (P / P.sum(axis=1, keepdims=True)) @ V


def gradients(Q, K, V, dO, allowed):
    """O, L = log Σ exp(βS) and dQ, dK, dV of masked attention, from the formulas (dS = P ∘ (dP − rowsum(dO ∘ O)))."""
    beta = 1 / math.sqrt(Q.shape[1])
    S = np.where(allowed, beta * (Q @ K.T), -np.inf)
    m = S.max(axis=1, keepdims=True)
    L = (m + np.log(np.exp(S - m).sum(axis=1, keepdims=True)))[:, 0]
    P = np.exp(S - L[:, None])
    O = P @ V
    dS = P * (dO @ V.T - (dO * O).sum(axis=1, keepdims=True))
    return O, L, beta * dS @ K, beta * dS.T @ Q, P.T @ dO


def blocks(allowed, tile: int) -> dict:
    """Numpy's count of the (query tile, key tile) pairs on which ``allowed`` holds for some pair, every pair."""
    n = allowed.shape[0]
    out = {"some": 0, "every": 0, "partial": 0}
    for a in range(0, n, tile):
        for b in range(0, n, tile):
            block = allowed[a:a + tile, b:b + tile]
            out["some"] += bool(block.any())
            out["every"] += bool(block.all())
            out["partial"] += bool(block.any() and not block.all())
    return out


def tiled(d, n: int):
    axes = {"q": n, "x": n, "d": D}
    return nc.plan(d, {**axes, **{str(s): TILE for s in symbols_of(d) if str(s) not in axes}})


def runner_made(d, n: int, arrays) -> int:
    """The trips the plan's counting runner runs with the mask made (a stream with full trips, not full here)."""
    made = []
    full = Machine.left_out

    def counting(self, s, frame):
        found = full(self, s, frame)
        if s.full_trips is not None and self.whole is None and found is None:
            made.append(s.index)
        return found
    Machine.left_out = counting
    try:
        tiled(d, n).run(*arrays)
    finally:
        Machine.left_out = full
    return len(made)


def mask_lines(source: str, kernel: str, condition: str) -> list:
    """The line numbers (from 1) in function ``kernel`` of ``source`` that assign ``condition``."""
    lines, inside, out = source.splitlines(), False, []
    for k, line in enumerate(lines, 1):
        if line.startswith("def "):
            inside = line.startswith(f"def {kernel}(")
        elif inside and re.match(rf"\s+{re.escape(condition)} = ", line):
            out.append(k)
    return out


@pytest.fixture(scope="module")
def runs():
    """Per mask and size: the kernel, its stream's full trips, the inputs, the output and the lines' counts."""
    rng = np.random.default_rng(0)
    out = []
    for kind, (make, _) in MASKS.items():
        d = nc.derive(make(), 2 ** 9, sizes={"q": EVEN, "x": EVEN, "d": D}).diagram
        k = nc.codegen.triton(tiled(d, EVEN))
        (full,) = [s.full_trips for s in walk(k.plan.body) if isinstance(s, StreamLoop)]
        for n in (EVEN, RAGGED):
            arrays = [rng.standard_normal((n, D)).astype(np.float32) for _ in range(3)]
            y, counts = k.executions(*arrays)
            out.append((kind, n, d, k, full, arrays, y, counts))
    return out


@needs_triton
def test_the_kernels_equal_numpys_masked_attention_with_trips_skipped_whole_and_partial(runs):
    for kind, n, _, _, _, arrays, out, _ in runs:
        i = np.arange(n)
        allowed = MASKS[kind][1](i[:, None], i[None, :])
        b = blocks(allowed, TILE)
        assert 0 < b["every"] < b["some"] < (-(-n // TILE)) ** 2, (kind, n, b)   # every kind of trip occurs
        want = reference(*(a.astype(np.float64) for a in arrays), allowed)
        np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-5, err_msg=f"{kind} at {n}")


@needs_triton
def test_the_kernel_makes_the_mask_on_the_partial_trips_alone_as_the_plan_says(runs):
    for kind, n, d, k, full, arrays, _, counts in runs:
        i = np.arange(n)
        partial = blocks(MASKS[kind][1](i[:, None], i[None, :]), TILE)["partial"]
        (launched,) = k.launched({"q": n, "x": n})
        assert launched.endswith("_ragged") == (n % TILE != 0)
        lines = mask_lines(k.source, launched, nc.codegen.printer.ident(full.mask.condition))
        assert lines, (kind, launched)
        made = sum(counts.get(line, 0) for line in lines)
        assert made == partial == runner_made(d, n, arrays), (kind, n, made, partial)


@needs_triton
def test_the_even_kernel_loops_over_whole_trips_apart_and_the_ragged_one_tests_each_trip(runs):
    for kind, n, _, k, full, _, _, _ in runs:
        if n != EVEN:
            continue
        cond = nc.codegen.printer.ident(full.mask.condition)
        even = k.source.split("def nc_kernel0(")[1].split("def nc_kernel0_ragged(")[0]
        loops = re.split(r"\n    for ", even)[1:]
        whole = [body for body in loops if "the mask is true on every pair: not made" in body.splitlines()[0]]
        partial = [body for body in loops if "some pairs allowed: the mask made" in body.splitlines()[0]]
        assert len(whole) == 1 and partial, kind
        assert not re.search(rf"\n\s+{cond} = ", whole[0]) and all(re.search(rf"\n\s+{cond} = ", b) for b in partial)
        ragged = k.source.split("def nc_kernel0_ragged(")[1].split("def nc_run(")[0]
        assert "the mask is true on every pair of this trip" in ragged and "else:   # some pairs allowed" in ragged


@needs_triton
@pytest.mark.skipif(not os.environ.get("NAPKIN_SLOW"), reason="the derived causal backward (~7 CPU s to derive): "
                    "NAPKIN_SLOW=1; in CI the forwards check the same printer on loops bounded below and above")
def test_the_derived_causal_backward_makes_the_mask_on_partial_trips_alone():
    """dQ (a stream over keys, whole trips below the diagonal) and dK with dV (a stream over queries, whole trips
    past it: a low bound) = the gradients' formulas; each stream makes its mask on numpy's partial tile pairs alone."""
    f = nc.library.causal_attention(lse=True)
    d = nc.derive(nc.grad(f, wrt=[0, 1, 2], saved=True, aux=1), 2 ** 8, depth=0,
                  sizes={"q": EVEN, "x": EVEN, "d": D}).diagram
    k = nc.codegen.triton(tiled(d, EVEN))
    conditions = [nc.codegen.printer.ident(s.full_trips.mask.condition) for s in walk(k.plan.body)
                  if isinstance(s, StreamLoop) and s.full_trips is not None]
    assert len(conditions) == 2, conditions
    rng = np.random.default_rng(2)
    for n in (EVEN, RAGGED):
        Q, K, V, dO = (rng.standard_normal((n, D)) for _ in range(4))
        i = np.arange(n)
        allowed = i[None, :] <= i[:, None]
        O, L, *want = gradients(Q, K, V, dO, allowed)
        ys, counts = k.executions(*(a.astype(np.float32) for a in (Q, K, V, O, L, dO)))
        for got, w in zip(ys, want, strict=True):
            np.testing.assert_allclose(got, w, rtol=1e-4, atol=1e-4, err_msg=f"at {n}")
        launched = k.launched({"q": n, "x": n})
        partial = blocks(allowed, TILE)["partial"]
        for cond in conditions:
            lines = [line for name in launched for line in mask_lines(k.source, name, cond)]
            assert lines and sum(counts.get(line, 0) for line in lines) == partial, (n, cond, launched)
