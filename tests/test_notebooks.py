"""The notebooks run end to end in a Jupyter kernel, use only the public API, and are stored without outputs
(so a diff shows code, and a stale output can never pass for a result).

Each notebook asserts what it shows (the paper's formulas, numpy references, two routes to a number),
so a regression fails here, not only an exception.

A worker's notebooks share one kernel, reset to its starting state before each (:data:`RESET`): an empty
namespace, its own scratch folder as the working directory, the kinds and rule books the kernel started with,
matplotlib's figures closed and settings restored, the warning filters restored and every warning shown again,
torch's threads and random state restored, and the repository's scripts (``examples/``) imported again; a kernel
that failed a notebook is shut down and the next notebook starts a new one.  Starting a kernel and importing the
package in it costs 3.5 s of CPU (measured: an empty cell 0.9 s, ``import napkin_cat`` and a plot 3.5 s), eight
times over where two workers need two (measured, the eight notebooks in one process with an empty cache folder:
97.0 s of CPU in eight kernels, 73.9 s in one).  At its first notebook the kernel moves what it imported (the
packages, matplotlib, torch: about 300,000 objects) out of the cyclic collector's generations (``gc.freeze``), so that
a collection no longer walks them: IPython's ``%reset`` collects twice (0.2 s each), and notebooks that draw or
compile trigger full collections (measured, the kernel's CPU, old reset / this one, two runs each: notebook 07
21.9, 21.6 / 17.9, 16.8 s; 03 8.3, 6.5 / 5.0, 5.2 s; 01 3.3, 2.8 / 1.4, 1.3 s; the probe after them 2.8, 2.5 / 1.1,
1.1 s); one ``%reset`` per notebook, after the reset, clears the names.  ``NAPKIN_SLOW=1`` runs each notebook in a
kernel of its own, as a reader does.
"""
from __future__ import annotations

import ast
import os
import pathlib
import re

import nbformat
import pytest
from jupyter_client.manager import AsyncKernelManager
from jupyter_core.utils import run_sync
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


#: run before each notebook in its kernel: the state the kernel started with, back (see the module docstring);
#: ``{root}`` and ``{cwd}`` are filled in
RESET = """\
def _reset(root, cwd):
    import gc, importlib.util, os, sys, types, warnings
    import matplotlib, matplotlib.pyplot as plt
    import napkin_cat as nc
    from napkin_cat.rewriting import registry
    base = sys.modules.get("_notebook_kernel_start")
    if base is None:                     # the kernel's first notebook: its start is the state to come back to
        base = sys.modules["_notebook_kernel_start"] = types.ModuleType("_notebook_kernel_start")
        base.torch = None
        if importlib.util.find_spec("torch") is not None:
            import torch
            base.torch = (torch.get_num_threads(), torch.get_rng_state())
        registry.rulebooks()             # the books of the entry points loaded (once a process): they stay
        base.kinds, base.books = dict(nc.engine.KINDS), dict(registry.BOOKS)
        base.rc, base.filters, base.modules = matplotlib.rcParams.copy(), list(warnings.filters), set(sys.modules)
        gc.collect()
        gc.freeze()                      # what the kernel imported: long-lived, never walked again by a collection
    plt.close("all")
    matplotlib.rcParams.update(base.rc)
    for table, start in ((nc.engine.KINDS, base.kinds), (registry.BOOKS, base.books)):
        for name in set(table) - set(start):
            del table[name]
        table.update(start)
    if base.torch is not None:
        import torch
        torch.set_num_threads(base.torch[0])
        torch.set_rng_state(base.torch[1])
    root = os.path.join(root, "")
    own = (os.path.join(root, "napkin_cat", ""), os.path.join(root, "rewrites", ""))
    for name in set(sys.modules) - base.modules:     # the repository's scripts (examples/) are imported again
        where = getattr(sys.modules[name], "__file__", None) or ""
        if where.startswith(root) and not where.startswith(own):
            del sys.modules[name]
    warnings.resetwarnings()            # also forgets where each warning was shown: shown again
    warnings.onceregistry.clear()
    warnings.filters[:] = base.filters
    os.chdir(cwd)
_reset({root!r}, {cwd!r})
%reset -f
"""


