"""The plan IR: a loop nest where every variable, transfer and operation is explicit (paper §5.1-5.3).

Small immutable nodes.  Every index and extent is a sympy expression in axis, tile and loop
symbols; every statement is tied to the diagram element it came from (``origin``: the box or
region label, and ``box``: the primitive box itself for a computation).

======================  ==========================================================================
node                    meaning
======================  ==========================================================================
``Variable``            an array the plan allocates (or is given): shape, dtype, level, role
``Range`` / ``Ref``     a slice ``start : start + extent`` of a variable along one axis / a view
``Alloc`` / ``Free``    a global variable comes to life / a value is no longer needed
``Load`` / ``Store``    a transfer one level down / up (the diagram's Load / Save boxes)
``Fill``                a stream's state set to its value for an empty stream (the head ``F(0)``)
``Compute``             a primitive box on refs; ``accumulate`` folds it into its output (a monoid);
                        an operand may be a ``Compute`` itself (no ``outs``): computed into the
                        consumer, never stored (a sum accumulated in place, ``o ← fma(o, δ, P·V)``)
``Copy``                a state value moved into its variable (no transfer, no FLOPs)
``Kernel``              a fused kernel at ``level``: its body runs there
``GridLoop``            parallel loop over the tiles of ``axis`` (a Grid)
``StreamLoop``          ``head`` once, ``body`` per slice of ``axis``, ``tail`` once (a Stream)
======================  ==========================================================================

The extent of a tile is ``Min(tile, full − start)``: the last tile of a ragged axis is masked.

>>> import sympy
>>> from napkin_cat.syntax.axis import symbol
>>> q, g, i = symbol("q"), symbol("g_q"), sympy.Symbol("i_q", integer=True, nonnegative=True)
>>> r = Range(i * g, g, q); r.extent
Min(g_q, -g_q*i_q + q)
>>> v = Variable("Q", (("q", g), ("d", symbol("d"))), "fp32", 1, "tile", origin="load")
>>> v.size, v.bytes
(d*g_q, 4*d*g_q)
"""
from __future__ import annotations

from dataclasses import dataclass, field

import sympy

from napkin_cat.errors import NapkinError
from napkin_cat.syntax.dtype import as_dtype

ROLES = ("input", "output", "tile", "state", "temp")


class PlanError(NapkinError, ValueError):
    """A plan cannot be made or run: sizes it cannot mask, a missing size, a malformed plan."""


@dataclass(frozen=True)
class Variable:
    """An array of the plan: ``shape`` is ``((axis, extent), …)``; ``level`` 0 is global memory.

    ``role``: input / output (the user's arrays), tile (a loaded slice), state (what a stream
    maintains), temp (an intermediate); ``origin`` the box or state it came from; ``buffers``
    copies kept for asynchronous loads (1 unless a hardware configuration says otherwise).
    """

    name: str
    shape: tuple
    dtype: str
    level: int
    role: str
    origin: str = ""
    buffers: int = 1

    def __post_init__(self):
        if self.role not in ROLES:
            raise PlanError(f"variable {self.name!r}: role {self.role!r} is not one of {ROLES}")

    @property
    def axes(self) -> tuple:
        return tuple(a for a, _ in self.shape)

    @property
    def size(self) -> sympy.Expr:
        """Values held: the product of the extents."""
        n = sympy.Integer(1)
        for _, e in self.shape:
            n = n * e
        return n

    @property
    def bytes(self) -> sympy.Expr:
        """Bytes held: size × bytes per value × buffers."""
        return self.size * as_dtype(self.dtype).bytes * self.buffers


@dataclass(frozen=True)
class Range:
    """The slice ``start : start + extent`` of an axis that ends at ``end``: ``extent = Min(tile, end − start)``."""

    start: sympy.Expr
    tile: sympy.Expr
    end: sympy.Expr

    @property
    def extent(self) -> sympy.Expr:
        return sympy.Min(self.tile, self.end - self.start)


@dataclass(frozen=True)
class Ref:
    """A view of ``var``: ``index`` maps an axis of the variable to a :class:`Range` (whole axis if absent)."""

    var: str
    index: tuple = ()      # ((axis, Range), …)

    def range(self, axis: str):
        for a, r in self.index:
            if a == axis:
                return r
        return None

    def sliced(self, axis: str, rng: Range) -> "Ref":
        """This view narrowed along ``axis`` to ``rng`` (absolute: loops compose their offsets)."""
        rest = tuple((a, r) for a, r in self.index if a != axis)
        return Ref(self.var, rest + ((axis, rng),))

    @property
    def whole(self) -> bool:
        """Whether the view is the whole variable (a write to it is a full definition)."""
        return not self.index


