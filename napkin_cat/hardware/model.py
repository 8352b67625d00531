"""GPU models as data: a small, versioned, validated TOML format (``format = 1``), and ``load``.

A model is read, never coded: ``load("h100-sxm5")`` reads ``models/h100-sxm5.toml`` shipped with
the package, ``load("my-gpu.toml")`` reads a user's file.  Every quantity carries its unit
(:mod:`napkin_cat.hardware.units`) and is stored exactly (``Fraction``) in base units: Hz, bytes,
bytes per second, operations per clock per SM.  Unstated assumptions are fields (errata D-14: the
clock ``f_K`` behind 295 and 1.32 PFLOP/s is ``[clock] f_K``, with the boost clock beside it).

The format (sections, fields, units; ``?`` marks an optional field)::

    format = 1, name, description, compute_capability, hierarchy (a toy hierarchy: hopper, ampere)
    [sources]    free text: where each value comes from
    [clock]      f_K (frequency: the clock the throughput model uses), boost
    [sm]         count, warp, warpgroup?, max_threads_per_block, max_threads_per_sm   (counts)
    [memory]     gmem, l2, smem_per_sm, smem_per_block, registers_per_sm, registers_per_block,
                 registers_per_thread (counts of registers), register_bytes, transaction (bytes)
    [bandwidth]  hbm, l2_to_smem?, gmem_to_smem?, smem (B/clk per SM), sm_to_sm? {cluster size: bandwidth}
    [pipelines.P] for P in tensor, special, general: rate_by (operands | output), computes_in?, widen?
                 {dtype: dtype}, and one rate (ops/clk per SM) per dtype (fp32, fp16, bf16, fp8)
    [[tensor_shapes]] instruction, dtypes, m, n, k, n_max?   (a tile multiple of m, n, k; n up to n_max)

>>> h = load("h100-sxm5")
>>> h.sm_count, float(h.f_K), h.smem_per_block, h.rate("tensor", "fp8")
(132, 1830000000.0, 232448, 8192)
>>> float(h.peak("tensor", "fp16")) / 1e12     # 132 SMs x 4096 FLOP/clk x 1.83 GHz
989.42976
>>> load("b300")
Traceback (most recent call last):
...
napkin_cat.errors.HardwareError: no hardware model called 'b300'; shipped models are a100, h100-pcie, ...
"""
from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

from napkin_cat.hardware import files
from napkin_cat.hardware.errors import HardwareError
from napkin_cat.hardware.units import LARGEST, parse
from napkin_cat.syntax.dtype import DTYPES
from napkin_cat.syntax.primitive import PIPELINES
from napkin_cat.hardware.toy import load_hierarchy

FORMAT = 1
RATE_BY = ("operands", "output")

#: section → field → (dimension, required); the format is this table
SCHEMA = {
    "clock": {"f_K": ("frequency", True), "boost": ("frequency", True)},
    "sm": {"count": ("count", True), "warp": ("count", True), "warpgroup": ("count", False),
           "max_threads_per_block": ("count", True), "max_threads_per_sm": ("count", True)},
    "memory": {"gmem": ("bytes", True), "l2": ("bytes", True), "smem_per_sm": ("bytes", True),
               "smem_per_block": ("bytes", True), "registers_per_sm": ("count", True),
               "registers_per_block": ("count", True), "registers_per_thread": ("count", True),
               "register_bytes": ("bytes", True), "transaction": ("bytes", True)},
    "bandwidth": {"hbm": ("bandwidth", True), "l2_to_smem": ("bandwidth", False),
                  "gmem_to_smem": ("bandwidth", False), "smem": ("bandwidth", True)},
}
TOP = {"format", "name", "description", "compute_capability", "hierarchy", "sources", "clock", "sm", "memory",
       "bandwidth", "pipelines", "tensor_shapes"}
