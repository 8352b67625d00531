"""The Triton kernel runs the trips a mask from positions allows whole without the mask, as the cost, the plan's
counting runner and the GPU time model charge it (``hardware/masks.py``).

The derived causal, sliding-window and prefix-LM forwards (``nc.derive``), tiled where every kind of trip occurs
(skipped, whole, partial): at 8 on ``q`` and ``x``, and at 4 on ``q`` and 8 on ``x``; printed for Triton and run
under its interpreter (``k.executions``: the times each line runs counted) at sizes the tiles divide (the even
kernel) and at primes (the ragged kernel: the last tile of ``q``, of ``x``, or of both ragged).  Both kernels run the
whole trips as a loop of their own between loops over partial trips (``codegen/ranges.py``: the ragged last
tile's extent ``Min(T, n − T·i)`` in the condition split, so the ragged last trip runs whole where it is whole).
Second routes:

* the outputs against numpy's masked attention written here from the mask's formula (float64);
* the times the kernel makes the mask (the executions of the line that assigns it) against the (query tile, key
  tile) pairs on which the formula allows some pair but not every one, enumerated in numpy, and against the plan's
  counting runner (the trips it runs with the mask made);
* the printed source: the loop over whole trips never assigns the mask, the loops over partial trips do, and no
  trip tests the condition (no fallback) in either kernel, also where the whole trips are two ranges (attention sinks
  beside a window: a gap between the sinks and the window, a loop per range).

Mutations caught: the whole trips' loop printed with the mask left in (``full_of``'s ``"whole"`` → False,
``codegen/trips.py``: the counts become every trip that runs); a high bound printed as the truncated quotient plus
one (``(a − rest) // a`` → ``(−rest) // a + 1`` in ``ranges._Reader.relation``: on the first query tile the diagonal
trip runs unmasked, the causal output differs); the ragged last tile's whole trip dropped from the whole loop
(``tl.where(c, stop, H)`` → ``H`` in ``ranges._Reader.union``: the ragged kernel makes the mask on a trip numpy
counts whole); the clamp of a piece's end to the loop's stop left out (``trips._Chain.pieces``: a trip past the keys
runs); the gaps between whole pieces not cut by the reached ranges (``trip_loops``: the sinks' gap trips run with the
mask made, the counts exceed numpy's partial tiles).
"""
from __future__ import annotations

import math
import re

import numpy as np
import pytest

import napkin_cat as nc
from napkin_cat.plan.ir import StreamLoop, walk
from napkin_cat.plan.runner import Machine
from napkin_cat.syntax.adapter import Ty
from napkin_cat.syntax.builder import Builder
from napkin_cat.syntax.construct import elementwise
from napkin_cat.syntax.dtype import INT32
from napkin_cat.syntax.indices import compare, logical, position
from napkin_cat.syntax.sizes import symbols_of
from kernels_common import needs_triton

WINDOW, PREFIX, TILE, D = 10, 12, 8, 8
EVEN, RAGGED = 32, 29
#: (tile of q, tile of x) and the (q, x) each kernel runs at: the tiles divide the first two (the second: more
#: query tiles than key tiles, so a bound from ``i_q`` passes the keys' last trip), not the others
TILINGS = {(8, 8): ((32, 32), (40, 32), (29, 29), (37, 31), (23, 37)),
           (4, 8): ((32, 32), (40, 32), (29, 29), (32, 37), (23, 32))}
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


def blocks(allowed, tile: int, tile_x: int | None = None) -> dict:
    """Numpy's count of the (query tile, key tile) pairs on which ``allowed`` holds for some pair, every pair."""
    tile_x = tile_x or tile
    out = {"some": 0, "every": 0, "partial": 0}
    for a in range(0, allowed.shape[0], tile):
        for b in range(0, allowed.shape[1], tile_x):
            block = allowed[a:a + tile, b:b + tile_x]
            out["some"] += bool(block.any())
            out["every"] += bool(block.all())
            out["partial"] += bool(block.any() and not block.all())
    return out


