"""The cost record: transfers, memory and FLOPs per level, symbolic or at concrete sizes (paper §2.2-2.4).

One record holds what the cost functor predicts and what the instrumented plan runner measures:

==============  ======================  ===========================================================
field           runner's name           meaning
==============  ======================  ===========================================================
``H[ℓ]``        ``transfers[ℓ]``        values moved into or out of level ℓ
``H_bytes[ℓ]``  ``bytes[ℓ]``            the same in bytes
``M[ℓ]``        ``peak[ℓ]`` (ℓ ≥ 1)     the most values live at level ℓ at once: the max of ``columns[ℓ]``
``flops[p]``    ``flops[p]``            FLOPs per pipeline (``tensor``, ``special``, ``general``)
``link``        ``link``                per device: values sent and received over the link, messages, level-0
                                        memory (:class:`Link`; None: no device region)
==============  ======================  ===========================================================

``nc.cost(d)`` fills it with sympy expressions (and the breakdowns ``groups``, ``streams``, ``ops``);
``nc.cost(d, sizes=...)`` and ``p.run(...)`` with integers.  It is a monoid: ``then`` adds H and FLOPs
and pools the columns (M is their max), so ``cost(f >> g) == cost(f).then(cost(g))``.

>>> c = Cost({1: 10}, {1: 40}, {1: [3, 7]}, {"tensor": 12})
>>> c.M, c.peak, c.transfers, c.bytes
({1: 7}, {1: 7}, {1: 10}, {1: 40})
>>> c.then(Cost({1: 5}, {1: 20}, {1: [9]}, {"tensor": 1})).M
{1: 9}
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import sympy

from napkin_cat.cost.maxima import column_max
from napkin_cat.cost.polynomial import Poly, add_all
from napkin_cat.errors import ArgumentError, DeviceError
from napkin_cat.cost.expanded import expand

ZERO = sympy.Integer(0)
ONE = sympy.Integer(1)


@dataclass(frozen=True)
class OpCost:
    """One box's FLOPs in one pipeline: ``flops`` per execution (tile sizes), run ``trips`` times.

    ``region`` is the path of enclosing partitions (``(("grid", "q"), ("stream", "x"))``), ``role``
    the box's part of its innermost stream (``'head'``, ``'body'``, ``'tail'``; ``''`` outside one),
    ``dtype`` the name of its output's number format, ``operands`` the formats of its inputs (a tensor
    core's rate is set by them), ``index`` the box's occurrence (records of one box share it; numbered
    in the order of the walk; not compared, so that ``cost(f >> g).ops == cost(f).then(cost(g)).ops``),
    ``arrays`` the box's ``(inputs, outputs)`` as the record counts them (seen through the relabelling the walk saw
    the box through: the axes' sizes are those its ``flops`` multiply; not compared): what a time model reads a
    box's own shape off (a matrix product's ``m, n, k``), where boxes of one ``label`` differ.
    """

    label: str
    kind: str
    pipeline: str
    flops: sympy.Expr
    trips: sympy.Expr
    region: tuple = ()
    role: str = ""
    dtype: str = ""
    operands: tuple = ()
    index: int = field(default=-1, compare=False)   # bookkeeping: which records are one box, not a cost
    arrays: tuple = field(default=((), ()), compare=False, repr=False)   # the box's (inputs, outputs), not a cost


@dataclass
class GroupCost:
    """One group partition: ``H = N_g · H_g`` (per level), over the grouped ``axes`` with ``tiles``."""

    axes: tuple
    tiles: tuple
    N_g: sympy.Expr
    H_g: dict
    fulls: tuple = ()
    level: int = 1      # the level of the kernel it partitions (2: a level-2 kernel's groups in a level-1 tile)


@dataclass(frozen=True)
class Density:
    """An assumption of a cost: ``symbol`` (``rho[…]``, :func:`~napkin_cat.algorithms.skipping.density_symbol`) is
    the fraction of a stream's trips (those the masks from positions allow) whose block the mask from data allows;
    ``value``: None where it is left free (a symbolic cost: substitute it), else the number the counts assume (1:
    dense, every trip run, as a cost at sizes given no block mask counts)."""

    symbol: sympy.Symbol
    value: object = None

    def __str__(self):
        told = "free" if self.value is None else f"= {self.value}" + (" (dense)" if self.value == 1 else "")
        return (f"{self.symbol} {told}: the fraction of the stream's trips that the positions allow whose block the "
                f"data's mask allows")


class StreamRecord(tuple):
    """``(axis, stream size, full size)`` of one stream, with the ``level`` its slices are held at, and whether it is
    ``masked``: a mask skips some of its trips, so the symbolic count of those that run is an estimate
    (:mod:`napkin_cat.cost.trips`) and only the cost at concrete sizes counts them exactly; ``density``: the symbol
    its running trips are scaled by where a mask from data skips some (None where none does)."""

    level = 1
    masked = False
    density = None

    def __new__(cls, axis, size, full, level: int = 1, masked: bool = False, density=None):
        out = super().__new__(cls, (axis, size, full))
        out.level, out.masked, out.density = level, masked, density
        return out


@dataclass(frozen=True)
class Link:
    """The device level (issue 37): per device, the values it ``sent`` and ``received`` over the link (and the same in
    bytes, ``sent_bytes``/``received_bytes``, each array at its number format), its ``messages`` (one per peer and
    array a collective moves: what latency is paid for) and ``held``, the most values it holds in global memory at
    once (its ``M[0]``: shards of the sharded arrays, replicated arrays whole).

    Symbolic (``nc.cost(d)``): each a sympy expression, any device's (shards of ``n/P``: ``P`` divides the axis).
    At sizes (``nc.cost(d, sizes=...)``): each a tuple of ints, one per device ``0 … P−1`` (shards cut as
    ``np.array_split`` cuts them).  ``H`` is the device level's transfers, ``sent + received``.  Records compose as
    the cost does: ``then`` adds the counts and takes the max of ``held``; ``devices`` must agree.

    The work of the rings' trips, per device and ring step ``t`` (a step waits for the slowest device): ``trips``,
    the folds it runs at step ``t`` (one per piece of its queries and piece of the shard that arrived, those a mask
    skips not counted) and ``work``, their FLOPs.  At sizes: per device a tuple over the steps; symbolically
    ``trips`` is the folds of one device without a mask (``P`` per ring, times the pieces), None where a mask skips
    some (the count differs between devices), and ``work`` None.

    >>> a = Link(2, (3, 2), (2, 3), (1, 1), (9, 8), (12, 8), (8, 12))
    >>> a.then(a).H, a.then(a).held, a.then(a).sent_bytes
    ((10, 10), (9, 8), (24, 16))
    """

    devices: object
    sent: object
    received: object
    messages: object
    held: object = None
    sent_bytes: object = 0
    received_bytes: object = 0
    trips: object = None
    work: object = None

    @property
    def H(self):
        """Values in or out over the link, per device: ``sent + received``."""
        return _each(self.sent, self.received, lambda a, b: a + b)

    def then(self, other: "Link | None") -> "Link":
        if other is None:
            return self
        if other.devices != self.devices:
            raise DeviceError(f"one program runs on one set of devices: a part on {self.devices} devices composed "
                              f"with one on {other.devices}")
        held = self.held if other.held is None else other.held if self.held is None else \
            _each(self.held, other.held, lambda a, b: max(a, b) if isinstance(a, int) else sympy.Max(a, b))
        return Link(self.devices, _each(self.sent, other.sent, _plus2), _each(self.received, other.received, _plus2),
                    _each(self.messages, other.messages, _plus2), held,
                    _each(self.sent_bytes, other.sent_bytes, _plus2),
                    _each(self.received_bytes, other.received_bytes, _plus2),
                    steps_plus(self.trips, other.trips), steps_plus(self.work, other.work))

    def scaled(self, k) -> "Link":
        """The link of running this ``k`` times (the counts scale, ``held`` does not)."""
        return Link(self.devices, _times(self.sent, k), _times(self.received, k), _times(self.messages, k), self.held,
                    _times(self.sent_bytes, k), _times(self.received_bytes, k), steps_times(self.trips, k),
                    steps_times(self.work, k))


def steps_plus(a, b):
    """Two records of ring steps added: None is none; a number (symbolic, one device's) adds; a tuple over steps adds
    step by step (the shorter padded with zeros); a tuple of those (one per device) device by device.

    >>> steps_plus((1, 2), (3,)), steps_plus(((1,), (2,)), ((1, 1), (0,))), steps_plus(None, 4)
    ((4, 2), ((2, 1), (2,)), 4)
    """
    if a is None or b is None:
        return b if a is None else a
    if not isinstance(a, tuple) or not isinstance(b, tuple):
        return a + b
    if any(isinstance(x, tuple) for x in (*a, *b)):
        return tuple(steps_plus(x, y) for x, y in zip(a, b))
    n = max(len(a), len(b))
    return tuple((a[i] if i < len(a) else 0) + (b[i] if i < len(b) else 0) for i in range(n))


def steps_times(a, k):
    """A record of ring steps scaled by ``k`` (None stays)."""
    if a is None:
        return None
    return tuple(steps_times(x, k) for x in a) if isinstance(a, tuple) else a * k


def _plus2(a, b):
    return a + b


def _each(a, b, fn):
    if isinstance(a, tuple) and isinstance(b, tuple):
        return tuple(fn(x, y) for x, y in zip(a, b))
    if isinstance(a, tuple) or isinstance(b, tuple):     # a device-less 0 (a record made without bytes) and a tuple
        t, x = (a, b) if isinstance(a, tuple) else (b, a)
        return tuple(fn(v, x) if t is a else fn(x, v) for v in t)
    return fn(a, b)


def _times(x, k):
    return tuple(v * k for v in x) if isinstance(x, tuple) else x * k


def join_links(a: "Link | None", b: "Link | None") -> "Link | None":
    """``a ; b`` for two links that may be absent (no device region)."""
    return b if a is None else a.then(b)


@dataclass
class Cost:
    """H (values), H_bytes, M (max over ``columns``), FLOPs per pipeline, and the group partitions."""

    H: dict = field(default_factory=dict)
    H_bytes: dict = field(default_factory=dict)
    columns: dict = field(default_factory=dict)
    flops: dict = field(default_factory=dict)
    groups: list = field(default_factory=list)
    streams: list = field(default_factory=list)   # (axis, stream size, full size)
    ops: list = field(default_factory=list)       # OpCost records, the per-box breakdown of ``flops``
    #: the diagram the record was read off (None for a record composed of others): where the symbolic transfers
    #: are an estimate (:attr:`estimated`), the cost at concrete sizes re-reads it
    source: object = field(default=None, repr=False, compare=False)
    #: the densities of masks from data the counts assume (:class:`Density`): free symbols (symbolic) or bound
    assumptions: tuple = ()
    #: the device level (:class:`Link`): per device, values sent and received over the link, messages, level-0
    #: memory; None where the program has no device region
    link: Link | None = None

    @property
    def M(self) -> dict:
        """Level → the largest column (an int at concrete sizes, else a sympy ``Max``)."""
        return {lvl: _largest(cols) for lvl, cols in self.columns.items()}

    @property
    def transfers(self) -> dict:
        """``H`` by the runner's name."""
        return self.H

    @property
    def bytes(self) -> dict:
        """``H_bytes`` by the runner's name."""
        return self.H_bytes

    @property
    def peak(self) -> dict:
        """``M`` on chip (levels ≥ 1), by the runner's name."""
        return {lvl: m for lvl, m in self.M.items() if lvl > 0}

    @property
    def estimated(self) -> bool:
        """Whether the symbolic transfers count some trips by an estimate: a masked stream's running trips
        (:class:`StreamRecord`), exact only at concrete sizes (``nc.cost(d, sizes=...)``)."""
        return any(getattr(s, "masked", False) for s in self.streams)

    def at_density(self, density) -> "Cost":
        """This cost with every density symbol of :attr:`assumptions` bound: ``density`` a number (every mask from
        data) or ``{symbol or its name: number}`` (a name none of :attr:`assumptions` has: an ArgumentError naming
        it and those it has); the assumptions then say which value the counts assume.

        >>> import napkin_cat as nc
        >>> from napkin_cat.cost.iocost import cost
        >>> c = cost(nc.stream(nc.kernel(nc.library.document_attention()), "x", "s_x"))
        >>> (rho,) = [a.symbol for a in c.assumptions]
        >>> half = c.at_density(0.5)
        >>> rho, half.H[1] == c.H[1].subs(rho, sympy.Rational(1, 2)), half.assumptions[0].value
        (rho[d(q)=d(x)], True, 1/2)
        """
        if isinstance(density, dict):
            names = {str(a.symbol) for a in self.assumptions}
            unknown = [str(k) for k in density if str(k) not in names]
            if unknown:
                raise ArgumentError(f"density names {unknown}, no mask read from data of this cost: its densities "
                                    f"are {sorted(names) or 'none (it has no mask read from data)'}")
        values = {}
        for a in self.assumptions:
            given = density.get(a.symbol, density.get(str(a.symbol))) if isinstance(density, dict) else density
            if a.value is None and given is not None:
                values[a.symbol] = fraction(given, a.symbol)
        if not values:
            return self

        def bind(x):
            return x.xreplace(values) if isinstance(x, (sympy.Basic, Poly)) else x
        ops = [replace(o, flops=bind(o.flops), trips=bind(o.trips)) for o in self.ops]
        groups = [replace(g, N_g=bind(g.N_g), H_g={l: bind(h) for l, h in g.H_g.items()}) for g in self.groups]
        return Cost({l: bind(h) for l, h in self.H.items()}, {l: bind(h) for l, h in self.H_bytes.items()},
                    {l: list(c) for l, c in self.columns.items()}, {p: bind(f) for p, f in self.flops.items()},
                    groups, list(self.streams), ops, self.source,
                    tuple(Density(a.symbol, values.get(a.symbol, a.value)) for a in self.assumptions), self.link)

    @property
    def levels(self):
        return sorted(set(self.H) | set(self.columns))

    def _first_group(self):
        if not self.groups:
            raise AttributeError("this algorithm has no group partition (use nc.group)")
        return self.groups[0]

    @property
    def N_g(self):
        return self._first_group().N_g

    @property
    def H_g(self) -> dict:
        return self._first_group().H_g

    @property
    def total_flops(self):
        return sum(self.flops.values(), ZERO)

    def scaled(self, k, *, region=None, role: str = "") -> "Cost":
        """The cost of running this ``k`` times (H and FLOPs scale, M does not).

        ``region`` (a partition such as ``("grid", "q")``) is prepended to the ops' region paths;
        ``role`` is given to the ops that have none yet (the innermost stream decides).
        """
        if k is ONE or (type(k) is int and k == 1) or (type(k) is Poly and k == 1):    # k · x is x: only the ops'
            # region paths and roles change
            times = _same
        elif isinstance(k, sympy.Expr):
            def times(x):
                return k if x is ONE else x * k        # 1 · k is k (sympy's 1 is one object)
        else:
            def times(x):
                return x * k
        prefix = (region,) if region else ()
        ops = [o if not prefix and (o.role or not role) and times is _same else
               OpCost(o.label, o.kind, o.pipeline, o.flops, times(o.trips), prefix + o.region, o.role or role,
                      o.dtype, o.operands, o.index, o.arrays) for o in self.ops]
        return Cost({l: times(h) for l, h in self.H.items()}, {l: times(h) for l, h in self.H_bytes.items()},
                    {l: list(c) for l, c in self.columns.items()}, {p: times(f) for p, f in self.flops.items()},
                    [replace(g, N_g=times(g.N_g)) for g in self.groups], list(self.streams), ops,
                    assumptions=self.assumptions, link=None if self.link is None else self.link.scaled(k))

    def then(self, other: "Cost") -> "Cost":
        """Sequential composition: H and FLOPs add, M is the max (columns are pooled)."""
        return Cost().absorb(self).absorb(other)

    def absorb(self, src: "Cost") -> "Cost":
        """In place: ``self ← self ; src`` (the functor's accumulator; linear in the diagram)."""
        for mine, theirs in ((self.H, src.H), (self.H_bytes, src.H_bytes), (self.flops, src.flops)):
            for k, v in theirs.items():
                mine[k] = mine[k] + v if k in mine else v if isinstance(v, Poly) else ZERO + v   # (0 + 7 is sympy's)
        for l, cols in src.columns.items():
            for v in cols:
                self._add(l, v)
        self.groups += src.groups
        self.streams += src.streams
        self.ops += src.ops
        self._assume(src.assumptions)
        self.link = join_links(self.link, src.link)
        return self

    def _assume(self, more):
        if more:
            self.assumptions = tuple(dict.fromkeys(self.assumptions + tuple(more)))

    def absorb_all(self, parts) -> "Cost":
        """In place: ``self ← self ; p₁ ; … ; pₙ``, each total summed once (not through n partial sums)."""
        parts = list(parts)
        if not parts:
            return self
        for name in ("H", "H_bytes", "flops"):
            mine, terms = getattr(self, name), None
            for src in parts:
                theirs = getattr(src, name)
                if not theirs:
                    continue
                if terms is None:
                    terms = {k: [v] for k, v in mine.items()}
                for k, v in theirs.items():
                    found = terms.get(k)
                    if found is None:
                        terms[k] = [v]
                    else:
                        found.append(v)
            if terms is not None:
                for k, vs in terms.items():
                    mine[k] = vs[0] if len(vs) == 1 else add_all(vs)
        for src in parts:
            for l, cols in src.columns.items():
                for v in cols:
                    self._add(l, v)
            if src.groups:
                self.groups += src.groups
            if src.streams:
                self.streams += src.streams
            if src.ops:
                self.ops += src.ops
            if src.assumptions:
                self._assume(src.assumptions)
            if src.link is not None:
                self.link = join_links(self.link, src.link)
        return self

    __rshift__ = then

    def _add(self, l, v):
        pools = self.__dict__.get("_seen")
        if pools is None:
            pools = self.__dict__["_seen"] = {}
        seen = pools.get(l)
        if seen is None:
            seen = pools[l] = set()
        if v not in seen:
            seen.add(v)
            self.columns.setdefault(l, []).append(v)

    def add_column(self, col: dict, *, expanded: bool = False):
        """Pool a column (level → live data), expanded so that equal columns are pooled once."""
        for l, v in col.items():
            if type(v) is Poly:
                if not v.terms:
                    continue
            else:
                v = v if expanded else expand(v)
                if v == 0:
                    continue
            self._add(l, v)

    def __repr__(self):
        H = {l: h for l, h in self.H.items()}
        return f"Cost(H={H}, M={self.M}, flops={self.flops})"



def fraction(value, symbol):
    """A density as an exact rational in [0, 1], or an ArgumentError naming ``symbol`` (what it binds) and the value.

    >>> fraction(0.25, "rho"), fraction(1, "rho")
    (1/4, 1)
    """
    try:
        r = sympy.Rational(str(value)) if isinstance(value, float) else sympy.Rational(value)
    except (TypeError, ValueError):
        r = None
    if r is None or not 0 <= r <= 1:
        raise ArgumentError(f"{symbol}: a density is the fraction of a stream's trips that run, a number 0 … 1; "
                            f"got {value!r}")
    return r


def _same(x):
    return x


def _largest(cols):
    """The max of a level's columns: an int for a record at concrete sizes (ints), else a sympy expression."""
    if all(isinstance(c, int) for c in cols):
        return max(cols)
    return column_max(cols) if len(cols) > 1 else cols[0]

