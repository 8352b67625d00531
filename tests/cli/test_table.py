"""``napkin table config|clock|overlap``: the paper's tables by default, other GPUs and head dimensions, JSON for
programs, one-line errors for bad input."""
from __future__ import annotations

import json

import pytest

from napkin_cat.cli import main


def run(capsys, *argv):
    code = main(["table", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_config_defaults_to_the_papers_configuration(capsys):
    code, out, _ = run(capsys, "config")
    assert code == 0
    assert "Table 1: configuration on h100-sxm5" in out and "excess at N = 3" in out
    assert "74.75" in out and "paper prints 8192 (errata D-01)" in out and "Table 2 with the paper's printed" in out
    assert "divisor constraints: 7 checked, all satisfied" in out
    code, out, _ = run(capsys, "config", "--json")
    data = json.loads(out)
    smem, regs = data["pools"]
    assert (round(smem["N_max"], 2), round(regs["N_max"], 2), round(regs["excess_per_thread_B"])) == (3.2, 3.42, 85)
    assert data["pools_as_printed"][0]["M_WG_B"] == 48 * 1024 and data["N"] == 3 and data["variant"] == "paper"
    assert {v["dtype"] for v in data["variables"]} == {"fp8", "fp16"} and len(data["variables"]) == 14


def test_config_on_other_gpus_and_head_dimensions(capsys):
    # H200: the same SMEM and registers per block as H100, so the same table
    _, h100, _ = run(capsys, "config", "--json")
    _, h200, _ = run(capsys, "config", "--hardware", "h200", "--json")
    assert json.loads(h200)["pools"] == json.loads(h100)["pools"]
    # d = 64 in FP16 throughout: half of K's and V's columns at twice K's bytes per value; FP16 Q, P, A, ΔO
    # leave SMEM binding at 3 warpgroups (3.48) while the registers (O' halved) would hold 4.36
    code, out, _ = run(capsys, "config", "--d", "64", "--variant", "fp16", "--json")
    data = json.loads(out)
    smem, regs = data["pools"]
    assert code == 0 and data["N"] == 3 and (round(smem["N_max"], 2), round(regs["N_max"], 2)) == (3.48, 4.36)
    kv = sorted(v["M_TB_B"] for v in data["variables"] if v["M_TB_B"])
    assert kv == [16384, 16384]                 # 64·64·2 B × 2 buffers, each
    # --n: an explicit number of warpgroups, refused when it does not fit
    code, out, _ = run(capsys, "config", "--n", "2", "--json")
    assert code == 0 and json.loads(out)["N"] == 2


def test_clock_and_overlap(capsys):
    code, out, _ = run(capsys, "clock")
    assert code == 0 and "k_TC = 6 clk/thread" in out and "295.18" in out and "1.319 PFLOP/s" in out
    code, out, _ = run(capsys, "clock", "--hardware", "h200", "--json")
    data = json.loads(out)
    assert round(data["min_rows"]) == 206          # H200's 4.8 TB/s lowers the g_q threshold from 295
    code, out, _ = run(capsys, "clock", "--hardware", "a100", "--variant", "fp16", "--json")
    data = json.loads(out)
    assert data["k_TC"] == 16 and round(data["ideal_flops_per_s"] / 1e12) == 312
    code, out, _ = run(capsys, "overlap", "--variant", "fa3-fp16", "--overhead", "special=2/3", "--json")
    rows = {r["strategy"]: r for r in json.loads(out)["strategies"]}
    assert round(rows["intra"]["tensor_utilisation"], 2) == 0.75     # §6.1: FA3 FP16 at 75%
    code, out, _ = run(capsys, "overlap")
    assert code == 0 and "overhead: special 50%, general 100%" in out and "inter (3 warpgroups, pipelined)" in out


@pytest.mark.parametrize("argv, message", [
    (["config", "--hardware", "a100"], "a100 has no tensor-core instruction for fp8 operands"),
    (["config", "--d", "64"], "tile d = 64 of x0_1 violates coalesced GMEM↔SMEM access"),
    (["config", "--n", "4"], "SMEM overflows with N = 4 warpgroups"),
    (["config", "--n", "0"], "--n 0: the number of warpgroups per block must be a positive int"),
    (["config", "--d", "0"], "--d 0: the head dimension must be a positive int"),
    (["config", "--hardware", "b300"], "no hardware model called 'b300'"),
    (["config", "--hardware", "a100", "--variant", "fp16"], "registers: 1622 B per thread exceeds the per-thread "
                                                            "limit"),
    (["overlap", "--overhead", "special=half"], "malformed --overhead 'special=half'"),
    (["overlap", "--overhead", "special=-1"], "an overhead is a fraction ≥ 0"),
    (["clock", "--hardware", "a100"], "a100: the tensor pipeline has no rate for 'fp8' values"),
    (["shape"], "invalid choice: 'shape'"),
])
def test_bad_input_is_one_line_naming_what_is_wrong(capsys, argv, message):
    code, out, err = run(capsys, *argv)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1


def test_a_users_hardware_file(tmp_path, capsys):
    from importlib import resources
    text = (resources.files("napkin_cat.hardware") / "models" / "h100-sxm5.toml").read_text()
    mine = tmp_path / "half-smem.toml"
    mine.write_text(text.replace('name = "h100-sxm5"', 'name = "half-smem"')
                    .replace('smem_per_block = "227 KiB"', 'smem_per_block = "113 KiB"'))
    code, out, _ = run(capsys, "config", "--hardware", str(mine), "--json")
    data = json.loads(out)
    assert code == 0 and data["hardware"] == "half-smem" and data["N"] == 1     # (113 − 48) / 56 = 1.16
    assert data["pools"][0]["M_max_B"] == 113 * 1024
    code, _, err = run(capsys, "config", "--hardware", str(mine), "--no-strict", "--n", "3")
    assert code == 0
    bad = tmp_path / "bad.toml"
    bad.write_text(text.replace('smem_per_block = "227 KiB"', 'smem_per_block = "-1 KiB"'))
    code, _, err = run(capsys, "config", "--hardware", str(bad))
    assert code == 2 and "smem_per_block" in err


def test_flashattention3_configurations(capsys):
    # Appendix A.5: FP8 inter-warpgroup fits its two warpgroups; FP16 intra-warpgroup holds a second iteration
    # and spills (refused, or shown with --no-strict)
    code, out, _ = run(capsys, "config", "--variant", "fa3-fp8", "--json")
    data = json.loads(out)
    assert code == 0 and data["N"] == 2 and data["hierarchy"] == "hopper-fragments"
    assert round(data["pools"][1]["excess_per_thread_B"]) == 441     # (256 − 2 · 72.875) KB over 256 threads
    code, _, err = run(capsys, "config", "--variant", "fa3-fp16")
    assert code == 2 and "registers overflows with N = 2 warpgroups" in err
    code, out, _ = run(capsys, "config", "--variant", "fa3-fp16", "--no-strict")
    assert code == 0 and "2 iterations in flight: intra" in out
    code, _, err = run(capsys, "config", "--strategy", "intra")
    assert code == 2 and "--strategy chooses a FlashAttention-3 configuration" in err


def test_cluster_table(capsys):
    # 8 H100 over NVLink 4: the all-reduce of 1 GiB by hand, 2(P−1)/P · S bytes at 450 GB/s and 2(P−1) · 3.4 µs
    code, out, _ = run(capsys, "cluster", "--devices", "8", "--json")
    data = json.loads(out)
    S, P = 2 ** 30, 8
    rows = {r["collective"]: r for r in data["collectives"]}
    assert code == 0 and data["bytes"] == S and data["cluster"]["capacity_B"] == 80 * 10 ** 9
    assert rows["all-reduce"]["time_s"] == pytest.approx(2 * (P - 1) / P * S / 450e9 + 2 * (P - 1) * 3.4e-6)
    # nccl-tests' busbw: algbw · 2(P−1)/P for an all-reduce, (P−1)/P for an all-gather: the link's 450 GB/s less
    # the latency's share
    for name in ("all-reduce", "all-gather"):
        r = rows[name]
        assert r["busbw_B_per_s"] == pytest.approx(S / r["time_s"] * r["chunks"] / P)
        assert r["busbw_B_per_s"] == pytest.approx(450e9 / (1 + r["messages"] * 3.4e-6 * 450e9 / r["sent_B"]))
    code, out, _ = run(capsys, "cluster", "--devices", "16", "--inter-node-link", "ib-ndr", "--bytes", "256 MiB")
    assert code == 0 and "charged: 50 GB/s per direction, 14 µs per message (2 nodes)" in out
    assert "link ib-ndr: 50 GB/s per direction, 14 µs per message (switch, between nodes)" in out
    code, _, err = run(capsys, "cluster", "--devices", "16")
    assert code == 2 and "devices=16 span 2 nodes of 8 GPUs joined by nvlink4: give inter_node_link=" in err
    code, _, err = run(capsys, "cluster")
    assert code == 2 and "needs --devices P" in err
    code, _, err = run(capsys, "cluster", "--devices", "2", "--link", "nvlink9")
    assert code == 2 and "no link called 'nvlink9'; shipped links are ib-hdr, ib-ndr, nvlink4" in err
    code, _, err = run(capsys, "cluster", "--devices", "2", "--bytes", "1 GHz")
    assert code == 2 and "--bytes: 'GHz' is a unit of frequency" in err


@pytest.mark.parametrize("P", [2, 3, 8])
def test_cluster_table_counts_are_the_costs_and_nccls(capsys, P):
    """The rows read the collectives' cost; they agree with NCCL's ring algorithms as nccl-tests documents them
    (doc/PERFORMANCE.md: chunks of S/P each rank sends, one message per step), and busbw = algbw · chunks / P."""
    nccl = {"all-gather": P - 1, "reduce-scatter": P - 1, "all-reduce": 2 * (P - 1), "all-to-all": P - 1,
            "ring step": 1}
    S = 3 * 2 ** 20 + 7                         # not a multiple of P: the chunks are fractions of a byte
    code, out, _ = run(capsys, "cluster", "--devices", str(P), "--bytes", f"{S} B", "--json")
    rows = {r["collective"]: r for r in json.loads(out)["collectives"]}
    assert code == 0 and set(rows) == set(nccl)
    for name, chunks in nccl.items():
        r = rows[name]
        assert (r["chunks"], r["messages"]) == (chunks, chunks)
        assert r["sent_B"] == pytest.approx(S * chunks / P, rel=1e-15)
        assert r["busbw_B_per_s"] == pytest.approx(S / r["time_s"] * chunks / P)