#: (smaller, larger): a per-block limit within the SM's, a thread's within the block's
AT_MOST = [(("memory", "smem_per_block"), ("memory", "smem_per_sm")),
           (("memory", "registers_per_block"), ("memory", "registers_per_sm")),
           (("memory", "registers_per_thread"), ("memory", "registers_per_block")),
           (("sm", "max_threads_per_block"), ("sm", "max_threads_per_sm")),
           (("sm", "warp"), ("sm", "max_threads_per_block"))]


@dataclass(frozen=True)
class Pipeline:
    """One execution pipeline: its ``rates`` (ops per clock per SM) by dtype, and how an op's dtype is read.

    ``rate_by = "operands"``: the operands' format sets the rate (tensor cores: FP8 in, FP16 out runs at the
    FP8 rate); ``"output"``: the result's format does.  ``computes_in``: every op runs in this format whatever
    its storage format (the special-function unit evaluates in FP32).
    """

    name: str
    rate_by: str
    rates: dict
    computes_in: str | None = None
    widen: dict = field(default_factory=dict)    # dtype -> the dtype it is computed in (fp8 -> fp16)


@dataclass(frozen=True)
class TensorShape:
    """A tensor-core instruction shape: tiles must be multiples of ``m``, ``n``, ``k`` (``n`` at most ``n_max``)."""

    instruction: str
    dtypes: tuple
    m: int
    n: int
    k: int
    n_max: int | None = None


@dataclass(frozen=True)
class GPU:
    """A validated hardware model (all quantities exact, in base units)."""

    name: str
    description: str
    compute_capability: str
    hierarchy: str
    sources: dict
    f_K: Fraction
    boost: Fraction
    sm_count: int
    warp: int
    warpgroup: int | None
    max_threads_per_block: int
    max_threads_per_sm: int
    gmem: int
    l2: int
    smem_per_sm: int
    smem_per_block: int
    registers_per_sm: int
    registers_per_block: int
    registers_per_thread: int
    register_bytes: int
    transaction: int
    hbm: Fraction
    smem_bandwidth: Fraction
    l2_to_smem: Fraction | None = None
    gmem_to_smem: Fraction | None = None
    sm_to_sm: dict = field(default_factory=dict)
    pipelines: dict = field(default_factory=dict)
    tensor_shapes: tuple = ()
    path: str = ""

    # ------------------------------------------------------------------ derived quantities
    @property
    def register_bytes_per_block(self) -> int:
        return self.registers_per_block * self.register_bytes

    @property
    def register_bytes_per_thread(self) -> int:
        return self.registers_per_thread * self.register_bytes

    def threads(self, unit: str) -> int:
        """Threads in one ``unit`` (thread, warp, warpgroup); a block's thread count is a configuration choice."""
        table = {"thread": 1, "warp": self.warp, "warpgroup": self.warpgroup}
        if unit not in table:
            raise HardwareError(f"{self.name}: unknown unit {unit!r}; units with a fixed thread count are "
                                f"{sorted(table)}")
        if table[unit] is None:
            raise HardwareError(f"{self.name} ({self.path}) has no [sm] warpgroup: its hierarchy cannot use "
                                "warpgroups (Hopper and later have them)")
        return table[unit]

    def capacity(self, attribute: str) -> int:
        """A capacity named by a hierarchy file (``smem_per_block``, ``register_bytes_per_block``, ...)."""
        value = getattr(self, attribute, None)
        if not isinstance(value, int):
            raise HardwareError(f"{self.name}: {attribute!r} is not a capacity of the model")
        return value

    def pipeline(self, name: str) -> Pipeline:
        if name not in self.pipelines:
            raise HardwareError(f"{self.name} ({self.path}) declares no pipeline {name!r}; it has "
                                f"{sorted(self.pipelines)}")
        return self.pipelines[name]

    def rate(self, pipeline: str, dtype: str):
        """Ops per clock per SM of ``pipeline`` on values of ``dtype`` (after ``computes_in``).  An op on integers
        or masks (positions, comparisons) runs at the pipeline's fp32 rate unless the model gives its own."""
        p = self.pipeline(pipeline)
        key = p.computes_in or p.widen.get(dtype, dtype)
        if key not in p.rates and key in DTYPES and DTYPES[key].is_integer and "fp32" in p.rates:
            key = "fp32"
        if key not in p.rates:
            raise HardwareError(f"{self.name}: the {pipeline} pipeline has no rate for {key!r} values; it runs "
                                f"{sorted(p.rates)} (add '{key} = \"... ops/clk\"' under [pipelines.{pipeline}])")
        return p.rates[key]

    def peak(self, pipeline: str, dtype: str) -> Fraction:
        """Device-wide ops per second: ``N_SM · f_K · rate``."""
        return Fraction(self.sm_count) * self.f_K * self.rate(pipeline, dtype)

    def shapes_for(self, dtype: str) -> tuple:
        return tuple(s for s in self.tensor_shapes if dtype in s.dtypes)

    def to_dict(self) -> dict:
        """A JSON-ready summary (numbers as floats or ints, in base units)."""
        def num(v):
            return None if v is None else (int(v) if Fraction(v).denominator == 1 else float(v))
        return {
            "name": self.name, "description": self.description, "compute_capability": self.compute_capability,
            "hierarchy": self.hierarchy, "f_K_Hz": num(self.f_K), "boost_Hz": num(self.boost),
            "sm_count": self.sm_count, "warp": self.warp, "warpgroup": self.warpgroup,
            "smem_per_block_B": self.smem_per_block, "register_bytes_per_block": self.register_bytes_per_block,
            "hbm_B_per_s": num(self.hbm), "l2_to_smem_B_per_s": num(self.l2_to_smem),
            "rates_ops_per_clk_per_sm": {p.name: {d: num(r) for d, r in p.rates.items()}
                                         for p in self.pipelines.values()},
            "sources": dict(self.sources), "path": self.path,
        }