def tiled(d, n: int, tiles=(TILE, TILE), n_x: int | None = None):
    """``d`` planned at ``q = n``, ``x = n_x`` (or ``n``), its tiles of ``q`` and ``x`` (``g_q``, ``s_x``) at
    ``tiles``, any other at :data:`TILE`."""
    axes = {"q": n, "x": n_x or n, "d": D}
    by = {"g_q": tiles[0], "s_x": tiles[1]}
    return nc.plan(d, {**axes, **{str(s): by.get(str(s), TILE) for s in symbols_of(d) if str(s) not in axes}})


def runner_made(d, n: int, arrays, tiles=(TILE, TILE), n_x: int | None = None) -> int:
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
        tiled(d, n, tiles, n_x).run(*arrays)
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
    """Per mask, tiling and sizes: the kernel, its stream's full trips, the inputs, the output and the lines'
    counts."""
    rng = np.random.default_rng(0)
    out = []
    for kind, (make, _) in MASKS.items():
        d = nc.derive(make(), 2 ** 9, sizes={"q": EVEN, "x": EVEN, "d": D}).diagram
        for tiles, sizes in TILINGS.items():
            k = nc.codegen.triton(tiled(d, EVEN, tiles))
            (full,) = [s.full_trips for s in walk(k.plan.body) if isinstance(s, StreamLoop)]
            for nq, nx in sizes:
                arrays = [rng.standard_normal((n, D)).astype(np.float32) for n in (nq, nx, nx)]
                y, counts = k.executions(*arrays)
                out.append((kind, tiles, (nq, nx), d, k, full, arrays, y, counts))
    return out


def allowed_at(kind, nq: int, nx: int):
    return MASKS[kind][1](np.arange(nq)[:, None], np.arange(nx)[None, :])


@needs_triton
def test_the_kernels_equal_numpys_masked_attention_with_trips_skipped_whole_and_partial(runs):
    for kind, tiles, (nq, nx), _, _, _, arrays, out, _ in runs:
        allowed = allowed_at(kind, nq, nx)
        b = blocks(allowed, *tiles)
        total = -(-nq // tiles[0]) * -(-nx // tiles[1])
        assert 0 < b["every"] < b["some"] < total, (kind, tiles, nq, nx, b)   # every kind of trip occurs
        want = reference(*(a.astype(np.float64) for a in arrays), allowed)
        np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-5, err_msg=f"{kind} at {tiles}, {nq}×{nx}")


