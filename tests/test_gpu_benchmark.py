"""The GPU benchmark's pipeline on the CPU (``--dry-run``: derive for the hardware model, Triton under the
interpreter, the CUDA kernel compiled, torch's paths run once and checked), its correctness gate and spreads, the
committed results (relabelled from their own data, nothing re-measured), and the README's GPU section, tables and
words, written from them, never stale, marked stale where git history shows a later change."""
from __future__ import annotations

import copy
import importlib.util
import json
import os
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest
from tests.scripts import import_beside

ROOT = Path(__file__).resolve().parent.parent
GPU = ROOT / "benchmarks" / "gpu"
HAVE = all(importlib.util.find_spec(m) for m in ("torch", "triton"))
needs_kernels = pytest.mark.skipif(not HAVE, reason="the benchmark needs torch and triton (pip install '.[kernels]')")


def _git(*args) -> str | None:
    try:
        run = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, timeout=60)
    except OSError:
        return None
    return run.stdout.strip() if run.returncode == 0 else None


HISTORY = _git("rev-parse", "--is-shallow-repository") == "false"
needs_history = pytest.mark.skipif(not HISTORY, reason="needs this repository's full git history (not a shallow "
                                                       "clone or an unpacked archive)")


def _module(name):
    return import_beside("benchmarks/gpu", name)


@pytest.fixture(scope="module")
def report():
    return _module("report")


def committed():
    return sorted(GPU.glob("results/*.json"))


# ------------------------------------------------------------------------------------------------ the dry run
#: the forward rows (this file's first test), the training step's rows in CI (the second), and the mask zoo
#: (NAPKIN_SLOW=1: each row derives a forward and a backward, ~25 CPU s a row)
FORWARD = ("attention", "causal", "gqa", "decode", "matmul", "cuda")
TRAINING = ("backward", "flce")
MORE_MASKS = ("window", "prefix-lm", "document", "alibi", "softcap")
SLOW = bool(os.environ.get("NAPKIN_SLOW"))


@needs_kernels
def test_the_dry_run_goes_through_every_step(tmp_path):
    """``python benchmarks/gpu/run.py --dry-run`` is ``run.main(["--dry-run", ...])``, called here in this process
    (a subprocess imported napkin_cat, torch and Triton again: 4.2 s of its 38 s of CPU; its processes, Triton's
    interpreter and compiler and the CUDA compiler, are the same ones either way)."""
    status = _module("run").main(["--dry-run", "--out", str(tmp_path), "--only", ",".join(FORWARD)])
    (path,) = tmp_path.glob("dry-run-*.json")
    result = json.loads(path.read_text())
    for row in result["rows"]:
        assert "failed" not in row, row.get("traceback")
    assert status == 0
    assert result["schema"] == 2 and result["dry_run"] and result["model"] == "h100-sxm5"
    prov = result["provenance"]
    if HISTORY:
        assert prov["commit"] == _git("rev-parse", "HEAD") and isinstance(prov["dirty"], bool)
    assert prov["driver"].startswith("not recorded") and prov["clocks"].startswith("not recorded")
    assert result["tolerance"] == {"bf16": 1e-2, "fp32": 1e-4} and "median" in result["timing"]
    assert {"torch", "triton", "python"} <= set(result["versions"])
    kinds = [row["kind"] for row in result["rows"]]
    assert kinds == list(FORWARD)
    for row in result["rows"]:
        assert "failed" not in row, row.get("traceback")
        (c,) = row["candidates"]
        assert c["pick"] == "derived" and c["variant"] == row["variant"]
        assert c["error"] < 2e-2 and c["predicted_s"] > 0 and c["time_s"] is None and "gate" not in c
        if row["kind"] != "cuda":             # compiled for sm_90: the kernels a run at the row's sizes launches
            assert c["triton_compiled"] and c["triton_smem"] > 0, c
        assert c["prediction"]["assumptions"]
        for b in row.get("baselines", ()):
            assert "refused" in b or (b["error"] < 2e-2 and b["time_s"] is None), b
    attention = result["rows"][0]
    assert attention["candidates"][0]["runtime_sizes"] == ["q", "x", "h"]
    assert {b["path"] for b in attention["baselines"]} >= {"sdpa flash, 4-D", "sdpa default dispatch, 4-D"}
    cuda = result["rows"][5]["candidates"][0]
    assert cuda["smem"] == cuda["smem_static"] + cuda["smem_dynamic"] == cuda["plan_smem"]
    assert (tmp_path / path.name.replace(".json", ".png")).stat().st_size > 10_000
    # the derived pick is what nc.derive(hardware=) returns, asked here again
    import napkin_cat as nc
    decode = result["rows"][3]             # one query row: a split (FlashDecoding) derived for the model
    (c,) = decode["candidates"]
    assert decode["sizes"]["q"] == 1 and "×" in decode["variant"] and c["tiles"]["p_x"] > 1
    kernel = c["prediction"]["kernels"][0]
    assert kernel["combine"]["blocks"] * c["tiles"]["p_x"] == kernel["blocks"]
    assert set(kernel["products"].values()) <= {"CUDA cores", "tensor cores, padded ×64"}
    assert decode["flops"] == 4.0 * decode["N"] * decode["d"]       # 2·x·d for QKᵀ and as many for PV, per head
    mm = result["rows"][4]
    r = nc.derive(nc.einsum("a b, b c -> a c", dtype="bf16", out_dtype="bf16"), sizes=mm["sizes"],
                  hardware="h100-sxm5")
    assert mm["candidates"][0]["tiles"] == {str(k): int(v) for k, v in r.optimum.exact_sizes.items()}


