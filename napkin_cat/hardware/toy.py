"""The toy hierarchies of §5 as data: levels, what each level offers, where its bytes live.

A toy hierarchy (``hierarchies/hopper.toml``, ``ampere.toml``, or a user's file) lists

* **pools**: the physical memories (GMEM, SMEM, registers) with their capacities, named as attributes
  of the hardware model (``smem_per_block``, ``register_bytes_per_block``), and a per-thread limit;
* **levels**: the logical levels of the diagram (an array's ``level`` index is the level's ``index``,
  drawn in the paper's colours), each with the partition ``unit`` that holds one copy (grid, block,
  warpgroup or warp, thread), the relabelled ``tile`` prefix (``g_q`` → ``w_q``, ``t_q``, step 3), the
  pool its data lives in (tensor-core operands may live elsewhere: ``operand_pool``), its ``parent``
  through which transfers pipe, and the pipelines it **offers** (tensor cores: matmul only; threads:
  general-purpose and special functions).

The law checked by :func:`check_offers` (recolouring, step 3): every box runs on a level that offers
each pipeline its FLOPs use, and every transfer moves between a level and its parent.

>>> import napkin_cat as nc
>>> h = load_hierarchy("hopper")
>>> [(lv.index, lv.name, lv.unit) for lv in h.levels]
[(0, 'GMEM', 'grid'), (1, 'SMEM', 'block'), (2, 'registers', 'thread'), (3, 'tensor-core', 'warpgroup')]
>>> h.partition("q")
{'block': 'g_q', 'warpgroup': 'w_q', 'thread': 't_q'}
>>> [(p.array.names, p.level, p.pool, p.dtype) for p in placement(nc.einsum("q d, x d -> q x", level=3), h)]
[(('q', 'd'), 'tensor-core', 'SMEM', 'fp32'), (('x', 'd'), 'tensor-core', 'SMEM', 'fp32'),
 (('q', 'x'), 'tensor-core', 'registers', 'fp32')]
"""
from __future__ import annotations

from dataclasses import dataclass

from napkin_cat.errors import LevelError, NapkinError
from napkin_cat.hardware import files
from napkin_cat.hardware.errors import HardwareError
from napkin_cat.plan.lowering.placement import TRANSFERS, pipelines_of  # noqa: F401  (the toy's vocabulary)
from napkin_cat.syntax.array import MAX_LEVEL
from napkin_cat.syntax.adapter import Bubble
from napkin_cat.syntax.flat import layers
from napkin_cat.syntax.axis import check_name
from napkin_cat.syntax.wiring import computes
from napkin_cat.syntax.primitive import PIPELINES

UNITS = ("grid", "block", "warpgroup", "warp", "thread")
OFFERS = PIPELINES + ("transfer",)
#: the most copies of a tile a stream may keep in flight: asynchronous loads on Hopper (TMA) and Ampere (cp.async)
#: pipeline two to four stages; every copy is a tile's memory again
MAX_STREAM_BUFFERS = 16
TOP = ("format", "name", "description", "scaling_unit", "asynchronous", "stream_buffers", "pool", "level")
POOL = ("name", "capacity", "per_thread")
LEVEL = ("index", "name", "unit", "pool", "offers", "tile", "operand_pool", "parent", "coalesced_with")


@dataclass(frozen=True)
class Pool:
    """A physical memory: its capacity per thread block (a hardware-model attribute) and per-thread limit."""

    name: str
    capacity: str
    per_thread: str | None = None


@dataclass(frozen=True)
class ToyLevel:
    """One level of a toy hierarchy: its unit and memory pool, what it offers, and the tile, operand pool and parent it
    names (see ``hopper.toml``).
    """

    index: int
    name: str
    unit: str
    pool: str
    offers: tuple
    tile: str | None = None
    operand_pool: str | None = None
    parent: str | None = None
    coalesced_with: str | None = None


@dataclass(frozen=True)
class Placed:
    """Where one array of a diagram lives: its logical ``level``, physical ``pool`` and quantization."""

    array: object
    level: str
    pool: str
    dtype: str
    role: str          # 'operand' (read by a tensor op), 'value'