class Kernels:
    """This worker's notebook kernel: started at the first notebook, reset before each, replaced after a failure
    (or after every notebook with ``fresh``)."""

    def __init__(self, scratch: pathlib.Path, fresh: bool):
        self.scratch, self.fresh, self.km = scratch, fresh, None
        # the kernel imports this checkout (CI also has it installed); scratch dirs keep the run hermetic
        path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
        self.env = {**os.environ, "PYTHONPATH": path, "IPYTHONDIR": str(scratch / ".ipython"),
                    "JUPYTER_RUNTIME_DIR": str(scratch / ".runtime"), "PYDEVD_DISABLE_FILE_VALIDATION": "1"}
        self.env.pop("MPLBACKEND", None)       # the kernel's own inline backend (Agg, headless)

    def client(self, nb, cwd: pathlib.Path) -> NotebookClient:
        return NotebookClient(nb, km=self.km, timeout=300, kernel_name="python3",
                              resources={"metadata": {"path": str(cwd)}})

    def run(self, nb, cwd: pathlib.Path):
        """Execute ``nb`` with ``cwd`` its working directory, in the kernel reset (raises what nbclient raises)."""
        if self.km is None:
            self.km = AsyncKernelManager(kernel_name="python3")
            with pytest.MonkeyPatch.context() as mp:      # where the manager writes the connection file
                mp.setenv("JUPYTER_RUNTIME_DIR", self.env["JUPYTER_RUNTIME_DIR"])
                run_sync(self.km.start_kernel)(env=self.env, cwd=str(self.scratch))
        try:
            for book in (nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
                    RESET.format(root=str(ROOT), cwd=str(cwd)))]), nb):
                client = self.client(book, cwd)
                try:
                    client.execute()
                finally:
                    if client.kc is not None:
                        client.kc.stop_channels()
        except BaseException:
            self.close()
            raise
        if self.fresh:
            self.close()

    def close(self):
        if self.km is not None:
            km, self.km = self.km, None
            run_sync(km.shutdown_kernel)(now=True)


@pytest.fixture(scope="session")
def kernels(tmp_path_factory):
    k = Kernels(tmp_path_factory.mktemp("kernel"), fresh=bool(os.environ.get("NAPKIN_SLOW")))
    yield k
    k.close()


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_notebook_runs(path, tmp_path, kernels):
    """Execute every cell (cwd: a scratch folder) in the worker's kernel, reset; a failed assertion fails the test."""
    nb = nbformat.read(path, as_version=4)
    try:
        kernels.run(nb, tmp_path)
    except CellExecutionError as e:
        pytest.fail(f"{path.name} failed:\n{e}", pytrace=False)
    outputs = [o for cell in nb.cells if cell.cell_type == "code" for o in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    assert images, f"{path.name} showed no picture or plot"
    text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert not re.search(r"Traceback|Warning:", text), text[-2000:]


#: prints what a notebook finds of the kernel's state (a warning from a module that outlives the reset included)
PROBE = """\
import gc, os, sys, types, warnings, importlib.util
import matplotlib, matplotlib.pyplot as plt
import napkin_cat as nc
from napkin_cat.rewriting import registry
source = "import warnings\\ndef warn():\\n    warnings.warn('once per place', UserWarning)"
shared = sys.modules.get("shared_by_notebooks")
if shared is None:
    shared = sys.modules["shared_by_notebooks"] = types.ModuleType("shared_by_notebooks")
    exec(compile(source, "shared.py", "exec"), shared.__dict__)
shared.warn()
torch = None
if importlib.util.find_spec("torch") is not None:
    import torch
state = {"names": sorted(n for n in dir() if not n.startswith("_")), "kinds": sorted(nc.engine.KINDS),
         "books": sorted(registry.BOOKS), "cwd": os.path.basename(os.getcwd()), "figures": plt.get_fignums(),
         "linewidth": matplotlib.rcParams["lines.linewidth"], "frozen": gc.get_freeze_count() > 100_000,
         "torch": torch and (torch.get_num_threads(), torch.rand(2).tolist())}
print("STATE", state)
"""

#: changes what :data:`PROBE` prints (a filter put in place as ``simplefilter`` does, without invalidating what the
#: modules' registries remember having shown)
LEAVE = """\
import os, warnings, matplotlib, matplotlib.pyplot as plt, numpy as np
import napkin_cat as nc
left = 1
nc.declare("left_behind", lambda xs, core: [xs[0]])
plt.figure()
matplotlib.rcParams["lines.linewidth"] = 7
warnings.filters.insert(0, ("ignore", None, Warning, None, 0))
import torch
torch.set_num_threads(1)
torch.manual_seed(5)
os.chdir("..")
"""


def test_each_notebook_finds_the_kernel_as_it_started(kernels, tmp_path):
    """A notebook's names, kinds, figures, settings, folder, warning filters and torch state do not reach the next
    notebook in the shared kernel, and a warning already shown is shown again; the probe runs before and after.  What
    the kernel imported is frozen out of the collector (see the module docstring)."""
    pytest.importorskip("torch")
    if kernels.fresh:
        pytest.skip("NAPKIN_SLOW=1: each notebook starts a kernel of its own, nothing is shared")
    seen = []
    for k, source in enumerate((PROBE, LEAVE, PROBE, PROBE)):
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source)])
        (tmp_path / f"nb{k}").mkdir()
        kernels.run(nb, tmp_path / f"nb{k}")
        seen.append({name: "".join(o.text for o in nb.cells[0].outputs if o.get("name") == name)
                     for name in ("stdout", "stderr")})
    before, after = (s["stdout"].replace(f"'nb{k}'", "'nbK'") for k, s in ((0, seen[0]), (2, seen[2])))
    assert "STATE" in before and "'cwd': 'nbK'" in before and "'frozen': True" in before, before
    assert after == before, f"the kernel kept what a notebook left:\n{before}\n{after}"
    assert seen[3]["stdout"].replace("'nb3'", "'nbK'") == before
    assert all("UserWarning: once per place" in s["stderr"] for s in (seen[0], seen[2], seen[3])), seen