def _training(tmp_path, kinds, more=()) -> list[dict]:
    """The dry run of ``kinds`` (forward+backward rows): every row derived, printed, run under the interpreter and
    compiled for sm_90, forward and backward; its gate, errors and predictions checked; the rows returned."""
    status = _module("run").main(["--dry-run", "--out", str(tmp_path), "--only", ",".join(kinds), *more])
    (path,) = tmp_path.glob("dry-run-*.json")
    rows = json.loads(path.read_text())["rows"]
    for row in rows:
        assert "failed" not in row, row.get("traceback")
    assert status == 0 and [row["kind"] for row in rows] == list(kinds)
    for row in rows:
        (c,) = row["candidates"]
        assert row["pass"] == "forward+backward" and c["pick"] == "derived" and c["time_s"] is None
        want = ("loss", "dH", "dW") if row["kind"] == "flce" else ("O", "dQ", "dK", "dV")
        assert sorted(c["errors"]) == sorted(want)           # each output against float64 torch.autograd
        assert c["error"] == max(c["errors"].values()) < 1e-2 and "gate" not in c, c["errors"]
        for p in ("forward", "backward"):
            assert c[p]["predicted_s"] > 0 and c[p]["prediction"]["assumptions"] and c[p]["kernels"] >= 1
            assert c[p]["triton_compiled"] and c[p]["triton_smem"] > 0, c[p]
        assert c["predicted_s"] == c["forward"]["predicted_s"] + c["backward"]["predicted_s"]
        for b in row["baselines"]:
            assert "refused" in b or (b["error"] < 1e-2 and b["time_s"] is None), b
    return rows


@needs_kernels
def test_the_training_steps_dry_run_derives_runs_and_gates_forward_and_backward(tmp_path):
    """Dense attention's forward+backward and the fused linear cross-entropy.  The reference's gradients are
    torch.autograd's in float64; that they are right is checked apart: torch's own SDPA backward and its fp32
    logits' cross-entropy (their math, not the reference's) land within the tolerance of them."""
    pre = _module("prederived")       # the loss's two derivations searched before, read by the run (below)
    folder = tmp_path / "derived"
    assert _module("run").main(["--dry-run", "--prederive", "--derived", str(folder), "--models", "h100-sxm5",
                                "--only", "flce"]) == 0
    rows = {row["kind"]: row for row in _training(tmp_path, TRAINING, ["--derived", str(folder), "--relaunch"])}
    back = rows["backward"]["candidates"][0]["backward"]          # FlashAttention-2's dQ, and dK with dV
    assert back["kernels"] == 2 and back["variant"].count("stream") == 2, back["variant"]
    assert len(back["triton_compiled"]) == 2
    again = back["relaunched"]         # --relaunch: the launch shapes the model times, beside the printed ones
    assert sorted(again["launch_shapes"]) == sorted(again["printed_shapes"]) == ["nc_kernel0", "nc_kernel1"]
    assert again.get("same") or again["changed_lines"] >= 1
    dense = {b["path"]: b for b in rows["backward"]["baselines"]}
    sdpa = dense["sdpa default dispatch, forward+backward, 4-D"]
    assert sorted(sdpa["errors"]) == ["O", "dK", "dQ", "dV"] and sdpa["error"] < 1e-2
    flce = rows["flce"]
    assert flce["flops"] == 6.0 * flce["n"] * flce["e"] * flce["v"]
    (torch_path,) = [b for b in flce["baselines"] if b["path"].startswith("torch")]
    assert sorted(torch_path["errors"]) == ["dH", "dW", "mean loss"] and torch_path["error"] < 1e-2
    # derivations searched before (run.py --prederive, under the tree's source hash) are read instead of searched, and
    # the row says from where; the store's check is the second route (the algorithm read back moves the stored H
    # at its tiles by the cost functor); a row the folder holds nothing for searches and says so
    index = json.loads((folder / "index.json").read_text())
    assert sorted(v["pass"] for v in index.values()) == ["backward", "forward"]
    assert all(v["code"] == pre.source_hash() and v["seconds"] > 0 for v in index.values())
    for p in ("forward", "backward"):
        where = flce["derived"][p]
        assert where["from"] == "prederived" and index[where["file"][:-len(".json")]]["pass"] == p
        assert rows["backward"]["derived"][p]["from"] == "searched in this run"
    (_, f, sizes, rho), _ = _module("run").functions(flce)     # a folder of another tree's code is not read
    r, where = pre.Prederived(folder, code="sha256:another tree").derive(f, sizes, "h100-sxm5", rho)
    assert where["from"] == "searched in this run" and "another tree" in where["prederived"]
    assert {str(k): int(v) for k, v in r.optimum.exact_sizes.items()} == flce["candidates"][0]["forward"]["tiles"]


