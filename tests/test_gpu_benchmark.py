"""The GPU benchmark's pipeline on the CPU (``--dry-run``: derive for the hardware model, Triton under the
interpreter, the CUDA kernel compiled, torch's paths run once), and the README's GPU table, written from the
committed results files, never stale."""
from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
GPU = ROOT / "benchmarks" / "gpu"
HAVE = all(importlib.util.find_spec(m) for m in ("torch", "triton"))


@pytest.mark.skipif(not HAVE, reason="the benchmark needs torch and triton (pip install '.[kernels]')")
def test_the_dry_run_goes_through_every_step(tmp_path):
    run = subprocess.run([sys.executable, str(GPU / "run.py"), "--dry-run", "--out", str(tmp_path)],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    (path,) = tmp_path.glob("dry-run-*.json")
    result = json.loads(path.read_text())
    assert result["dry_run"] and result["model"] == "h100-sxm5"
    kinds = [row["kind"] for row in result["rows"]]
    assert kinds == ["attention", "causal", "gqa", "matmul", "cuda"]
    for row in result["rows"]:
        assert "failed" not in row, row.get("traceback")
        (c,) = row["candidates"]
        assert c["error"] < 2e-2 and c["predicted_s"] > 0 and c["time_s"] is None
        assert c["prediction"]["assumptions"]
    attention = result["rows"][0]
    assert attention["candidates"][0]["runtime_sizes"] == ["q", "x", "h"]
    assert {b["path"] for b in attention["baselines"]} >= {"sdpa flash, 4-D", "sdpa default dispatch, 4-D"}
    cuda = result["rows"][4]["candidates"][0]
    assert cuda["smem"] == cuda["smem_static"] + cuda["smem_dynamic"] == cuda["plan_smem"]
    assert (tmp_path / path.name.replace(".json", ".png")).stat().st_size > 10_000


def test_the_readme_gpu_table_is_written_from_the_committed_results():
    sys.path.insert(0, str(GPU))
    try:
        report = importlib.import_module("report")
    finally:
        sys.path.remove(str(GPU))
    files = report.result_files()
    assert files, "no GPU results committed under benchmarks/gpu/results"
    readme = (ROOT / "README.md").read_text()
    assert report.readme_with(readme, files) == readme, (
        "the README's GPU table is stale: python benchmarks/gpu/report.py --readme README.md")
    for f in files:
        r = json.loads(f.read_text())
        assert not r["dry_run"] and r["device"] in readme and r["date"] in readme
