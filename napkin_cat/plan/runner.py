"""Running a plan on numpy arrays, tile by tile; instrumented, it measures what it moves.

The instrumented run counts, from the arrays it actually handles (never from ``nc.cost``):

* ``transfers[ℓ]`` / ``bytes[ℓ]``: values (bytes) each Load and Store copies into or out of level ℓ;
* ``peak[ℓ]``: the most values live at level ℓ ≥ 1 at any program point between two statements
  (the paper's columns: an operation's inputs and outputs meet only inside it); a value is live
  from the statement that writes it to its ``Free``;
* ``flops[pipeline]``: each executed primitive's FLOPs as its kind declares them per item, at the
  extents of the tiles it ran on (a masked edge tile counts what it computes), times its items.

The counters are the cost record (:class:`~napkin_cat.cost.record.Cost`, by the runner's names), and equal
``nc.cost(diagram, sizes=...)`` at the plan's sizes.  Ragged axes run with masked edge tiles: a tile's extent
is ``min(tile, end − start)``; the user's arrays are sliced, never padded.  The fast run (``instrument=False``)
skips the counting and may run the tiles of a Grid on a thread pool.

Each block runs as steps compiled once per machine (:meth:`Machine.steps`): a Load, Store, Compute or Free is one
closure over what it reads of its statement (its views' printed index functions,
:func:`~napkin_cat.plan.expressions.indexer`; types, level, prepared box), and the trips of a stream share one
frame, its index and tile's extent rebound per trip; every trip still counts what it handles.

>>> import numpy as np, napkin_cat as nc
>>> p = nc.plan(nc.stream(nc.library.matmul(), "b", "s_b"), {"a": 2, "b": 5, "c": 3, "s_b": 2})
>>> A, B = np.ones((2, 5)), np.ones((5, 3))
>>> (C,), n = Machine(p, instrument=True).run([A, B])
>>> C.tolist(), n.transfers, n.flops
([[5.0, 5.0, 5.0], [5.0, 5.0, 5.0]], {1: 31}, {'tensor': 60})
>>> n.transfers == nc.cost(p.diagram, sizes={"a": 2, "b": 5, "c": 3, "s_b": 2}).H
True
"""
from __future__ import annotations

import functools
import math
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import sympy

from napkin_cat.algorithms.blockmask import FULL, NONE
from napkin_cat.cost.record import Cost
from napkin_cat.plan.blocks import block_tables
from napkin_cat.plan.ir import Compute, Free, Load, PlanError, Store
from napkin_cat.plan.expressions import indexer, number, truth
from napkin_cat.semantics.env import Env
from napkin_cat.semantics.primitives import run_primitive
from napkin_cat.syntax.axis import Axis
from napkin_cat.syntax.dtype import as_dtype
from napkin_cat.syntax.ops import MAX, MIN, SUM
from napkin_cat.syntax.primitive import Core, kind_of

#: monoid name → its accumulator (what a ``Combine`` folds with)
MONOIDS = {a.name: a for a in (SUM, MAX, MIN)}


#: what a run measured is the cost record (:mod:`napkin_cat.cost.record`): ``transfers`` (``H``), ``bytes``
#: (``H_bytes``) and ``peak`` (``M`` on chip) per level, ``flops`` per pipeline, as ``nc.cost(d, sizes=...)`` says
Counters = Cost


def measured_flops(box, xs, ys) -> dict:
    """FLOPs of one execution of ``box``: its kind's per-item count at the actual core extents × items."""
    spec = box.data
    weaves = set(spec.weave_names)

    def core(arrays, values):
        return tuple(tuple(Axis(n, int(k)) for n, k in zip(arr.names, np.shape(x)) if n not in weaves)
                     for arr, x in zip(arrays, values))
    per_item = kind_of(spec.kind).item_flops(Core(core(box.dom.inside, xs), core(box.cod.inside, ys),
                                                  dict(spec.params)))
    items = 1
    out = box.cod.inside[0]
    for n, k in zip(out.names, np.shape(ys[0])):
        if n in weaves:
            items *= int(k)
    return {p: int(f) * items for p, f in per_item.items()}


def size(x) -> int:
    """``np.size(x)`` as an int, an array's own ``size`` read directly."""
    return x.size if type(x) is np.ndarray else int(np.size(x))


