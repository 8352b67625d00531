"""The GPU time search drops a structure with a kernel whose least bytes on chip exceed the block's shared memory
before its kernels' forms are read (``hardware/on_chip.py``, ``timed.structure_timings``; issue 35).

Second routes:

* the same derive with the filter off (``least_on_chip`` answering 0: every structure's forms built and every
  tiling timed, the model refusing those over ``smem_per_block`` one by one): the answer (``H``, the algorithm, the
  tiles, the prediction) and every timing must be equal, on programs with and without masks (causal, and one read
  from data) and on two GPU models (h100-sxm5's 227 KiB block, a100's 163 KiB), and the filter must have dropped a
  structure there (a test where it never fires proves nothing);
* every kernel it drops, read as a :class:`~napkin_cat.hardware.predict.KernelForm` after all, is refused by the
  model at each of its legal tilings;
* the bound against the model's bytes on chip read off a plan made afresh at larger tiles: never above them.
"""
from __future__ import annotations

import hashlib
import itertools
import os

import pytest
import sympy

import napkin_cat as nc
from napkin_cat.errors import MemoryLimitError
from napkin_cat.hardware import timed
from napkin_cat.hardware.errors import HardwareError
from napkin_cat.hardware.model import load
from napkin_cat.hardware.on_chip import chip_forms, growing, least_on_chip
from napkin_cat.hardware.predict import KernelForm, environment, kernels_of
from napkin_cat.syntax.adapter import Diagram
from napkin_cat.syntax.sizes import Sizes

SLOW = pytest.mark.skipif(not os.environ.get("NAPKIN_SLOW"),
                          reason="3-7 s each: NAPKIN_SLOW=1 (the filter's answers on softmax on both models, causal on "
                                 "a100: in CI)")
ATT = {"q": 512, "x": 512, "d": 256}
ROWS = {"q": 64, "x": 2 ** 16}          # a softmax row of 256 KiB (fp32): over either block
HALF = {"q": 64, "x": 2 ** 15}          # 128 KiB: over half of h100-sxm5's 227 KiB, under the whole


def softmax():
    return nc.softmax("q x", over="x")


CASES = [
    pytest.param(softmax, ROWS, "h100-sxm5", id="softmax-h100"),
    pytest.param(softmax, ROWS, "a100", id="softmax-a100"),
    pytest.param(nc.library.attention, ATT, "a100", id="attention-a100", marks=SLOW),
    pytest.param(nc.library.causal_attention, ATT, "a100", id="causal-a100"),
    pytest.param(nc.library.attention, ATT, "h100-sxm5", id="attention-h100", marks=SLOW),
    pytest.param(nc.library.causal_attention, ATT, "h100-sxm5", id="causal-h100", marks=SLOW),
    pytest.param(nc.library.document_attention, ATT, "a100", id="document-a100", marks=SLOW),
    pytest.param(nc.library.document_attention, ATT, "h100-sxm5", id="document-h100", marks=SLOW),
]


def answer(f, sizes, gpu) -> tuple:
    """Everything a GPU derive answers: H, the algorithm, its tiles, the prediction and every timing."""
    r = nc.derive(f(), sizes=sizes, hardware=gpu)
    return (r.H, hashlib.sha1(nc.dumps(r.diagram).encode()).hexdigest(), str(r.variant), dict(r.optimum.sizes),
            r.prediction, r.timings)


def dropping(monkeypatch):
    """Record the bound of every kernel the search checks: ``[(its least tiles, the bound there)]``."""
    seen = []

    def recorded(columns, least):
        v = least_on_chip(columns, least)
        seen.append((least, v))
        return v
    monkeypatch.setattr(timed, "least_on_chip", recorded)
    return seen


@pytest.mark.parametrize("f, sizes, gpu", CASES)
def test_the_filtered_search_answers_as_the_unfiltered_one(monkeypatch, f, sizes, gpu):
    seen = dropping(monkeypatch)
    filtered = answer(f, sizes, gpu)
    assert any(v > load(gpu).smem_per_block for _, v in seen), "the filter dropped nothing here"
    monkeypatch.setattr(timed, "least_on_chip", lambda columns, least: 0)
    assert answer(f, sizes, gpu) == filtered


@pytest.mark.parametrize("gpu", ["h100-sxm5", "a100"])
def test_where_every_structure_is_dropped_the_search_says_so_as_before(monkeypatch, gpu):
    """A softmax row of 1 MiB: no structure fits either block; both routes raise the MemoryLimitError naming the
    GPU and its shared memory."""
    big = {"q": 16, "x": 2 ** 18}
    with pytest.raises(MemoryLimitError, match=f"fits the {gpu}.*shared memory") as filtered:
        nc.derive(softmax(), sizes=big, hardware=gpu)
    monkeypatch.setattr(timed, "least_on_chip", lambda columns, least: 0)
    with pytest.raises(MemoryLimitError, match=f"fits the {gpu}.*shared memory") as unfiltered:
        nc.derive(softmax(), sizes=big, hardware=gpu)
    assert "on chip per thread block" in str(filtered.value) and "on chip per thread block" in str(unfiltered.value)


