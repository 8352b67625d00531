"""A generated kernel as an object: its source, a folder to save it in, its arguments checked against the plan.

``k.source`` is the text; ``k.save(folder)`` writes the source and a launcher; ``k(*arrays)`` (where the
machine can run it) returns what ``p(*arrays)`` returns.  Compiled artefacts are cached by the hash of
their source and flags in the user's cache folder (``$NAPKIN_CACHE``, else ``$XDG_CACHE_HOME/napkin-cat``,
else ``~/.cache/napkin-cat``), never in the repository.
"""
from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import numpy as np
import sympy

from napkin_cat.codegen.errors import CodegenError, ToolNotFoundError
from napkin_cat.errors import BlockMaskError, ShapeError
from napkin_cat.plan.condition import check, derived_states


NUMPY = {"fp32": np.float32, "fp16": np.float16, "int32": np.int32, "bool": np.bool_}


def cache_root() -> Path:
    """The user's napkin-cat cache folder: ``$NAPKIN_CACHE``, else ``$XDG_CACHE_HOME/napkin-cat``, else
    ``~/.cache/napkin-cat`` (compiled kernels under ``kernels/``, a torch op's derivations under ``derivations/``)."""
    return Path(os.environ.get("NAPKIN_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "napkin-cat"))


def cache_dir() -> Path:
    """The folder for compiled kernels (created on first use)."""
    path = cache_root() / "kernels"
    path.mkdir(parents=True, exist_ok=True)
    return path


def digest(*parts) -> str:
    """A short hash of ``parts`` (each as text, separated): the cache key of a compiled kernel.

    >>> digest("int x;", ("-O3",)) == digest("int x;", ("-O3",)) != digest("int x;", ("-O2",))
    True
    """
    h = hashlib.sha256()
    for p in parts:
        h.update(str(p).encode())
        h.update(b"\0")
    return h.hexdigest()[:20]


def tool(name: str, *, env: str | None = None, fallback: tuple = (), purpose: str = "") -> str:
    """The path of a command-line tool (``$env`` first, then PATH, then ``fallback``); else a typed error."""
    candidates = ([os.environ[env]] if env and os.environ.get(env) else []) + [name, *fallback]
    for c in candidates:
        found = shutil.which(c)
        if found:
            return found
    raise ToolNotFoundError(f"{name} is not on this machine (looked for {candidates}); it is needed to {purpose}")


class GeneratedKernel:
    """Source text for a plan, with what this machine can do with it (see the subclasses)."""

    backend = "code"
    suffix = ".txt"

    def __init__(self, plan, source: str, printer):
        self.plan, self.source, self.printer = plan, source, printer

    def __repr__(self):
        sizes = {str(k): v for k, v in self.plan.sizes.items()}
        return f"{type(self).__name__}({len(self.source.splitlines())} lines, sizes={sizes})"

    def __str__(self):
        return self.source

    # ------------------------------------------------------------------ files
    def launcher(self) -> str:
        """A small program that loads and runs the saved kernel (the backend's)."""
        raise NotImplementedError

    def save(self, folder) -> list[Path]:
        """Write ``kernel<suffix>`` and ``launch.py`` into ``folder``; returns their paths."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        src = folder / f"kernel{self.suffix}"
        src.write_text(self.source)
        launch = folder / "launch.py"
        launch.write_text(self.launcher())
        return [src, launch]

    # ------------------------------------------------------------------ arguments
    def shapes(self) -> tuple[list, list]:
        """Shapes of the plan's inputs and outputs at its sizes (worked out once: a call checks its arguments
        against them, and sympy's substitutions cost milliseconds)."""
        if getattr(self, "_shapes", None) is None:
            def shape(name):
                return tuple(int(sympy.sympify(e).subs(self.plan.sizes)) for _, e in self.plan.variable_map[name].shape)
            self._shapes = ([shape(n) for n in self.plan.inputs], [shape(n) for n in self.plan.outputs])
        ins, outs = self._shapes
        return list(ins), list(outs)

    def numpy_dtype(self, name: str):
        """The numpy type of a global variable's values (fp32 → float32, fp16 → float16)."""
        dt = self.plan.variable_map[name].dtype
        if dt not in NUMPY:
            raise CodegenError(f"the {self.backend} kernel exchanges {sorted(NUMPY)} arrays with numpy; {name} is "
                               f"{dt}: cast it in the diagram (nc.cast) to one of them")
        return NUMPY[dt]

    def check(self, arrays) -> list:
        """The arguments as C-ordered numpy arrays of their variables' formats (float32 for fp32), after
        checking their number and shapes."""
        ins, _ = self.shapes()
        if len(arrays) != len(ins):
            raise ShapeError(f"the {self.backend} kernel takes {len(ins)} array(s) of shapes {ins}, got {len(arrays)}")
        out = []
        for k, (name, want, x) in enumerate(zip(self.plan.inputs, ins, arrays)):
            x = np.asarray(x)
            if x.shape != want:
                raise ShapeError(f"argument {k} ({name}, axes {list(self.plan.variable_map[name].axes)}) must have "
                                 f"shape {want} at the plan's sizes, got {x.shape}")
            out.append(np.ascontiguousarray(x, dtype=self.numpy_dtype(name)))
        return out

    # ------------------------------------------------------------------ block tables
    def block_mask(self, *arrays):
        """The data's block mask of the mask this kernel drops on a full trip, derived from ``arrays`` (its
        inputs): :meth:`~napkin_cat.plan.program.Plan.block_mask` of its plan, to be given to every call on them."""
        return self.printer.written.block_mask(*arrays)

    def block_arguments(self, arrays=(), block_mask=None, blocks=None) -> list:
        """The block tables a run on ``arrays`` passes (:mod:`napkin_cat.plan.blocks`), one per stream loop of the
        plan whose skip test reads a mask from data: ``block_mask`` (the data's, :meth:`block_mask`; ``"data"``:
        derived here) read at the kernel's tiles, or ``blocks``, the tables themselves (int8 arrays of the
        tables' shapes, :data:`~napkin_cat.algorithms.blockmask.NONE` / ``PARTIAL`` / ``FULL``); with neither,
        None each (every trip runs masked).  A block mask or tables other than the data's block mask of the mask
        the kernel drops on a full trip are refused (:func:`~napkin_cat.plan.condition.tables`): a full trip
        does not look at the mask."""
        plan = self.printer.written
        found = list(self.printer.block_tables.values())
        if block_mask is not None and blocks is not None:
            raise BlockMaskError("give block_mask= (the data's) or blocks= (its tables at the kernel's tiles), not "
                                 "both")
        if block_mask is None and blocks is None:
            return [None] * len(found)
        if not found:
            raise BlockMaskError("a block mask was given, but no stream of this kernel's plan has a mask read from "
                                 "data (a mask from positions alone is decided by interval arithmetic); give none")
        if not len(arrays):
            raise BlockMaskError("a block mask is checked against the data it is of: give the kernel's inputs too")
        arrays = self.check(arrays)
        if block_mask is not None:
            return [np.ascontiguousarray(t, dtype=np.int8) for t in plan.block_states(block_mask, arrays)]
        blocks = list(blocks)
        if len(blocks) != len(found):
            raise BlockMaskError(f"the kernel reads {len(found)} block table(s) (shapes {[t.shape for t in found]}), "
                                 f"got {len(blocks)}")
        out = []
        for t, b in zip(found, blocks):
            b = np.asarray(b)
            if b.shape != t.shape or not np.isin(b, (0, 1, 2)).all():
                raise BlockMaskError(f"block table {t.number} (stream over {t.loop.axis!r}, indices "
                                     f"{[str(i) for i, _ in t.indices]}) must have shape {t.shape} with entries 0 "
                                     f"none, 1 partial, 2 full; got shape {b.shape}")
            check(t, b, derived_states(plan, arrays, t))
            out.append(np.ascontiguousarray(b, dtype=np.int8))
        return out