def shape(x) -> tuple:
    """``np.shape(x)``, an array's own ``shape`` read directly."""
    return x.shape if type(x) is np.ndarray else np.shape(x)


class Machine:
    """Executes a plan: ``run(arrays) -> (outputs, counters)``; counters are None when not instrumented."""

    def __init__(self, plan, *, instrument: bool = False, threads: int = 1, tables=None):
        self.plan = plan
        # the block tables of the data (what a kernel reads, :mod:`napkin_cat.plan.condition`), by stream loop
        # index; None: no block mask, a stream whose mask reads data runs every trip
        self.tables = None if tables is None else {
            t.loop.index: (t, states) for t, states in zip(block_tables(plan), tables)}
        self.vars = plan.variable_map
        self.levels = {name: v.level for name, v in self.vars.items()}
        self.counters = Counters() if instrument else None
        self.peak: dict = {}
        self.live: dict = {}
        self.threads = threads
        #: the full trip being run (a FullTrips, or a BlockSkip at a block the data's table says full), or None:
        #: the statements it leaves out run uncounted (their values are what the kernel reads as true)
        self.whole = None
        self.compiled: dict = {}   # id(block) -> (the block, its steps)

    # ------------------------------------------------------------------ values
    def view(self, ref, frame):
        x = frame.values[ref.var]
        if ref.whole:
            return x
        # a view, a variable without axes too (the index ends in ``...``: ``x[()]`` would be a copied scalar)
        return x[indexer(map(ref.range, self.vars[ref.var].axes))(frame.nominal)]

    def write(self, ref, y, frame):
        if ref.index:       # a slice of the variable
            self.view(ref, frame)[...] = y
            return
        var = ref.var
        old = frame.values.get(var)
        frame.values[var] = y
        if self.counters is not None:
            self._grow(var, (np.size(old) if var in frame.live else 0), np.size(y), frame)

    def _grow(self, var, old, new, frame):
        if self.counters is None:
            return
        lvl = self.levels[var]
        frame.live.add(var)
        self.live[lvl] = self.live.get(lvl, 0) - old + new

    def free(self, var, frame):
        lvl = self.levels[var]
        if var in frame.live:
            frame.live.discard(var)
            if self.counters is not None:
                self.live[lvl] -= int(np.size(frame.values[var]))
        if lvl > 0:
            frame.values.pop(var, None)

    def sample(self):
        if self.counters is None:
            return
        for lvl, n in self.live.items():
            if lvl > 0 and n > self.peak.get(lvl, 0):
                self.peak[lvl] = n

    def shape(self, var, frame):
        return tuple(number(e, frame.extents) for _, e in self.vars[var].shape)

    # ------------------------------------------------------------------ the program
    def run(self, arrays):
        frame = Frame(self.plan.sizes, self.plan.sizes, {}, set())
        dtype = np.result_type(*arrays) if arrays else np.float64
        self.dtype = dtype if np.issubdtype(dtype, np.floating) else np.float64
        for v, x in zip(self.plan.inputs, arrays):
            frame.values[v] = x
            self._grow(v, 0, np.size(x), frame)
        self.block(self.plan.body, frame)
        self.sample()
        if self.counters is not None:
            self.counters.columns = {lvl: [n] for lvl, n in sorted(self.peak.items())}
        return [frame.values[v] for v in self.plan.outputs], self.counters

    def values_at(self, stmts, arrays, bindings: dict) -> dict:
        """The values ``stmts`` (simple statements) leave, run once on the plan's ``arrays`` (its inputs, in order)
        with ``bindings`` (symbol → int) over the plan's sizes: a tile bound to its whole axis and its index to 0
        runs a trip's statements on every element at once (:mod:`napkin_cat.plan.condition`)."""
        at = {**self.plan.sizes, **bindings}
        frame = Frame(at, dict(at), dict(zip(self.plan.inputs, arrays)), set())
        dtype = np.result_type(*arrays) if len(arrays) else np.float64
        self.dtype = dtype if np.issubdtype(dtype, np.floating) else np.float64     # the run's precision, as run()
        self.block(stmts, frame)
        return frame.values

    def block(self, stmts, frame):
        """Run ``stmts``: their steps, compiled once per block (the plan holds its blocks; the entry holds ``stmts``
        too, so that a block made for one call is never mistaken for another made later at its address)."""
        for step in self.steps(stmts):
            step(frame)

    def steps(self, stmts) -> list:
        """The steps of a block, compiled on first use."""
        got = self.compiled.get(id(stmts))
        if got is None:
            got = self.compiled[id(stmts)] = (stmts, self._compile(stmts))
        return got[1]

    def _compile(self, stmts) -> list:
        """The steps of a block, each a function of the trip's frame: a Free, Load, Store or Compute as one closure
        over what it reads of its statement (its views' index functions, types, level, prepared box), any other
        statement by its ``_run_<Type>``; counting, the live values sampled before each statement but a Free."""
        steps = []
        for s in stmts:
            if isinstance(s, Free):
                free = self._free_step(s.var)
                if free is not None:
                    steps.append(free)
                continue
            if self.counters is not None:
                steps.append(self._sample_step())
            if isinstance(s, (Load, Store)):
                steps.append(self._move_step(s))
            elif isinstance(s, Compute):
                steps.append(self._compute_step(s))
            else:       # an Alloc, Fill, Copy, Combine, Kernel or loop: by its type's ``_run_<Type>``
                steps.append(functools.partial(self._step(s), s))
        return steps

    def _sample_step(self):
        live, peak = self.live, self.peak

        def sample(frame):
            for lvl, n in live.items():
                if lvl > 0 and n > peak.get(lvl, 0):
                    peak[lvl] = n
        return sample

    def _free_step(self, var):
        lvl = self.levels[var]
        if self.counters is None:       # nothing is live when not counting: a Free drops an on-chip value only
            if lvl == 0:
                return None
            return lambda frame: frame.values.pop(var, None)
        live = self.live

        def free(frame):
            if var in frame.live:
                frame.live.discard(var)
                live[lvl] -= size(frame.values[var])
            if lvl > 0:
                frame.values.pop(var, None)
        return free

    def _reader(self, ref):
        """``frame -> value`` of a view (a numpy view of its variable), its index function made once."""
        var = ref.var
        if ref.whole:
            return lambda frame: frame.values[var]
        index = indexer(map(ref.range, self.vars[var].axes))
        return lambda frame: frame.values[var][index(frame.nominal)]

    def _writer(self, ref, counted: bool):
        """``(frame, y) -> None`` writing ``y`` to a view: into its slice, or as the variable's new value
        (``counted``: the live values grown by the difference)."""
        var = ref.var
        if ref.index:
            index = indexer(map(ref.range, self.vars[var].axes))

            def into(frame, y):
                frame.values[var][index(frame.nominal)] = y
            return into
        if not counted:
            def new(frame, y):
                frame.values[var] = y
            return new
        lvl, live = self.levels[var], self.live

        def grown(frame, y):
            values, held = frame.values, frame.live
            old = size(values[var]) if var in held else 0
            values[var] = y
            held.add(var)
            live[lvl] = live.get(lvl, 0) - old + size(y)
        return grown

    def _move_step(self, s):
        """A Load or Store: the view copied at the destination's type (its axes moved, or a split's unit part axis
        dropped), its values and bytes counted at its level."""
        read, write = self._reader(s.src), self._writer(s.dst, self.counters is not None)
        src, dst = tuple(self.vars[s.src.var].axes), tuple(self.vars[s.dst.var].axes)
        perm = [src.index(a) for a in dst] if src != dst and sorted(src) == sorted(dst) else None
        dtype, rank, width, level = self.numpy_dtype(s.dst.var), len(dst), as_dtype(self.vars[s.dst.var].dtype).bytes, \
            s.level
        reshape = s.dst.whole and perm is None
        counted, var = self.counters is not None, s.dst.var
        transfers, moved = (self.counters.transfers, self.counters.bytes) if counted else (None, None)

        def move(frame):
            x = np.array(read(frame), dtype=dtype)
            if perm is not None:     # a woven transfer that also moves its axes: by name
                x = x.transpose(perm)
            elif reshape and x.ndim != rank:       # one part of a split's partials: its unit part axis dropped
                x = x.reshape(self.shape(var, frame))
            if counted:
                n = x.size
                transfers[level] = transfers.get(level, 0) + n
                moved[level] = moved.get(level, 0) + n * width
            write(frame, x)
        return move

    def _applier(self, s, counted: bool):
        """``frame -> outputs`` of a Compute: its operands read (an inlined computation applied), its box run as
        prepared once; ``counted``: its FLOPs (and its inlined computations') counted, measured once per shape met
        (they depend on the box and the tiles' extents only)."""
        operands = [self._applier(r, counted) if isinstance(r, Compute) else self._reader(r) for r in s.ins]
        operands = [(lambda frame, f=f: f(frame)[0]) if isinstance(r, Compute) else f for r, f in zip(s.ins, operands)]
        fast = _prepare(s.box, self.plan.sizes)
        table, flops_at, box = self.counters.flops if counted else None, {}, s.box
        at = tuple(s.at)

        def apply(frame):
            xs = [f(frame) for f in operands]
            if callable(fast):
                ys = fast(xs)
            else:
                env = frame.env()
                if at:       # a position or a gather: where its tile starts on the whole axis
                    env.tiles = {a: (number(start, frame.nominal), None) for a, start in at}
                ys = run_primitive(fast, xs, env)
            if table is not None:
                key = (tuple([shape(x) for x in xs]), tuple([shape(y) for y in ys]))
                flops = flops_at.get(key)
                if flops is None:
                    flops = flops_at[key] = tuple(measured_flops(box, xs, ys).items())
                for p, n in flops:
                    table[p] = table.get(p, 0) + n
            return ys
        return apply

    def _computer(self, s, counted: bool):
        """``frame -> None`` of a Compute: applied, its outputs written (or folded into its state by its kind's
        accumulator); ``counted``: its FLOPs and the values it makes live counted."""
        apply = self._applier(s, counted)
        if s.accumulate:
            combine, read, write = kind_of(s.kind).accumulator.combine, self._reader(s.outs[0]), \
                self._writer(s.outs[0], counted)

            def run(frame):
                write(frame, combine(read(frame), apply(frame)[0]))
        else:
            writers = [self._writer(r, counted) for r in s.outs]

            def run(frame):
                for w, y in zip(writers, apply(frame)):
                    w(frame, y)
        return run

    def _compute_step(self, s):
        """A Compute's step; counting, a computation the full trip being run leaves out (it makes only the mask,
        true there on every pair) runs for its value alone, its FLOPs not counted nor what it makes live, as the
        kernel, which makes none of it, computes none.  (The loads only the mask reads, a document's ids, are
        counted on every trip that runs, as the cost's density estimate counts them.)"""
        if self.counters is None:
            return self._computer(s, counted=False)
        run, quiet = self._computer(s, counted=True), []

        def step(frame):
            if self.whole is not None and self.whole.omits(s):
                if not quiet:
                    quiet.append(self._computer(s, counted=False))
                quiet[0](frame)
            else:
                run(frame)
        return step

    def _step(self, s):
        """The method running a statement of ``s``'s type: its ``_run_<Type>``."""
        return getattr(self, f"_run_{type(s).__name__}")

    def numpy_dtype(self, var):
        """The numpy type a variable is held in: its integers as integers, a mask as bools, values as the run's."""
        family = as_dtype(self.vars[var].dtype).family
        return {"int": np.int64, "bool": np.bool_}.get(family, self.dtype)

    def _run_Alloc(self, s, frame):
        dt = self.numpy_dtype(s.var)
        fill = np.nan if self.counters is not None and dt == self.dtype else 0
        self.write_new(s.var, np.full(self.shape(s.var, frame), fill, dt), frame)

    def write_new(self, var, y, frame):
        frame.values[var] = y
        self._grow(var, 0, np.size(y), frame)

    def _run_Fill(self, s, frame):
        self.write_new(s.var, np.full(self.shape(s.var, frame), s.value, self.numpy_dtype(s.var)), frame)

    def _run_Copy(self, s, frame):
        self.write(s.dst, np.array(self.view(s.src, frame)), frame)

    def _run_Combine(self, s, frame):
        if s.monoid not in MONOIDS:
            raise PlanError(f"Combine into {s.dst.var!r}: no monoid {s.monoid!r}; monoids are {sorted(MONOIDS)}")
        self.write(s.dst, MONOIDS[s.monoid].combine(self.view(s.dst, frame), self.view(s.src, frame)), frame)

    def _run_Kernel(self, s, frame):
        self.block(s.body, frame)

    def _trips(self, s, frame):
        full, tile = number(s.full, frame.nominal), number(s.tile, frame.nominal)
        return [(t, min(tile, full - t * tile)) for t in range(math.ceil(full / tile))]

    def _run_GridLoop(self, s, frame):
        trips = self._trips(s, frame)
        if self.threads > 1 and self.counters is None and len(trips) > 1:
            with ThreadPoolExecutor(self.threads) as pool:
                list(pool.map(lambda te: self.block(s.body, frame.trip(s, *te)), trips))
            return
        for t, extent in trips:
            self.block(s.body, frame.trip(s, t, extent))

    def _state(self, s, frame) -> int:
        """The data's block mask's state on the trip's box: its entry in the loop's block table
        (:mod:`napkin_cat.plan.blocks`, what a kernel reads): none, partial or full."""
        table, states = self.tables[s.index]
        return states[tuple(frame.nominal[index] for index, _ in table.indices)]

    def left_out(self, s, frame):
        """What the trip leaves out where its mask allows every pair, as a kernel runs it (the printers'
        ``trip_variants``): the data's BlockSkip where its table says full, the FullTrips where the positions say
        so; None: as written (inside a full trip already, a nested loop's trips run as written)."""
        if self.whole is not None:
            return None
        if s.data is not None and self.tables is not None and s.index in self.tables:
            return s.data if s.data.condition is not None and self._state(s, frame) == FULL else None
        full = s.full_trips
        return full if full is not None and truth(full.when, frame.nominal) else None

    def _run_StreamLoop(self, s, frame):
        self.block(s.head, frame)
        inner = frame.trip(s, 0, 0, carried=True)      # one frame for every trip: its index and extent rebound
        nominal, extents, tile = inner.nominal, inner.extents, s.tile if isinstance(s.tile, sympy.Symbol) else None
        when, data = s.when is not sympy.true, s.data is not None and self.tables is not None
        # nothing left out on any trip (left_out's None), checked once: no mask from data, none from positions
        plain = self.whole is not None or (s.data is None and s.full_trips is None)
        body = self.steps(s.body)
        for t, extent in self._trips(s, frame):
            nominal[s.index] = t
            if tile is not None:
                extents[tile] = extent
            if when and not truth(s.when, nominal):
                continue      # a trip the mask skips: it would change nothing
            if data and self._state(s, inner) == NONE:
                continue      # no pair of the trip's tiles allowed by the data's block mask: it changes nothing
            if plain:
                for step in body:
                    step(inner)
                continue
            outer = self.whole
            self.whole = outer if outer is not None else self.left_out(s, inner)
            try:
                self.block(s.body, inner)
            finally:
                self.whole = outer
        self.block(s.tail, frame)