@needs_kernels
@pytest.mark.skipif(not SLOW, reason="NAPKIN_SLOW=1: five masks, each a forward and a backward derived (~25 CPU s a "
                                     "row); in CI each mask's diagram is checked against its mods (the next test)")
def test_the_mask_zoo_in_the_dry_run(tmp_path):
    """Every mask's forward+backward, and FlexAttention's forward (its block mask from the same mods) within the
    tolerance of the reference.  The document's kernels read block tables from the data: their density is the
    fraction of (query block, key block) pairs that share a document, counted here from the ids at the tiles."""
    zoo = _module("zoo")
    rows = {row["kind"]: row for row in _training(tmp_path, MORE_MASKS)}
    for row in rows.values():
        (flex,) = [b for b in row["baselines"] if b["path"].startswith("flex_attention")]
        assert list(flex["errors"]) == ["O"] and flex["error"] < 1e-2, flex
    doc = rows["document"]
    assert doc["allowed"] == pytest.approx((3 / 8) ** 2 + (1 / 8) ** 2 + 2 * (1 / 4) ** 2)   # the four documents
    fwd = doc["candidates"][0]["forward"]
    ids = zoo.documents(doc).numpy()
    gq, sx = fwd["tiles"]["g_q"], fwd["tiles"]["s_x"]
    pairs = [bool(np.intersect1d(ids[i:i + gq], ids[j:j + sx]).size) for i in range(0, len(ids), gq)
             for j in range(0, len(ids), sx)]
    assert fwd["block_tables"] >= 1 and fwd["table_density"] == pytest.approx(np.mean(pairs))


@needs_kernels
@pytest.mark.parametrize("kind", ["backward", "window", "prefix-lm", "document", "alibi", "softcap"])
def test_each_masks_diagram_is_its_flex_mods(kind):
    """The zoo's diagram (nc.evaluate, float64) computes what its FlexAttention mods do (torch on index grids):
    O, L, and the saved backward's dQ, dK, dV against torch.autograd, at a size where every mask cuts."""
    import torch
    import napkin_cat as nc
    zoo = _module("zoo")
    cfg = {"N": 24, "d": 4}
    g = torch.Generator().manual_seed(1)
    Q, K, V, dO = (torch.randn(24, 4, generator=g, dtype=torch.float64) for _ in range(4))
    ids = zoo.documents(cfg)
    extra = [ids.numpy(), ids.numpy()] if kind == "document" else []
    f = zoo.one_head(kind, cfg, None)
    O, L = nc.evaluate(f, Q.numpy(), K.numpy(), V.numpy(), *extra)
    grads = nc.evaluate(nc.grad(f, wrt=[0, 1, 2], saved=True, aux=1), Q.numpy(), K.numpy(), V.numpy(), *extra,
                        O, L, dO.numpy())
    ref = zoo.reference(kind, cfg, Q, K, V, dO, ids)
    for name, got in zip(("O", "L", "dQ", "dK", "dV"), (O, L, *grads)):
        np.testing.assert_allclose(got, ref[name].numpy(), rtol=1e-9, atol=1e-12, err_msg=name)
    assert 0 < zoo.allowed(kind, cfg, ids) <= 1


@needs_kernels
def test_the_derived_pick_comes_first_and_the_others_are_the_same_structures_next_tiles():
    import napkin_cat as nc
    run = _module("run")
    sizes = {"a": 256, "b": 256, "c": 256}
    r = nc.derive(nc.einsum("a b, b c -> a c", dtype="bf16", out_dtype="bf16"), sizes=sizes, hardware="h100-sxm5")
    cands = run.candidates(r, 3)
    assert [c["pick"] for c in cands] == ["derived", "autotune", "autotune"]
    assert cands[0]["tiles"] == {str(k): int(v) for k, v in r.optimum.exact_sizes.items()}
    assert cands[0]["model_s"] == r.prediction.time and cands[0]["H"] == r.H
    same = [(t, s) for label, t, s, _ in r.timings if label == str(r.variant)]
    want = []
    for tiles, seconds in same:                   # the model's order, distinct tiles, the derived pick first
        t = {str(k): int(v) for k, v in tiles.items()}
        if t not in [w for w, _ in want]:
            want.append((t, seconds))
    assert [(c["tiles"], c["model_s"]) for c in cands] == want[:3]
    assert len({json.dumps(c["tiles"], sort_keys=True) for c in cands}) == 3
    assert all(c["variant"] == str(r.variant) for c in cands)