# ---------------------------------------------------------------------------------------------- loading
def models() -> list[str]:
    """The names of the shipped models."""
    return files.shipped("models")


def load(name_or_path) -> GPU:
    """A hardware model by name (``"h100-sxm5"``, ``"a100"``, ...) or from the path of a user's TOML file."""
    if isinstance(name_or_path, GPU):
        return name_or_path
    data, where = files.read_named(name_or_path, "models", "hardware model", plural="models", file_what="hardware")
    return from_dict(data, where=where)


def _section(data, name, where):
    sec = data.get(name)
    if sec is None:
        raise HardwareError(f"{where}: missing section [{name}]")
    if not isinstance(sec, dict):
        raise HardwareError(f"{where}: [{name}] must be a table")
    return sec


def _fields(data, section, where) -> dict:
    sec = _section(data, section, where)
    schema = SCHEMA[section]
    for key in sec:
        if key not in schema and not (section == "bandwidth" and key == "sm_to_sm"):
            raise HardwareError(f"{where}: unknown field {section}.{key}; fields of [{section}] are "
                                f"{', '.join(schema)}")
    out = {}
    for key, (dim, required) in schema.items():
        if key not in sec:
            if required:
                raise HardwareError(f"{where}: missing field {section}.{key} (a {dim}, e.g. with a unit)")
            out[key] = None
            continue
        value = parse(sec[key], dim, where=f"{where}: {section}.{key}")
        if dim in ("count", "bytes") and Fraction(value).denominator != 1:
            raise HardwareError(f"{where}: {section}.{key} = {sec[key]!r} must be a whole number of {dim}")
        out[key] = int(value) if dim in ("count", "bytes") else value
    return out


