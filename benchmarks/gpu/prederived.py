"""Derivations searched before the device's call and carried to it: the training step's rows (``training.py``,
``losses.py``) derived here, on a CPU, for each GPU model, and read back on the device instead of searched there.
A row's two derivations take 5-20 CPU seconds (126 s for the eleven rows of the two phases of ``device_run.sh``
on a two-core machine, 2026-12-04); on the device those seconds are the session's device time.

    python benchmarks/gpu/prederived.py [--models h100-sxm5 h200] [--only backward,flce] [--dry-run] [--out DIR]

Each derivation is the benchmark's own call, ``nc.derive(f, sizes=..., hardware=<model>)`` of a row's forward or
backward (a mask from data at the density its data lets through), kept in a
:class:`~napkin_cat.torch.stored.DerivationStore` whose code is named by :func:`source_hash`: the bytes of every
file of the library and its rules (``napkin_cat/``, ``rewrites/``; the function searched is in the key, as JSON),
the same on the device whatever its Python and library versions.  The device reads a derivation only where its own
tree has that hash and the algorithm moves the stored ``H`` at its tiles (the store's check); else it searches, as
without the folder.  ``index.json`` says, per file, the host, Python and sympy it was searched with and how long it
took; a row records where its derivations came from (``derived``).

>>> source_hash() == source_hash() and len(source_hash()) == 64 + len("sha256:")
True
"""
from __future__ import annotations

import argparse
import hashlib
import json
import platform
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

import napkin_cat as nc   # noqa: E402
from napkin_cat.torch.stored import DerivationStore   # noqa: E402
import losses    # noqa: E402
import measure   # noqa: E402
import training  # noqa: E402

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
    """The derivations of a folder (written by :func:`main`), read where the tree's :func:`source_hash` (or
    ``code``) is theirs."""

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


def functions(cfg: dict) -> tuple:
    """``((f, g), sizes, density)``: a row's forward and backward functions, sizes and density, as its module's
    ``run_case`` derives them (``training.functions``, ``losses.functions``)."""
    if cfg["kind"] == "flce":
        return (*losses.functions(cfg), 1.0)
    return (*training.functions(cfg), training.density(cfg))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", nargs="+", default=["h100-sxm5", "h200"], help="the GPU models to derive for")
    ap.add_argument("--only", help="comma-separated kinds (default: every training row, "
                                   f"{', '.join(training.KINDS)}, flce)")
    ap.add_argument("--quick", action="store_true", help="the rows of run.py --quick (device_run.sh's)")
    ap.add_argument("--dry-run", action="store_true", help="the dry run's tiny rows")
    ap.add_argument("--out", default=str(HERE / "derived"), help="the folder (carried to the device)")
    args = ap.parse_args(argv)
    kinds = set(args.only.split(",")) if args.only else None
    folder = Path(args.out)
    folder.mkdir(parents=True, exist_ok=True)
    store = Prederived(folder)
    rows = [c for c in training.configurations(args.dry_run, args.quick) + losses.configurations(args.dry_run,
                                                                                               args.quick)
            if kinds is None or c["kind"] in kinds]
    host = {"host": platform.node(), "python": platform.python_version(), "sympy": _version("sympy"),
            "code": store.store.code}
    for model in args.models:
        for cfg in rows:
            (f, g), sizes, rho = functions(cfg)
            for name, fn in (("forward", f), ("backward", g)):
                key = store.key(fn, sizes, model, rho)
                if store.store.load(key, fn) is not None:
                    print(f"{model:10} {cfg['kind']:9} {name:8} kept", flush=True)
                    continue
                r, where = measure.searched(fn, sizes, model, rho)
                store.store.save(key, r)
                store.index[key] = {**host, "model": model, "row": cfg, "pass": name, "seconds": where["seconds"]}
                (folder / INDEX).write_text(json.dumps(store.index, indent=1))
                print(f"{model:10} {cfg['kind']:9} {name:8} {where['seconds']:6.1f} s  {r.variant}", flush=True)
    return 0


def _version(name: str) -> str:
    from importlib.metadata import version
    return version(name)


if __name__ == "__main__":
    sys.exit(main())