@needs_kernels
def test_the_sweep_changes_one_tile_of_the_pick_at_a_time_over_every_tile():
    """``--sweep K``: the pick, then assignments of its variant that differ from it in exactly one tile, taken a
    tile at a time in turn, each as the search timed it; checked against the search's own timings."""
    import napkin_cat as nc
    run = _module("run")
    cfg = {"kind": "decode", "q": 1, "d": 128, "N": 32768, "batch": 1, "heads": 32}
    f, sizes = run.diagram_of(cfg)
    r = nc.derive(f, sizes=sizes, hardware="h200")
    cands = run.neighbours(r, 8)
    pick = cands[0]["tiles"]
    assert cands[0]["pick"] == "derived" and pick == {str(k): int(v) for k, v in r.optimum.exact_sizes.items()}
    assert len(cands) == 8 and all(c["pick"] == "sweep" and c["variant"] == str(r.variant) for c in cands[1:])
    changed = [[a for a in c["tiles"] if c["tiles"][a] != pick[a]] for c in cands[1:]]
    assert all(len(a) == 1 for a in changed)
    assert len({a[0] for a in changed}) >= 2            # more than one tile swept: s_x and p_x both vary here
    timed = {json.dumps({str(k): int(v) for k, v in t.items()}, sort_keys=True): s for label, t, s, _ in r.timings
             if label == str(r.variant)}
    assert all(timed[json.dumps(c["tiles"], sort_keys=True)] == c["model_s"] for c in cands[1:])
    assert len({json.dumps(c["tiles"], sort_keys=True) for c in cands}) == 8


def test_where_selects_rows_by_their_keys_and_names_an_unknown_key():
    run = _module("run")
    rows = [c for c in run.configurations(False, True) if run.selection(["N=32768,131072", "kind=decode"])(c)]
    assert [c["N"] for c in rows] == [32768, 131072] and {c["kind"] for c in rows} == {"decode"}
    with pytest.raises(ValueError, match=r"no row has the key\(s\) \['size'\]; rows have \[.*'N'"):
        run.selection(["size=4096"])
    with pytest.raises(ValueError, match="write KEY=V1,V2"):
        run.selection(["N"])


@needs_kernels
def test_the_dry_run_sweeps_decoding_around_its_pick(tmp_path):
    """``run.py --dry-run --only decode --sweep 3``: the pick and two neighbours printed, run under the
    interpreter and gated; the report counts k = 3 and says none was timed (the CPU times nothing)."""
    assert _module("run").main(["--dry-run", "--out", str(tmp_path), "--only", "decode", "--sweep", "3"]) == 0
    (path,) = tmp_path.glob("dry-run-*.json")
    (row,) = json.loads(path.read_text())["rows"]
    assert [c["pick"] for c in row["candidates"]] == ["derived", "sweep", "sweep"]
    assert all(c["error"] < 2e-2 and c.get("time_s") is None for c in row["candidates"])
    assert "k = 3: none timed" in _module("report").table(json.loads(path.read_text()))


def test_the_kernels_a_run_launches_are_those_whose_divisions_hold_at_its_sizes():
    """What the dry run compiles (``k.launched()``): per launch, the even variant where every tile divides its size
    at the run's sizes, else the ragged one; the divisions checked here by plain arithmetic on the tiles."""
    import napkin_cat as nc
    f = nc.group(nc.group(nc.stream(nc.library.matmul(), "b", "s_b"), "a", "g_a"), "c", "g_c")
    tiles = {"g_a": 32, "g_c": 64, "s_b": 16}
    k = nc.codegen.triton(nc.plan(f, {"a": 96, "b": 64, "c": 128, **tiles}))
    (name,) = [n for n in k.printer.signature() if not n.endswith("_ragged")]
    assert f"{name}_ragged" in k.printer.signature()
    for a, b, c in ((96, 64, 128), (80, 64, 128), (96, 40, 128), (96, 64, 96), (64, 32, 64)):
        even = a % tiles["g_a"] == b % tiles["s_b"] == c % tiles["g_c"] == 0
        assert k.launched({"a": a, "b": b, "c": c}) == [name if even else f"{name}_ragged"], (a, b, c)
    assert k.launched() == [name]
    with pytest.raises(nc.codegen.CodegenError, match="the kernel's functions are"):
        k.compile(kernels=["nc_no_such_kernel"])


