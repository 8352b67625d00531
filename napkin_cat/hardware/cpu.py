"""CPU models as data: the caches a CPU kernel's tiles must fit and the rates its time is predicted from, read
from a small TOML file (``format = 2``; ``format = 1`` files, caches only, still load).

A GPU model (:mod:`napkin_cat.hardware.model`) is about SMs, shared memory and pipelines; a CPU kernel needs
only where its level-1 values live and how fast one core moves and computes them.  The C kernel
(``nc.codegen.c``) runs one block per thread with its arena (the plan's level-1 columns) in that core's private
cache, so the level-1 memory of a CPU is its per-core L2: ``cpu.memory(1, "fp32")`` values, the ``memory=`` of
``nc.optimal`` / ``nc.derive``.

The format (every size and rate carries its unit; ``?`` marks an optional field)::

    format = 2, name, description
    [sources]    free text: where each value comes from
    [caches]     l1d, l2 (per core), l3 (shared), line (bytes)
    [cores]      vector? (bytes in one vector register)
    [bandwidth]  l3, dram: one core copying tiles into its cache from L3 / from DRAM (B/s)          format 2 only
    [compute]    contraction: {smallest dimension = FLOP/s} (a matrix product whose m, n or k is that
                 small), special (exp), general (the other arithmetic): one core, FLOP/s           format 2 only
                 contraction_call? (seconds): what one ``cblas_sgemm`` call costs beyond its FLOPs at the
                 table's rate (absent: 0)

The rates are measured (``benchmarks/calibrate_cpu.py`` writes them, naming the machine); the time model
(:mod:`~napkin_cat.hardware.cputime`) reads them.  A contraction's rate between two measured smallest dimensions
is interpolated linearly in their logarithm, and held at the end points outside them, on the measured rates'
running maximum (a product whose smallest dimension is ``s`` can be cut into products whose smallest dimension is
any ``s' ≤ s``, so it runs at least as fast: a measured dip above a smaller dimension is the machine's noise, and
read as a rate it steered the choice of tiles to the dip's edge, ``g_q = 32`` where ``256`` ran 1.4× faster)::

    r̂_i     = max(r_0, …, r_i)
    rate(s) = r̂_i + (r̂_{i+1} - r̂_i) · log(s / d_i) / log(d_{i+1} / d_i)      d_i ≤ s ≤ d_{i+1}

The table's shapes keep the other two dimensions at 256; a product whose every dimension is small pays, per call,
what its packing and dispatch cost beyond its FLOPs (``contraction_call``: a 64×64×64 product ran at 23 GFLOP/s
where 256×128×64 ran at 27.5 on the development machine), so a call of ``F`` FLOPs takes::

    F / rate(s) + contraction_call

``this_cpu()`` reads the caches from Linux's sysfs (``/sys/devices/system/cpu/cpu0/cache``), the check that a
shipped file describes the machine at hand; ``load_cpu("this-cpu")`` is a model of those caches with the rates of
the shipped model whose caches are the same (none: no rates).

>>> zen4 = load_cpu("epyc-zen4")
>>> zen4.l2, zen4.memory(1, "fp32"), zen4.memory(1, "fp16")
(1048576, 262144, 524288)
>>> dev = load_cpu("epyc-zen3-dev")              # format 2: the development machine's measured rates
>>> zen4.timed, dev.timed, dev.contraction_rate(1) < dev.contraction_rate(16)
(False, True, True)
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

import dataclasses
import math
import platform
from dataclasses import dataclass, field
from pathlib import Path

import sympy

from napkin_cat.hardware import files
from napkin_cat.hardware.errors import HardwareError
from napkin_cat.hardware.units import parse
from napkin_cat.syntax.dtype import as_dtype
from napkin_cat.cost.optimum import optimal
from napkin_cat.errors import MemoryLimitError

#: format 1: caches only; format 2: the time model's rates too ([bandwidth], [compute])
FORMATS = (1, 2)
CACHES = {"l1d": True, "l2": True, "l3": True, "line": True}
CORES = {"vector": False}
BANDWIDTH = ("l3", "dram")
COMPUTE = ("contraction", "special", "general")
#: the optional fields of [compute]
COMPUTE_OPTIONAL = ("contraction_call",)
TOP = {"format", "name", "description", "sources", "caches", "cores", "bandwidth", "compute"}
#: the name of the model of this machine (:func:`load_cpu`)
THIS_CPU = "this-cpu"
#: the script that measures a format-2 model's rates
CALIBRATION = "benchmarks/calibrate_cpu.py"
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
    #: bytes per second one core copies into its cache from L3 and from DRAM (None: a format-1 model)
    l3_bandwidth: float | None = None
    dram_bandwidth: float | None = None
    #: ``((smallest dimension, FLOP/s), ...)`` ascending: one core's matrix products by their smallest dimension
    contraction: tuple = ()
    #: FLOP/s of one core on the special (exp) and general pipelines
    special: float | None = None
    general: float | None = None
    #: seconds one contraction call (``cblas_sgemm``) costs beyond its FLOPs at :meth:`contraction_rate`
    contraction_call: float = 0.0

    @property
    def timed(self) -> bool:
        """Whether the model has the rates the time model needs (a format-2 file)."""
        return self.l3_bandwidth is not None

    def require_rates(self, what: str = "the CPU time model") -> CPU:
        """This model, checked to have rates; else a :class:`HardwareError` naming the fields and the script."""
        if not self.timed:
            raise HardwareError(f"{self.name}: {what} needs a format-2 CPU model ([bandwidth] l3, dram and [compute] "
                                f"contraction, special, general: one core's measured rates); this one has caches "
                                f"only. Run {CALIBRATION} on the machine and add its TOML block to the model's file")
        return self

    def contraction_rate(self, smallest) -> float:
        """FLOP/s of one core on a matrix product whose smallest dimension is ``smallest`` (interpolated in its
        logarithm between the measured ones' running maximum, held outside them: see the module docstring)."""
        table = self.require_rates().contraction
        table = [(d, max(r for _, r in table[:i + 1])) for i, (d, _) in enumerate(table)]     # the running maximum
        if smallest <= table[0][0]:
            return table[0][1]
        for (d0, r0), (d1, r1) in zip(table, table[1:]):
            if smallest <= d1:
                return r0 + (r1 - r0) * math.log(smallest / d0) / math.log(d1 / d0)
        return table[-1][1]

    def bandwidth(self, footprint: int) -> float:
        """Bytes per second one core fills its cache at when the data it reads (``footprint`` bytes) fits L3 (the
        model's ``l3``), else DRAM's."""
        self.require_rates()
        return self.l3_bandwidth if footprint <= self.l3 else self.dram_bandwidth

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
    return files.shipped("cpus")


def load_cpu(name_or_path) -> CPU:
    """A CPU model by name (``"epyc-zen4"``) or from the path of a user's TOML file."""
    if isinstance(name_or_path, CPU):
        return name_or_path
    if isinstance(name_or_path, str) and name_or_path.lower() == THIS_CPU:
        found = this_cpu_model()
        if found is None:
            raise HardwareError(f"{THIS_CPU}: sysfs ({SYSFS}) does not give this machine's caches; name a CPU model "
                                f"({', '.join(cpus())}) or the path of a .toml file")
        return found
    data, where = files.read_named(name_or_path, "cpus", "CPU model", plural="CPU models")
    return _from_table(data, where)


def _from_table(data: dict, where: str) -> CPU:
    """A :class:`CPU` from a TOML file's table (``where``: the file, for the errors)."""
    fmt = data.get("format")
    if type(fmt) is not int or fmt not in FORMATS:
        raise HardwareError(f"{where}: format must be one of {FORMATS} (1: caches; 2: caches and rates), got {fmt!r}")
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
    rates = _rates(data, where) if fmt == 2 else {}
    if fmt == 1 and ({"bandwidth", "compute"} & set(data)):
        raise HardwareError(f"{where}: [bandwidth] and [compute] are fields of format 2; write format = 2 (and give "
                            f"both, measured by {CALIBRATION})")
    return CPU(files.text(data, "name", where, default=where), files.text(data, "description", where, default=""),
               values["l1d"], values["l2"], values["l3"], values["line"], values.get("vector"),
               files.texts(data, "sources", where), **rates)


def _rates(data: dict, where: str) -> dict:
    """The time model's rates of a format-2 file: [bandwidth] and [compute], every field required."""
    out = {}
    for section, fields in (("bandwidth", BANDWIDTH), ("compute", COMPUTE)):
        optional = COMPUTE_OPTIONAL if section == "compute" else ()
        sec = files.known_fields(data.get(section, {}), fields + optional, where, f"[{section}]")
        missing = [k for k in fields if k not in sec]
        if missing:
            raise HardwareError(f"{where}: [{section}] needs {', '.join(missing)} (format 2: one core's rates, "
                                f"measured by {CALIBRATION})")
    bw = data["bandwidth"]
    out["l3_bandwidth"] = float(parse(bw["l3"], "bandwidth", where=f"{where} [bandwidth] l3"))
    out["dram_bandwidth"] = float(parse(bw["dram"], "bandwidth", where=f"{where} [bandwidth] dram"))
    comp = data["compute"]
    for key in ("special", "general"):
        out[key] = float(parse(comp[key], "throughput", where=f"{where} [compute] {key}"))
    table = comp["contraction"]
    if not isinstance(table, dict) or not table:
        raise HardwareError(f"{where}: [compute] contraction must be a table of smallest dimension = FLOP/s, such as "
                            f"{{ \"1\" = \"2.3 GFLOP/s\", \"64\" = \"26 GFLOP/s\" }}; got {table!r}")
    rows = []
    for key, rate in table.items():
        if not (isinstance(key, str) and key.isdigit() and int(key) >= 1):
            raise HardwareError(f"{where}: [compute] contraction has the key {key!r}; its keys are smallest "
                                f"dimensions, whole numbers ≥ 1 (\"1\", \"2\", \"64\")")
        rows.append((int(key), float(parse(rate, "throughput", where=f"{where} [compute] contraction {key}"))))
    out["contraction"] = tuple(sorted(rows))
    if "contraction_call" in comp:
        call = float(parse(comp["contraction_call"], "time", where=f"{where} [compute] contraction_call"))
        if call < 0:
            raise HardwareError(f"{where}: [compute] contraction_call is a time ≥ 0 (what one cblas_sgemm call costs "
                                f"beyond its FLOPs, e.g. \"3 us\"), got {comp['contraction_call']!r}")
        out["contraction_call"] = call
    return out


def this_cpu_model(root=SYSFS) -> CPU | None:
    """The model of this machine: its caches from sysfs (:func:`this_cpu`), with the rates of the shipped model whose
    caches are the same (the first by name; none: a model without rates); None where sysfs does not say."""
    found = this_cpu(root)
    if found is None:
        return None
    caches = (found["l1d"], found["l2"], found["l3"], found["line"])
    same = next((m for m in map(load_cpu, cpus()) if (m.l1d, m.l2, m.l3, m.line) == caches), None)
    if same is None:
        return CPU(THIS_CPU, "this machine's caches (sysfs); no shipped model has them, so no rates", *caches)
    return dataclasses.replace(same, name=THIS_CPU, description=f"this machine's caches (sysfs), with the rates of "
                               f"{same.name} (the shipped model with the same caches)")


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


def this_cpu_name(cpuinfo="/proc/cpuinfo") -> str:
    """This machine's processor as Linux names it (``model name`` of ``/proc/cpuinfo``), else what Python's
    :mod:`platform` says (another OS): the machine a benchmark's results were measured on.

    >>> isinstance(this_cpu_name(), str) and this_cpu_name() != ""
    True
    """
    try:
        for line in Path(cpuinfo).read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"