@dataclass(frozen=True)
class ToyHierarchy:
    """A toy hierarchy (§5): memory pools and levels, the scaling unit, the pipelines issued asynchronously and the
    copies of a stream's tile loaded per trip; loaded by :func:`load_hierarchy`."""

    name: str
    description: str
    scaling_unit: str
    pools: tuple
    levels: tuple
    path: str = ""
    asynchronous: tuple = ()     # pipelines whose ops are issued without blocking the issuing unit (wgmma)
    stream_buffers: int = 1      # copies of a tile a stream loads from GMEM on every trip (asynchronous loads)

    def level(self, key) -> ToyLevel:
        """A level by index (the diagram's array level) or by name."""
        for lv in self.levels:
            if lv.index == key or lv.name == key:
                return lv
        raise LevelError(f"level {key!r} is not in the toy hierarchy {self.name!r}; its levels are "
                         + ", ".join(f"{lv.index} ({lv.name})" for lv in self.levels))

    def pool(self, name: str) -> Pool:
        for p in self.pools:
            if p.name == name:
                return p
        raise HardwareError(f"toy hierarchy {self.name!r} has no memory pool {name!r}; pools are "
                            f"{[p.name for p in self.pools]}")

    def unit_level(self, unit: str) -> ToyLevel | None:
        return next((lv for lv in self.levels if lv.unit == unit), None)

    def partition(self, axis: str) -> dict:
        """The tile names of a grouped ``axis`` at each partition unit (step 3's relabelling of ``g``)."""
        return {lv.unit: f"{lv.tile}_{axis}" for lv in sorted(self.levels, key=lambda lv: UNITS.index(lv.unit))
                if lv.tile}


# ---------------------------------------------------------------------------------------------- loading
def hierarchies() -> list[str]:
    """The names of the shipped toy hierarchies.

    >>> "hopper" in hierarchies()
    True
    """
    return files.shipped("hierarchies")


def load_hierarchy(name_or_path) -> ToyHierarchy:
    """A toy hierarchy by name (``hopper``, ``ampere``) or from a TOML file (the format of ``hopper.toml``)."""
    if isinstance(name_or_path, ToyHierarchy):
        return name_or_path
    data, where = files.read_named(name_or_path, "hierarchies", "toy hierarchy", plural="toy hierarchies",
                                   file_what="toy-hierarchy")
    return _validate(data, where)


def hierarchy_of(gpu) -> ToyHierarchy:
    """The toy hierarchy a hardware model names (``hierarchy = "hopper"``)."""
    return load_hierarchy(gpu.hierarchy)


def _validate(data, where) -> ToyHierarchy:
    files.known_fields(data, TOP, where, "a toy hierarchy")
    if type(data.get("format")) is not int or data["format"] != 1:
        raise HardwareError(f"{where}: format = {data.get('format')!r}; this napkin-cat reads format 1")
    pools = []
    for i, p in enumerate(_tables(data, "pool", where)):
        at = f"{where}: pool[{i}]"
        files.known_fields(p, POOL, at, "a pool")
        if "name" not in p or "capacity" not in p:
            raise HardwareError(f"{at} needs a name and a capacity (a hardware-model attribute)")
        per_thread = None if "per_thread" not in p else _attribute(files.text(p, "per_thread", at), at)
        pools.append(Pool(files.text(p, "name", at), _attribute(files.text(p, "capacity", at), at), per_thread))
    names = {p.name for p in pools}
    levels = []
    for i, lv in enumerate(_tables(data, "level", where)):
        at = f"{where}: level[{i}]"
        files.known_fields(lv, LEVEL, at, "a level")
        for key in ("index", "name", "unit", "pool", "offers"):
            if key not in lv:
                raise HardwareError(f"{at} is missing field {key}")
        index = files.whole(lv["index"], f"{at}: index", least=0, most=MAX_LEVEL)
        name, unit = files.text(lv, "name", at), files.text(lv, "unit", at)
        if unit not in UNITS:
            raise HardwareError(f"{where}: level {name!r}: unit {unit!r} is not one of {UNITS}")
        offers = files.names(lv["offers"], f"{where}: level {name!r} offers", OFFERS)
        for key in ("pool", "operand_pool"):
            if lv.get(key) is not None and (not isinstance(lv[key], str) or lv[key] not in names):
                raise HardwareError(f"{where}: level {name!r}: {key} {lv[key]!r} is not a declared pool "
                                    f"({sorted(names)})")
        optional = {key: files.text(lv, key, at) if key in lv else None
                    for key in ("tile", "operand_pool", "parent", "coalesced_with")}
        if optional["tile"] is not None:
            _tile_prefix(optional["tile"], f"{at}: tile")
        levels.append(ToyLevel(index, name, unit, lv["pool"], offers, optional["tile"], optional["operand_pool"],
                               optional["parent"], optional["coalesced_with"]))
    if not levels:
        raise HardwareError(f"{where}: a toy hierarchy needs [[level]] entries")
    indices = [lv.index for lv in levels]
    if len(set(indices)) != len(indices) or 0 not in indices:
        raise HardwareError(f"{where}: the levels' indices {indices} must be distinct, and level 0 is global memory")
    unit = data.get("scaling_unit")
    if unit not in UNITS:
        raise HardwareError(f"{where}: scaling_unit {unit!r} is not one of {UNITS}")
    levels = tuple(sorted(levels, key=lambda lv: lv.index))
    level_names = {lv.name for lv in levels}
    for lv in levels:
        if lv.parent is not None and lv.parent not in level_names:
            raise HardwareError(f"{where}: level {lv.name!r}: parent {lv.parent!r} is not a level")
    asynchronous = files.names(data.get("asynchronous", []), f"{where}: asynchronous", PIPELINES)
    buffers = files.whole(data.get("stream_buffers", 1), f"{where}: stream_buffers (copies of a tile a stream "
                          "loads on every trip)", most=MAX_STREAM_BUFFERS)
    return ToyHierarchy(files.text(data, "name", where, default=where), files.text(data, "description", where,
                                                                                   default=""),
                        unit, tuple(pools), levels, where, asynchronous, buffers)


