"""The hardware derives rank a masked stream's tilings by the estimate, and time (count) what they pick (issue 35).

Where a stream skips masked trips, the symbolic transfers are an estimate, and the transfer search counts every
candidate tiling (one fold each: :func:`napkin_cat.cost.optimum.counted`).  Under a time model every tiling of every
structure found is timed again with its transfers counted, so the transfer searches there rank by the estimate
(``derive(..., ranking="estimate")``, the call's option).  Checks, each by a second route:

* the answer of ``derive_for_cpu_time`` ("epyc-zen3-dev") and ``derive_for_time`` ("h100-sxm5") does not change: the
  chosen structure (``str(r.variant)``), tiles (``r.optimum.exact_sizes``), predicted time and ``H`` are equal under
  ``ranking="counted"`` and ``"estimate"``, on causal, sliding window, prefix-LM, document ids (a mask from data),
  ALiBi, a tanh softcap of the scores, and the causal backward from the saved forward;
* ``ranking="estimate"`` counts no candidate (no fold in :mod:`~napkin_cat.cost.optimum`), ``"counted"`` does;
* a transfer derive ranking by the estimate reports the transfers its algorithm moves (``nc.cost`` at its tiles),
  and can pick another algorithm than the counted ranking (the lagged band of ``test_derive_masks_exact``);
* a curve shared by calls keeps the two rankings' points apart (the option is part of a point's key);
* the CPU derive keeps each group of kernels' timed rows for its call (a group two structures share is timed once:
  the flex backward's dQ kernel), and every structure's best row is still what
  :func:`~napkin_cat.hardware.cputime.predict_cpu` predicts for that structure (its own kernels' times).

Mutations caught: ``optima`` ignoring ``count`` (folds under "estimate"; the lagged band's choice equal);
the regime's ``H`` left at the estimate (``nc.cost`` disagrees); ``count`` dropped from a curve's keys (the second
call reads the first's points); ``_timed``'s kept rows keyed by the kernels' positions, not the kernels (a structure
reads another's kernel times: ``predict_cpu`` disagrees).  Not caught here: no rows kept (the library's backward
shares no kernel between its structures at these sizes; the flex backward at N = 1,024 does, 5 kernel forms of
which 4 distinct, too slow for a test: 28 CPU s at N = 64, where none is shared).
"""
from __future__ import annotations

import importlib
import os

import pytest
import sympy

import napkin_cat as nc
from napkin_cat.hardware.cputime import CPUKernelForm, derive_for_cpu_time, predict_cpu
from napkin_cat.hardware.timed import derive_for_time
from napkin_cat.search.context import KernelCache
from tests.search.test_derive_masks_exact import lagged_band, prefix_lm

optimum_module = importlib.import_module("napkin_cat.cost.sized_optimum")
cputime = importlib.import_module("napkin_cat.hardware.cputime")
slow = pytest.mark.skipif(not os.environ.get("NAPKIN_SLOW"), reason="the whole zoo on both models: NAPKIN_SLOW=1")
L = nc.library
CPU, GPU = "epyc-zen3-dev", "h100-sxm5"


def softcap_attention(cap: float):
    """Causal attention whose scores are soft-capped, ``cap · tanh(s / cap)`` (Gemma 2's score mod)."""
    b = nc.Builder(nc.types("q d") @ nc.types("x d") @ nc.types("x d"))
    Q, K, V = b.inputs
    S = b(nc.einsum("q d, x d -> q x"), Q, K)
    S = b(nc.elementwise("scale", "q x", const=1 / cap), S)
    S = b(nc.elementwise("tanh", "q x"), S)
    S = b(nc.elementwise("scale", "q x", const=cap), S)
    S = b(nc.where("q x, q x -> q x"), b(L.causal_mask()), S)
    P = b(nc.softmax("q x", over="x", beta=1 / sympy.sqrt(nc.symbol("d"))), S)
    return b.build(b(nc.einsum("q x, x d -> q d"), P, V))


ZOO = {
    "causal": L.causal_attention,
    "window": lambda: L.sliding_window_attention(9),
    "prefix_lm": lambda: L.masked_attention(prefix_lm(20)),
    "document": L.document_attention,
    "alibi": L.alibi_attention,
    "softcap": lambda: softcap_attention(20.0),
    "backward": lambda: nc.grad(L.causal_attention(lse=True), saved=True, aux=1),
}
#: the cases CI runs (a few seconds: a mask from positions on the CPU, one from data on the GPU, the backward on the
#: CPU, below); the rest with NAPKIN_SLOW
CI = {("window", CPU), ("document", GPU)}
SIZES = {"q": 64, "x": 64, "d": 8}
#: the backward's sizes (its structures take the time; the tiles are few)
SMALL = {"q": 32, "x": 32, "d": 8}


def answer(r) -> tuple:
    return str(r.variant), {str(k): int(v) for k, v in r.optimum.exact_sizes.items()}, r.prediction.time, int(r.H)


def derive_on(hardware, f, ranking, sizes, cache):
    """The hardware derive; ``cache``: one kernel cache for both rankings of a case (each point is kept under its
    ranking, :func:`test_a_shared_curve_keeps_the_rankings_apart`; the partitions are costed once)."""
    if hardware == CPU:
        return derive_for_cpu_time(f, CPU, sizes, cache=cache, ranking=ranking)
    return derive_for_time(f, GPU, sizes, cache=cache, ranking=ranking)


def same_answer(counted, estimated, sizes):
    assert answer(estimated) == answer(counted)
    at = {**sizes, **answer(counted)[1]}
    assert int(nc.cost(counted.diagram, sizes=at).H[1]) == answer(counted)[3]      # H counted, both ways


