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
``Combine``             ``dst ← dst ⊕ src`` with a monoid: a partial result folded into its accumulator
``Kernel``              a fused kernel at ``level``: its body runs there
``GridLoop``            parallel loop over the tiles of ``axis`` (a Grid)
``StreamLoop``          ``head`` once, ``body`` per slice of ``axis``, ``tail`` once (a Stream); with
                        ``when``, a trip runs only where that condition holds (a mask skips the rest)
``BlockSkip``           a stream's skip test by the data's block mask (``StreamLoop.data``): none trips
                        skipped, full ones run without the mask (:mod:`napkin_cat.plan.skips`)
======================  ==========================================================================

The extent of a tile is ``Min(tile, full − start)``: the last tile of a ragged axis is masked.  A
``Compute`` that reads positions (a ``position``, a ``gather``) carries ``at``: where index 0 of each
axis it reads sits on the whole axis, the start expression of the loops around it.

The toolkit every pass and printer uses: :func:`access` (what a statement reads and writes, one table
``ACCESS``), :func:`walk` / :func:`walk_scoped` (every statement in program order), :func:`blocks` /
:func:`with_blocks` (a compound's statement lists, and the one way to rebuild it) and :func:`rebuild` (the
bottom-up map of a plan's statements).  Liveness is :mod:`napkin_cat.plan.liveness`.

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

import math
from dataclasses import dataclass, field, replace
from fractions import Fraction

import sympy

from napkin_cat.cost.exact_arithmetic import rational_at
from napkin_cat.errors import PlanError
from napkin_cat.syntax.dtype import as_dtype

ROLES = ("input", "output", "tile", "state", "temp")


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
    at: tuple = ()        # ((axis, start), …): the global position of index 0 along the axes it reads

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

    def start(self, axis: str):
        """Where index 0 of ``axis`` sits on the whole axis (0 outside every loop over it)."""
        return dict(self.at).get(axis, sympy.Integer(0))


@dataclass(frozen=True)
class Copy:
    """``dst ← src`` at one level (a new state value moved into the state's variable)."""

    dst: Ref
    src: Ref
    origin: str = ""


@dataclass(frozen=True)
class Combine:
    """``dst ← dst ⊕ src`` with the monoid ``monoid`` (``sum``, ``max``, ``min``): a partial result folded into
    the value that accumulates it (the parts of a split reduction; a region's result folded into a state)."""

    dst: Ref
    src: Ref
    monoid: str
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
    """``head``; ``for index in 0 … ⌈full / tile⌉ − 1: if when: body``; ``tail`` (a Stream, in order).

    ``when``: a condition on the loop indices (sympy), true on the trips that run; a trip where it is false
    is skipped, its mask never true there (:mod:`napkin_cat.algorithms.skipping`).  ``data``: where a mask read
    from data decides too, its :class:`~napkin_cat.plan.skips.BlockSkip`: a trip runs where the data's block mask
    (:mod:`napkin_cat.algorithms.blockmask`, given to the run) allows a pair in its box, without the mask where
    it allows every pair.  ``full_trips``: where a mask from positions decides, its
    :class:`~napkin_cat.plan.skips.FullTrips`: its
    ``when`` (a condition on the loop indices) holds on the trips where that mask is true on every pair, and a
    kernel may run them without it (``made`` not made, ``conditions`` read as true), as a block mask's full trips:
    FlashAttention's causal tiles below the diagonal, which apply no mask.  None where no trip is known full."""

    axis: str
    tile: sympy.Expr
    full: sympy.Expr
    index: sympy.Symbol
    head: tuple
    body: tuple
    tail: tuple
    origin: str = ""
    when: object = sympy.true
    data: object = None          # a BlockSkip (napkin_cat.plan.skips), or None
    full_trips: object = None    # a FullTrips (napkin_cat.plan.skips), or None

    @property
    def skips(self) -> bool:
        """Whether some trip may be skipped by its mask from positions (``when``)."""
        return self.when is not sympy.true

    @property
    def trips(self) -> sympy.Expr:
        return sympy.ceiling(self.full / self.tile)


def trips_at(loop, sizes) -> int | None:
    """A loop's :attr:`~GridLoop.trips` at ``sizes`` (symbol → int) where they are a number there: ``⌈full / tile⌉``
    in exact arithmetic, without building sympy's ``ceiling`` (milliseconds each, and a derive with a GPU model
    plans every candidate kernel); None where the extent or the tile is no rational number at ``sizes`` or the tile
    is 0 (the caller reads ``loop.trips`` with sympy there)::

        trips_at(loop, sizes) == loop.trips.subs(sizes)          (where it is not None)

    >>> q, g = sympy.Symbol("q"), sympy.Symbol("g_q")
    >>> loop = GridLoop("q", g, q, sympy.Symbol("i_q"), ())
    >>> trips_at(loop, {q: 10, g: 4}), loop.trips.subs({q: 10, g: 4}), trips_at(loop, {q: 10})
    (3, 3, None)
    """
    full, tile = rational_at(loop.full, sizes), rational_at(loop.tile, sizes)
    if full is None or not tile:
        return None
    return math.ceil(Fraction(full) / tile)


LOOPS = (GridLoop, StreamLoop)
COMPOUND = (Kernel, GridLoop, StreamLoop)


# ---------------------------------------------------------------------------------------------- the toolkit
def blocks(stmt) -> tuple:
    """The statement lists nested in ``stmt`` (in execution order); ``()`` for a simple statement."""
    if isinstance(stmt, StreamLoop):
        return (stmt.head, stmt.body, stmt.tail)
    if isinstance(stmt, (GridLoop, Kernel)):
        return (stmt.body,)
    return ()


def with_blocks(stmt, new: tuple):
    """``stmt`` with its nested statement lists replaced by ``new`` (one per block, as :func:`blocks` lists them).

    The one rebuild of a compound statement: ``with_blocks(s, blocks(s)) == s``.
    """
    new = tuple(tuple(b) for b in new)
    if len(new) != len(blocks(stmt)):
        raise PlanError(f"a {type(stmt).__name__} has {len(blocks(stmt))} block(s), got {len(new)}")
    if isinstance(stmt, StreamLoop):
        return replace(stmt, head=new[0], body=new[1], tail=new[2])
    if isinstance(stmt, (GridLoop, Kernel)):
        return replace(stmt, body=new[0])
    return stmt


def walk_scoped(stmts, scope: tuple = ()):
    """``(statement, scope)`` for every statement, depth first, in program order; ``scope`` lists the
    ``(compound, block number)`` pairs it sits in, outermost first (a stream's head is block 0, body 1, tail 2)."""
    for s in stmts:
        yield s, scope
        for k, b in enumerate(blocks(s)):
            yield from walk_scoped(b, scope + ((s, k),))


def walk(stmts):
    """Every statement, depth first, in program order (compounds before what they hold): the statements of
    :func:`walk_scoped` without their scopes."""
    for s in stmts:
        yield s
        for b in blocks(s):
            yield from walk(b)


def rebuild(stmts, f) -> tuple:
    """The plan's statements mapped by ``f``, bottom up: each compound is rebuilt from its mapped blocks, then
    ``f`` gets it; ``f`` returns a statement, or a sequence of statements spliced in its place (``()`` drops it).

    Laws: ``rebuild(b, lambda s: s) == b``; for ``f`` that maps each simple statement to one and leaves
    compounds as they are, ``[f(s) for s in walk(b) if simple] == [s for s in walk(rebuild(b, f)) if simple]``.

    >>> import napkin_cat as nc
    >>> p = nc.plan(nc.stream(nc.library.matmul(), "b", "s_b"), {"a": 2, "b": 4, "c": 3, "s_b": 2})
    >>> rebuild(p.body, lambda s: s) == p.body
    True
    >>> [type(s).__name__ for s in walk(rebuild(p.body, lambda s: () if isinstance(s, Free) else s))]
    ['Kernel', 'StreamLoop', 'Fill', 'Load', 'Load', 'Compute', 'Store']
    """
    out = []
    for s in stmts:
        if isinstance(s, COMPOUND):
            s = with_blocks(s, tuple(rebuild(b, f) for b in blocks(s)))
        r = f(s)
        if isinstance(r, (list, tuple)):
            out.extend(r)
        else:
            out.append(r)
    return tuple(out)


@dataclass(frozen=True)
class Access:
    """What a simple statement does to the plan's variables: the views it ``reads`` and ``writes``.

    ``fold``: it folds a value into what it writes (``o ⊕= …``): it reads its destination and defines
    nothing new.  For liveness, ``uses`` are the variables whose current value it needs (what it reads, and
    what it writes only part of: the rest is kept) and ``defs`` those it gives a whole new value.
    """

    reads: tuple = ()
    writes: tuple = ()
    fold: bool = False

    @property
    def uses(self) -> frozenset:
        return frozenset(r.var for r in self.reads) | frozenset(r.var for r in self.writes if not r.whole)

    @property
    def defs(self) -> frozenset:
        return frozenset() if self.fold else frozenset(r.var for r in self.writes if r.whole)


def _compute_access(s: Compute) -> Access:
    return Access(tuple(s.refs) + (tuple(s.outs) if s.accumulate else ()), tuple(s.outs), bool(s.accumulate))


#: statement type → what it reads and writes (the one vocabulary: a new statement kind adds its row here)
ACCESS = {
    Alloc: lambda s: Access((), (Ref(s.var),)),
    Free: lambda s: Access(),
    Fill: lambda s: Access((), (Ref(s.var),)),
    Load: lambda s: Access((s.src,), (s.dst,)),
    Store: lambda s: Access((s.src,), (s.dst,)),
    Copy: lambda s: Access((s.src,), (s.dst,)),
    Combine: lambda s: Access((s.src, s.dst), (s.dst,), True),
    Compute: _compute_access,
    Kernel: lambda s: Access(),
    GridLoop: lambda s: Access(),
    StreamLoop: lambda s: Access(),
}   # (and napkin_cat.plan.skips's BlockSkip and FullTrips, registered there)


def access(stmt) -> Access:
    """What ``stmt`` reads and writes (nothing for a compound: its blocks hold its statements).

    >>> access(Load(Ref("t"), Ref("x", (("a", Range(0, 2, 4)),)), 1)).uses
    frozenset({'x'})
    >>> access(Combine(Ref("o"), Ref("p"), "sum")).defs
    frozenset()
    """
    rule = ACCESS.get(type(stmt))
    if rule is None:
        raise PlanError(f"{type(stmt).__name__} is not a statement of the plan IR; its statements are "
                        f"{', '.join(t.__name__ for t in ACCESS)}")
    return rule(stmt)


def reads(stmt) -> tuple:
    """Names of the variables a simple statement reads (an accumulation reads its output)."""
    return tuple(r.var for r in access(stmt).reads)


def writes(stmt) -> tuple:
    """Names of the variables a simple statement writes (an ``Alloc`` or ``Fill`` brings its variable to life)."""
    return tuple(r.var for r in access(stmt).writes)


def uses(stmt) -> frozenset:
    """Variables whose current value a simple statement needs (reads, accumulations, partial writes)."""
    return access(stmt).uses


def defs(stmt) -> frozenset:
    """Variables a simple statement gives a whole new value."""
    return access(stmt).defs


def loop_index(axis: str, taken: set) -> sympy.Symbol:
    """A fresh loop index ``i_<axis>`` (primed when the axis is partitioned again inside)."""
    name = f"i_{axis}"
    while name in taken:
        name += "'"
    taken.add(name)
    return sympy.Symbol(name, integer=True, nonnegative=True)