def _tables(data: dict, key: str, where: str) -> list:
    """The array of tables ``[[key]]`` of a hierarchy file."""
    value = data.get(key, [])
    if not isinstance(value, list) or any(not isinstance(t, dict) for t in value):
        raise HardwareError(f"{where}: {key} must be an array of tables ([[{key}]]), got {value!r}")
    return value


def _attribute(name: str, where: str) -> str:
    """A hardware-model attribute a pool names (``smem_per_block``): an identifier."""
    if not name.isidentifier():
        raise HardwareError(f"{where}: {name!r} is not the name of a hardware-model attribute (such as "
                            f"'smem_per_block')")
    return name


def _tile_prefix(prefix: str, where: str) -> str:
    """A level's tile prefix (``g`` makes ``g_q``): an axis-name prefix."""
    try:
        return check_name(prefix)
    except NapkinError:
        raise HardwareError(f"{where} = {prefix!r} must be a name prefix such as 'g' (tiles are named g_q)") from None


# ---------------------------------------------------------------------------------------------- diagrams
def primitive_boxes(diagram):
    """Every primitive box of ``diagram``, inside bubbles too."""
    for _, box in layers(diagram):
        if not computes(box):
            continue
        if isinstance(box, Bubble):
            yield from primitive_boxes(box.arg)
        else:
            yield box


def placement(diagram, hierarchy) -> list:
    """Each array of ``diagram`` (inputs, and every box's outputs) with its level, pool and quantization.

    An input of a tensor-pipeline box is an *operand*: it lives in the level's ``operand_pool`` when the
    level names one (wgmma reads A/B from SMEM; wmma fragments are loaded into registers).
    """
    h = load_hierarchy(hierarchy)
    out, seen = [], {}

    def put(arr, role):
        lv = h.level(arr.level)
        pool = lv.operand_pool if role == "operand" and lv.operand_pool else lv.pool
        key = (arr, role)
        if key not in seen:
            seen[key] = len(out)
            out.append(Placed(arr, lv.name, pool, arr.dtype.name, role))

    for box in primitive_boxes(diagram):
        role = "operand" if "tensor" in pipelines_of(box) else "value"
        for arr in box.dom.inside:
            put(arr, role)
        for arr in box.cod.inside:
            put(arr, "value")
    if not out:
        for arr in diagram.dom.inside:
            put(arr, "value")
    return out


def check_offers(diagram, hierarchy) -> None:
    """Raise :class:`LevelError` for a box on a level that does not offer its pipeline, or a transfer
    that skips the parent level (tensor cores and threads exchange data through SMEM, step 3)."""
    h = load_hierarchy(hierarchy)
    for box in primitive_boxes(diagram):
        levels = {a.level for a in box.dom.inside} | {a.level for a in box.cod.inside}
        if box.data.kind in TRANSFERS:
            src, dst = h.level(box.dom.inside[0].level), h.level(box.cod.inside[0].level)
            if src.parent != dst.name and dst.parent != src.name:
                raise LevelError(f"{box.data.kind} of {box.dom.inside[0]} moves between {src.name} and {dst.name}, "
                                 f"which are not parent and child in {h.name!r}; pipe it through "
                                 f"{src.parent or dst.parent}")
            continue
        for index in sorted(levels):
            lv = h.level(index)
            for p in pipelines_of(box):
                if p not in lv.offers:
                    able = [o.name for o in h.levels if p in o.offers]
                    raise LevelError(f"box {box.name!r} uses the {p} pipeline on level {lv.name!r}, which offers "
                                     f"only {list(lv.offers)}; recolour it onto {' or '.join(able)}")