@dataclass(frozen=True)
class Alloc:
    """``var`` comes to life (a global output or intermediate, allocated before it is written)."""

    var: str


@dataclass(frozen=True)
class Free:
    """The value of ``var`` is no longer needed (its storage may be reused)."""

    var: str


@dataclass(frozen=True)
class Load:
    """``dst ← src`` one level down (a Load box); ``level`` is the lower level."""

    dst: Ref
    src: Ref
    level: int
    origin: str = ""


@dataclass(frozen=True)
class Store:
    """``dst ← src`` one level up (a Save box); ``level`` is the lower level (where ``src`` lives)."""

    dst: Ref
    src: Ref
    level: int
    origin: str = ""


@dataclass(frozen=True)
class Fill:
    """``var ← value`` everywhere: a stream's state before its first slice (the head ``F(0)``)."""

    var: str
    value: float
    origin: str = ""


@dataclass(frozen=True)
class Compute:
    """``outs ← box(ins)``; with ``accumulate`` (a monoid name) ``outs ← outs ⊕ box(ins)``.

    ``box`` is the primitive box of the diagram (its kind, parameters and weaves); ``origin``
    its label and the path of regions it sits in.
    """

    box: object = field(compare=False, repr=False)
    outs: tuple
    ins: tuple
    accumulate: str | None = None
    origin: str = ""

    @property
    def kind(self) -> str:
        return self.box.data.kind

    @property
    def refs(self) -> tuple:
        """The views it reads, those of its inlined operands included (in operand order)."""
        out = ()
        for r in self.ins:
            out += r.refs if isinstance(r, Compute) else (r,)
        return out

    @property
    def inlined(self) -> tuple:
        """``(position, Compute)`` of its operands computed into it (never stored)."""
        return tuple((p, r) for p, r in enumerate(self.ins) if isinstance(r, Compute))


@dataclass(frozen=True)
class Copy:
    """``dst ← src`` at one level (a new state value moved into the state's variable)."""

    dst: Ref
    src: Ref
    origin: str = ""


@dataclass(frozen=True)
class Kernel:
    """A fused kernel at ``level``: ``body`` runs between its loads and stores."""

    level: int
    body: tuple
    origin: str = ""


@dataclass(frozen=True)
class GridLoop:
    """``for index in 0 … ⌈full / tile⌉ − 1`` in parallel: the tiles of ``axis`` (a Grid)."""

    axis: str
    tile: sympy.Expr
    full: sympy.Expr
    index: sympy.Symbol
    body: tuple
    origin: str = ""

    @property
    def trips(self) -> sympy.Expr:
        return sympy.ceiling(self.full / self.tile)


@dataclass(frozen=True)
class StreamLoop:
    """``head``; ``for index in 0 … ⌈full / tile⌉ − 1: body``; ``tail`` (a Stream, in order)."""

    axis: str
    tile: sympy.Expr
    full: sympy.Expr
    index: sympy.Symbol
    head: tuple
    body: tuple
    tail: tuple
    origin: str = ""

    @property
    def trips(self) -> sympy.Expr:
        return sympy.ceiling(self.full / self.tile)


LOOPS = (GridLoop, StreamLoop)


def blocks(stmt) -> tuple:
    """The statement lists nested in ``stmt`` (in execution order)."""
    if isinstance(stmt, StreamLoop):
        return (stmt.head, stmt.body, stmt.tail)
    if isinstance(stmt, (GridLoop, Kernel)):
        return (stmt.body,)
    return ()


def walk(stmts):
    """Every statement, depth first, in program order."""
    for s in stmts:
        yield s
        for b in blocks(s):
            yield from walk(b)


def reads(stmt) -> tuple:
    """Variables a simple statement reads."""
    if isinstance(stmt, (Load, Store, Copy)):
        return (stmt.src.var,)
    if isinstance(stmt, Compute):
        return tuple(r.var for r in stmt.refs) + (tuple(r.var for r in stmt.outs) if stmt.accumulate else ())
    return ()


def writes(stmt) -> tuple:
    """Variables a simple statement defines (gives a new value)."""
    if isinstance(stmt, (Load, Store, Copy)):
        return (stmt.dst.var,)
    if isinstance(stmt, Compute):
        return tuple(r.var for r in stmt.outs)
    if isinstance(stmt, (Fill, Alloc)):
        return (stmt.var,)
    return ()


def loop_index(axis: str, taken: set) -> sympy.Symbol:
    """A fresh loop index ``i_<axis>`` (primed when the axis is partitioned again inside)."""
    name = f"i_{axis}"
    while name in taken:
        name += "'"
    taken.add(name)
    return sympy.Symbol(name, integer=True, nonnegative=True)
