"""The cost functor: transfers H, memory M and FLOPs per level, read off the diagram (§2.2-2.4).

* ``H[ℓ]``: values moved into or out of level ℓ (Loads/Saves whose lower end is ℓ),
  times the trip counts of enclosing Grids (``a/g``) and Streams (``b/s``).
* ``M[ℓ]``: the maximum over columns of the live data at ℓ, with relabelled
  sizes inside bubbles, plus what a Stream maintains (its accumulated outputs and
  the auxiliaries of online softmax) while its body runs.
* ``flops[pipeline]``: item FLOPs × weave sizes × trips; ``ops`` breaks them down per box
  (:class:`OpCost`: one record per box and pipeline, with the box's FLOPs per execution and its
  trips), so that ``flops[p] == Σ r.flops · r.trips`` over the records of pipeline ``p``.
  A stream's body counts its accumulator's step diagram once per trip (the online-softmax
  δ = exp(μ′ − μ) and the running output's rescale-and-accumulate included), its finish once.

It is a monoid-valued functor: composition adds H and FLOPs and takes the max of M::

    cost(f >> g) == cost(f).then(cost(g))

>>> import napkin_cat as nc
>>> q, x, d, g = nc.symbol("q"), nc.symbol("x"), nc.symbol("d"), nc.symbol("g_q")
>>> c = cost(nc.group(nc.stream(nc.library.attention(), "x", "s_x"), "q", "g_q"))
>>> c.N_g, c.H_g[1]
(q/g_q, 2*d*g_q + 2*d*x)
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field, replace

import sympy

from napkin_cat.errors import NapkinError
from napkin_cat.syntax.adapter import Diagram, layers
from napkin_cat.algorithms.bubbles import Grid, Region, Stream
from napkin_cat.syntax.primitive import kind_of
from napkin_cat.syntax.weave import core_of
from napkin_cat.syntax.wiring import computes, traverse
from napkin_cat.cost.columns import stream_columns
from napkin_cat.cost.live import Live, numel
from napkin_cat.cost.maxima import column_max
from napkin_cat.algorithms.nesting import state_moves

ZERO = sympy.Integer(0)


@dataclass(frozen=True)
class OpCost:
    """One box's FLOPs in one pipeline: ``flops`` per execution (tile sizes), run ``trips`` times.

    ``region`` is the path of enclosing partitions (``(("grid", "q"), ("stream", "x"))``), ``role``
    the box's part of its innermost stream (``'head'``, ``'body'``, ``'tail'``; ``''`` outside one),
    ``dtype`` the name of its output's number format, ``operands`` the formats of its inputs (a tensor
    core's rate is set by them), ``index`` the box's occurrence (records of one box share it; numbered
    in the order of the walk; not compared, so that ``cost(f >> g).ops == cost(f).then(cost(g)).ops``).
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


@dataclass
class GroupCost:
    """One group partition: ``H = N_g · H_g`` (per level), over the grouped ``axes`` with ``tiles``."""

    axes: tuple
    tiles: tuple
    N_g: sympy.Expr
    H_g: dict
    fulls: tuple = ()
    level: int = 1      # the level of the kernel it partitions (2: a level-2 kernel's groups in a level-1 tile)