def _pipelines(data, where) -> dict:
    sec = _section(data, "pipelines", where)
    out = {}
    for name, body in sec.items():
        if name not in PIPELINES:
            raise HardwareError(f"{where}: unknown pipeline [pipelines.{name}]; pipelines are {', '.join(PIPELINES)}")
        if not isinstance(body, dict):
            raise HardwareError(f"{where}: [pipelines.{name}] must be a table")
        rate_by = body.get("rate_by")
        if rate_by not in RATE_BY:
            raise HardwareError(f"{where}: pipelines.{name}.rate_by must be one of {RATE_BY}, got {rate_by!r}")
        computes_in = body.get("computes_in")
        widen = body.get("widen", {})
        if not isinstance(widen, dict) or any(k not in DTYPES or v not in DTYPES for k, v in widen.items()):
            raise HardwareError(f"{where}: pipelines.{name}.widen must map dtypes to dtypes, got {widen!r}")
        rates = {}
        for key, value in body.items():
            if key in ("rate_by", "computes_in", "widen"):
                continue
            if key not in DTYPES:
                raise HardwareError(f"{where}: pipelines.{name}.{key}: unknown dtype {key!r}; dtypes are "
                                    f"{', '.join(DTYPES)}")
            rate = parse(value, "rate", where=f"{where}: pipelines.{name}.{key}")
            rates[key] = int(rate) if rate.denominator == 1 else rate
        if not rates:
            raise HardwareError(f"{where}: [pipelines.{name}] gives no rate; write e.g. fp16 = \"512 FLOP/clk\"")
        if computes_in is not None and computes_in not in rates:
            raise HardwareError(f"{where}: pipelines.{name}.computes_in = {computes_in!r} has no rate of its own")
        for small, big in widen.items():
            if big not in rates:
                raise HardwareError(f"{where}: pipelines.{name}.widen computes {small} in {big}, which has no rate")
        out[name] = Pipeline(name, rate_by, rates, computes_in, dict(widen))
    missing = [p for p in PIPELINES if p not in out]
    if missing:
        raise HardwareError(f"{where}: missing pipeline(s) {', '.join(f'[pipelines.{p}]' for p in missing)}")
    return out


def _shapes(data, where) -> tuple:
    out = []
    shapes = data.get("tensor_shapes", [])
    if not isinstance(shapes, list):
        raise HardwareError(f"{where}: tensor_shapes must be an array of tables ([[tensor_shapes]]), got {shapes!r}")
    for i, s in enumerate(shapes):
        at = f"{where}: tensor_shapes[{i}]"
        files.known_fields(s, ("instruction", "dtypes", "m", "n", "k", "n_max"), at, "a tensor shape")
        for key in ("instruction", "dtypes", "m", "n", "k"):
            if key not in s:
                raise HardwareError(f"{at}: missing field {key}")
        dims = {key: files.whole(s[key], f"{at}: {key}", most=LARGEST["count"])
                for key in ("m", "n", "k", "n_max") if key in s}
        out.append(TensorShape(files.text(s, "instruction", at), files.names(s["dtypes"], f"{at}: dtypes", DTYPES),
                               dims["m"], dims["n"], dims["k"], dims.get("n_max")))
    return tuple(out)


