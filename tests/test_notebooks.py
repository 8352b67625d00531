"""The notebooks run end to end in a fresh Jupyter kernel, use only the public API, and are stored
without outputs (so a diff shows code, and a stale output can never pass for a result).

Each notebook asserts what it shows (the paper's formulas, numpy references, two routes to a number),
so a regression fails here, not only an exception.
"""
from __future__ import annotations

import ast
import os
import pathlib
import re

import nbformat
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

import napkin_cat as nc

ROOT = pathlib.Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
IDS = [p.stem for p in NOTEBOOKS]

# what a notebook may import: the public package, the rule library, documented layer paths that have
# no `nc.` name yet, and ordinary scientific Python
PUBLIC_LAYER_PATHS = {"napkin_cat.cost.hierarchy", "napkin_cat.render.timeline"}
OTHER_MODULES = {"numpy", "sympy", "matplotlib", "matplotlib.pyplot", "IPython.display", "json", "math",
                 "dataclasses", "itertools", "pathlib", "fractions", "torch",
                 "examples.gpt"}     # the repository's example model (notebook 08), not the package
NC_NAMES = set(nc.__all__) | {"__version__"}


def _code(path: pathlib.Path) -> list[str]:
    nb = nbformat.read(path, as_version=4)
    # IPython magics and shell escapes are not Python
    return ["\n".join(line for line in cell.source.splitlines() if not line.lstrip().startswith(("%", "!")))
            for cell in nb.cells if cell.cell_type == "code"]


def test_the_notebooks_are_there():
    assert {"01_tour", "02_deriving_flash_attention", "03_performance_models"} <= set(IDS), IDS


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_notebook_is_stored_with_outputs_cleared(path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    dirty = [k for k, cell in enumerate(nb.cells) if cell.cell_type == "code"
             and (cell.outputs or cell.execution_count is not None)]
    assert not dirty, f"{path.name}: cells {dirty} hold outputs; clear them before committing"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_notebook_uses_the_public_api_only(path):
    """Imports are the package, `rewrites`, documented layer paths or ordinary libraries; every `nc.<name>`
    is in ``napkin_cat.__all__``."""
    bad = []
    for source in _code(path):
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Import):
                mods = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                mods = [node.module]
                if node.module == "napkin_cat":
                    bad += [f"from napkin_cat import {a.name}" for a in node.names if a.name not in NC_NAMES]
            else:
                if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "nc"
                        and node.attr not in NC_NAMES):
                    bad.append(f"nc.{node.attr}")
                continue
            for mod in mods:
                top = mod.split(".")[0]
                if not (mod in ("napkin_cat", "rewrites") or mod in PUBLIC_LAYER_PATHS
                        or (top != "napkin_cat" and (mod in OTHER_MODULES or top in OTHER_MODULES))):
                    bad.append(f"import {mod}")
    assert not bad, f"{path.name} reaches past the public API: {sorted(set(bad))}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_notebook_runs(path, tmp_path, monkeypatch):
    """Execute every cell in a fresh kernel (cwd: a scratch folder); a failed assertion fails the test."""
    # the kernel imports this checkout (CI also has it installed); scratch dirs keep the run hermetic
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / ".ipython"))
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path / ".runtime"))
    monkeypatch.setenv("PYDEVD_DISABLE_FILE_VALIDATION", "1")
    monkeypatch.delenv("MPLBACKEND", raising=False)       # the kernel's own inline backend (Agg, headless)
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}})
    try:
        client.execute()
    except CellExecutionError as e:
        pytest.fail(f"{path.name} failed:\n{e}", pytrace=False)
    outputs = [o for cell in nb.cells if cell.cell_type == "code" for o in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    assert images, f"{path.name} showed no picture or plot"
    text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert not re.search(r"Traceback|Warning:", text), text[-2000:]
