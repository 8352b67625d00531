"""The README cannot drift: its Python blocks run, its links point at files, its commands are the CLI's,
and its test command is the one CI runs."""
from __future__ import annotations

import os
import pathlib
import re
import shutil

import pytest

from napkin_cat.cli import parser

ROOT = pathlib.Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
HAVE_NVCC = shutil.which("nvcc") is not None or os.path.exists("/usr/local/bin/nvcc")
HAVE_CC = shutil.which(os.environ.get("CC", "cc")) is not None


def test_the_two_commands_of_a_fresh_machine():
    bash = re.findall(r"^```bash\n(.*?)^```$", README, re.S | re.M)
    assert [b.strip() for b in bash] == [
        "python3 -m venv .venv && . .venv/bin/activate && pip install . && napkin reproduce --out out",
        'python3 -m venv .venv && . .venv/bin/activate && pip install ".[test,kernels]" && python -m pytest -q']
    ci = (ROOT / ".ci" / "run").read_text()
    assert ci.rstrip().splitlines()[-1] == bash[1].strip()     # CI runs the README's test command, last


def test_every_link_and_picture_exists():
    targets = re.findall(r"\]\(((?!https?://)[^)#]+)\)", README)
    assert len(targets) > 20
    missing = [t for t in targets if not (ROOT / t).exists()]
    assert not missing, missing


def test_the_command_table_lists_every_subcommand_and_nothing_else():
    rows = re.findall(r"^\| `napkin (\w+)", README, re.M)
    sub = next(a for a in parser()._actions if a.dest == "cmd")
    assert set(rows) == set(sub.choices), (rows, sorted(sub.choices))


@pytest.mark.skipif(not (HAVE_NVCC and HAVE_CC), reason="the README's kernel block compiles C (cc) and CUDA (nvcc); "
                                                        "one of them is missing here")
def test_the_python_blocks_run_in_order(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    for block in re.findall(r"^```python\n(.*?)^```$", README, re.S | re.M):
        exec(compile(block, "README.md", "exec"), namespace)
    assert (tmp_path / "flash.png").stat().st_size > 1000 and (tmp_path / "strip.png").stat().st_size > 1000
    assert namespace["counted"].transfers == {1: 1114112}          # the value the README's comment states
    assert "parallel for i_q" in capsys.readouterr().out
