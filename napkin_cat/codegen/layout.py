"""Where each on-chip value lives: one arena per level, byte offsets from liveness (paper §5, "Identifying Variables").

The plan's columns say which values are live at once (:mod:`napkin_cat.plan.static` samples the live set
between statements).  Values live at once get disjoint bytes; a value may take the bytes of one that died::

    conflict(u, v)  ⇔  some column holds both u and v
    arena           =  max over values of offset + bytes   ≥   the plan's peak bytes at that level

The arena is found by first fit under a few orders of the values (by first column, by size) and the
smallest is kept.  An operation's inputs and outputs never share a column (they meet only inside the
operation), so an output may be given the bytes of an input that dies with it: the kernel then computes
that statement into staging storage (registers on a GPU) before writing it (:meth:`Layout.aliased`).

>>> import napkin_cat as nc
>>> p = nc.plan(nc.stream(nc.library.matmul(), "b", "s_b"), {"a": 4, "b": 6, "c": 5, "s_b": 3})
>>> lay = layout(p)
>>> lay.bytes == p.smem_bytes, sorted(lay.offsets)
(True, ['sum0', 'x0_1', 'x1_1'])
"""
from __future__ import annotations

import random
from dataclasses import dataclass

import sympy

from napkin_cat.plan.ir import Compute, access, reads, walk
from napkin_cat.plan.liveness import columns as live_columns
from napkin_cat.syntax.dtype import as_dtype
from napkin_cat.syntax.primitive import kind_of

#: first-fit restarts from random orders when no fixed order reaches the columns' bound
RESTARTS = 200


def reads_writes(stmt) -> tuple[tuple, tuple]:
    """``(refs read, refs written)`` of a simple statement (:func:`napkin_cat.plan.ir.access`)."""
    a = access(stmt)
    return a.reads, a.writes


def _in_place(stmt, out, src, variables) -> bool:
    """Whether ``out`` may be written over exactly the bytes of ``src`` while ``stmt`` runs: a copy, or a
    statement whose kind's record says so (``Kind.in_place``: element e of the output reads element e of the
    input; ``Kind.renames``: the axes keep their positions under new names), where the output's axes are the
    input's in the same order (a map may also permute: ``S a n -> n a S`` reads element e from elsewhere)."""
    if out.var == src.var:
        return out == src
    kind = kind_of(stmt.kind) if isinstance(stmt, Compute) else None
    may, renames = (True, False) if kind is None else (kind.in_place, kind.renames)
    a, b = variables[out.var], variables[src.var]
    same_place = tuple(e for _, e in a.shape) == tuple(e for _, e in b.shape) and \
        (renames or tuple(n for n, _ in a.shape) == tuple(n for n, _ in b.shape))
    return may and out.whole and src.whole and same_place and a.dtype == b.dtype


@dataclass(frozen=True)
class Layout:
    """``offsets`` (variable → byte offset in its level's arena), ``sizes`` (bytes), ``bytes`` (the arena);
    ``dead``: values nothing reads (an unused output of a box): they get no bytes and are never written;
    ``bound``: the most bytes live in one column (the plan's peak), which the arena reaches unless the
    values cannot be packed without a gap (first fit is a heuristic: packing is NP-hard in general)."""

    level: int
    offsets: dict
    sizes: dict
    bytes: int
    variables: dict
    bound: int = 0
    dead: frozenset = frozenset()

    def overlap(self, u: str, v: str) -> bool:
        """Whether the bytes of ``u`` and ``v`` meet (a variable always meets itself)."""
        if u not in self.offsets or v not in self.offsets:
            return False
        a, b = self.offsets[u], self.offsets[v]
        return a < b + self.sizes[v] and b < a + self.sizes[u]

    def aliased(self, stmt) -> set:
        """Variables ``stmt`` writes over bytes it still reads (other than in place): they must be staged."""
        ins, outs = reads_writes(stmt)
        staged = set()
        for o in outs:
            for i in ins:
                if self.overlap(o.var, i.var) and not (self.offsets[o.var] == self.offsets[i.var]
                                                      and _in_place(stmt, o, i, self.variables)):
                    staged.add(o.var)
        return staged

    def of(self, variables) -> int:
        """The arena bytes that ``variables`` (one kernel's) need."""
        return max((self.offsets[v] + self.sizes[v] for v in variables if v in self.offsets), default=0)


