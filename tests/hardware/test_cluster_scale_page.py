"""docs/distributed.md, section 8: the table of predicted step times at scale is the one benchmarks/cluster_scale.py
makes from the results file the page names (no derive here: the results are read), and those results are
consistent with the model's own bounds: an attention step no faster than the GPUs' bf16 tensor peak allows for its
useful FLOPs, every chosen form within a device's memory, every form refused for memory over it."""
from __future__ import annotations

import re
from pathlib import Path

import napkin_cat as nc
from tests.scripts import load_script

ROOT = Path(__file__).resolve().parents[2]
script = load_script("benchmarks/cluster_scale.py")


def results() -> dict:
    names = re.findall(r"benchmarks/results/(cluster_scale-[0-9a-f]+(?:-[\w.+-]+)?\.json)", script.on_page())
    assert names
    return script.merged([ROOT / "benchmarks" / "results" / name for name in names])


def test_the_page_holds_the_table_of_its_results_file():
    assert script.on_page() == script.table(results())


def test_the_results_respect_the_peak_and_the_memory():
    r = results()
    capacity = nc.hardware.load("h100-sxm5").gmem
    peak = nc.hardware.load("h100-sxm5").peak("tensor", "bf16")
    rows = [row for row in r["rows"] if row.get("chosen")]
    assert rows
    for row in rows:
        assert row["memory_B"] <= capacity
        if row["program"] == "attention":
            useful = 4 * script.HEADS * script.D * row["n"] ** 2 / 2          # the causal half's two contractions
            assert row["time_s"] >= useful / row["devices"] / peak
            assert abs(row["attention_tflops_per_gpu"] - useful / row["devices"] / row["time_s"] / 1e12) < 1e-6
        if row["program"] == "block":                                        # its contractions at the bf16 peak
            assert row["time_s"] >= script.block_flops(row["n"]) / row["devices"] / peak
        for c in row["candidates"]:
            if c["refused"] is not None:
                assert c["refused"].startswith("memory") and c["memory_B"] > capacity
            else:
                assert c["time_s"] >= row["time_s"]                          # the chosen one is the fastest
