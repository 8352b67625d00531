"""``benchmarks/torch_ops.py`` without timing anything: its command line, its masks against their definitions, and
the ratio it reports (ours over the fastest torch path) on a row made here."""
from __future__ import annotations

from pathlib import Path

import pytest
from tests.scripts import load_script

torch = pytest.importorskip("torch", reason="the benchmark needs torch (pip install '.[kernels]')")

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "benchmarks" / "torch_ops.py"


@pytest.fixture(scope="module")
def bench():
    return load_script(SCRIPT, "torch_ops_benchmark")


def test_help_names_every_flag(bench, capsys):
    with pytest.raises(SystemExit) as done:     # in this process: a second one would import torch again (~15 s)
        bench.main(["--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    for flag in ("--sizes", "--masks", "--threads", "--repeats", "--quick", "--derive-timeout"):
        assert flag in out


def test_masks_are_what_they_say(bench):
    n, w = 40, 3
    causal, _ = bench.mask_mod("causal", n, w, 0)
    window, _ = bench.mask_mod("window", n, w, 0)
    assert torch.equal(bench.dense_mask(causal, n), torch.ones(n, n, dtype=torch.bool).tril())
    assert torch.equal(bench.dense_mask(window, n), torch.tensor([[abs(a - b) <= w for b in range(n)]
                                                                  for a in range(n)]))
    assert bench.mask_mod("dense", n, w, 0)[0] is None
    assert set(bench.sdpa_variants("causal", causal, n)) == {"sdpa is_causal", "sdpa attn_mask"}


def test_documents_cover_the_sequence_in_seeded_runs(bench):
    n = 1024
    ids = bench.documents(n, seed=3)
    lengths = torch.bincount(ids).tolist()
    assert sum(lengths) == n and len(lengths) > 1
    assert bool((ids[1:] >= ids[:-1]).all())                         # contiguous documents
    assert all(64 <= L <= n // 4 for L in lengths[:-1]) and 1 <= lengths[-1] <= n // 4
    assert torch.equal(ids, bench.documents(n, seed=3)) and not torch.equal(ids, bench.documents(n, seed=4))
    doc, _ = bench.mask_mod("document", n, 0, 3)
    allowed = bench.dense_mask(doc, n)
    assert torch.equal(allowed, ids[:, None] == ids[None, :])


def test_ratio_is_ours_over_the_fastest_torch_path(bench):
    def timed(ms):
        return {"median_ms": ms, "min_ms": ms, "max_ms": ms}

    row = {"paths": {
        "sdpa is_causal": {"torch_path": True, "forward": timed(10.0), "forward_backward": timed(40.0)},
        "sdpa attn_mask": {"torch_path": True, "forward": timed(12.0), "forward_backward": timed(30.0)},
        "flex_attention compiled": {"torch_path": True, "forward": timed(8.0)},
        "ours": {"torch_path": False, "forward": timed(16.0), "forward_backward": timed(50.0)},
    }}
    r = bench.ratios(row)
    assert r["forward"]["fastest_torch"] == "flex_attention compiled" and r["forward"]["ours"] == pytest.approx(2.0)
    assert r["forward_backward"]["fastest_torch"] == "sdpa attn_mask"
    assert r["forward_backward"]["ours"] == pytest.approx(50 / 30)
    assert r["forward_backward"][f"ours within {bench.TARGET}x"] is (50 / 30 <= 1.5)


def test_spread_reports_median_and_quartiles(bench):
    s = bench.spread([0.004, 0.001, 0.003, 0.002, 0.005])
    assert (s["median_ms"], s["min_ms"], s["max_ms"], s["q1_ms"], s["q3_ms"]) == pytest.approx((3, 1, 5, 2, 4))
