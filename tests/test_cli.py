"""The ``napkin`` command line: the README's main job and the subcommands."""
import pytest

from napkin_cat.cli import main


def test_demo_writes_drawings_and_reports_the_paper_formula(tmp_path, capsys):
    assert main(["demo", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "FlashAttention derived by rules: kernel_formation" in out
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


def test_cost_and_draw(tmp_path, capsys):
    assert main(["cost", "matmul", "--derived"]) == 0
    assert "M[1] = g_a*g_c + g_a*s_b + g_c*s_b" in capsys.readouterr().out
    assert main(["draw", "mlp", str(tmp_path / "mlp.svg")]) == 0
    assert "<svg" in (tmp_path / "mlp.svg").read_text()


def test_unknown_example_is_refused():
    with pytest.raises(SystemExit):
        main(["cost", "resnet"])
