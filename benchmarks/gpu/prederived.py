"""Derivations searched before the device's call and carried to it: each row's ``nc.derive(f, sizes=...,
hardware=<model>)`` searched here, on a CPU, for each GPU model, and read back on the device instead of searched
there.  A training row's two derivations take 5-20 CPU seconds (126 s for the eleven rows of the two phases of
``device_run.sh`` on a two-core machine, 2026-12-04); on the device those seconds are the session's device time.

    python benchmarks/gpu/run.py --quick --prederive --derived benchmarks/gpu/derived [--models h100-sxm5 h200]

searches them (the rows ``run.py`` would run with the same ``--quick``, ``--dry-run`` and ``--only``: the rows' own
functions, a mask from data at its data's density) and keeps them in a
:class:`~napkin_cat.torch.stored.DerivationStore` whose code is named by :func:`source_hash`: the bytes of every
file of the library and its rules (``napkin_cat/``, ``rewrites/``; the function searched is in the key, as JSON),
the same on the device whatever its Python and library versions.  ``run.py --derived DIR`` reads a derivation only
where its own tree has that hash and the algorithm moves the stored ``H`` at its tiles (the store's check); else it
searches, as without the folder.  ``index.json`` says, per file, the row, the host, Python and sympy it was searched
with and how long it took; a row records where its derivations came from (``derived``).

>>> source_hash() == source_hash() and len(source_hash()) == 64 + len("sha256:")
True
"""
from __future__ import annotations

import hashlib
import json
import platform
import sys
import time
from importlib.metadata import version
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

import napkin_cat as nc   # noqa: E402
from napkin_cat.torch.stored import DerivationStore   # noqa: E402
import measure   # noqa: E402

#: the code a search runs: the library and its rules (what it searches, the function, is in the key itself)
SOURCES = ("napkin_cat", "rewrites")
#: ``nc.derive``'s default number of prepare rewrites, the one the rows derive with
DEPTH = 2
INDEX = "index.json"


def source_hash(root: Path = ROOT) -> str:
    """``sha256:<hex>`` of the relative path and bytes of every file of :data:`SOURCES` (compiled files and caches
    left out), in path order: the name of the code that derives, the same on any machine holding the same tree."""
    h = hashlib.sha256()
    for entry in SOURCES:
        path = root / entry
        files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file()
                                                     and "__pycache__" not in p.parts and p.suffix != ".pyc")
        for f in files:
            h.update(str(f.relative_to(root)).encode() + b"\0" + f.read_bytes() + b"\0")
    return "sha256:" + h.hexdigest()


class Prederived:
    """The derivations of a folder (written by :meth:`keep`: ``run.py --prederive``), read where the tree's
    :func:`source_hash` (or ``code``) is theirs."""

    def __init__(self, folder, code: str | None = None):
        self.folder = Path(folder)
        self.store = DerivationStore(self.folder, code=code or source_hash())
        index = self.folder / INDEX
        self.index = json.loads(index.read_text()) if index.exists() else {}

    def key(self, f, sizes: dict, model: str, density: float) -> str:
        return self.store.key(f, sizes, nc.hardware.load(model), depth=DEPTH, density=density)

    def derive(self, f, sizes: dict, model: str, density: float = 1.0) -> tuple:
        """``(derivation, where)``: the folder's derivation of ``f`` for ``model`` where it holds one of this code
        (``where``: the index's record of its search), else ``nc.derive``'s, searched now (``where``: so saying)."""
        key = self.key(f, sizes, model, density)
        t0 = time.perf_counter()
        r = self.store.load(key, f)
        if r is not None:
            return r, {"from": "prederived", "file": f"{key}.json", "read_s": time.perf_counter() - t0,
                       **self.index.get(key, {})}
        r, where = measure.searched(f, sizes, model, density)
        where["prederived"] = (f"none of this tree's code ({self.store.code}) in {self.folder}" if self.index else
                               f"{self.folder} holds none")
        return r, where

    def keep(self, f, sizes: dict, model: str, density: float, about: dict) -> tuple:
        """``(derivation, seconds)``: ``f``'s derivation for ``model`` searched and written, with ``about`` (the row,
        the pass), the host and the seconds in the index; ``seconds`` None where the folder held it already."""
        key = self.key(f, sizes, model, density)
        r = self.store.load(key, f)
        if r is not None:
            return r, None
        r, where = measure.searched(f, sizes, model, density)
        self.store.save(key, r)
        self.index[key] = {**about, "model": model, "host": platform.node(), "python": platform.python_version(),
                           "sympy": version("sympy"), "code": self.store.code, "seconds": where["seconds"]}
        (self.folder / INDEX).write_text(json.dumps(self.index, indent=1))
        return r, where["seconds"]