class StreamRecord(tuple):
    """``(axis, stream size, full size)`` of one stream, with the ``level`` its slices are held at."""

    level = 1

    def __new__(cls, axis, size, full, level: int = 1):
        out = super().__new__(cls, (axis, size, full))
        out.level = level
        return out


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

    @property
    def M(self) -> dict:
        return {lvl: (column_max(cols) if len(cols) > 1 else cols[0]) for lvl, cols in self.columns.items()}

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
        ops = [replace(o, trips=o.trips * k, region=((region,) if region else ()) + o.region,
                       role=o.role or role) for o in self.ops]
        return Cost({l: h * k for l, h in self.H.items()}, {l: h * k for l, h in self.H_bytes.items()},
                    {l: list(c) for l, c in self.columns.items()}, {p: f * k for p, f in self.flops.items()},
                    [replace(g, N_g=g.N_g * k) for g in self.groups], list(self.streams),
                    ops)

    def then(self, other: "Cost") -> "Cost":
        """Sequential composition: H and FLOPs add, M is the max (columns are pooled)."""
        return Cost().absorb(self).absorb(other)

    def absorb(self, src: "Cost") -> "Cost":
        """In place: ``self ← self ; src`` (the functor's accumulator; linear in the diagram)."""
        for l, h in src.H.items():
            self.H[l] = self.H.get(l, ZERO) + h
        for l, h in src.H_bytes.items():
            self.H_bytes[l] = self.H_bytes.get(l, ZERO) + h
        for l, cols in src.columns.items():
            for v in cols:
                self._add(l, v)
        for p, f in src.flops.items():
            self.flops[p] = self.flops.get(p, ZERO) + f
        self.groups += src.groups
        self.streams += src.streams
        self.ops += src.ops
        return self

    def absorb_all(self, parts) -> "Cost":
        """In place: ``self ← self ; p₁ ; … ; pₙ``, each total summed once (not through n partial sums)."""
        parts = list(parts)
        for name in ("H", "H_bytes", "flops"):
            mine, terms = getattr(self, name), {}
            for src in [self] + parts:
                for k, v in getattr(src, name).items():
                    terms.setdefault(k, []).append(v)
            for k, vs in terms.items():
                mine[k] = sympy.Add(*vs)
        for src in parts:
            for l, cols in src.columns.items():
                for v in cols:
                    self._add(l, v)
            self.groups += src.groups
            self.streams += src.streams
            self.ops += src.ops
        return self

    __rshift__ = then

    def _add(self, l, v):
        seen = self.__dict__.setdefault("_seen", {}).setdefault(l, set())
        if v not in seen:
            seen.add(v)
            self.columns.setdefault(l, []).append(v)

    def add_column(self, col: dict, *, expanded: bool = False):
        """Pool a column (level → live data), expanded so that equal columns are pooled once."""
        for l, v in col.items():
            v = v if expanded else sympy.expand(v)
            if v != 0:
                self._add(l, v)

    def __repr__(self):
        H = {l: h for l, h in self.H.items()}
        return f"Cost(H={H}, M={self.M}, flops={self.flops})"


def _plus(col: dict, extra: dict) -> dict:
    out = dict(col)
    for l, v in extra.items():
        out[l] = out.get(l, ZERO) + v
    return out


def box_cost(box) -> Cost:
    """The cost of one primitive box run once."""
    c = Cost()
    spec = box.data
    kind = kind_of(spec.kind)
    occurrence = next(_OCCURRENCES)
    per_item = kind.item_flops(core_of(spec, box.dom, box.cod))
    weave = sympy.Integer(1)
    for w in spec.weave_names:
        for arr in box.cod.inside:
            if w in arr.names:
                weave = weave * arr.axis(w).size
                break
    out = (box.cod.inside or box.dom.inside)[0] if (box.cod.inside or box.dom.inside) else None
    for p, f in per_item.items():
        f = sympy.sympify(f) * weave
        c.flops[p] = c.flops.get(p, ZERO) + f
        c.ops.append(OpCost(box.name, spec.kind, p, f, sympy.Integer(1), dtype=out.dtype.name if out else "",
                            operands=tuple(a.dtype.name for a in box.dom.inside), index=occurrence))
    if spec.kind in ("load", "save"):
        src, dst = box.dom.inside[0], box.cod.inside[0]
        lvl = max(src.level, dst.level)
        c.H[lvl] = numel(src)
        c.H_bytes[lvl] = numel(src) * max(src.dtype.bytes, dst.dtype.bytes) if src.dtype == dst.dtype \
            else numel(src) * dst.dtype.bytes
    return c


def _walk(diagram: Diagram) -> Cost:
    """Cost of ``diagram``: the boxes' costs add up; a column of live data is read after every layer.

    One pass of :func:`~napkin_cat.syntax.wiring.traverse` whose values are ``(id, array)``: the
    wiring moves them (a copy keeps the id, so the copied variable is counted once), a box's outputs
    get fresh ids.  Inside a region, every column of the region is counted on top of what lies
    beside it outside (the live data minus the region's inputs).
    """
    total, parts = Cost(), []
    live = Live()
    fresh = [len(diagram.dom)]
    values = list(enumerate(diagram.dom.inside))
    live.put(values)
    total.add_column(live.column(), expanded=True)

    def on_box(step):
        box = step.box
        if isinstance(box, Region):
            inner = region_cost(box)
            base = None
            # a partition's arrays are whole at its own level (0 for a top-level Grid, 1 for a level-2
            # kernel's Grid in a level-1 tile): its groups' columns count only the levels below it
            whole = max((a.level for a in (*box.dom.inside, *box.cod.inside)), default=0) \
                if isinstance(box, (Grid, Stream)) else 0
            if whole:
                base = live.column(without=step.ins)
                for arrays in _held_phases(box):
                    held = {}
                    for a in arrays:
                        if 0 < a.level <= whole:
                            held[a.level] = held.get(a.level, ZERO) + numel(a)
                    total.add_column(_plus(base, held))
            for lvl, cols in inner.columns.items():
                if lvl <= whole or lvl == 0:  # global arrays are whole at level 0: the outer columns count them
                    continue
                base = live.column(without=step.ins) if base is None else base
                for v in cols:   # both sides expanded: their sum is too
                    total.add_column(_plus(base, {lvl: v}), expanded=True)
            inner.columns = {}
            parts.append(inner)
        else:
            parts.append(box_cost(box))
        outs = [(fresh[0] + j, arr) for j, arr in enumerate(box.cod.inside)]
        fresh[0] += len(outs)
        _after(step, outs)
        return outs

    def _after(step, outs):
        live.take(step.ins)
        live.put(outs)
        total.add_column(live.column(), expanded=True)
    traverse(diagram, values, on_box, on_wiring=_after)
    return total.absorb_all(parts)