class Layouts(dict):
    """The layouts of every on-chip level (level → :class:`Layout`), asked as one."""

    @property
    def dead(self) -> frozenset:
        return frozenset().union(*(lay.dead for lay in self.values()))

    @property
    def offsets(self) -> dict:
        return {v: o for lay in self.values() for v, o in lay.offsets.items()}

    def aliased(self, stmt) -> set:
        return set().union(*(lay.aliased(stmt) for lay in self.values()))

    def of(self, variables, level: int = 1) -> int:
        return self[level].of(variables) if level in self else 0


def layouts(p, *, unstaged: bool = False, width: dict | None = None) -> Layouts:
    """A :class:`Layout` per on-chip level of the plan (``unstaged``, ``width``: see :func:`layout`)."""
    return Layouts({lvl: layout(p, lvl, unstaged=unstaged, width=width)
                    for lvl in sorted({v.level for v in p.variables if v.level > 0})})


def columns(p, level: int = 1) -> list[frozenset]:
    """The live sets at ``level``, sampled as :func:`napkin_cat.plan.static.static_peak` samples them
    (:func:`napkin_cat.plan.liveness.columns`, every sample kept in program order)."""
    at = {v.name for v in p.variables if v.level == level}
    return [col & at for col in live_columns(p.body, p.inputs)]


def value_bytes(dtype: str, width: dict | None = None) -> int:
    """Bytes one value of ``dtype`` takes in a kernel: ``width[dtype]`` where the kernel holds that format wider
    (the C kernel's ``real="double"`` holds fp32 values in 8 bytes), else the format's own."""
    return (width or {}).get(dtype) or as_dtype(dtype).bytes


def variable_bytes(v, sizes, width: dict | None = None) -> int:
    """The bytes a plan variable takes at ``sizes``: its size × its values' bytes (:func:`value_bytes`) × its
    buffers."""
    return int(sympy.sympify(v.size).subs(sizes)) * value_bytes(v.dtype, width) * v.buffers


