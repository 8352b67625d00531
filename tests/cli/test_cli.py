"""The ``napkin`` command line: the main jobs, a user's own algorithm, and one-line errors for bad input."""
import json
import os
import sys

import pytest

from napkin_cat.cli import main


def test_demo_writes_drawings_and_reports_the_paper_formula(tmp_path, capsys):
    assert main(["demo", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "FlashAttention derived by rules: " in out and "kernel_formation" in out
    assert "every step checked: True" in out and "equivalent to attention: True" in out
    assert "H* (large M) = 2*d*q + 4*d**2*q*x/M" in out
    for name in ("attention.png", "attention.svg", "flash_attention.png", "flash_derivation.png"):
        assert (tmp_path / name).stat().st_size > 1000


def test_derive_prints_the_trace_and_draws_the_strip(tmp_path, capsys):
    strip = tmp_path / "mm.png"
    assert main(["derive", "matmul", "--strip", str(strip)]) == 0
    out = capsys.readouterr().out
    assert "0: kernel_formation" in out and "H* = a*c + 2*a*b*c/sqrt(M)" in out
    assert strip.stat().st_size > 1000
    assert main(["derive", "attention", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["checked"] is True and data["H_star"] == "2*d*q + 4*d**2*q*x/M" and "group_partition" in data["trace"]


def test_cost_and_draw(tmp_path, capsys):
    assert main(["cost", "matmul", "--derived"]) == 0
    assert "M[1] = g_a*g_c + g_a*s_b + g_c*s_b" in capsys.readouterr().out
    assert main(["draw", "mlp", str(tmp_path / "mlp.svg")]) == 0
    assert "<svg" in (tmp_path / "mlp.svg").read_text()


def test_cost_json_with_concrete_sizes(capsys):
    assert main(["cost", "attention", "--sizes", "q=64,x=32,d=8", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    # unfused attention moves Q, K (scores out), the scores twice through SoftMax, P and V, O: 2qd + 2xd + 4qx
    assert data["H"]["1"] == str(2 * 64 * 8 + 2 * 32 * 8 + 4 * 64 * 32) and data["sizes"] == {"q": 64, "x": 32, "d": 8}


def test_a_users_own_algorithm_from_a_python_file(tmp_path, capsys):
    src = tmp_path / "mine.py"
    src.write_text("import napkin_cat as nc\n"
                   "scores = nc.einsum('u v, w v -> u w')\n"
                   "diagram = scores >> nc.elementwise('sigmoid', 'u w')\n")
    assert main(["cost", str(src), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["algorithm"] == "mine" and "tensor" in data["flops"]
    assert main(["draw", str(src), str(tmp_path / "mine.png")]) == 0
    assert (tmp_path / "mine.png").stat().st_size > 1000
    assert main(["cost", str(src), "--name", "scores"]) == 0


def test_derive_searches_a_range_of_memories_and_plots(tmp_path, capsys):
    plot = tmp_path / "curves.png"
    assert main(["derive", "attention", "--memory", "2^10..2^16", "--sizes", "q=4096,x=4096,d=128",
                 "--plot", str(plot)]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].split()[:3] == ["M", "H*", "ratio"] and len([ln for ln in lines if ln.strip()[:1].isdigit()]) == 7
    # 400.5·2^20: the SoftMax·V kernel accumulates P·V into o in place (never holds both; was 487063552)
    assert " 1024  419954688 " in out and "partly fused" in out and "fully fused" in out
    assert "Saha-Ye" in out and plot.stat().st_size > 10_000
    assert main(["derive", "matmul", "--memory", "2^12", "--sizes", "a=256,b=256,c=256", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    (row,) = data["rows"]
    assert row["H_star"] == "851968" and row["tiles"]["g_a"] == "32" and row["trace"][0] == "kernel_formation"
    assert row["variant"]["kind"] == "fully fused" and data["bound"].startswith("Hong-Kung")


def test_derive_searches_a_users_own_diagram(tmp_path, capsys):
    src = tmp_path / "gated.py"
    src.write_text("import napkin_cat as nc\n"
                   "b = nc.Builder(nc.types('u v, w v, w z'))\n"
                   "A, B, C = b.inputs\n"
                   "S = b(nc.einsum('u v, w v -> u w'), A, B)\n"
                   "diagram = b.build(b(nc.einsum('u w, w z -> u z'), b(nc.elementwise('sigmoid', 'u w'), S), C))\n")
    assert main(["derive", str(src), "--memory", "2^8..2^12", "--sizes", "u=256,v=32,w=256,z=32", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [row["M"] for row in data["rows"]] == ["256", "512", "1024", "2048", "4096"]
    assert data["bound"].startswith("compulsory") and all(row["bound_ratio"] == "—" for row in data["rows"])


def test_derive_symbolic_prints_the_piecewise_envelope(capsys):
    assert main(["derive", "attention", "--memory", "M"]) == 0
    out = capsys.readouterr().out
    assert "H* = Piecewise((nan, M < 6)" in out and "(2*d*q + 4*d**2*q*x/M, M < 2*d*q)" in out
    assert "(2*d*q + 2*d*x, True)" in out     # past M = 2dq, q whole: Q, K, V read and O written once (issue 35)


BAD = [
    (["derive", "attention", "--memory", "2", "--sizes", "q=64,x=64,d=16"], "smallest memory that works is"),
    (["derive", "attention", "--memory", "1024"], "needs sizes="),
    (["derive", "attention", "--plot", "x.png"], "--plot and --sizes belong to the search"),
    (["derive", "attention", "--memory", "2^x"], "malformed --memory"),
    (["cost", "resnet"], "unknown algorithm 'resnet'"),
    (["cost", "attention", "--sizes", "q=4096,x"], "malformed --sizes"),
    (["cost", "attention", "--sizes", "q=-3"], "malformed --sizes"),
    (["draw", "nowhere.py", "x.png"], "no such file 'nowhere.py'"),
    (["frobnicate"], "invalid choice: 'frobnicate'"),
]


@pytest.mark.parametrize("argv, message", BAD, ids=[b[1][:20] for b in BAD])
def test_bad_input_is_one_line_and_status_2(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("napkin: error: ") and message in err, err


def test_a_file_that_defines_no_diagram_or_raises(tmp_path, capsys):
    empty, broken, many = tmp_path / "empty.py", tmp_path / "broken.py", tmp_path / "many.py"
    empty.write_text("x = 1\n")
    broken.write_text("raise RuntimeError('the user made a mistake')\n")
    many.write_text("import napkin_cat as nc\na = nc.Id('q')\nb = nc.Id('x')\n")
    for path, message in ((empty, "defines no diagram"), (broken, "raised RuntimeError: the user made a mistake"),
                          (many, "defines several diagrams (a, b)")):
        assert main(["cost", str(path)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and message in err, err


def test_an_unwritable_output_folder(tmp_path, capsys):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        target = locked / "inner" if os.geteuid() != 0 else tmp_path / "file-not-folder" / "x"
        if os.geteuid() == 0:  # root may write anywhere: use a path whose parent is a file instead
            (tmp_path / "file-not-folder").write_text("")
        assert main(["demo", "--out", str(target)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "cannot create the output folder" in err, err
    finally:
        locked.chmod(0o700)


def test_the_console_script_prints_no_traceback(monkeypatch, capsys):
    """The console script (``entry``: ``sys.exit(main())``) on bad input: status 2, one line, no traceback; called in
    this process with its ``sys.argv`` (a process of its own imported the package again: 2 s of CPU)."""
    from napkin_cat.cli import entry
    monkeypatch.setattr(sys, "argv", ["napkin", "cost", "resnet"])
    with pytest.raises(SystemExit) as exit:
        entry()
    err = capsys.readouterr().err
    assert exit.value.code == 2 and "Traceback" not in err and err.startswith("napkin: error:")


def test_help_everywhere(capsys):
    for cmd in ("reproduce", "demo", "cost", "derive", "draw"):
        with pytest.raises(SystemExit) as e:
            main([cmd, "--help"])
        assert e.value.code == 0
        assert "usage: napkin " + cmd in capsys.readouterr().out


def test_plan_prints_pseudocode_and_variables(capsys):
    assert main(["plan", "attention", "--sizes", "q=512,x=512,d=64"]) == 0
    out = capsys.readouterr().out
    assert "parallel for i_q" in out and "for i_x" in out and "fma(" in out and "variables:" in out
    assert "chosen by nc.optimal" in out
    assert main(["plan", "matmul", "--sizes", "a=64,b=64,c=64,g_a=16,g_c=32,s_b=8", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["tiles_chosen"] == {} and data["smem_bytes"] == 4 * (16 * 32 + 16 * 8 + 8 * 32)


def test_plan_needs_the_axis_sizes(capsys):
    assert main(["plan", "attention", "--sizes", "q=512"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "napkin: error:" in err, err


def test_version(capsys):
    from importlib import metadata
    from napkin_cat.cli import main
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    assert capsys.readouterr().out.strip() == f"napkin {metadata.version('napkin-cat')}"


def test_a_symbolic_search_prints_what_its_answer_does_not_guarantee(capsys):
    """The derivation's notes reach the text and the JSON (causal attention's envelope is an upper bound where its
    fused kernel's cubic is not solved: tests/search/test_beyond_closed.py); dense attention prints none."""
    assert main(["derive", "causal_attention", "--memory", "M"]) == 0
    out = capsys.readouterr().out
    assert "note: an upper bound" in out and "g_d*g_q = M" in out
    assert main(["derive", "causal_attention", "--memory", "M", "--json"]) == 0
    assert "upper bound" in json.loads(capsys.readouterr().out)["notes"][0]
    assert main(["derive", "attention", "--memory", "M", "--json"]) == 0
    assert "notes" not in json.loads(capsys.readouterr().out)