def _held_phases(box: Region) -> list:
    """The region's own inputs and outputs held at once, phase by phase.  A Grid writes its output group by group,
    so it holds every input and output throughout.  A Stream holds all its inputs in its head, then only those
    its body or tail still reads (the slices it streams, what the tail uses), and its outputs from its tail on
    (they are made there), with the inputs the tail reads; a sliced stream's sliced outputs throughout
    (each trip writes its slice into them, so they exist before the first)."""
    if not isinstance(box, Stream):
        return [list(box.dom.inside) + list(box.cod.inside)]
    plan = box.plan
    phases = {v: {plan.role[op] for op, _ in plan.uses.get(v, ())} for v in plan.dom}
    dom = list(zip(plan.dom, box.dom.inside))
    body = [a for v, a in dom if phases[v] & {"body", "tail"} or v in plan.streamed_inputs]
    sliced = [box.cod.inside[j] for j in plan.sliced]   # written trip by trip: held whole from the start
    tail = [a for v, a in dom if "tail" in phases[v]] + list(box.cod.inside)
    return [list(box.dom.inside) + sliced, body + sliced, tail]


def region_cost(box: Region) -> Cost:
    if isinstance(box, Grid):
        return _grid_cost(box, region_cost_of_arg(box.arg), _is_nest(box.arg))
    if isinstance(box, Stream):
        return _stream_cost(box)
    return region_cost_of_arg(box.arg)


def _grid_cost(box: Grid, inner: Cost, nest: bool) -> Cost:
    """``a/g`` runs of the inside; its group partition (merged with a Grid directly inside: one group
    over several axes)."""
    trips = sympy.sympify(box.full_size()) / sympy.sympify(box.size)
    nested = inner.groups[0] if inner.groups and nest else None
    out = inner.scaled(trips, region=("grid", box.axis))
    if nested is not None:
        out.groups = [GroupCost((box.axis,) + nested.axes, (box.size,) + nested.tiles, nested.N_g * trips,
                                nested.H_g, (box.full_size(),) + nested.fulls, nested.level)] + out.groups[1:]
    else:
        out.groups = [GroupCost((box.axis,), (box.size,), trips, dict(inner.H), (box.full_size(),),
                                _kernel_level(box.arg))] + out.groups
    return out


def _kernel_level(arg: Diagram) -> int:
    """The level of the kernel a Grid partitions (through Grids directly inside)."""
    for _, b in layers(arg):
        if isinstance(b, Region) and b.region == "kernel":
            return b.params["level"]
        if isinstance(b, Grid):
            return _kernel_level(b.arg)
    return 1


def region_cost_of_arg(arg: Diagram) -> Cost:
    return _walk(arg)


def _is_nest(arg: Diagram) -> bool:
    boxes = [b for _, b in layers(arg) if computes(b)]
    return len(boxes) == 1 and isinstance(boxes[0], Grid)


def _flop_cost(diagram: Diagram) -> Cost:
    """FLOPs (and their per-op records) of a diagram run once; its memory is the stream's to count."""
    c = _walk(diagram)
    c.columns = {}
    return c


