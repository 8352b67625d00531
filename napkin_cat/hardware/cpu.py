"""CPU models as data: the caches a CPU kernel's tiles must fit, read from a small TOML file (``format = 1``).

A GPU model (:mod:`napkin_cat.hardware.model`) is about SMs, shared memory and pipelines; a CPU kernel needs
only where its level-1 values live.  The C kernel (``nc.codegen.c``) runs one block per thread with its
arena (the plan's level-1 columns) in that core's private cache, so the level-1 memory of a CPU is its
per-core L2: ``cpu.memory(1, "fp32")`` values, the ``memory=`` of ``nc.optimal`` / ``nc.derive``.

The format (every size carries its unit; ``?`` marks an optional field)::

    format = 1, name, description
    [sources]   free text: where each value comes from
    [caches]    l1d, l2 (per core), l3 (shared), line (bytes)
    [cores]     vector? (bytes in one vector register)

``this_cpu()`` reads the same sizes from Linux's sysfs (``/sys/devices/system/cpu/cpu0/cache``), the check
that a shipped file describes the machine at hand.

>>> zen4 = load_cpu("epyc-zen4")
>>> zen4.l2, zen4.memory(1, "fp32"), zen4.memory(1, "fp16")
(1048576, 262144, 524288)
>>> import napkin_cat as nc
>>> c = nc.cost(nc.group(nc.stream(nc.library.attention(), "x", "s_x"), "q", "g_q"))
>>> {str(k): v for k, v in zen4.tiles(c, {"q": 4096, "x": 4096, "d": 64}).sizes.items() if str(k) in ("g_q", "s_x")}
{'g_q': 1024, 's_x': 64}
>>> zen4.memory(2)
Traceback (most recent call last):
...
napkin_cat.errors.HardwareError: epyc-zen4: a CPU model has level 1 only (the per-core L2 that holds ...
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import sympy

from napkin_cat.hardware import files
from napkin_cat.hardware.errors import HardwareError
from napkin_cat.hardware.units import parse
from napkin_cat.syntax.dtype import as_dtype
from napkin_cat.cost.optimum import optimal
from napkin_cat.errors import MemoryLimitError

FORMAT = 1
CACHES = {"l1d": True, "l2": True, "l3": True, "line": True}
CORES = {"vector": False}
TOP = {"format", "name", "description", "sources", "caches", "cores"}
SYSFS = Path("/sys/devices/system/cpu/cpu0/cache")


@dataclass(frozen=True)
class CPU:
    """A CPU's caches in bytes: ``l1d`` and ``l2`` per core, ``l3`` shared, ``line``; ``vector`` bytes per register."""

    name: str
    description: str
    l1d: int
    l2: int
    l3: int
    line: int
    vector: int | None = None
    sources: dict = field(default_factory=dict, compare=False)

    def memory(self, level: int = 1, dtype: str = "fp32") -> int:
        """Values of ``dtype`` that fit the cache holding ``level`` (level 1: a core's L2, the C kernel's arena)."""
        if level != 1:
            raise HardwareError(f"{self.name}: a CPU model has level 1 only (the per-core L2 that holds the C "
                                f"kernel's arena), got level {level}")
        return self.l2 // as_dtype(dtype).bytes

    def tiles(self, cost, sizes: dict, dtype: str = "fp32", *, blocks: int = 1):
        """The tiles of a CPU kernel: the groups' from ``nc.optimal`` at the level-1 memory (:meth:`memory`), and
        the streams' the largest size (one for all, a divisor of every streamed axis) that leaves the optimal
        transfers ``H*`` unchanged and fits (a longer slice is fewer trips; transfers do not depend on it).
        ``blocks``: at least this many Grid blocks (the kernel's threads: one block runs on one thread); where
        the optimum has fewer, the longest group axis takes tiles that give enough, the cheapest of them.

        Returns the :class:`~napkin_cat.cost.optimum.Optimum` (``.sizes``: the axes and the tiles → int, ``.H``).
        """
        memory = self.memory(1, dtype)
        by_name = {str(k): v for k, v in sizes.items()}

        def value(e):
            e = sympy.sympify(e)
            return int(e.subs({a: by_name[str(a)] for a in e.free_symbols}))
        groups = [(str(t), value(f)) for g in cost.groups for t, f in zip(g.tiles, g.fulls)]
        best = optimal(cost, memory=memory, level=1, sizes=sizes, streams=1)
        legal = None
        if _blocks(best, groups) < blocks:
            tile, full = max(groups, key=lambda g: g[1])
            others = _blocks(best, [g for g in groups if g[0] != tile])
            need = -(-blocks // others)
            legal = {tile: [t for t in range(1, full + 1) if full % t == 0 and full // t >= need] or [1]}
            best = optimal(cost, memory=memory, level=1, sizes=sizes, streams=1, candidates=legal)
        fulls = [value(full) for _, s, full in cost.streams if not isinstance(s, int)]
        chosen, common = best, math.gcd(*fulls) if fulls else 1
        for s in (k for k in range(2, common + 1) if common % k == 0):
            try:
                o = optimal(cost, memory=memory, level=1, sizes=sizes, streams=s, candidates=legal)
            except MemoryLimitError:
                break
            if o.H == best.H:
                chosen = o
        return chosen


def _blocks(optimum, groups) -> int:
    """The Grid blocks of ``groups`` (tile name, axis size) at ``optimum``'s tiles."""
    tiles = {str(k): int(v) for k, v in optimum.sizes.items()}
    return math.prod(-(-full // tiles[t]) for t, full in groups)


def cpus() -> list[str]:
    """The names of the shipped CPU models."""
    folder = resources.files("napkin_cat.hardware") / "cpus"
    return sorted(p.name[:-len(".toml")] for p in folder.iterdir() if p.name.endswith(".toml"))


def load_cpu(name_or_path) -> CPU:
    """A CPU model by name (``"epyc-zen4"``) or from the path of a user's TOML file."""
    if isinstance(name_or_path, CPU):
        return name_or_path
    path = files.as_path(name_or_path, "CPU model")
    if path.suffix == ".toml" or "/" in str(name_or_path):
        data, where = files.read_toml(path, "CPU model")
    else:
        name = str(name_or_path).lower()
        if name not in cpus():
            raise HardwareError(f"no CPU model called {name!r}; shipped CPU models are {', '.join(cpus())} (or give "
                                "the path of a .toml file)")
        where = f"{name}.toml"
        data = files.parse_toml((resources.files("napkin_cat.hardware") / "cpus" / where).read_text(), where)
    if type(data.get("format")) is not int or data["format"] != FORMAT:
        raise HardwareError(f"{where}: format must be {FORMAT}, got {data.get('format')!r}")
    unknown = set(data) - TOP
    if unknown:
        raise HardwareError(f"{where}: unknown field(s) {sorted(unknown)}; a CPU model has {sorted(TOP)}")
    values = {}
    for section, fields in (("caches", CACHES), ("cores", CORES)):
        sec = files.known_fields(data.get(section, {}), fields, where, f"[{section}]")
        for key, required in fields.items():
            if key not in sec:
                if required:
                    raise HardwareError(f"{where}: [{section}] needs {key} (bytes, e.g. \"1 MiB\")")
                continue
            v = parse(sec[key], "bytes", where=f"{where} [{section}] {key}")
            if v.denominator != 1:
                raise HardwareError(f"{where}: [{section}] {key} must be a whole number of bytes, got {sec[key]!r}")
            values[key] = int(v)
    if not values["l1d"] <= values["l2"] <= values["l3"]:
        raise HardwareError(f"{where}: caches must grow outwards (l1d ≤ l2 ≤ l3), got {values['l1d']}, "
                            f"{values['l2']}, {values['l3']} bytes")
    return CPU(files.text(data, "name", where, default=where), files.text(data, "description", where, default=""),
               values["l1d"], values["l2"], values["l3"], values["line"], values.get("vector"),
               files.texts(data, "sources", where))


def this_cpu(root=SYSFS) -> dict | None:
    """The caches of this machine's first core from Linux's sysfs (``{"l1d", "l2", "l3", "line"}`` in bytes), or
    None where sysfs does not say (another OS, a container without it)."""
    root = Path(root)
    out = {}
    try:
        for index in sorted(root.glob("index*")):
            level = (index / "level").read_text().strip()
            kind = (index / "type").read_text().strip()
            size = (index / "size").read_text().strip()
            key = {("1", "Data"): "l1d", ("2", "Unified"): "l2", ("3", "Unified"): "l3"}.get((level, kind))
            if key is None:
                continue
            out[key] = int(parse(size.replace("K", " KiB").replace("M", " MiB"), "bytes"))
            out["line"] = int((index / "coherency_line_size").read_text().strip())
    except (OSError, ValueError, HardwareError):
        return None
    return out if {"l1d", "l2", "l3"} <= set(out) else None
