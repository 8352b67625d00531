"""Skipped trips: a stream's slice on which a mask is never true contributes nothing, so it is not run.

FlashAttention's causal path and FlexAttention's block masks skip every tile that is entirely masked.
Here that is a property of the stream's schedule, read off the diagram:

1. a **mask** is a ``bool`` value that an op of the stream's head or trip applies to values that are not
   ``bool`` (the condition of a ``where`` or a ``select``, a mask cast to numbers, a user's kind that takes
   one), computed by its ops from positions (and, through ``and``, from anything);
2. it is **neutral when false**: with the condition false everywhere, constant propagation through the
   trip's maps, by each kind's constant rule (``declare(..., constant=…)``: a masked score is −∞;
   ``exp(−∞) = 0``; a product with 0 is 0; ``where(m, v, other=v) = v`` whatever another mask ``m`` is, …)
   brings every reducer's contribution to its identity: the monoid's (0 for a sum, −∞ for a max), or an
   accumulator form's no-op (scores of −∞ leave the online SoftMax's μ, z and o, and the online
   log-sum-exp, as they are);
3. on a tile, **interval arithmetic** (:mod:`.intervals`, each kind's interval image) from the tile's
   positions to the condition says whether it is never true there.

A kind without a constant rule or an interval image is no error here: nothing is known of its output, and
a mask through it skips nothing (both parts are read with ``kind.part(…, default=None)``).

The law, proved in ``proofs/test_skipping.py`` (random masks, tiles, data, ragged sizes)::

    skipped(tile) ⟹ trip(state, tile) == state          hence    run with skips == run without

``Skip.skipped(tile_of)`` is one condition for every functor: ``tile_of(axis, size)`` gives the tile an axis
is in, ``(start, extent)``, as numbers (a run, the cost at sizes) or sympy expressions (the plan's
per-trip test, the symbolic count of the trips that run).

>>> import napkin_cat as nc
>>> from napkin_cat.algorithms.schedule import schedule_of
>>> att = nc.library.causal_attention(q=8, x=8, d=4)
>>> s = schedule_of(nc.stream(att, "x", "s_x").boxes[0].arg.boxes[0])
>>> sorted(s.skip.axes), s.skip.skipped(lambda a, n: (4, 4) if a == "x" else (0, 2))
(['q', 'x'], True)
>>> s.skip.skipped(lambda a, n: (0, 4) if a == "x" else (2, 2))
False
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, fields

import sympy

from napkin_cat.algorithms.intervals import evaluate, tiles_read
from napkin_cat.syntax.dtype import BOOL
from napkin_cat.syntax.interval import MAYBE, Truth, all_of, any_of, negate
from napkin_cat.syntax.primitive import kind_of


def _kept_hash(self) -> int:
    """The hash of a frozen record that holds boxes, made once: its fields' (a discopy box hashes by its ``repr``,
    and the counts a search keeps are looked up by a stream's skip at every tiling counted: 7 % of a masked
    attention's symbolic derive went to printing boxes).  Not pickled (a string's hash is the process's).

    >>> a, b = Skip("x", ()), Skip("x", ())
    >>> hash(a) == hash(b) == hash(("x", (), ())), a == b
    (True, True)
    >>> import pickle
    >>> "_hash" in a.__dict__, "_hash" in pickle.loads(pickle.dumps(a)).__dict__
    (True, False)
    """
    found = self.__dict__.get("_hash")
    if found is None:
        found = hash(tuple(getattr(self, f.name) for f in fields(self)))
        object.__setattr__(self, "_hash", found)
    return found


def _state(self) -> dict:
    """What pickles of a record with a kept hash: its fields, not what is kept on it (the hash, a skip's reads)."""
    return {k: v for k, v in self.__dict__.items() if not k.startswith("_")}


@dataclass(frozen=True)
class Mask:
    """A condition (value id ``value``) made by ``ops`` (``(box, ins, outs)``, in order) from positions of ``axes``;
    ``copies``: the other values the stream makes equal to it (:func:`equal_values`)."""

    value: int
    ops: tuple
    axes: frozenset
    copies: frozenset = frozenset()

    __hash__, __getstate__ = _kept_hash, _state

    def truth(self, tile_of) -> Truth:
        """The condition on the tile: always true, possibly true (a bool, an array of them, or a sympy condition)."""
        truth = evaluate(self.ops, tile_of).get(self.value)
        return truth if isinstance(truth, Truth) else MAYBE

    def never(self, tile_of):
        """Whether the condition is false everywhere on the tile."""
        return negate(self.truth(tile_of).possibly)


@dataclass(frozen=True)
class DataMask:
    """A condition (value id ``value``) that ``ops`` make from data (and positions, perhaps): its truth on a tile
    is a fact of the data, read from a :class:`~napkin_cat.algorithms.blockmask.BlockMask` over ``axes``
    (``((name, size), …)``, the condition's array's axes) computed from that data before a run; ``copies``: the
    other values the stream makes equal to it (:func:`equal_values`: a full trip reads them all as true)."""

    value: int
    ops: tuple
    axes: tuple
    copies: frozenset = frozenset()

    __hash__, __getstate__ = _kept_hash, _state

    @property
    def names(self) -> tuple:
        return tuple(a for a, _ in self.axes)

    @property
    def formula(self) -> str:
        """The condition in words over axis names, a datum over axes ``a`` read as ``d(a)``: ``d(q)=d(x)`` for a
        document mask, ``d(q)=d(x)∧x≤q`` with causality (loads are transparent; sizes, tiles and value ids do
        not enter, so every copy of one mask, in any kernel and under any relabelling, reads the same)."""
        made = {v: k for k, (_, _, outs) in enumerate(self.ops) for v in outs}
        return _formula(self.ops, made, self.value, top=True)


@dataclass(frozen=True)
class Skip:
    """The masks of a stream whose trips may be skipped (each one alone makes a trip neutral when never true):
    ``masks`` decided on a tile by interval arithmetic on positions, ``data`` by a block mask of the data."""

    axis: str
    masks: tuple
    data: tuple = ()

    __hash__, __getstate__ = _kept_hash, _state

    @property
    def axes(self) -> frozenset:
        """The axes whose positions decide a skip by interval arithmetic."""
        return frozenset().union(*(m.axes for m in self.masks))

    @property
    def reads(self) -> tuple:
        """``((axis, size), …)``: the axes the masks from positions read and the size each is read at, in the order
        first read: a probe of :meth:`verdict` (every mask's truth is asked, on a tile ``(0, 1)`` of each axis, so
        what is read is a fact of the masks alone), kept on the skip (a count at each tiling asks it,
        :func:`~napkin_cat.cost.at_sizes.count_key`).

        >>> Skip("x", ()).reads
        ()
        """
        found = self.__dict__.get("_reads")
        if found is None:
            read: dict = {}

            def probe(axis, size):
                read.setdefault(axis, size)
                return (0, 1)
            self.verdict(probe)
            found = self.__dict__["_reads"] = tuple(read.items())
        return found

    @property
    def data_axes(self) -> tuple:
        """``((name, size), …)``: the axes of the masks from data, in order (what their block mask is over)."""
        seen: dict = {}
        for m in self.data:
            for a, n in m.axes:
                seen.setdefault(a, n)
        return tuple(seen.items())

    @property
    def density(self):
        """The symbol ``rho[…]`` for the fraction of this stream's trips that the masks from positions allow
        whose block the masks from data allow (what a data's block mask decides), named after their condition
        (:attr:`DataMask.formula`): one symbol per distinct condition; None without a mask from data."""
        if not self.data:
            return None
        return density_symbol("∧".join(sorted({m.formula for m in self.data})))

    def active(self, block_mask) -> bool:
        """Whether some mask decides a trip: one from positions, or one from data with ``block_mask`` given."""
        return bool(self.masks) or (block_mask is not None and bool(self.data))

    def skipped(self, tile_of, block_mask=None):
        """Whether the trip on the tiles ``tile_of`` gives is skipped: some mask from positions is never true
        there, or (with ``block_mask``, the data's) no pair of it is allowed.  Without a block mask a mask from
        data skips nothing."""
        return self.verdict(tile_of, block_mask)[0]

    def whole(self, trip) -> Whole | None:
        """The trips this stream runs whole (:class:`Whole`) given its ``trip`` (the schedule's trip items: ops
        with ``box``, ``ins``, ``outs``; reducers with ``inputs``): the first mask from data where the trip makes
        it, else the first from positions where the trip makes it; None where neither is made in the trip or
        nothing is made only for it.  Kept per skip and trip (both immutable: the cost at sizes asks it per tiling)."""
        return _whole(self, tuple(trip))

    def verdict(self, tile_of, block_mask=None) -> tuple:
        """``(skipped, everywhere)`` on the tiles ``tile_of`` gives: some mask is never true there, and every mask
        is always true there.  On a part of those tiles a trip is then skipped, and runs, too: interval arithmetic
        is inclusion-monotone (a part's intervals lie in the whole's), so what is never true on the whole is never
        on a part, and what is always true on the whole is on each part; a block mask's counts are exact.  A mask
        from data without ``block_mask`` is possibly true, never known always true."""
        truths = [m.truth(tile_of) for m in self.masks]
        if self.data:
            truths.append(MAYBE if block_mask is None else block_mask.truth(tile_of))
        return any_of(*(negate(t.possibly) for t in truths)), all_of(*(t.always for t in truths))


@functools.lru_cache(maxsize=4096)
def _whole(skip, trip: tuple) -> Whole | None:
    """:meth:`Skip.whole`, made once per skip and trip."""
    items = [(tuple(getattr(it, "ins", None) or getattr(it, "inputs", ())), tuple(getattr(it, "outs", ())),
              hasattr(it, "box") and getattr(it.box, "data", None) is not None) for it in trip]
    written = {v for _, w, _ in items for v in w}
    for data, masks in ((True, skip.data), (False, skip.masks)):
        if not masks:
            continue
        first = masks[0]
        if first.value not in written:
            if data:
                continue          # the plan's test by the data's table then has no condition: positions decide
            return None
        made = made_only_for(items, {first.value, *first.copies})
        ops = tuple(k for k, (_, w, simple) in enumerate(items) if simple and w and set(w) <= made
                    and trip[k].box.data.kind not in ("load", "save"))    # its maps (loads counted as run)
        return Whole(first, data, ops) if ops else None
    return None


def made_only_for(items, seeds) -> frozenset:
    """What a trip makes only for a mask: the ``seeds`` it writes (the condition and its copies), grown back through
    every value it writes that only their makers read.  ``items``: the trip's statements in order, each ``(reads,
    writes, simple)`` (``simple``: a primitive or a transfer, not a region or a loop, which is never left out).  One
    definition for the plan (:class:`~napkin_cat.plan.skips.BlockSkip`, what a kernel leaves out on a trip the mask
    allows whole) and the cost at sizes (:meth:`Skip.whole`, what it charges only on the other trips).

    >>> sorted(made_only_for([((0,), (1,), True), ((1,), (2,), True), ((2, 0), (3,), True)], {2}))
    [1, 2]
    """
    items = [(tuple(r), tuple(w), bool(simple)) for r, w, simple in items]
    written = {v for _, w, _ in items for v in w}
    made = set(seeds) & written

    def maker(item) -> bool:
        return item[2] and bool(item[1]) and set(item[1]) <= made
    grown = bool(made)
    while grown:
        grown = False
        for item in items:
            if not maker(item):
                continue
            for v in item[0]:
                if v in made or v not in written:
                    continue
                if all(maker(other) or v not in other[0] for other in items):
                    made.add(v)
                    grown = True
    return frozenset(made)


@dataclass(frozen=True)
class Whole:
    """The trips of a stream on which a mask allows every pair and what they leave out: ``mask`` (the first mask
    from positions, decided by interval arithmetic, or the first from data, decided by the data's block mask: as
    the plan decides, :class:`~napkin_cat.plan.skips.FullTrips` and :class:`~napkin_cat.plan.skips.BlockSkip`),
    ``data`` (which of the two), ``ops``: the positions in the trip of the maps that make only that mask (not run on
    such a trip: a kernel reads the mask as true there; the loads only they read are counted on every trip that
    runs, as the density's estimate counts them, though a kernel leaves them out too)."""

    mask: object
    data: bool
    ops: tuple

    __hash__, __getstate__ = _kept_hash, _state

    def always(self, tile_of, block_mask=None):
        """Whether the mask allows every pair on the tiles ``tile_of`` gives (a bool or an array of them); a mask
        from data without ``block_mask`` never (its trips run as written)."""
        if not self.data:
            return self.mask.truth(tile_of).always
        return False if block_mask is None else block_mask.truth(tile_of).always


def density_symbol(formula: str) -> sympy.Symbol:
    """The density of the mask from data ``formula`` (:attr:`DataMask.formula`): ``rho[formula]``, nonnegative.

    >>> density_symbol("d(q)=d(x)")
    rho[d(q)=d(x)]
    """
    return sympy.Symbol(f"rho[{formula}]", nonnegative=True)


def _formula(ops, made, value, top=False) -> str:
    k = made.get(value)
    if k is None:
        return "d"
    box, ins, _ = ops[k]
    array = box.cod.inside[0]
    if not ins:                                            # a position: the axis it runs along
        return ",".join(a.name for a in array.axes) if box.name == "pos" else box.name
    if len(ins) == 1 and box.name in ("load", "save", "cast"):
        inner = _formula(ops, made, ins[0], top)
        return f"d({','.join(a.name for a in box.dom.inside[0].axes)})" if inner == "d" else inner
    args = []
    for v, a in zip(ins, box.dom.inside):
        arg = _formula(ops, made, v)
        args.append(f"d({','.join(x.name for x in a.axes)})" if arg == "d" else arg)
    if len(args) == 2 and not box.name[:1].isalnum():
        text = f"{args[0]}{box.name}{args[1]}"
        return text if top else f"({text})"
    return f"{box.name}({','.join(args)})"


# ---------------------------------------------------------------------------------------------- constants
def _constant(box, inputs):
    """The one value of ``box``'s output when its inputs are the constants ``inputs`` (None: not constant), by its
    kind's constant rule; None when the output is not constant, or the kind has no rule."""
    rule = kind_of(box.data.kind).part("constant", default=None)
    return None if rule is None else rule(box, inputs)


def _constants(ops, start: dict) -> dict:
    out = dict(start)
    for box, ins, outs in ops:
        if (outs and outs[0] in out) or getattr(box, "data", None) is None:   # a region: not a constant
            continue
        v = _constant(box, [out.get(i) for i in ins])
        if v is not None:
            out[outs[0]] = v
    return out


def _neutral(r, consts) -> bool:
    """Whether reducer ``r`` leaves its state unchanged given the constants of its inputs."""
    if r.kind == "monoid":
        box, ins = r.op.box, r.op.ins
        v = _constant(box, [consts.get(i) for i in ins])
        return v is not None and v == float(r.accumulator.identity(()))
    rule = getattr(r.form, "neutral", None)
    return r.kind == "step" and rule is not None and bool(rule([consts.get(v) for v in r.inputs]))


def _ancestry(ops, values, made_by_reducers) -> tuple | None:
    """The ops among ``ops`` that ``values`` depend on, in order; None when they depend on a reducer's result."""
    producer = {v: k for k, (_, _, outs) in enumerate(ops) for v in outs}
    need, seen = list(values), set()
    while need:
        v = need.pop()
        if v in made_by_reducers:
            return None
        k = producer.get(v)
        if k is None or k in seen:
            continue
        seen.add(k)
        need += list(ops[k][1])
    return tuple(ops[k] for k in sorted(seen))


def equal_values(ops) -> dict:
    """Each value the ops ``[(box, ins, outs)]`` make → the values among them equal to it (itself included): those
    made by equal boxes (kind, parameters, types) at the same output from equal inputs, by value numbering.  A
    box is a function of its inputs, so equal keys are equal values; a region's outputs (no kind) are their own.

    A derived backward recomputes a mask in each kernel that reads it, once per product (P for dV, dS for dK):
    one condition, several values; false at once, they make every reducer neutral, where no one alone does.

    >>> import napkin_cat as nc
    >>> from napkin_cat.syntax.wiring import trace_values
    >>> ops, _, (m1, m2) = trace_values(nc.library.causal_mask(q=4, x=4) @ nc.library.causal_mask(q=4, x=4))
    >>> equal_values(ops)[m1] == {m1, m2}, equal_values(ops)[m2] == {m1, m2}
    (True, True)
    """
    key_of: dict = {}
    numbers: dict = {}        # (box, its inputs' keys) → its number: a key holds numbers, not its ancestors' boxes
    for box, ins, outs in ops:
        if getattr(box, "data", None) is None:          # a region: nothing is known of what it computes
            continue
        k = numbers.setdefault((box, tuple(key_of.get(v, v) for v in ins)), len(numbers))
        for j, v in enumerate(outs):
            key_of[v] = (k, j)
    classes: dict = {}
    for v, k in key_of.items():
        classes.setdefault(k, set()).add(v)
    return {v: frozenset(classes[k]) for v, k in key_of.items()}


def skip_of(schedule) -> Skip | None:
    """The skip of a stream schedule (:class:`~napkin_cat.algorithms.schedule.StreamSchedule`), or None when
    no mask makes its trips neutral (or it writes sliced outputs, which every trip must write)."""
    if schedule.region is None or schedule.sliced or not schedule.reducers:
        return None
    maps = [it for it in schedule.trip if hasattr(it, "box")]
    ops = [(op.box, op.ins, op.outs) for op in (*schedule.head, *maps)]
    conditions = list(_conditions(ops))
    if not conditions:      # no mask applied: nothing to number (equal_values hashes every box, the search's
        return None         # candidates are mostly such streams)
    by_reducers = {v for r in schedule.reducers for v in r.outputs}
    equal = equal_values(ops)
    masks, data, seen = [], [], set()
    for cond, array in conditions:
        if cond in seen:
            continue
        copies = equal.get(cond, frozenset({cond}))
        seen |= copies
        consts = _constants([(o.box, o.ins, o.outs) for o in maps], dict.fromkeys(copies, 0.0))
        if not all(_neutral(r, consts) for r in schedule.reducers):
            continue
        made = _ancestry(ops, copies, by_reducers)
        if made is None:
            continue
        others = copies - {cond}
        axes = tiles_read(made, cond)
        if axes:
            masks.append(Mask(cond, made, axes, others))
        if _reads_data(made, cond) and schedule.axis in array.names:
            data.append(DataMask(cond, made, tuple((a.name, a.size) for a in array.axes), others))
    return Skip(schedule.axis, tuple(masks), tuple(data)) if masks or data else None


def _reads_data(ops, value) -> bool:
    """Whether ``value`` (made by ``ops``, its ancestry) reads a value that no op of it makes: an input of the
    stream (document ids, offsets), not positions alone."""
    made = {v for _, _, outs in ops for v in outs}
    return any(v not in made for _, ins, _ in ops for v in ins) or value not in made


def _conditions(ops):
    """The masks the ops apply, in order, with their arrays: each ``bool`` input of an op whose outputs are not
    ``bool`` (logic on masks makes masks; a ``where``, a ``select``, a cast to numbers applies one)."""
    for box, ins, _ in ops:
        if getattr(box, "data", None) is None or any(a.dtype == BOOL for a in box.cod.inside):
            continue
        yield from ((v, a) for v, a in zip(ins, box.dom.inside) if a.dtype == BOOL)


__all__ = ["Mask", "DataMask", "Skip", "Whole", "skip_of", "density_symbol", "made_only_for"]
