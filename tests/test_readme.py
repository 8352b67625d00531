"""The README cannot drift: its Python blocks run, its links point at files, its commands are the CLI's,
and its test command is the one CI runs.

A line of a Python block that needs a tool (a compiler) says so in its comment, ``# ... (needs nvcc)``; where
the tool is missing only that line is left out (and says why), the rest of every block runs."""
from __future__ import annotations

import ast
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


#: the tools a README line may need, by the name its ``(needs TOOL)`` comment gives, and whether this machine has it
TOOLS = {"nvcc": HAVE_NVCC, "cc": HAVE_CC}
NEEDS = re.compile(r"#.*\(needs (\w+)\)\s*$")


def gated(block: str, tools: dict) -> tuple[str, list]:
    """``block`` with each line whose comment names a missing tool replaced by ``pass`` (its indentation kept),
    and the lines left out.  A line names at most one tool, a tool this test knows, and is one whole statement
    (so that leaving it out leaves the rest of the block as written)."""
    out, left = [], []
    for line in block.splitlines():
        m = NEEDS.search(line)
        if m is None:
            out.append(line)
            continue
        assert m.group(1) in tools, f"README line needs {m.group(1)!r}, a tool this test does not know: {line}"
        ast.parse(line.strip())           # one whole statement (raises SyntaxError otherwise)
        if tools[m.group(1)]:
            out.append(line)
        else:
            out.append(line[:len(line) - len(line.lstrip())] + "pass")
            left.append(line.strip())
    return "\n".join(out) + "\n", left


def test_the_gate_leaves_out_only_the_lines_that_name_a_missing_tool():
    block = "x = 1\ny = x + 1   # (needs nvcc)\nif x:\n    z = y  # compiles (needs cc)\nw = 2\n"
    run, left = gated(block, {"nvcc": False, "cc": True})
    assert run == "x = 1\npass\nif x:\n    z = y  # compiles (needs cc)\nw = 2\n" and left == [
        "y = x + 1   # (needs nvcc)"]
    assert gated(block, {"nvcc": True, "cc": True}) == (block, [])
    with pytest.raises(AssertionError, match="'gcc', a tool this test does not know"):
        gated("x = 1  # (needs gcc)", TOOLS)


def test_the_python_blocks_run_in_order(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    blocks = re.findall(r"^```python\n(.*?)^```$", README, re.S | re.M)
    marked = [line for b in blocks for line in b.splitlines() if NEEDS.search(line)]
    assert any("(needs nvcc)" in line and ".cuda(" in line for line in marked)    # the CUDA line is the gated one
    left = []
    for block in blocks:
        run, skipped = gated(block, TOOLS)
        left += skipped
        exec(compile(run, "README.md", "exec"), namespace)
    assert (tmp_path / "flash.png").stat().st_size > 1000 and (tmp_path / "strip.png").stat().st_size > 1000
    assert namespace["counted"].transfers == {1: 1114112}          # the value the README's comment states
    # the same count from the paper's formula 2qd + 2xdq/g_q, at the block's sizes (q = x = 512, d = 64, g_q = 32)
    assert namespace["counted"].transfers[1] == 2 * 512 * 64 + 2 * 512 * 64 * 512 // 32
    assert "parallel for i_q" in capsys.readouterr().out
    if left:
        print(f"left out (tool missing): {left}")