# ------------------------------------------------------------------------------------------------ gate, spread
@needs_kernels
@needs_kernels
def test_a_results_file_writes_every_number_as_it_is():
    """``run.py`` writes what json cannot (sympy's and numpy's numbers) as an int where it is one, else a float: it
    wrote them with ``int()``, and a sympy term of 6e-10 s became 0; not finite: null; anything else: its text."""
    import sympy
    jsonable = _module("run")._jsonable
    row = {"term": sympy.Float(5.96e-10), "flops": sympy.Float(589824.0), "rho": sympy.Rational(9, 32),
           "n": np.int64(7), "x": np.float32(0.5), "inf": sympy.oo, "what": sympy.Symbol("g_q")}
    back = json.loads(json.dumps(row, default=jsonable))
    assert back == {"term": 5.96e-10, "flops": 589824, "rho": 0.28125, "n": 7, "x": 0.5, "inf": None, "what": "g_q"}
    assert type(back["n"]) is int and type(back["term"]) is float


def test_nothing_wrong_is_timed_and_what_is_timed_keeps_its_spread():
    import torch
    measure = _module("measure")
    ref = torch.ones(8, 8)
    calls = []

    def timer(fn):
        calls.append(fn)
        return measure.spread([2e-3, 1e-3, 3e-3])
    gpu = {"dry": False}
    wrong = measure.checked_and_timed("kernel", ref * 1.05, ref, "bf16", gpu, timer=timer)      # error 5e-2
    assert wrong["time_s"] is None and "spread" not in wrong and not calls
    assert wrong["gate"] == "error 5.0e-02 > tolerance 1.0e-02 (bf16 operands): not timed"
    nan = measure.checked_and_timed("kernel", ref * float("nan"), ref, "bf16", gpu, timer=timer)
    assert nan["time_s"] is None and "not timed" in nan["gate"] and not calls
    fine = measure.checked_and_timed("kernel", ref * 1.005, ref, "bf16", gpu, timer=timer)
    assert calls == ["kernel"] and fine["time_s"] == 2e-3 and fine["spread"]["n"] == 3 and "gate" not in fine
    fp32 = measure.checked_and_timed("k", ref * 1.005, ref, "fp32", gpu, timer=timer)
    assert fp32["gate"].startswith("error 5.0e-03") and len(calls) == 1


def test_a_spread_is_the_runs_percentiles():
    pytest.importorskip("torch")
    measure = _module("measure")
    runs = list(np.random.default_rng(0).exponential(1e-3, size=37))
    s = measure.spread(runs)
    assert s["n"] == 37 and s["min"] == min(runs) and s["max"] == max(runs)
    for key, q in (("median", 50), ("p10", 10), ("p90", 90)):
        assert s[key] == pytest.approx(np.percentile(runs, q), rel=1e-12)


# ------------------------------------------------------------------------------------------------ the results files
def _schema_1(path) -> dict | None:
    """The file as schema 1 wrote it (the version git first added), or None if it was born in schema 2."""
    sha = _git("log", "--diff-filter=A", "--format=%H", "--", str(path.relative_to(ROOT)))
    text = _git("show", f"{sha.split()[-1]}:{path.relative_to(ROOT)}") if sha else None
    old = json.loads(text) if text else None
    return old if old and "schema" not in old else None


def _contains(new, old, where="") -> None:
    """Every value of ``old`` is in ``new`` at the same place (new keys allowed): nothing was re-measured."""
    if isinstance(old, dict):
        for k, v in old.items():
            assert k in new, f"{where}.{k} dropped"
            _contains(new[k], v, f"{where}.{k}")
    elif isinstance(old, list):
        assert len(new) == len(old), f"{where}: {len(old)} entries became {len(new)}"
        for i, (a, b) in enumerate(zip(new, old)):
            _contains(a, b, f"{where}[{i}]")
    else:
        assert new == old, f"{where}: {old!r} became {new!r}"


@needs_history
@pytest.mark.parametrize("path", committed(), ids=lambda p: p.stem)
def test_a_relabelled_file_holds_its_measurements_unchanged(path):
    new = json.loads(path.read_text())
    assert new["schema"] == 2
    old = _schema_1(path)
    if old is None:
        return                                   # written by run.py in schema 2: nothing was relabelled
    for row in old["rows"]:                      # the only renamed field: the fastest candidate's ratio
        if "speedup" in row:
            row["best_of_k_vs_fastest"] = row.pop("speedup")
    _contains(new, old)
    assert new["provenance"]["commit"] == new["provenance"]["driver"] == new["provenance"]["clocks"] == "not recorded"
    first_added = _git("log", "--diff-filter=A", "--format=%H", "--", str(path.relative_to(ROOT))).split()[-1]
    assert new["provenance"]["committed_in"] == first_added
    for row, was in zip(new["rows"], old["rows"]):
        picks = [c["pick"] for c in row["candidates"]]
        assert picks == ["derived"] + ["autotune"] * (len(picks) - 1)
        assert row["candidates"][0]["tiles"] == was["candidates"][0]["tiles"]      # schema 1's first: derive's
        assert all(c["spread"] == "not recorded" for c in row["candidates"])