def from_dict(data: dict, *, where: str = "<dict>") -> GPU:
    """Validate a parsed hardware file; every error names ``where`` and the field at fault."""
    unknown = set(data) - TOP
    if unknown:
        raise HardwareError(f"{where}: unknown top-level field(s) {sorted(unknown)}; fields are {sorted(TOP)}")
    if type(data.get("format")) is not int or data["format"] != FORMAT:
        raise HardwareError(f"{where}: format = {data.get('format')!r}; this napkin-cat reads format {FORMAT}")
    for key in ("name", "hierarchy"):
        if not isinstance(data.get(key), str) or not data[key]:
            raise HardwareError(f"{where}: missing field {key} (a string)")
    for key in ("description", "compute_capability"):
        files.text(data, key, where, default="")
    clock, sm = _fields(data, "clock", where), _fields(data, "sm", where)
    mem, bw = _fields(data, "memory", where), _fields(data, "bandwidth", where)
    if bw["smem"] is not None and _section(data, "bandwidth", where)["smem"].strip().endswith("B/s"):
        raise HardwareError(f"{where}: bandwidth.smem is per SM per clock: write it in B/clk")
    sm_to_sm = {}
    clusters = _section(data, "bandwidth", where).get("sm_to_sm", {})
    if not isinstance(clusters, dict):
        raise HardwareError(f"{where}: bandwidth.sm_to_sm maps a cluster size to a bandwidth (sm_to_sm = {{ 2 = "
                            f"\"3 TB/s\" }}), got {clusters!r}")
    for size, value in clusters.items():
        if not (size.isascii() and size.isdigit() and len(size) <= 10 and 2 <= int(size) <= sm["count"]):
            raise HardwareError(f"{where}: bandwidth.sm_to_sm.{size[:20]}: a cluster size is an integer 2 … "
                                f"{sm['count']} (the SMs of the device)")
        sm_to_sm[int(size)] = parse(value, "bandwidth", where=f"{where}: bandwidth.sm_to_sm.{size}")
    fields = {"clock": clock, "sm": sm, "memory": mem, "bandwidth": bw}
    for (s1, k1), (s2, k2) in AT_MOST:
        small, large = fields[s1][k1], fields[s2][k2]
        if small > large:
            unit = " B" if s1 == "memory" and "smem" in k1 else ""
            raise HardwareError(f"{where}: {s1}.{k1} ({small}{unit}) exceeds {s2}.{k2} ({large}{unit})")
    if sm["warpgroup"] is not None and sm["warpgroup"] % sm["warp"]:
        raise HardwareError(f"{where}: sm.warpgroup = {sm['warpgroup']} threads is not a whole number of warps "
                            f"({sm['warp']} threads each)")
    hierarchy = _hierarchy(data["hierarchy"], sm, where)
    return GPU(
        name=data["name"], description=data.get("description", ""),
        compute_capability=data.get("compute_capability", ""), hierarchy=hierarchy,
        sources=files.texts(data, "sources", where), f_K=clock["f_K"], boost=clock["boost"],
        sm_count=sm["count"], warp=sm["warp"], warpgroup=sm["warpgroup"],
        max_threads_per_block=sm["max_threads_per_block"], max_threads_per_sm=sm["max_threads_per_sm"],
        gmem=mem["gmem"], l2=mem["l2"], smem_per_sm=mem["smem_per_sm"], smem_per_block=mem["smem_per_block"],
        registers_per_sm=mem["registers_per_sm"], registers_per_block=mem["registers_per_block"],
        registers_per_thread=mem["registers_per_thread"], register_bytes=mem["register_bytes"],
        transaction=mem["transaction"], hbm=bw["hbm"], smem_bandwidth=bw["smem"], l2_to_smem=bw["l2_to_smem"],
        gmem_to_smem=bw["gmem_to_smem"], sm_to_sm=sm_to_sm, pipelines=_pipelines(data, where),
        tensor_shapes=_shapes(data, where), path=where)


def _hierarchy(name: str, sm: dict, where: str) -> str:
    """The toy hierarchy a model names (a shipped name, or a .toml path relative to the model's file), checked
    against the model: every partition unit it uses must be counted in [sm]."""
    if name.endswith(".toml") and not Path(name).is_absolute() and Path(where).is_file():
        name = str(Path(where).parent / name)
    try:
        h = load_hierarchy(name)
    except HardwareError as e:
        raise HardwareError(f"{where}: field hierarchy = {name!r}: {e}") from None
    for lv in h.levels:
        if lv.unit in ("warp", "warpgroup") and sm.get(lv.unit) is None:
            raise HardwareError(f"{where}: the toy hierarchy {h.name!r} has {lv.unit}s (level {lv.name!r}), but "
                                f"[sm] gives no {lv.unit} size; add e.g. {lv.unit} = \"128 threads\"")
    if sm.get(h.scaling_unit) is None and h.scaling_unit in ("warp", "warpgroup"):
        raise HardwareError(f"{where}: the toy hierarchy {h.name!r} scales by {h.scaling_unit}s, but [sm] gives "
                            f"no {h.scaling_unit} size")
    return name
