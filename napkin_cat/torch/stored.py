"""A torch op's derivations on disk: searched in one process, read back in the next (issue 33).

A compiled op derives its forward and its backward at its first call (:mod:`.kernels`); the search takes seconds
to minutes, so its result is stored under the user's cache folder
(:func:`~napkin_cat.codegen.kernel.cache_root`, beside the compiled kernels) and a later process reads it instead
of searching again.  The file is named by a hash of everything the result depends on::

    key  = sha256(FORMAT, fingerprint, JSON of the function, sizes, memory | CPU model, threads, value bytes |
                  GPU model, depth, level, the rule book's name, rules and roles)
    file = <cache root>/derivations/<key>.json

where ``fingerprint`` (:mod:`.searched_code`) hashes the code a search and the kernels' printers run (the import
closure of the package's face, :mod:`.kernels` and the book's rules; docstrings, comments and positions not counted)
and the versions of the libraries it computes with, once per process, so that a changed search never serves an old
answer and a changed docstring keeps every stored one. A file is written whole (a temporary file renamed over it),
and read with checks: its format, key and fingerprint as expected, the algorithm's diagram read by
:mod:`napkin_cat.io` with the function's inputs and outputs, and its transfers ``H`` those the cost functor counts
at its tiles; a file that fails one is ignored with a :class:`StoredDerivationWarning` naming it and why, and the op
searches again (and rewrites it). ``NAPKIN_DERIVATION_CACHE=off`` turns the store off (``on``, or unset: on).

A store may name the code itself (``DerivationStore(folder, code=...)``: a hash of the source files, say): its keys
and checks then read that name instead of this process's fingerprint, so derivations made on one machine are read
on another whose Python or library versions differ (a GPU benchmark's, searched on a CPU machine and carried), and
the caller vouches that the name covers what the search runs.  A derivation with a mask from data at ``density`` of
its trips is keyed with it (``key(..., density=)``).

What is read back is a :class:`~napkin_cat.search.Derivation` with what the op reads and what its user inspects:
the algorithm, its trace (rule names and positions: it replays, without each step's diagrams), ``H``, the
variant, the tiles (``optimum``), memory, level, sizes, blocks and, for a derivation by predicted time, the
prediction.  What the search compared to choose it (``candidates``, ``timings``, the other regimes of a sweep,
the lower bound) is not stored.

>>> import tempfile, napkin_cat as nc
>>> f = nc.library.matmul()
>>> r = nc.derive(f, memory=64, sizes={"a": 8, "b": 6, "c": 4})
>>> store = DerivationStore(tempfile.mkdtemp())
>>> key = store.key(f, {"a": 8, "b": 6, "c": 4}, 64, depth=2)
>>> store.load(key, f) is None
True
>>> store.save(key, r)
>>> back = store.load(key, f)
>>> (back.diagram == r.diagram, back.H == r.H, str(back.variant) == str(r.variant),
...  back.optimum.exact_sizes == r.optimum.exact_sizes, back.trace.replay(f) == r.diagram)
(True, True, True, True, True)
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import uuid
import warnings
from pathlib import Path

import sympy

from napkin_cat.codegen.kernel import cache_root
from napkin_cat.cost.functor import cost
from napkin_cat.cost.optimum import Optimum
from napkin_cat.cost.record import Density
from napkin_cat.errors import ArgumentError, NapkinError
from napkin_cat.hardware.cpu import CPU
from napkin_cat.hardware.model import GPU
from napkin_cat.hardware.predict import Prediction
from napkin_cat.io.serial import dumps, from_json, to_json
from napkin_cat.rewriting.registry import rulebook
from napkin_cat.rewriting.trace import Trace
from napkin_cat.search.derivation import Derivation, Regime
from napkin_cat.search.schedule import Schedule
from napkin_cat.torch.searched_code import fingerprint
from napkin_cat.syntax.axis import symbol
from napkin_cat.syntax.sizes import Sizes

#: the layout of a stored derivation; a file of another format is ignored (and rewritten)
FORMAT = 1
#: the environment variable that turns the store off (``off``) or on (``on``, or unset)
SWITCH = "NAPKIN_DERIVATION_CACHE"
SWITCH_VALUES = {"on": True, "1": True, "off": False, "0": False}
#: the level every op derives at (level 1: the first below global memory; nc.derive's default)
LEVEL = 1


class StoredDerivationWarning(UserWarning):
    """A stored derivation could not be used (unreadable, of another key or code, or inconsistent): it is
    searched again."""


def enabled() -> bool:
    """Whether ops read and write stored derivations (``$NAPKIN_DERIVATION_CACHE``: ``on``/``1``, unset: on;
    ``off``/``0``: off); another value is an :class:`~napkin_cat.errors.ArgumentError`."""
    value = os.environ.get(SWITCH, "").strip().lower()
    if not value:
        return True
    if value not in SWITCH_VALUES:
        raise ArgumentError(f"${SWITCH}={os.environ[SWITCH]!r}: 'on' or 'off' (or 1 / 0; unset: on) say whether a "
                            f"torch op stores its derivations under {cache_root() / 'derivations'}")
    return SWITCH_VALUES[value]


def store() -> "DerivationStore | None":
    """The store ops use now: under the cache root, or None where ``$NAPKIN_DERIVATION_CACHE`` is off."""
    return DerivationStore(cache_root() / "derivations") if enabled() else None


def _memory_key(memory, threads, value_bytes) -> tuple:
    if isinstance(memory, CPU):
        return ("cpu", repr(memory), threads, value_bytes)
    if isinstance(memory, GPU):
        return ("gpu", repr(memory))
    if isinstance(memory, bool) or not isinstance(memory, int):
        raise NapkinError(f"a stored derivation is keyed by an int memory or a CPU or GPU model, not {memory!r}")
    return ("memory", memory)


def _names(mapping) -> dict:
    return {str(k): int(v) for k, v in mapping.items()}


class DerivationStore:
    """Derivations in a folder, one JSON file per key (see the module docstring)."""

    def __init__(self, folder, code: str | None = None):
        self.folder = Path(folder)
        if code is not None and (not isinstance(code, str) or not code):
            raise ArgumentError(f"a derivation store's code is a non-empty str naming the code that derives (a hash "
                                f"of its files, say), or None for this process's fingerprint; got {code!r}")
        self.code = code

    def __repr__(self):
        return f"DerivationStore({str(self.folder)!r}" + (f", code={self.code!r})" if self.code else ")")

    def _code(self, book) -> str:
        """What names the code that derives: the store's ``code`` where given (the caller vouches for it: a hash of
        the source files, the same on another machine and Python), else :func:`fingerprint` of this process."""
        return self.code if self.code is not None else fingerprint(book)

    def key(self, function, sizes: dict, memory, *, depth: int, threads: int | None = None,
            value_bytes: int | None = None, book=None, density=1) -> str:
        """The hash of everything a derivation of ``function`` at ``sizes`` and ``memory`` (an int, or the CPU
        model it is timed on with ``threads`` and ``value_bytes``, or a GPU model) depends on; ``density``: the
        fraction of a masked stream's trips a mask from data lets run (``nc.derive``'s; 1 is left out of the key)."""
        book = rulebook() if book is None else book
        parts = [FORMAT, self._code(book), dumps(function), sorted(_names(sizes).items()),
                 _memory_key(memory, threads, value_bytes), depth, LEVEL,
                 book.name, sorted(book.rules.names), sorted((k, str(v)) for k, v in book.roles.items())]
        if density != 1:
            parts.append(("density", str(density)))
        return hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()

    def path(self, key: str) -> Path:
        return self.folder / f"{key}.json"

    def save(self, key: str, r: Derivation):
        """Write ``r`` under ``key``, whole or not at all (a temporary file renamed); a folder that cannot be
        written is a warning (the op runs on, searching again next time)."""
        path = self.path(key)
        try:
            record = {"napkin_cat_derivation": FORMAT, "key": key, "fingerprint": self._code(rulebook()),
                      "derivation": _to_record(r)}
        except (TypeError, ValueError, AttributeError, NapkinError) as e:
            warnings.warn(f"could not store the derivation in {path}: {e}", StoredDerivationWarning, stacklevel=3)
            return
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex}.tmp")
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            tmp.write_text(json.dumps(record))
            os.replace(tmp, path)
        except OSError as e:
            with contextlib.suppress(OSError):      # nothing to remove where the folder is not one
                tmp.unlink(missing_ok=True)
            warnings.warn(f"could not store the derivation in {path}: {e}", StoredDerivationWarning, stacklevel=3)

    def load(self, key: str, function, *, book=None) -> Derivation | None:
        """The derivation stored under ``key`` (of ``function``), or None: none there, or one that fails a check
        (a :class:`StoredDerivationWarning` names the file and the check; the caller searches again)."""
        path = self.path(key)
        if not path.exists():
            return None
        try:
            record = json.loads(path.read_text())
            if not isinstance(record, dict) or record.get("napkin_cat_derivation") != FORMAT:
                raise ValueError(f"not a stored derivation of format {FORMAT}")
            if record.get("key") != key:
                raise ValueError("it was stored under another key")
            if record.get("fingerprint") != self._code(rulebook() if book is None else book):
                raise ValueError("it was derived by other code (napkin-cat, its rules or its libraries changed)"
                                 if self.code is None else f"it was derived by other code than {self.code}")
            return _from_record(record["derivation"], function, path)
        except (OSError, ValueError, KeyError, TypeError, AttributeError, NapkinError) as e:
            warnings.warn(f"ignoring the stored derivation {path}: {e}; searching again", StoredDerivationWarning,
                          stacklevel=3)
            return None


def _to_record(r: Derivation) -> dict:
    memory = r.memory if isinstance(r.memory, int) else [int(m) for m in r.memory]
    opt = r.optimum
    return {"diagram": to_json(r.diagram), "trace": r.trace.dumps(diagrams=False), "H": int(r.H),
            "variant": r.variant.as_json(), "memory": memory, "level": r.level, "sizes": _names(r.sizes),
            "optimum": {"sizes": _names(opt.sizes), "memory": None if opt.memory is None else int(opt.memory),
                        "exact_sizes": None if opt.exact_sizes is None else _names(opt.exact_sizes),
                        "notes": [str(n) for n in opt.notes]},
            "blocks": r.blocks, "prediction": None if r.prediction is None else r.prediction.to_dict(),
            "densities": [[str(a.symbol), None if a.value is None else str(a.value)] for a in r.assumptions]}


def _from_record(d: dict, function, path: Path) -> Derivation:
    diagram = from_json(d["diagram"])
    if diagram.dom != function.dom or diagram.cod != function.cod:
        raise ValueError(f"its algorithm maps {diagram.dom} to {diagram.cod}, the function {function.dom} to "
                         f"{function.cod}")
    H, level, sizes = int(d["H"]), int(d["level"]), _names(d["sizes"])
    o = d["optimum"]
    exact = None if o["exact_sizes"] is None else {symbol(k): sympy.Integer(v) for k, v in o["exact_sizes"].items()}
    optimum = Optimum(sympy.Integer(H), Sizes(_names(o["sizes"])), [(sympy.Integer(H), sympy.Integer(0))],
                      None if o["memory"] is None else sympy.Integer(o["memory"]), sympy.Integer(H), exact, None, None,
                      [*o["notes"], f"read back from {path}"])
    bound = {n: sympy.Rational(v) for n, v in d.get("densities", ()) if v is not None}  # (a mask from data: H there)
    counted = cost(diagram, sizes=optimum.sizes, density=bound or None).H[level]
    if int(counted) != H:
        raise ValueError(f"its algorithm moves {counted} values at level {level} at its tiles, not the {H} stored")
    trace, variant = Trace.loads(d["trace"]), Schedule.from_json(d["variant"])
    memory = d["memory"] if isinstance(d["memory"], int) else [int(m) for m in d["memory"]]
    c = cost(diagram)
    regime = Regime(variant, H, diagram, trace, c, optimum, memory=memory if isinstance(memory, int) else None)
    prediction = None if d["prediction"] is None else Prediction.from_dict(d["prediction"])
    return Derivation(function, diagram, trace, H=H, cost=c, optimum=optimum, variant=variant, regimes=(regime,),
                      memory=memory, level=level, sizes=sizes, blocks=d["blocks"], prediction=prediction,
                      assumptions=tuple(Density(a.symbol, bound.get(str(a.symbol), sympy.Integer(1)))
                                        for a in c.assumptions))   # (a density not stored: the search's 1)


__all__ = ["DerivationStore", "StoredDerivationWarning", "enabled", "fingerprint", "store", "FORMAT", "SWITCH"]