def test_relabel_refuses_what_the_data_does_not_decide():
    relabel = _module("relabel")
    row = {"kind": "attention", "N": 64, "d": 16, "variant": "A", "candidates": [
        {"variant": "A", "tiles": {"g_q": 64}, "time_s": 2e-3}, {"variant": "B", "tiles": {"g_q": 32}, "time_s": 1e-3}]}
    old = {"device": "x", "model": "h200", "date": "d", "dry_run": False, "versions": {}, "ceilings": {}, "rows": [row]}
    with pytest.raises(SystemExit, match="candidate 1 is of another structure"):
        relabel.relabelled(copy.deepcopy(old), added_in="0" * 40)
    row["candidates"][1]["variant"] = "A"
    new = relabel.relabelled(copy.deepcopy(old), added_in="0" * 40)
    assert [c["pick"] for c in new["rows"][0]["candidates"]] == ["derived", "autotune"]


def test_the_report_reads_only_the_current_schema(tmp_path, report):
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"device": "x", "rows": []}))
    with pytest.raises(SystemExit, match="schema 1.*relabel.py"):
        report.load(old)


# ------------------------------------------------------------------------------------------------ the README
def _section(report) -> str:
    readme = (ROOT / "README.md").read_text()
    return readme.split(report.BEGIN, 1)[1].split(report.END, 1)[0]


@needs_history
def test_the_readme_gpu_section_is_written_from_the_committed_results(report):
    files = report.result_files()
    assert files, "no GPU results committed under benchmarks/gpu/results"
    readme = (ROOT / "README.md").read_text()
    assert report.readme_with(readme, files) == readme, (
        "the README's GPU section is stale: python benchmarks/gpu/report.py --readme README.md")
    for f in files:
        r = json.loads(f.read_text())
        assert not r["dry_run"] and r["device"] in readme and r["date"] in readme


def _flash_over(row, pick) -> float:
    """torch's flash time over the candidate's, read from the raw row (not through report.py)."""
    (flash,) = [b for b in row["baselines"] if b["path"].startswith("sdpa flash") and "expanded" not in b["path"]]
    timed = [c for c in row["candidates"] if c.get("time_s")]
    c = next(c for c in timed if c["pick"] == "derived") if pick == "derived" else min(timed,
                                                                                       key=lambda c: c["time_s"])
    return flash["time_s"] / c["time_s"]


def _current_rows(report) -> list[dict]:
    """The rows the words read, chosen here by the rule the README states: per device and configuration, the first
    measurement in a results file that is not stale (path order), else every stale one."""
    files = [(json.loads(f.read_text()), report.staleness(json.loads(f.read_text()))["stale"])
             for f in report.result_files()]
    fresh = {}
    for r, stale in files:
        for row in r["rows"]:
            if "failed" not in row and not stale:
                fresh.setdefault((r["device"], report.label(row)), id(row))
    return [row for r, stale in files for row in r["rows"] if "failed" not in row
            and fresh.get((r["device"], report.label(row)), id(row)) == id(row)]


def test_the_readmes_words_are_the_results_derived_pick_and_best_of_k_apart(report):
    """The ranges in the words under the tables, recomputed here from the raw files: the derived pick's (what
    ``nc.derive`` returns) and, apart, the best of k (autotuned); the old "1.3-1.45×" (the best of three,
    called the derived kernels, its low end 1.275 rounded up) is gone."""
    words = _section(report)
    rows = _current_rows(report)
    for kind, name in (("attention", "attention"), ("gqa", "grouped-query attention")):
        for d in sorted({row["d"] for row in rows if row["kind"] == kind}):
            group = [row for row in rows if row["kind"] == kind and row["d"] == d]
            lo, hi = (f"{f(_flash_over(row, 'derived') for row in group):.2f}" for f in (min, max))
            blo, bhi = (f"{f(_flash_over(row, 'best') for row in group):.2f}" for f in (min, max))
            line = next(ln for ln in words.splitlines() if ln.startswith(f"- {name}, d = {d} "))
            assert f"the derived pick **{lo}-{hi}×**" in line, line
            assert f"tile choices (autotuned, not what derive returns) {blo}-{bhi}×" in line, line
    assert "1.3-1.45" not in (ROOT / "README.md").read_text()
    derived_all = [_flash_over(row, "derived") for row in rows if row["kind"] in ("attention", "gqa")]
    assert min(derived_all) < 1.2 < 1.3 < max(derived_all)        # the 1.12-1.39×, not 1.3-1.45×