@needs_triton
def test_the_kernel_makes_the_mask_on_the_partial_trips_alone_as_the_plan_says(runs):
    ragged_whole = 0
    for kind, tiles, (nq, nx), d, k, full, arrays, _, counts in runs:
        allowed = allowed_at(kind, nq, nx)
        partial = blocks(allowed, *tiles)["partial"]
        (launched,) = k.launched({"q": nq, "x": nx})
        assert launched.endswith("_ragged") == (nq % tiles[0] != 0 or nx % tiles[1] != 0)
        lines = mask_lines(k.source, launched, nc.codegen.printer.ident(full.mask.condition))
        assert lines, (kind, launched)
        made = sum(counts.get(line, 0) for line in lines)
        assert made == partial == runner_made(d, nq, arrays, tiles, nx), (kind, tiles, nq, nx, made, partial)
        last = allowed[:, (nx - 1) // tiles[1] * tiles[1]:]          # the ragged last key tile, whole somewhere
        ragged_whole += nx % tiles[1] != 0 and any(last[a:a + tiles[0]].all() for a in range(0, nq, tiles[0]))
    assert ragged_whole >= 3, ragged_whole       # the ragged last trip runs whole (unmasked) in some kernels


def kernel_text(source: str, name: str) -> str:
    """The body of function ``name`` in ``source``."""
    return re.split(r"\n(?:@triton\.jit\n)?def ", source.split(f"def {name}(")[1])[0]


@needs_triton
def test_both_kernels_loop_over_whole_trips_apart_and_no_trip_tests_the_mask(runs):
    seen = set()
    for kind, tiles, _, _, k, full, _, _, _ in runs:
        if (kind, tiles) in seen:
            continue
        seen.add((kind, tiles))
        cond = nc.codegen.printer.ident(full.mask.condition)
        for name in ("nc_kernel0", "nc_kernel0_ragged"):
            text = kernel_text(k.source, name)
            loops = re.split(r"\n    for ", text)[1:]
            whole = [body for body in loops if "the mask is true on every pair: not made" in body.splitlines()[0]]
            partial = [body for body in loops if "some pairs allowed: the mask made" in body.splitlines()[0]]
            assert len(whole) == 1 and partial and len(loops) == 1 + len(partial), (kind, tiles, name)
            assert not re.search(rf"\n\s+{cond} = ", whole[0]), (kind, name)
            assert all(re.search(rf"\n\s+{cond} = ", b) for b in partial), (kind, name)
            assert not re.search(r"\n\s+if \(", text) and "each trip tests it" not in text, (kind, tiles, name)


def sink_window_mask(sinks: int, window: int):
    """Attention sinks beside a sliding window (StreamingLLM): ``x < sinks ∨ |q − x| ≤ window``."""
    b = Builder(Ty())
    qi, xi = b(position("q")), b(position("x"))
    lo = b(elementwise("shift", "q", const=-window, dtype=INT32), qi)
    hi = b(elementwise("shift", "q", const=window, dtype=INT32), qi)
    bound = b(elementwise("shift", "q", const=sinks, dtype=INT32), b(elementwise("scale", "q", const=0, dtype=INT32),
                                                                      qi))
    inside = b(logical("and", "q x, q x -> q x"), b(compare("le", "q, x -> q x"), lo, xi),
               b(compare("le", "x, q -> q x"), xi, hi))
    return b.build(b(logical("or", "q x, q x -> q x"), b(compare("lt", "x, q -> q x"), xi, bound), inside))


@needs_triton
def test_where_the_whole_trips_have_a_gap_each_range_is_a_loop_and_no_trip_tests_the_mask():
    """Sinks [0, 4) and a window of 6 at tiles of 4: the trips reached and the whole ones are two ranges each with a
    gap between (``codegen/ranges.py``: a union of ranges); the kernels loop over each range (``codegen/trips.py``),
    the sinks' whole trips and the window's apart from the partial ones, no trip testing a condition, correct and
    counted alike."""
    d = nc.group(nc.stream(nc.kernel(nc.library.masked_attention(sink_window_mask(4, 6))), "x", "s_x"), "q", "g_q")
    k = nc.codegen.triton(tiled(d, EVEN, (4, 4)))
    (full,) = [s.full_trips for s in walk(k.plan.body) if isinstance(s, StreamLoop)]
    cond = nc.codegen.printer.ident(full.mask.condition)
    for name in ("nc_kernel0", "nc_kernel0_ragged"):
        text = kernel_text(k.source, name)
        assert "each trip tests it" not in text and not re.search(r"\n\s+if \(", text), name
        loops = re.split(r"\n    for ", text)[1:]
        whole = [body for body in loops if "the mask is true on every pair: not made" in body.splitlines()[0]]
        assert len(whole) == 2 and len(loops) == 6, (name, len(whole), len(loops))     # a whole loop per range
        assert not any(re.search(rf"\n\s+{cond} = ", b) for b in whole), name
        assert all(re.search(rf"\n\s+{cond} = ", b) for b in loops if b not in whole), name
    rng = np.random.default_rng(3)
    for n in (EVEN, RAGGED):
        arrays = [rng.standard_normal((n, D)).astype(np.float32) for _ in range(3)]
        y, counts = k.executions(*arrays)
        i = np.arange(n)
        allowed = (i[None, :] < 4) | (np.abs(i[:, None] - i[None, :]) <= 6)
        np.testing.assert_allclose(y, reference(*(a.astype(np.float64) for a in arrays), allowed), rtol=1e-4,
                                   atol=1e-5)
        (launched,) = k.launched({"q": n, "x": n})
        lines = mask_lines(k.source, launched, cond)
        b = blocks(allowed, 4)
        assert 0 < b["partial"] and b["every"] > 0
        assert sum(counts.get(line, 0) for line in lines) == b["partial"] == runner_made(d, n, arrays, (4, 4))


@needs_triton
def test_the_ragged_kernels_compile_for_the_gpu():
    """The interpreter is lenient with scalars: ``triton.compile`` (sm_90, no GPU needed) takes the ragged
    kernels' bounds (``tl.where`` of a scalar test, ``tl.minimum``, truncating ``//``) as loop bounds."""
    for kind, (make, _) in MASKS.items():
        d = nc.derive(make(), 2 ** 9, sizes={"q": EVEN, "x": EVEN, "d": D}).diagram
        k = nc.codegen.triton(tiled(d, EVEN, (16, 16)))
        assert "tl.where((" in kernel_text(k.source, "nc_kernel0_ragged").split("for i_x")[0], kind
        assert set(k.compile(arch=90, kernels=["nc_kernel0_ragged"])["kernels"]) == {"nc_kernel0_ragged"}


@needs_triton
@pytest.mark.parametrize("kind", sorted(MASKS))
def test_the_derived_backwards_make_the_mask_on_partial_trips_alone(kind):
    """dQ (a stream over keys) and dK with dV (a stream over queries: the whole trips bounded below, past the
    diagonal) = the gradients' formulas, at sizes the tiles divide and at primes; each stream makes its mask on
    numpy's partial tile pairs alone, in both kernels by whole-trip loops (no trip tests the mask)."""
    f = nc.library.causal_attention(lse=True) if kind == "causal" else \
        nc.library.sliding_window_attention(WINDOW, lse=True) if kind == "window" else \
        nc.library.prefix_lm_attention(PREFIX, lse=True)
    d = nc.derive(nc.grad(f, wrt=[0, 1, 2], saved=True, aux=1), 2 ** 8, depth=0,
                  sizes={"q": EVEN, "x": EVEN, "d": D}).diagram
    k = nc.codegen.triton(tiled(d, EVEN))
    conditions = [nc.codegen.printer.ident(s.full_trips.mask.condition) for s in walk(k.plan.body)
                  if isinstance(s, StreamLoop) and s.full_trips is not None]
    assert len(conditions) == 2, conditions
    assert not re.search(r"\n\s+if \(", k.source) and "each trip tests it" not in k.source
    rng = np.random.default_rng(2)
    for nq, nx in ((EVEN, EVEN), (RAGGED, RAGGED), (23, 37)):
        Q, dO = (rng.standard_normal((nq, D)) for _ in range(2))
        K, V = (rng.standard_normal((nx, D)) for _ in range(2))
        allowed = allowed_at(kind, nq, nx)
        O, L, *want = gradients(Q, K, V, dO, allowed)
        ys, counts = k.executions(*(a.astype(np.float32) for a in (Q, K, V, O, L, dO)))
        for got, w in zip(ys, want, strict=True):
            np.testing.assert_allclose(got, w, rtol=1e-4, atol=1e-4, err_msg=f"{kind} at {nq}×{nx}")
        launched = k.launched({"q": nq, "x": nx})
        partial = blocks(allowed, TILE)["partial"]
        for cond in conditions:
            lines = [line for name in launched for line in mask_lines(k.source, name, cond)]
            assert lines and sum(counts.get(line, 0) for line in lines) == partial, (kind, nq, nx, cond, launched)
