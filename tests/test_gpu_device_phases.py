"""The GPU benchmark's tools for the next device session, checked here: a change that no measurement depends on leaves
results current (``report.NOT_STALE``), a backward pass relaunched at the time model's launch shapes
(``relaunch.py``, ``run.py --relaunch``), the sweep's backward on the pick's saved forward, and decoding's kernels for
Nsight Compute (``profile_decode.py``)."""
from __future__ import annotations

import importlib
import importlib.util
import json
import subprocess

import pytest
from tests.scripts import import_beside

HAVE = all(importlib.util.find_spec(m) for m in ("torch", "triton"))
needs_kernels = pytest.mark.skipif(not HAVE, reason="the benchmark needs torch and triton (pip install '.[kernels]')")


def _module(name):
    return import_beside("benchmarks/gpu", name)


def test_a_change_to_the_triton_worker_alone_leaves_a_measurement_current(tmp_path, monkeypatch):
    """The Triton worker interprets and compiles printed kernels off the device (``report.NOT_STALE``): a commit that
    changes it alone leaves a run current; one that changes a printer marks it stale, from that commit."""
    report = _module("report")
    repo = tmp_path / "repo"
    (repo / "napkin_cat" / "codegen" / "triton").mkdir(parents=True)

    def git(*args):
        return subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                              capture_output=True, text=True, check=True).stdout.strip()

    def commit(path, text):
        (repo / path).write_text(text)
        git("add", path)
        git("commit", "-qm", path)
        return git("rev-parse", "HEAD")
    git("init", "-q")
    measured = commit("napkin_cat/codegen/triton/printer.py", "a = 1\n")
    commit("napkin_cat/codegen/triton/worker.py", "b = 1\n")
    monkeypatch.setattr(report, "ROOT", repo)
    result = {"provenance": {"commit": measured, "tree": None}}
    assert report.staleness(result)["stale"] is False
    printer = commit("napkin_cat/codegen/triton/printer.py", "a = 2\n")
    s = report.staleness(result)
    assert s["stale"] is True and s["first"][0] == printer[:7]


@needs_kernels
def test_a_backward_relaunched_at_the_models_threads_changes_only_its_launch_options():
    """``relaunch.py``: at g_q = 64 the printer launches both kernels of attention's d = 128 backward with 4 warps (its
    largest product's rows), where the time model times the dK, dV kernel at 256 threads; the relaunched source
    differs from the printed one in that kernel's launch options alone (its even and ragged variants' one call)."""
    import napkin_cat as nc
    training, relaunch = _module("training"), _module("relaunch")
    (_, g), sizes = training.functions({"kind": "backward", "N": 2048, "d": 128, "batch": 1, "heads": 16})
    r = nc.derive(g, sizes=sizes, hardware="h200")
    tiles = {**{str(k): int(v) for k, v in r.optimum.exact_sizes.items()}, "g_q": 64}
    p = nc.plan(r.diagram, {**sizes, **tiles})
    k = nc.codegen.triton(p)
    shapes, why = relaunch.model_shapes(p, k, "h200")
    threads = [kt.bytes["threads"] for kt in nc.hardware.predict(p, "h200").kernels]
    assert why == "" and [w * 32 for w, _ in shapes.values()] == threads == [128, 256]
    assert k.printer.num_warps == 4
    source = relaunch.relaunched(k.source, shapes)
    changed = [(a, b) for a, b in zip(k.source.splitlines(), source.splitlines()) if a != b]
    assert len(changed) == 1 and "num_warps=4" in changed[0][0] and "num_warps=8" in changed[0][1]
    assert len(source.splitlines()) == len(k.source.splitlines())
    with pytest.raises(KeyError, match="no launch shape for nc_kernel1"):
        relaunch.relaunched(k.source, {"nc_kernel0": (4, 3)})


@needs_kernels
def test_the_dry_run_sweeps_the_backward_on_the_picks_saved_forward(tmp_path):
    """``run.py --dry-run --only backward --sweep 3 --relaunch``: the pick, then two backward passes one tile away,
    each run under the interpreter on what the pick's forward saved (its O and L) and gated on dQ, dK and dV against
    the float64 reference; each says how the time model would launch it."""
    assert _module("run").main(["--dry-run", "--out", str(tmp_path), "--only", "backward", "--sweep", "3",
                                "--relaunch"]) == 0
    (path,) = tmp_path.glob("dry-run-*.json")
    (row,) = json.loads(path.read_text())["rows"]
    pick, *around = row["candidates"]
    assert [c["pick"] for c in around] == ["sweep:backward"] * 2
    for c in around:
        assert "failed" not in c and "gate" not in c, c
        assert sorted(c["errors"]) == ["dK", "dQ", "dV"] and c["error"] < 1e-2
        differ = [t for t in c["tiles"] if c["tiles"][t] != pick["backward"]["tiles"].get(t)]
        assert len(differ) == 1, (c["tiles"], pick["backward"]["tiles"])
        again = c["backward"]["relaunched"]
        assert again.get("same") or again["changed_lines"] >= 1


@needs_kernels
def test_the_decoding_profile_runs_each_split_and_checks_it_first(capsys):
    """``profile_decode.py --dry-run`` (what ``device_run.sh PHASES=profile`` runs under ncu): the derived decoding at
    each split count, printed, run under the interpreter and checked against float64 before anything is profiled;
    ``--metrics`` is the list ncu reads."""
    prof = _module("profile_decode")
    assert prof.main(["--dry-run"]) == 0
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("p_x = ")]
    assert [ln.split(":")[0] for ln in lines] == ["p_x = 2", "p_x = 4"]
    assert all(float(ln.rsplit("error ", 1)[1].split()[0]) < 1e-2 for ln in lines)
    assert prof.main(["--metrics"]) == 0 and capsys.readouterr().out.strip() == ",".join(prof.METRICS)