@needs_history
@pytest.mark.parametrize("abbrev", ["8", "12"])
def test_the_readme_gpu_section_does_not_depend_on_gits_abbreviation(report, monkeypatch, abbrev):
    """git abbreviates a sha by the clone's object count (7 characters here, 8 in a fresh CI clone: a stop
    failed on it); the README's shas are the full ones cut to 7, whatever ``core.abbrev`` says."""
    monkeypatch.setenv("GIT_CONFIG_COUNT", "1")
    monkeypatch.setenv("GIT_CONFIG_KEY_0", "core.abbrev")
    monkeypatch.setenv("GIT_CONFIG_VALUE_0", abbrev)
    readme = (ROOT / "README.md").read_text()
    assert report.readme_with(readme, report.result_files()) == readme


@needs_history
def test_results_measured_before_a_change_to_codegen_plan_or_time_model_are_marked_stale(report):
    """Per file, from git alone: is there a commit after the one measured (else the one that committed it) that
    touches the printers, the plan or the time model?  The README's header for that file says so."""
    words = _section(report)
    for f in report.result_files():
        r = json.loads(f.read_text())
        p = r["provenance"]
        since = p["commit"] if not p["commit"].startswith("not recorded") else p["committed_in"]
        files_of = report.tree_commit(p.get("tree"), since) if not p["commit"].startswith("not recorded") else None
        if files_of:         # the commit whose files were measured (the device's git metadata may be older)
            by_hand = json.loads(report.TREES.read_text()).get(p["tree"], {})
            assert p["tree"] in (_git("rev-parse", f"{files_of}^{{tree}}"), report.tree_on_paths(since, files_of)) \
                or _git("rev-parse", by_hand.get("commit", "-")) == files_of, f
            since = files_of
        later = _git("rev-list", f"{since}..HEAD", "--", *report.STALE_PATHS,
                     *(f":(exclude){p}" for p in report.NOT_STALE))
        (head,) = [ln for ln in words.splitlines() if f"({f.relative_to(ROOT)})" in ln]
        assert ("**Stale**" in head) == bool(later), head
        if p["commit"].startswith("not recorded"):
            assert f"commit not recorded (results committed in `{since[:7]}`" in head
        assert ("spread not recorded" in head) == all(c.get("spread") == "not recorded" for row in r["rows"]
                                                      for c in row.get("candidates", ()))


def test_a_range_prints_its_ends_as_the_table_does(report):
    assert report.span([1.2747, 1.39, 1.448]) == "1.27-1.45" and report.span([1.275001]) == "1.28"
    assert report.span([0.93, 0.931]) == "0.93"
    assert re.fullmatch(r"\d\.\d\d-\d\.\d\d", report.span([0.5, 2.0]))


def test_the_readmes_training_step_words_are_the_raw_rows_ratios(report):
    """The training step's lines (issue 36), recomputed from the raw files: per mask, flex_attention compiled's
    time over the derived pick's (forward's plus backward's medians); the loss against Liger-Kernel, with both
    peak memories; every row whose derived pick failed is named, its torch paths still in its table row."""
    words = _section(report)
    rows = _current_rows(report)
    masked = [row for row in rows if row["kind"] in ("window", "prefix-lm", "document", "alibi", "softcap")]
    if not masked:
        pytest.skip("no masked forward+backward row is committed yet (issue 36's GPU run)")
    line = next(ln for ln in words.splitlines() if ln.startswith("- masked attention forward+backward"))
    for row in masked:
        (flex,) = [b for b in row["baselines"] if b["path"].startswith("flex_attention") and b.get("time_s")]
        (c,) = [c for c in row["candidates"] if c["pick"] == "derived"]
        assert abs(c["time_s"] - c["forward"]["time_s"] - c["backward"]["time_s"]) < 1e-12
        assert f"{row['kind']} N={row['N']} d={row['d']}: {flex['time_s'] / c['time_s']:.2f}×" in line, line
    for row in (r for r in rows if r["kind"] == "flce"):
        (liger,) = [b for b in row["baselines"] if b["path"].startswith("liger") and b.get("time_s")]
        (c,) = [c for c in row["candidates"] if c["pick"] == "derived"]
        line = next(ln for ln in words.splitlines() if ln.startswith("- fused linear cross-entropy"))
        assert f"**{liger['time_s'] / c['time_s']:.2f}×**" in line
        assert f"{c['peak_bytes'] / 2 ** 30:.1f} GiB against {liger['peak_bytes'] / 2 ** 30:.1f} GiB" in line
    for row in rows:
        (c,) = [c for c in row["candidates"] if c["pick"] == "derived"]
        if "failed" in c:
            kind_line = next(ln for ln in words.splitlines() if "failed in" in ln and row["kind"] in ln)
            assert report.label(row) in kind_line
            (cells,) = [ln for ln in words.splitlines() if ln.startswith(f"| {report.label(row)} |")]
            assert f"failed: {c['failed'][:40]}" in cells and row["baseline"]["path"] in cells