def layout(p, level: int = 1, *, unstaged: bool = False, width: dict | None = None) -> Layout:
    """Byte offsets of the plan's variables at ``level``: first and best fit under a few orders (then seeded
    random ones while the bound is not reached), the smallest arena kept, then the fewest staged outputs.

    Hard: values live in one column never meet.  Soft: an output avoids the bytes of what its statement
    reads (or takes exactly an in-place partner's), when that keeps the arena at the columns' bound.
    ``unstaged``: the soft rule holds past the bound too, and the fewest staged outputs come before the
    smallest arena (a CPU stages by copying a whole tile, which costs more than a few more bytes of cache).
    ``width``: bytes per value by format name, where the kernel holds a format wider than its own
    (:func:`value_bytes`).

    >>> import napkin_cat as nc
    >>> flash = nc.group(nc.stream(nc.library.attention(), "x", "s_x"), "q", "g_q")
    >>> p = nc.plan(flash, {"q": 64, "x": 64, "d": 8, "g_q": 32, "s_x": 16})
    >>> tight, loose = layout(p), layout(p, unstaged=True)
    >>> [sum(len(lay.aliased(s)) for s in walk(p.body)) for lay in (tight, loose)], tight.bytes <= loose.bytes
    ([1, 0], True)
    """
    cols = columns(p, level)
    read = {v for s in walk(p.body) for v in reads(s)}
    dead = frozenset(v.name for v in p.variables if v.level == level and v.name not in read)
    names = [v.name for v in p.variables if v.level == level and v.name not in dead]
    size = {n: variable_bytes(p.variable_map[n], p.sizes, width) for n in names}
    bound = max((sum(size[n] for n in c) for c in cols), default=0)
    first, hard = {}, {n: set() for n in names}
    for k, col in enumerate(cols):
        for n in col:
            first.setdefault(n, k)
            hard[n] |= col - {n}
    for n in names:   # a value written and dropped at once is in no column but still needs bytes
        first.setdefault(n, len(cols))
    soft, partners = {n: set() for n in names}, {n: [] for n in names}
    for s in walk(p.body):
        ins, outs = reads_writes(s)
        for o in outs:
            for i in ins:
                if o.var in soft and i.var in soft and o.var != i.var:
                    soft[o.var].add(i.var)
                    soft[i.var].add(o.var)
                    if _in_place(s, o, i, p.variable_map):
                        partners[o.var].append(i.var)
    last = {n: max((k for k, col in enumerate(cols) if n in col), default=first[n]) for n in names}
    orders = [sorted(names, key=lambda n: (first[n], -size[n])),
              sorted(names, key=lambda n: (-size[n], first[n])),
              sorted(names, key=lambda n: (-len(hard[n]), -size[n], first[n])),
              sorted(names, key=lambda n: (-(last[n] - first[n]), -size[n], first[n])),
              sorted(names, key=lambda n: (-last[n], -size[n]))]
    align = {n: value_bytes(p.variable_map[n].dtype, width) for n in names}
    none = {n: set() for n in names}
    rng = random.Random(0)      # seeded: the same plan always gets the same layout

    def candidates():
        for order in orders:
            for prefer, near in ((soft, partners), (none, none)):
                for best_fit in (False, True):
                    yield order, prefer, near, best_fit
        for _ in range(RESTARTS):
            order = list(names)
            rng.shuffle(order)
            yield order, none, none, rng.random() < 0.5
    best = None
    soft_bound = float("inf") if unstaged else bound
    for k, (order, prefer, near, best_fit) in enumerate(candidates()):
        offsets = _Fit(size, align, hard, prefer, near, soft_bound, best_fit=best_fit).place(order)
        total = max((offsets[n] + size[n] for n in names), default=0)
        staged = sum(len(Layout(level, offsets, size, total, p.variable_map, bound).aliased(s)) for s in walk(p.body))
        key = (staged, total) if unstaged else (total, staged)
        if best is None or key < best[1]:
            best = (offsets, key)
        staged, total = best[1] if unstaged else best[1][::-1]
        fixed = k >= 4 * len(orders) - 1
        if (total == bound and (staged == 0 or fixed)) if not unstaged else (staged == 0 and (total == bound or fixed)):
            break     # at the bound: nothing smaller exists; past the fixed orders, the rest is a luxury
    total = 0 if best is None else best[1][1] if unstaged else best[1][0]
    return Layout(level, best[0] if best else {}, size, total, p.variable_map, bound, dead)


class _Fit:
    """First (or best) fit: an in-place partner's bytes, else the lowest (tightest) offset clear of hard and
    soft neighbours within the bound, else clear of hard ones."""

    def __init__(self, size, align, hard, soft, partners, bound, *, best_fit=False):
        self.size, self.align, self.hard, self.soft = size, align, hard, soft
        self.partners, self.bound = partners, bound
        self.best_fit = best_fit
        self.offsets: dict = {}

    def lowest(self, n, avoid) -> int:
        taken = sorted((self.offsets[m], self.offsets[m] + self.size[m]) for m in avoid if m in self.offsets)
        at, gaps = 0, []
        for lo, hi in taken:
            if at + self.size[n] <= lo:
                gaps.append((lo - at, at))
                if not self.best_fit:
                    break
            at = max(at, -(-hi // self.align[n]) * self.align[n])
        if not gaps or self.best_fit:
            gaps.append((float("inf"), at))
        return min(gaps)[1] if self.best_fit else gaps[0][1]

    def clear(self, n, at) -> bool:
        return all(at + self.size[n] <= self.offsets[m] or self.offsets[m] + self.size[m] <= at
                   for m in self.hard[n] if m in self.offsets)

    def place(self, order) -> dict:
        for n in order:
            at = next((self.offsets[m] for m in self.partners[n] if m in self.offsets and self.clear(n, self.offsets[m])
                       and self.offsets[m] + self.size[n] <= self.bound), None)
            if at is None:
                at = self.lowest(n, self.hard[n] | self.soft[n])
                if at + self.size[n] > self.bound:
                    at = self.lowest(n, self.hard[n])
            self.offsets[n] = at
        return self.offsets
