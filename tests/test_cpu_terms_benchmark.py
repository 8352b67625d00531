"""``benchmarks/cpu_terms.py`` without measuring anything: its ``--quick`` run (the backward derived for a CPU model,
its profiled kernel's statements sorted into the model's terms, per kernel), and the sorting itself on a plan
whose statements are known."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

import napkin_cat as nc
from tests.scripts import load_script

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "benchmarks" / "cpu_terms.py"
pytestmark = pytest.mark.skipif(shutil.which("cc") is None and shutil.which("gcc") is None, reason="no C compiler")


@pytest.fixture(scope="module")
def bench():
    return load_script(SCRIPT, "cpu_terms_benchmark")


def test_the_quick_run_reports_each_kernels_terms_beside_the_models(bench, tmp_path):
    result = bench.main(["--quick", "--cpu", "epyc-zen3-dev", "--out", str(tmp_path)])
    assert [(e["mask"], e["N"]) for e in result["rows"]] == [("dense", 128), ("causal", 128)]
    for e in result["rows"]:
        assert e["profiled_equals_plain"] is True
        assert e["kernels"] and all(k["predicted_ms"] is not None for k in e["kernels"])   # one kernel per launch
        for k in e["kernels"]:
            assert set(k["measured_ms"]) == set(k["predicted_ms"]) == set(bench.TERMS)
            assert all(v >= 0 for v in k["measured_ms"].values())
            assert sum(k["measured_ms"]["contractions"] for k in e["kernels"]) > 0
        assert e["predicted_ms"] == pytest.approx(sum(k["predicted_total_ms"] for k in e["kernels"]))
    written = json.loads(next(tmp_path.glob("cpu_terms-quick-*.json")).read_text())
    assert written["rows"] == json.loads(json.dumps(result["rows"]))
    table = next(tmp_path.glob("cpu_terms-quick-*.md")).read_text()
    assert all(f"| {e['mask']} | 128 | {k['launch']} |" in table for e in result["rows"] for k in e["kernels"])


def test_statements_are_sorted_into_the_models_terms(bench):
    """A grouped, streamed matmul: its product a contraction, its tile copies transfers, its zero fill an element
    loop (the model's terms: io, tensor, special + general)."""
    p = nc.plan(nc.group(nc.stream(nc.library.matmul(), "b", "s_b"), "a", "g_a"),
                {"a": 64, "b": 64, "c": 32, "s_b": 16, "g_a": 32})
    k = nc.codegen.c(p, blas=False, profile=True)
    k(np.ones((64, 64), np.float32), np.ones((64, 32), np.float32))
    sorted_ = {(t.kind, bench.category(t)) for t in k.statement_times()}
    assert sorted_ == {("Load", "transfers"), ("Store", "transfers"), ("Compute", "contractions"),
                       ("Fill", "element loops")}


def test_a_tile_set_by_hand_is_run_and_predicted_at_that_tile(bench, tmp_path):
    """``--set``: the derived algorithm at a tile given by hand, its other tiles the derived ones, its prediction the
    model's at those tiles; a name that is not one of its tiles is refused naming the tiles it has."""
    sizes = {"q": 128, "x": 128, "h": 2}
    r = nc.derive(bench.functions("causal", 2, 64)[1], sizes=sizes, hardware="epyc-zen3-dev", threads=1)
    derived = {str(k): int(v) for k, v in r.optimum.exact_sizes.items() if str(k) not in sizes}
    tile = sorted(derived)[0]
    again = bench.main(["--quick", "--masks", "causal", "--cpu", "epyc-zen3-dev", "--out", str(tmp_path),
                        "--set", f"{tile}=1"])["rows"][0]
    assert again["tiles"] == {**derived, tile: 1} and again["set"] == {tile: 1}
    plan = nc.plan(r.diagram, {**sizes, **again["tiles"]})
    assert again["predicted_ms"] == pytest.approx(nc.hardware.predict_cpu(plan, "epyc-zen3-dev").time * 1e3)
    with pytest.raises(SystemExit, match=r"--set g_nowhere: not a tile .* its tiles are \["):
        bench.main(["--quick", "--masks", "causal", "--cpu", "epyc-zen3-dev", "--out", str(tmp_path),
                    "--set", "g_nowhere=4"])