def _stream_cost(box: Stream) -> Cost:
    """A stream: head once, body (maps, monoid reducers, each form's step, each nested region advanced on
    the state) per trip, finish and tail once.

    Memory: the columns of the stream's expansion in the order it runs (:mod:`napkin_cat.cost.columns`):
    the head's, then each trip's with the reducers' state (e.g. μ, z and o for online softmax) and the
    values the body re-reads, the step diagram's own intermediates included, then the tail's.
    """
    plan = box.plan
    trips = sympy.sympify(box.full_size()) / sympy.sympify(box.size)
    total = Cost()
    for col in stream_columns(box, plan):
        total.add_column(col)
    in_form = {i: r for r in plan.reducers if r.step is not None or r.nest is not None for i in r.ops}
    for i, (b, _, _) in enumerate(plan.ops):   # in the order of the ops (the records' and the dicts' order)
        r = in_form.get(i)
        if r is not None:
            if r.nest is not None:
                total.absorb(advance_cost(r.nest).scaled(trips, role="body"))
            continue
        role = plan.role[i]
        total.absorb(_op_cost(b).scaled(trips if role == "body" else 1, role=role))
    for r in plan.reducers:
        if r.step is not None:
            total.absorb(_flop_cost(r.step).scaled(trips, role="body"))
        if r.finish is not None:
            total.absorb(_flop_cost(r.finish).scaled(1, role="tail"))
    total.ops = [replace(o, region=(("stream", box.axis),) + o.region) for o in total.ops]
    total.streams.append(StreamRecord(box.axis, box.size, box.full_size(), _held_at(box)))
    return total


def _held_at(box: Stream) -> int:
    """The level a stream's slices are held at: the deepest level on its inside's own wires."""
    levels = [a.level for a in box.arg.dom.inside]
    for _, b in layers(box.arg):
        levels += [a.level for a in b.cod.inside]
    return max(levels + [1])


def _op_cost(b) -> Cost:
    c = region_cost(b) if isinstance(b, Region) else box_cost(b)
    c.columns = {}
    return c


def _trips_cost(plan, trips, *, head: bool) -> Cost:
    """The head of a stream plan once, then its body ``trips`` times: maps, and each reducer's accumulator
    (a monoid's box, a form's step, a nested region advanced)."""
    total = Cost()
    if head:
        for i in plan.indices("head"):
            total.absorb(_op_cost(plan.ops[i][0]).scaled(1, role="head"))
    parts = [_op_cost(plan.ops[i][0]) for i in plan.maps]   # each scaled alone: b/s_b · a·s_b reads a·b
    for r in plan.reducers:
        if r.nest is not None:
            parts.append(advance_cost(r.nest))
        elif r.step is not None:
            parts.append(_flop_cost(r.step))
        else:
            parts.append(_op_cost(plan.ops[r.op][0]))
    for part in parts:
        total.absorb(part.scaled(trips, role="body"))
    return total


def advance_cost(nest) -> Cost:
    """One trip of a nested reducer (:mod:`napkin_cat.algorithms.nesting`): a Kernel loads the state to its
    level and saves it back around its inside, a Grid runs its inside per group, a sub-loop per sub-slice,
    a diagram its head and one slice.  No memory: the enclosing stream counts it."""
    region = nest.region
    kind = getattr(region, "region", None)
    if kind == "kernel":
        c = advance_cost(nest.child)
        level = region.params["level"]
        for s in nest.state:
            for direction in ("load", "save"):
                for step in state_moves(s.array, level, direction):
                    c.absorb(box_cost(step))
        c.ops = [replace(o, region=(("kernel", level),) + o.region) for o in c.ops]
        return c
    if kind == "grid":
        return _grid_cost(region, advance_cost(nest.child), _is_nest(region.arg))
    if kind == "stream":
        trips = sympy.sympify(region.full_size()) / sympy.sympify(region.size)
        c = _trips_cost(nest.plan, trips, head=True)
        c.ops = [replace(o, region=(("stream", region.axis),) + o.region) for o in c.ops]
        c.streams.append(StreamRecord(region.axis, region.size, region.full_size(), _held_at(region)))
        return c
    return _trips_cost(nest.plan, 1, head=True)


_OCCURRENCES = itertools.count()


def _number_occurrences(ops: list) -> list:
    """Dense box indices 0, 1, … in the order of the walk (records of one box keep one index)."""
    dense = {}
    return [replace(r, index=dense.setdefault(r.index, len(dense))) for r in ops]


def cost(diagram: Diagram, hierarchy=None) -> Cost:
    """The IO cost of an algorithm (or of a function diagram, which moves nothing)."""
    if not isinstance(diagram, Diagram):
        raise NapkinError(f"nc.cost takes a diagram, got {type(diagram).__name__}: {diagram!r:.60}")
    c = _walk(diagram)
    c.ops = _number_occurrences(c.ops)
    if hierarchy is not None:
        hierarchy.check_levels(c.levels)
    return c