def kernels_read(monkeypatch, f, sizes, gpu) -> list:
    """Every kernel the GPU derive checks before reading its structure's forms, with the sample (its least tiles) it
    was checked at: ``[(box, sample)]``, each once."""
    read = {}
    over_block = timed.over_block

    def recorded(boxes, gpu, memo, *, level, sample):
        for b in boxes:
            read.setdefault((b, Sizes(sample).restrict(b)), (b, sample))
        return over_block(boxes, gpu, memo, level=level, sample=sample)
    monkeypatch.setattr(timed, "over_block", recorded)
    nc.derive(f(), sizes=sizes, hardware=gpu)
    return list(read.values())


@pytest.mark.parametrize("f, sizes, gpu, drops", [
    (softmax, ROWS, "a100", True), (softmax, HALF, "h100-sxm5", False),
    pytest.param(nc.library.causal_attention, ATT, "a100", True, marks=SLOW)])
def test_a_kernel_is_dropped_exactly_where_the_model_refuses_every_tiling(monkeypatch, f, sizes, gpu, drops):
    """Each kernel checked, read as a KernelForm after all: it is dropped iff the model refuses its least tiles for
    shared memory (every column of these kernels grows), and a kernel dropped is refused at every legal tiling of
    it alone (its tiles' values on this GPU).  Rows of 128 KiB on h100-sxm5 hold more than half its block and are
    dropped by none."""
    g, env = load(gpu), environment(sizes)
    read = kernels_read(monkeypatch, f, sizes, gpu)
    dropped = 0
    for box, first in read:
        chip = chip_forms(box, 1, first)
        assert all(growing(c) for c in chip.columns)
        form = KernelForm(box, g, overlap="sequential", ceilings={}, level=1, sample=first)
        values = timed.tile_values(g, Diagram.id(box.dom).then(box), env)
        own = [t for t in values if t in form.symbols]
        assert all(first[t] == min(values[t]) for t in own)
        try:
            form.at(first)
            refused = False
        except HardwareError as e:
            refused = "on chip per thread block" in str(e)
        over = timed.over_block([box], g, {}, level=1, sample=first) is not None
        assert over == refused, box.name
        if over:
            dropped += 1
            for combo in itertools.product(*(values[t] for t in own)):
                with pytest.raises(HardwareError, match="on chip per thread block"):
                    form.at({**first, **dict(zip(own, combo))})
    assert (dropped > 0) == drops and dropped < len(read)


def test_the_bound_is_at_most_the_model_made_at_larger_tiles():
    """Every kernel of attention's structures at 2^10 … 2^20 values: the bound at its least tiles on the a100 is at
    most the bytes on chip the model reads off a plan made afresh at those tiles and at each tiling with one tile at
    its next legal value (KernelForm's ``on_chip``; equal at the least tiles where every column grows)."""
    env, g = environment(ATT), load("a100")
    r = nc.derive(nc.library.attention(), memory=[2 ** k for k in range(10, 21, 2)], sizes=ATT)
    checked = 0
    for d in {str(x.variant): x.diagram for x in r.regimes}.values():
        values = timed.tile_values(g, d, env)
        first = {**env, **{t: min(v) for t, v in values.items()}}
        for box in kernels_of(d):
            columns = chip_forms(box, 1, first).columns
            least = least_on_chip(columns, first)
            tiles = [t for t in values if t in Sizes(first).restrict(box).env]
            for t in [None, *tiles]:
                at = dict(first)
                if t is not None:
                    larger = [v for v in values[t] if v > at[t]]
                    if not larger:
                        continue
                    at[t] = larger[0]
                held = KernelForm(box, g, overlap="sequential", ceilings={}, level=1, sample=at).values(at)["on_chip"]
                assert least <= held
                if t is None and all(growing(c) for c in columns):
                    assert least == held
                checked += 1
    assert checked > 10


def test_only_sums_and_products_of_positive_terms_grow():
    q, g, s = nc.symbol("q"), nc.symbol("g"), nc.symbol("s")
    assert growing(q * g * 4 + 2 * s ** 2) and growing(g) and growing(8)
    assert not growing(q / g) and not growing(q - g) and not growing(-2 * g) and not growing(nc.symbol("q") ** -2)
    assert not growing(sympy.ceiling(q / g)) and not growing(sympy.Max(g, s))
    assert growing(0) and growing(0 * g)          # an empty column
    # a column that shrinks as a tile grows is left out of the bound: the bound is the others' most
    assert least_on_chip([q * 4 / g, g * 8], {q: 64, g: 2}) == 16