@pytest.mark.parametrize("name,hardware", [(n, h) if (n, h) in CI else pytest.param(n, h, marks=slow)
                                           for n in ZOO for h in (CPU, GPU) if (n, h) != ("backward", CPU)])
def test_ranking_by_the_estimate_keeps_the_hardware_derives_answer(name, hardware):
    f = ZOO[name]()
    sizes = SMALL if name == "backward" else SIZES
    cache = KernelCache()
    same_answer(derive_on(hardware, f, "counted", sizes, cache), derive_on(hardware, f, "estimate", sizes, cache),
                sizes)


@pytest.fixture(scope="module")
def backward():
    """The causal backward from the saved forward on the CPU model, ranked both ways, and the kernels whose form
    the estimate's call read (:class:`~napkin_cat.hardware.cputime.CPUKernelForm`, once per kernel)."""
    f = ZOO["backward"]()
    cache = KernelCache()
    counted = derive_on(CPU, f, "counted", SMALL, cache)
    made = []

    class Counting(CPUKernelForm):
        def __init__(self, box, *args, **kwargs):
            made.append(box)
            super().__init__(box, *args, **kwargs)
    cputime.CPUKernelForm = Counting
    try:
        estimated = derive_on(CPU, f, "estimate", SMALL, cache)
    finally:
        cputime.CPUKernelForm = CPUKernelForm
    return counted, estimated, made


def test_the_backward_from_the_saved_forward_keeps_its_answer(backward):
    counted, estimated, _ = backward
    same_answer(counted, estimated, SMALL)


def folds(monkeypatch) -> list:
    """The folds :mod:`napkin_cat.cost.sized_optimum` runs to count candidates (a list that grows by one per fold)."""
    seen, fold = [], optimum_module.folded

    def counting(*args, **kwargs):
        seen.append(1)
        return fold(*args, **kwargs)
    monkeypatch.setattr(optimum_module, "folded", counting)
    return seen


def test_ranking_by_the_estimate_counts_no_candidate(monkeypatch):
    seen = folds(monkeypatch)
    f = L.sliding_window_attention(9)
    nc.derive(f, memory=[1024, 4096], sizes=SIZES, cache=KernelCache(), ranking="estimate")
    assert not seen
    nc.derive(f, memory=[1024, 4096], sizes=SIZES, cache=KernelCache())
    assert seen


def test_a_derive_ranking_by_the_estimate_reports_what_its_algorithm_moves():
    """The lagged band ``q − 16 ≤ x ≤ q − 8`` at q = x = 64: counted, one query tile streaming single keys moves
    1,920 < 2,048 (the sweep over q); by the estimate (the band unclamped) that tiling looks like 2,176, so the
    estimate's ranking takes the sweep, and reports the 2,048 the sweep moves.  Under a memory the sweep does not fit
    the estimate's pick is a masked stream: its H is the count, not the estimate."""
    f = L.masked_attention(lagged_band(16, 8))
    cache = KernelCache()
    counted = nc.derive(f, memory=2048, sizes=SIZES, cache=cache)
    estimated = nc.derive(f, memory=[512, 2048], sizes=SIZES, cache=cache, ranking="estimate")
    assert counted.H == 1920 and estimated.H[2048] == 2048 == 4 * 64 * 8
    for reg in estimated.regimes:
        tiles = {k: int(v) for k, v in reg.optimum.exact_sizes.items()}
        assert reg.H == nc.cost(reg.diagram, sizes={**SIZES, **tiles}).H[1], (reg.memory, tiles)
    small = estimated.regimes[0]
    tiles = {nc.symbol(str(k)): int(v) for k, v in small.optimum.exact_sizes.items()}
    estimate = nc.cost(small.diagram).H[1].subs({**{nc.symbol(k): v for k, v in SIZES.items()}, **tiles})
    assert estimate != small.H                      # the pick under 512 is one whose estimate is not its count
    with pytest.raises(nc.errors.ArgumentError, match="ranking='fast'"):
        nc.derive(f, memory=2048, sizes=SIZES, ranking="fast")


def test_a_shared_curve_keeps_the_rankings_apart():
    """One kernel cache, the counted ranking then the estimate's: the second call's candidates are those of a cold
    search by the estimate (and they differ from the counted ones, so a point read across would show)."""
    f = L.masked_attention(lagged_band(16, 8))
    memories = [512, 2048]
    cache = KernelCache()
    counted = dict(nc.derive(f, memory=memories, sizes=SIZES, cache=cache).candidates)
    shared = dict(nc.derive(f, memory=memories, sizes=SIZES, cache=cache, ranking="estimate").candidates)
    cold = dict(nc.derive(f, memory=memories, sizes=SIZES, cache=KernelCache(), ranking="estimate").candidates)
    assert shared == cold != counted


def test_the_rows_a_call_keeps_are_each_structures_own(backward):
    """The causal backward's structures: each distinct kernel's form is read once in the call, and each structure's
    best row is ``predict_cpu``'s time of that structure at those tiles (rows kept under the kernels themselves)."""
    _, r, made = backward
    assert made and len(made) == len(set(made))     # no kernel read twice in one call
    structures = {str(reg.variant): reg.diagram for reg in r.regimes}
    assert len(structures) > 1
    best = {}
    for label, tiles, time, _ in r.timings:
        best.setdefault(label, (tiles, time))
    for label, diagram in structures.items():
        tiles, time = best[label]
        want = predict_cpu(diagram, CPU, {**SMALL, **{str(k): v for k, v in tiles.items()}}).time
        assert time == pytest.approx(want, rel=1e-12), label
