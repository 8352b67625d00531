"""Configuration tables (§5.6, Tables 1-2): bytes per thread block and per warpgroup, and ``N_max``.

Input: the variables of a plan (name, size expression in axis and tile symbols, dtype, toy-hierarchy
level, buffers), the tile names of the grouped axis at each partition unit (``g_q`` block, ``w_q``
warpgroup, ``t_q`` thread), concrete sizes, and a hardware model.  Each variable's bytes are
``size · bytes(dtype) · buffers``, counted in the pool its level stores it in, and split into a part
per thread block and a part per warpgroup (the scaling unit) *from the size expression*:

* a value spread over the block's units (a size with the block tile on a unit level: the stream's state
  ``g_q × d`` on the threads) counts like a block-level one: its rows are the block's rows;
* one copy per thread (a thread-level variable): ``threads per warpgroup ×`` per warpgroup;
* one copy per warpgroup (a fragment, or any size with the warpgroup tile ``w``): per warpgroup;
* a block-level size with the block tile: ``g = N · w`` makes it ``M_TB + N · M_WG``, read off;
* a block-level size with neither: per thread block.

Per pool, with ``M_max`` from the hardware model (SMEM per block, registers per block)::

    N_max = (M_max − M_TB) / M_WG
    excess(N) = M_max − M_TB − N · M_WG,   per warpgroup excess/N,   per thread excess/(N · threads)

>>> import napkin_cat as nc
>>> from napkin_cat.hardware.model import load
>>> vs = [Variable("K", "s_x*d", "fp8", "SMEM", buffers=2), Variable("O", "t_q*d", "fp16", "registers")]
>>> t = config_table(vs, load("h100-sxm5"), {"s_x": 64, "d": 128, "w_q": 128, "t_q": 1},
...                  partition={"block": "g_q", "warpgroup": "w_q", "thread": "t_q"}, n=3)
>>> [(r.variable.name, r.per_tb, r.per_wg) for r in t.rows]
[('K', 16384, 0), ('O', 0, 32768)]
>>> t.pool("registers").N_max
Fraction(8, 1)
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from fractions import Fraction

import sympy

from napkin_cat.hardware.errors import CapacityError, HardwareError
from napkin_cat.hardware.tables import decimal, dumps, kb, number, text_table
from napkin_cat.hardware.toy import load_hierarchy
from napkin_cat.syntax.axis import symbol
from napkin_cat.syntax.dtype import as_dtype
from napkin_cat.syntax.sizes import Sizes

N = sympy.Symbol("N_scaling", positive=True)


@dataclass(frozen=True)
class Variable:
    """A pre-allocated variable of a plan (§5.5): ``size`` a sympy expression (or a string) of axis/tile symbols."""

    name: str
    size: object
    dtype: str
    level: object
    buffers: int = 1
    description: str = ""
    role: str = "value"          # 'operand': read by a tensor op, stored in the level's operand pool


@dataclass(frozen=True)
class Row:
    """One variable's row of a configuration table: its size, its pool and the count per thread block and per warp
    group (``printed``, ``erratum``: the paper's number where it differs, and why).
    """

    variable: Variable
    size: sympy.Expr
    pool: str
    per_tb: int
    per_wg: int
    printed: int | None = None
    erratum: str | None = None


@dataclass(frozen=True)
class PoolSummary:
    """Table 2's row for one memory pool (bytes, exact)."""

    pool: str
    M_max: int
    M_TB: int
    M_WG: int
    N_max: Fraction | None
    excess_tb: Fraction | None = None
    excess_wg: Fraction | None = None
    excess_thread: Fraction | None = None


def as_expr(size) -> sympy.Expr:
    """A size as a sympy expression whose symbols are the library's axis symbols (positive integers)."""
    e = sympy.sympify(size) if isinstance(size, str) else sympy.sympify(size)
    return e.subs({s: symbol(str(s)) for s in e.free_symbols})


def _split(var, e, unit, scaling, part, threads, where):
    """``(per thread block, per scaling unit)`` bytes expressions of one variable (module docstring)."""
    g, w, t = (symbol(part[k]) if part.get(k) else None for k in ("block", scaling, "thread"))
    if unit != "block" and g is not None and e.has(g):
        unit = "block"          # a value spread over the block's units: its rows are the block's rows
    if unit == "thread":
        return sympy.Integer(0), e * threads[scaling]
    if unit in ("warp", "warpgroup") and unit != "block":
        per_unit = sympy.Rational(threads[scaling], threads[unit])
        return sympy.Integer(0), e * per_unit
    if g is not None and e.has(g):
        if w is None:
            raise HardwareError(f"{where}: variable {var.name!r} scales with {g} but the partition names no "
                                f"{scaling} tile to write {g} = N · {scaling} tile")
        poly = sympy.Poly(sympy.expand(e.subs(g, N * w)), N)
        if poly.degree() > 1:
            raise HardwareError(f"{where}: variable {var.name!r} of size {var.size} grows like {g}^{poly.degree()}; "
                                f"a configuration table needs sizes linear in the number of {scaling}s")
        return poly.coeff_monomial(1), poly.coeff_monomial(N)
    if t is not None and e.has(t):
        return sympy.Integer(0), e * threads[scaling]
    if w is not None and e.has(w):
        return sympy.Integer(0), e
    return e, sympy.Integer(0)


def _value(expr, sizes, var, what):
    v = expr.subs(sizes)
    if v.free_symbols:
        missing = sorted(str(s) for s in v.free_symbols)
        raise HardwareError(f"variable {var.name!r} ({what} {var.size}) needs a size for {', '.join(missing)}")
    v = sympy.nsimplify(v)
    if not v.is_Integer:
        raise HardwareError(f"variable {var.name!r} has a fractional size {v} bytes with these sizes")
    return int(v)


@dataclass
class ConfigTable:
    """Tables 1 (``rows``) and 2 (``pools``) for one configuration; ``printed`` holds the same with the paper's
    printed values substituted where an erratum differs (errata D-01)."""

    gpu: object
    hierarchy: object
    sizes: dict
    n: int
    scaling: str
    threads: int
    rows: list
    pools: list
    printed: "ConfigTable | None" = None
    notes: list = field(default_factory=list)

    def pool(self, name: str) -> PoolSummary:
        for p in self.pools:
            if p.pool == name:
                return p
        raise HardwareError(f"no pool {name!r} in this table; pools are {[p.pool for p in self.pools]}")

    def row(self, name: str) -> Row:
        for r in self.rows:
            if r.variable.name == name:
                return r
        raise HardwareError(f"no variable {name!r}; variables are {[r.variable.name for r in self.rows]}")

    # ------------------------------------------------------------------ renderings
    def to_dict(self) -> dict:
        def pool_dict(p):
            return {"pool": p.pool, "M_max_B": p.M_max, "M_TB_B": p.M_TB, "M_WG_B": p.M_WG, "N_max": number(p.N_max),
                    "excess_per_TB_B": number(p.excess_tb), "excess_per_WG_B": number(p.excess_wg),
                    "excess_per_thread_B": number(p.excess_thread)}
        out = {"hardware": self.gpu.name, "hierarchy": self.hierarchy.name, "scaling_unit": self.scaling,
               "threads_per_unit": self.threads, "N": self.n, "sizes": dict(self.sizes),
               "variables": [{"name": r.variable.name, "description": r.variable.description, "size": str(r.size),
                              "dtype": r.variable.dtype, "level": str(r.variable.level), "pool": r.pool,
                              "buffers": r.variable.buffers, "M_TB_B": r.per_tb, "M_WG_B": r.per_wg,
                              "paper_printed_B": r.printed, "erratum": r.erratum} for r in self.rows],
               "pools": [pool_dict(p) for p in self.pools], "notes": list(self.notes)}
        if self.printed is not None:
            out["pools_as_printed"] = [pool_dict(p) for p in self.printed.pools]
        return out

    def to_json(self) -> str:
        return dumps(self.to_dict())

    def to_text(self) -> str:
        rows = []
        for r in self.rows:
            flag = f"paper prints {r.printed} ({r.erratum})" if r.printed is not None else ""
            rows.append([r.variable.name, r.variable.description, str(r.size), r.variable.dtype.upper(),
                         r.pool, r.per_tb or "", r.per_wg or "", flag])
        for p in self.pools:
            rows.append(["", "Total (KB = 1024 B)", "", "", p.pool, kb(p.M_TB), kb(p.M_WG), ""])
        one = text_table(["", "Variable", "Size", "Q.", "Level", "M_TB (B)", f"M_{self.scaling} (B)", ""], rows,
                         title=f"Table 1: configuration on {self.gpu.name}, sizes {self.sizes}")
        two = self._pools_text(self.pools, f"Table 2: maximum {self.scaling}s per thread block (KB), "
                                           f"excess at N = {self.n}")
        parts = [one, two]
        if self.printed is not None:
            parts.append(self._pools_text(self.printed.pools, "Table 2 with the paper's printed values"))
        parts += [f"note: {n}" for n in self.notes]
        return "\n\n".join(parts)

    def _pools_text(self, pools, title):
        rows = [[p.pool, kb(p.M_max), kb(p.M_TB), kb(p.M_WG), decimal(p.N_max), kb(p.excess_tb), kb(p.excess_wg),
                 decimal(p.excess_thread, 0) if p.excess_thread is not None else ""] for p in pools]
        return text_table(["", "M_max", "M_TB", f"M_{self.scaling}", "N_max", "per TB", f"per {self.scaling}",
                           "per thread (B)"], rows, title=title)


def config_table(variables, gpu, sizes: dict, *, partition: dict, n: int | None = None, printed: dict | None = None,
                 hierarchy=None, strict: bool = True) -> ConfigTable:
    """Tables 1-2 for ``variables`` on ``gpu`` (module docstring).

    ``sizes``: tile/axis name → int (the block tile may be left out: it is ``N`` times the warpgroup tile);
    ``n``: the number of scaling units per block for the excess columns (default: the largest that fits);
    ``printed``: ``{variable: bytes}`` or ``{variable: (bytes, erratum)}``, values the paper prints that
    differ from the size expression; the table then also reports the totals as printed.
    ``strict``: raise :class:`CapacityError` when a pool overflows at ``n`` or a thread exceeds its registers.
    """
    h = load_hierarchy(hierarchy or gpu.hierarchy)
    scaling = h.scaling_unit
    threads = {u: gpu.threads(u) for u in ("thread", "warp", "warpgroup") if u != "warpgroup" or gpu.warpgroup}
    env = Sizes(sizes).env
    rows = []
    for var in variables:
        lv = h.level(var.level)
        pool = lv.operand_pool if var.role == "operand" and lv.operand_pool else lv.pool
        e = as_expr(var.size)
        q = as_dtype(var.dtype).bytes
        if not isinstance(var.buffers, int) or var.buffers < 1:
            raise HardwareError(f"variable {var.name!r}: buffers = {var.buffers!r} must be a positive integer")
        tb, wg = _split(var, e * q * var.buffers, lv.unit, scaling, partition, threads, h.name)
        rows.append(Row(var, e, pool, _value(tb, env, var, "size"), _value(wg, env, var, "size")))
    block = partition.get("block")
    if n is None and block in sizes and partition.get(scaling) in sizes:
        n = sizes[block] // sizes[partition[scaling]]
    table = _summarise(rows, gpu, h, dict(sizes), n, scaling, threads[scaling], strict=strict)
    if printed:
        table.printed, table.notes = _as_printed(table, printed, gpu, h, strict)
    return table


def _summarise(rows, gpu, h, sizes, n, scaling, threads, *, strict) -> ConfigTable:
    used = []
    for r in rows:
        if r.pool not in used:
            used.append(r.pool)
    totals = {}
    for name in used:
        pool = h.pool(name)
        tb = sum(r.per_tb for r in rows if r.pool == name)
        wg = sum(r.per_wg for r in rows if r.pool == name)
        M_max = gpu.capacity(pool.capacity)
        totals[name] = (pool, M_max, tb, wg, Fraction(M_max - tb, wg) if wg else None)
    fits = [t[4] for t in totals.values() if t[4] is not None]
    if n is None:
        n = math.floor(min(fits)) if fits else 1
        if n < 1:   # not one unit fits: the check below names the pool (or, not strict, show N = 1 overflowing)
            n = 1
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise HardwareError(f"N = {n!r} {scaling}s per thread block must be a positive integer")
    if strict:
        _check_capacity(rows, totals, n, scaling, threads, gpu)
    pools = []
    for name, (pool, M_max, tb, wg, n_max) in totals.items():
        excess = Fraction(M_max - tb - n * wg)
        per_thread = excess / (n * threads) if pool.per_thread else None
        pools.append(PoolSummary(name, M_max, tb, wg, n_max, excess, excess / n, per_thread))
    return ConfigTable(gpu, h, sizes, n, scaling, threads, rows, pools)


def _check_capacity(rows, totals, n, scaling, threads, gpu):
    for name, (pool, M_max, tb, wg, n_max) in totals.items():
        if tb + n * wg > M_max:
            big = sorted((r for r in rows if r.pool == name), key=lambda r: -(r.per_tb + n * r.per_wg))[:3]
            names = ", ".join(f"{r.variable.name} ({r.per_tb + n * r.per_wg} B)" for r in big)
            most = f"no {scaling} fits" if n_max is not None and n_max < 1 else \
                f"at most {math.floor(n_max)} {scaling}(s) fit" if n_max is not None else f"no {scaling} fits"
            raise CapacityError(f"{name} overflows with N = {n} {scaling}s: {tb} + {n}·{wg} = {tb + n * wg} B > "
                                f"M_max = {M_max} B; largest variables: {names}; {most} "
                                f"(N_max = {decimal(n_max) if n_max is not None else '∞'})")
        if pool.per_thread and n:
            per_thread = Fraction(tb + n * wg, n * threads)
            limit_attr = pool.per_thread
            limit = gpu.capacity(limit_attr)
            if per_thread > limit:
                big = sorted((r for r in rows if r.pool == name), key=lambda r: -r.per_wg)[:3]
                raise CapacityError(f"{name}: {decimal(per_thread)} B per thread exceeds the per-thread limit "
                                    f"{limit_attr} = {limit} B; largest variables: "
                                    + ", ".join(f"{r.variable.name} ({Fraction(r.per_wg, threads)} B/thread)"
                                                for r in big))


def _as_printed(table, printed, gpu, h, strict):
    rows, notes = [], []
    names = {r.variable.name for r in table.rows}
    for key in printed:
        if key not in names:
            raise HardwareError(f"printed value for {key!r}, which is not a variable; variables are {sorted(names)}")
    flagged = []
    for r in table.rows:
        if r.variable.name not in printed:
            rows.append(r)
            continue
        value, erratum = printed[r.variable.name] if isinstance(printed[r.variable.name], tuple) \
            else (printed[r.variable.name], "erratum")
        computed = r.per_tb or r.per_wg
        new = replace(r, per_tb=value if r.per_tb else 0, per_wg=value if not r.per_tb else 0)
        rows.append(new)
        flagged.append(replace(r, printed=value, erratum=erratum))
        notes.append(f"{r.variable.name}: {r.size} × {as_dtype(r.variable.dtype).bytes} B = {computed} B from its "
                     f"size expression; the paper prints {value} ({erratum}); Table 2 is given both ways")
    flags = {r.variable.name: r for r in flagged}
    table.rows = [flags.get(r.variable.name, r) for r in table.rows]
    other = _summarise(rows, gpu, h, table.sizes, table.n, table.scaling, table.threads, strict=False)
    return other, notes