@needs_kernels
def test_a_run_records_the_git_tree_of_the_files_it_measured(tmp_path, monkeypatch):
    """``provenance.tree`` is the git tree of the tracked files as they are (the device's copy may carry another
    commit's metadata): a clean checkout gives its commit's tree, a changed file another, and the report names the
    commit whose files those are."""
    measure, report = _module("measure"), _module("report")
    repo = tmp_path / "repo"
    repo.mkdir()

    def git(*args):
        return subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                              capture_output=True, text=True, check=True).stdout.strip()
    git("init", "-q")
    (repo / "a.py").write_text("x = 1\n")
    git("add", "a.py")
    git("commit", "-qm", "one")
    monkeypatch.setattr(measure, "ROOT", repo)
    assert measure.working_tree() == git("rev-parse", "HEAD^{tree}")
    (repo / "a.py").write_text("x = 2\n")
    changed = measure.working_tree()
    assert changed != git("rev-parse", "HEAD^{tree}")
    assert git("status", "--porcelain") == "M a.py"          # the real index is untouched
    git("commit", "-qam", "two")
    assert changed == git("rev-parse", "HEAD^{tree}")
    monkeypatch.setattr(report, "ROOT", repo)
    assert report.tree_commit(changed) == git("rev-parse", "HEAD")
    assert report.tree_commit("not recorded: no git") is None
    # the device's copy: the git metadata of an earlier commit (its index), the files of a later one that adds a file
    base = git("rev-parse", "HEAD")
    (repo / "a.py").write_text("x = 3\n")
    (repo / "b.py").write_text("y = 1\n")
    git("add", "a.py", "b.py")
    git("commit", "-qm", "three")
    three = git("rev-parse", "HEAD")
    git("branch", "measured", three)          # in history, as the commits measured are on main
    git("reset", "-q", "--mixed", base)       # base's index: a.py changed, b.py untracked, as on the device
    assert measure.working_tree() == git("rev-parse", f"{three}^{{tree}}")    # the new file is measured too
    # a run recorded with `git add -u` (before new files were added) wrote the tree of base's paths only: no
    # commit has it; the commit after base whose files on those paths give it is the one measured
    old = report.tree_on_paths(base, three)
    assert old != git("rev-parse", f"{three}^{{tree}}")
    assert report.tree_commit(old) is None and report.tree_commit(old, base) == three


@needs_kernels
def test_prederive_compiles_what_the_device_would_print(monkeypatch):
    """``--prederive`` prints each derivation as Triton and compiles it for its model's architecture here
    (``run.compiled``): None where it compiles, else why: the printers' refusal (run 5 met one on the device: an
    array past their 32-bit indices), named before any device time is spent."""
    import napkin_cat as nc
    run = _module("run")
    f = nc.einsum("a b, b c -> a c", dtype="bf16", out_dtype="bf16")
    sizes = {"a": 256, "b": 256, "c": 256}
    r = nc.derive(f, sizes=sizes, hardware="h200")
    resources = {}
    assert run.compiled(r, sizes, "h200", resources) is None
    assert list(resources) == ["nc_kernel0"] and 0 < resources["nc_kernel0"]["registers"] <= 255
    printer = importlib.import_module("napkin_cat.codegen.printer")
    monkeypatch.setattr(printer, "LARGEST_INDEX", 1000)      # every array of the product past it
    why = run.compiled(r, sizes, "h200")
    assert why.startswith("CodegenError") and "32-bit indices reach (1000)" in why


def test_the_device_call_refuses_to_start_without_napkin_cats_wheel(tmp_path):
    """Run 5's first call spent device time on rows that all failed ("no rule book is registered": the device runs
    the tree without installing it, so the entry points come from napkin-cat's wheel): ``device_run.sh`` now stops
    first, says why, and writes it where the call's files come back."""
    out = tmp_path / "out"
    run = subprocess.run(["bash", str(GPU / "device_run.sh")], cwd=tmp_path, env={**os.environ, "OUT": str(out)},
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 1
    assert "no napkin_cat wheel in .whl" in run.stdout
    assert "pip wheel --no-deps -w .whl ." in (out / "results" / "budget.txt").read_text()

