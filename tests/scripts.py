"""The repository's scripts (benchmarks, examples, CI helpers) loaded as modules, for the tests that call their
functions: one loader, not one per test file.

>>> load_script("benchmarks/zigzag_published.py").__name__
'zigzag_published'
"""
from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def load_script(path: str | Path, name: str | None = None, *, register: bool = False):
    """Execute the script at ``path`` (relative to the repository's root, or absolute) as a fresh module named
    ``name`` (the file's stem by default); ``register`` puts it in ``sys.modules`` first (dataclasses resolve their
    annotations through the module's entry there)."""
    path = ROOT / path
    if not path.is_file():
        raise FileNotFoundError(f"no script at {path}")
    spec = importlib.util.spec_from_file_location(name or path.stem, path)
    module = importlib.util.module_from_spec(spec)
    if register:
        sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def import_beside(folder: str | Path, name: str):
    """Import the module ``name`` from ``folder`` (relative to the root), whose modules import each other by name
    (``benchmarks/gpu``): the folder is on ``sys.path`` for the import only."""
    folder = str(ROOT / folder)
    sys.path.insert(0, folder)
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(folder)