def _prepare(box, sizes):
    """``box`` ready to run many times: its kind's prepared implementation where the record has one for this box
    (a contraction of two operands with no shared batch axis: one BLAS call), else with its parameters bound to
    numbers once (``β = d^-1/2``)."""
    spec = box.data
    prepared = kind_of(spec.kind).prepared
    fast = prepared(box) if prepared is not None else None
    if fast is not None:
        return fast
    if not any(isinstance(v, sympy.Basic) for _, v in spec.params):
        return box
    params = tuple((k, float(sympy.sympify(v).subs(sizes)) if isinstance(v, sympy.Basic) else v)
                   for k, v in spec.params)
    return type(box)(box.name, box.dom, box.cod, data=type(spec)(spec.kind, params, spec.weaves))


class Frame:
    """Bindings of one trip: ``nominal`` sizes and indices, ``extents`` of the current tiles, values."""

    def __init__(self, nominal, extents, values, live):
        self.nominal, self.extents, self.values, self.live = nominal, extents, values, live

    def trip(self, loop, t: int, extent: int, carried: bool = False) -> "Frame":
        """The frame of trip ``t``: the values and what is live copied (a Grid's trips are independent), or the same
        (``carried``: a Stream's state carries from trip to trip)."""
        nominal = dict(self.nominal)
        nominal[loop.index] = t
        extents = dict(self.extents)
        if isinstance(loop.tile, sympy.Symbol):
            extents[loop.tile] = extent
        if carried:
            return Frame(nominal, extents, self.values, self.live)
        return Frame(nominal, extents, dict(self.values), set(self.live))

    def env(self) -> Env:
        return Env(self.extents)
