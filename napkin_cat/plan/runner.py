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
from fractions import Fraction

import numpy as np
import sympy
from sympy.printing.pycode import PythonCodePrinter

from napkin_cat.algorithms.blockmask import FULL, NONE
from napkin_cat.cost.record import Cost
from napkin_cat.plan.blocks import block_tables
from napkin_cat.plan.ir import Compute, Free, Load, PlanError, Store
from napkin_cat.semantics.env import Env
from napkin_cat.semantics.primitives import run_primitive
from napkin_cat.syntax.axis import Axis
from napkin_cat.syntax.dtype import as_dtype
from napkin_cat.syntax.ops import MAX, MIN, SUM
from napkin_cat.syntax.primitive import Core, kind_of

#: statement type → the Machine's method running it
_STEPS: dict = {}

#: monoid name → its accumulator (what a ``Combine`` folds with)
MONOIDS = {a.name: a for a in (SUM, MAX, MIN)}


#: what a run measured is the cost record (:mod:`napkin_cat.cost.record`): ``transfers`` (``H``), ``bytes``
#: (``H_bytes``) and ``peak`` (``M`` on chip) per level, ``flops`` per pipeline, as ``nc.cost(d, sizes=...)`` says
Counters = Cost


def _count(table: dict, key, n: int):
    table[key] = table.get(key, 0) + int(n)


_LAMBDAS: dict = {}
_MINMAX = {"Min": min, "Max": max, "Fraction": Fraction}


class _ExactPrinter(PythonCodePrinter):
    """Rationals as :class:`~fractions.Fraction`: ``floor(4*i/3 + 1/3 - 1/3)`` at ``i = 3`` is 4, where floats give
    3.9999999999999996 and a floor (a floor quotient's image on a tile) lands one below."""

    def _print_Rational(self, e):
        return f"Fraction({e.p}, {e.q})"

    def _print_Half(self, e):
        return self._print_Rational(e)


#: lambdify's own settings (the namespace's names printed as themselves: ``Min``, not a builtin a symbol may shadow)
_EXACT = _ExactPrinter({"fully_qualified_modules": False, "inline": True, "allow_unknown_functions": True,
                        "user_functions": {k: k for k in _MINMAX}})


def _compiled(e):
    """``(symbols, function)`` computing ``e`` from its symbols' values, lambdified once per expression.

    The symbols are the function's parameters by their own names (lambdify replaces a name that is no Python
    identifier, or a keyword, by a dummy itself): replacing every symbol by a dummy first (``dummify=True``)
    rebuilds each ``Min``/``Max`` of the expression, and sympy re-simplifies their arguments on the way.
    """
    f = _LAMBDAS.get(e)
    if f is None:
        syms = tuple(sorted(e.free_symbols, key=str))
        f = _LAMBDAS[e] = (syms, sympy.lambdify(syms, e, modules=[_MINMAX, "math"], dummify=False,
                                                      printer=_EXACT))
    return f


class _NamedPrinter(_ExactPrinter):
    """:class:`_ExactPrinter` with each symbol printed as the local name given it (``v0``, ``v1``, …): a symbol may
    bear a keyword's or a builtin's name."""

    def __init__(self, names: dict):
        super().__init__({"fully_qualified_modules": False, "inline": True, "allow_unknown_functions": True,
                          "user_functions": {k: k for k in _MINMAX}})
        self.names = names

    def _print_Symbol(self, e):
        return self.names[e]


#: the names a printed index reads (``floor``, ``ceil``, … from :mod:`math`, ``Min``, ``Max``, ``Fraction``)
_NAMESPACE = {**{k: getattr(math, k) for k in dir(math) if not k.startswith("_")}, **_MINMAX}


def indexer(ranges):
    """The index of a view as one function of a binding (symbol → int), its Python source printed once per ranges
    (remembered: every run of a plan, and every plan with these ranges, shares it): per axis
    ``slice(start, min(start + tile, end))`` of its :class:`~napkin_cat.plan.ir.Range` (``None``: the whole axis),
    then ``...``; each bound is :func:`number`'s value of its expression.

    >>> i, g, n = sympy.symbols("i g n")
    >>> from napkin_cat.plan.ir import Range
    >>> indexer((Range(g * i, g, n), None))({i: 2, g: 4, n: 10})
    (slice(8, 10, None), slice(None, None, None), Ellipsis)
    """
    return _printed_index(tuple(ranges))


@functools.lru_cache(maxsize=1 << 14)
def _printed_index(ranges: tuple):
    syms = sorted(set().union(*(sympy.sympify(e).free_symbols for r in ranges if r is not None
                                for e in (r.start, r.tile, r.end))), key=str)
    names = {x: f"v{k}" for k, x in enumerate(syms)}
    printed = _NamedPrinter(names).doprint
    lines = ["def index(nominal):"] + [f"    v{k} = nominal[S{k}]" for k in range(len(syms))]
    parts = []
    for j, r in enumerate(ranges):
        if r is None:
            parts.append("slice(None)")
            continue
        lines.append(f"    b{j} = int({printed(r.start)})")
        parts.append(f"slice(b{j}, min(b{j} + int({printed(r.tile)}), int({printed(r.end)})))")
    lines.append(f"    return ({', '.join(parts + ['...'])},)")
    namespace = {**_NAMESPACE, "min": min, "int": int, "slice": slice, **{f"S{k}": x for k, x in enumerate(syms)}}
    exec("\n".join(lines), namespace)     # noqa: S102 -- source printed from the plan's own expressions
    return namespace["index"]


def number(e, env: dict) -> int:
    """An index or size expression evaluated at ``env`` (symbol → int), compiled once per expression; a
    symbol may bear a keyword's or a builtin's name.

    >>> t, g, n, lam, mn = sympy.symbols("t g n lambda min")
    >>> number(sympy.Min(g, n - t * g) + sympy.floor(n / g) + lam * mn, {t: 2, g: 4, n: 10, lam: 3, mn: 5})
    19
    """
    if isinstance(e, int):
        return e
    if isinstance(e, sympy.Symbol):     # (no function printed for a symbol alone, nor for a number)
        return int(env[e])
    if isinstance(e, sympy.Integer):
        return int(e)
    syms, fn = _compiled(e)
    return int(fn(*(env[s] for s in syms)))


def evaluator(e):
    """``e`` as a function of a binding (symbol → int) returning :func:`number`'s value, worked out once: a
    constant as itself, a symbol by lookup, else its compiled function.

    >>> t, g = sympy.symbols("t g")
    >>> [evaluator(e)({t: 3, g: 4}) for e in (5, sympy.Integer(5), g, t * g + 1)]
    [5, 5, 4, 13]
    """
    if isinstance(e, int) or isinstance(e, sympy.Integer):
        n = int(e)
        return lambda env: n
    if isinstance(e, sympy.Symbol):
        return lambda env: int(env[e])
    syms, fn = _compiled(e)
    return lambda env: int(fn(*[env[s] for s in syms]))


def truth(c, env: dict) -> bool:
    """A condition on loop indices and sizes (a trip's ``when``) evaluated at ``env``, compiled once."""
    if isinstance(c, (bool, sympy.logic.boolalg.BooleanTrue, sympy.logic.boolalg.BooleanFalse)):
        return bool(c)
    syms, fn = _compiled(c)
    return bool(fn(*(env[s] for s in syms)))


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
        # by the statement's id (the plan holds its statements while the machine lives; a statement's own hash
        # walks its views and their sympy ranges at every lookup)
        #: the full trip being run (a FullTrips, or a BlockSkip at a block the data's table says full), or None:
        #: the statements it leaves out run uncounted (their values are what the kernel reads as true)
        self.whole = None
        self.fast: dict = {}   # id(Compute) -> its box with parameters bound, or a BLAS call
        self.flops_at: dict = {}   # (id(Compute), operand shapes, result shapes) -> its measured FLOPs
        self.slices: dict = {}   # id(Ref) -> (the Ref, per axis of its variable None or its range's evaluators)
        self.moves: dict = {}    # id(Load/Store) -> (the statement, what _move reads of its variables)
        self.compiled: dict = {}   # id(block) -> (the block, its steps)

    # ------------------------------------------------------------------ values
    def view(self, ref, frame):
        x = frame.values[ref.var]
        if ref.whole:
            return x
        got = self.slices.get(id(ref))
        if got is None:     # the ranges' evaluators, once per view of the plan (the plan holds its refs)
            got = self.slices[id(ref)] = (ref, tuple(
                None if rng is None else (evaluator(rng.start), evaluator(rng.tile), evaluator(rng.end))
                for rng in map(ref.range, self.vars[ref.var].axes)))
        nominal = frame.nominal
        idx = []
        for ev in got[1]:
            if ev is None:
                idx.append(slice(None))
            else:
                start = ev[0](nominal)
                idx.append(slice(start, min(start + ev[1](nominal), ev[2](nominal))))
        idx.append(...)
        return x[tuple(idx)]      # a view, a variable without axes too (``x[()]`` would be a copied scalar)

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
            else:
                steps.append(lambda frame, s=s: self._step(s, frame))
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

    def _writer(self, ref):
        """``(frame, y) -> None`` writing ``y`` to a view: into its slice, or as the variable's new value (counting,
        the live values grown by the difference)."""
        var = ref.var
        if ref.index:
            index = indexer(map(ref.range, self.vars[var].axes))

            def into(frame, y):
                frame.values[var][index(frame.nominal)] = y
            return into
        if self.counters is None:
            def new(frame, y):
                frame.values[var] = y
            return new
        lvl, live = self.levels[var], self.live

        def counted(frame, y):
            values, held = frame.values, frame.live
            old = size(values[var]) if var in held else 0
            values[var] = y
            held.add(var)
            live[lvl] = live.get(lvl, 0) - old + size(y)
        return counted

    def _move_step(self, s):
        """A Load or Store: the view copied at the destination's type (its axes moved, or a split's unit part axis
        dropped), its values and bytes counted at its level."""
        read, write = self._reader(s.src), self._writer(s.dst)
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

    def _applier(self, s):
        """``frame -> outputs`` of a Compute: its operands read (an inlined computation applied, its FLOPs counted),
        its box run as prepared once, its FLOPs counted (measured once per shape met)."""
        operands = [self._applier(r) if isinstance(r, Compute) else self._reader(r) for r in s.ins]
        operands = [(lambda frame, f=f: f(frame)[0]) if isinstance(r, Compute) else f for r, f in zip(s.ins, operands)]
        fast = _prepare(s.box, self.plan.sizes)
        table, flops_at, box = None if self.counters is None else self.counters.flops, {}, s.box
        at = tuple((a, evaluator(start)) for a, start in s.at)

        def apply(frame):
            xs = [f(frame) for f in operands]
            if callable(fast):
                ys = fast(xs)
            else:
                env = frame.env()
                if at:       # a position or a gather: where its tile starts on the whole axis
                    env.tiles = {a: (start(frame.nominal), None) for a, start in at}
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

    def _compute_step(self, s):
        """A Compute: applied, its outputs written (or folded into its state by its kind's accumulator); a
        computation the full trip being run leaves out runs uncounted (:meth:`_quietly`)."""
        apply = self._applier(s)
        if s.accumulate:
            combine, read, write = kind_of(s.kind).accumulator.combine, self._reader(s.outs[0]), \
                self._writer(s.outs[0])

            def run(frame):
                write(frame, combine(read(frame), apply(frame)[0]))
        else:
            writers = [self._writer(r) for r in s.outs]

            def run(frame):
                for w, y in zip(writers, apply(frame)):
                    w(frame, y)
        if self.counters is None:
            return run

        def step(frame):
            if self.whole is not None and self.whole.omits(s):
                self._quietly(s, frame)
            else:
                run(frame)
        return step

    def _step(self, s, frame):
        """Run one statement by its type's ``_run_<Type>`` (looked up once per type)."""
        run = _STEPS.get(type(s))
        if run is None:
            run = _STEPS[type(s)] = getattr(Machine, f"_run_{type(s).__name__}")
        run(self, s, frame)

    def _quietly(self, s, frame):
        """A computation a full trip leaves out (it makes only the mask, true there on every pair): run for its value,
        its FLOPs not counted, as the kernel, which makes none of it, computes none.  (The loads only the mask reads,
        a document's ids, are counted on every trip that runs, as the cost's density estimate counts them.)"""
        counted, self.counters = self.counters, None
        try:
            self._step(s, frame)
        finally:
            self.counters = counted

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

    def _move(self, s, frame):
        got = self.moves.get(id(s))
        if got is None:     # its variables' types, axes and bytes per value, read once per statement
            src, dst = tuple(self.vars[s.src.var].axes), tuple(self.vars[s.dst.var].axes)
            perm = [src.index(a) for a in dst] if src != dst and sorted(src) == sorted(dst) else None
            got = self.moves[id(s)] = (s, self.numpy_dtype(s.dst.var), perm, len(dst),
                                       as_dtype(self.vars[s.dst.var].dtype).bytes)
        _, dtype, perm, rank, width = got
        x = np.array(self.view(s.src, frame), dtype=dtype)
        if perm is not None:     # a woven transfer that also moves its axes: by name
            x = x.transpose(perm)
        elif s.dst.whole and x.ndim != rank:       # one part of a split's partials: its unit part axis dropped
            x = x.reshape(self.shape(s.dst.var, frame))
        if self.counters is not None:
            n = x.size
            _count(self.counters.transfers, s.level, n)
            _count(self.counters.bytes, s.level, n * width)
        self.write(s.dst, x, frame)

    _run_Load = _move
    _run_Store = _move

    def _run_Copy(self, s, frame):
        self.write(s.dst, np.array(self.view(s.src, frame)), frame)

    def _value(self, r, frame):
        """An operand: a view, or an inlined computation's value (its FLOPs counted, never stored)."""
        if not isinstance(r, Compute):
            return self.view(r, frame)
        ys = self._apply(r, frame)
        return ys[0]

    def _apply(self, s, frame):
        xs = [self._value(r, frame) for r in s.ins]
        fast = self.fast.get(id(s))
        if fast is None:
            fast = self.fast[id(s)] = _prepare(s.box, self.plan.sizes)
        if callable(fast):
            ys = fast(xs)
        else:
            env = frame.env()
            if s.at:       # a position or a gather: where its tile starts on the whole axis
                env.tiles = {a: (number(start, frame.nominal), None) for a, start in s.at}
            ys = run_primitive(fast, xs, env)
        if self.counters is not None:
            # the FLOPs depend on the box and the tiles' extents only: measured once per shape met
            key = (id(s), tuple([np.shape(x) for x in xs]), tuple([np.shape(y) for y in ys]))
            flops = self.flops_at.get(key)
            if flops is None:
                flops = self.flops_at[key] = measured_flops(s.box, xs, ys)
            for p, n in flops.items():
                _count(self.counters.flops, p, n)
        return ys

    def _run_Compute(self, s, frame):
        ys = self._apply(s, frame)
        if s.accumulate:
            combine = kind_of(s.kind).accumulator.combine
            ref = s.outs[0]
            self.write(ref, combine(self.view(ref, frame), ys[0]), frame)
            return
        for r, y in zip(s.outs, ys):
            self.write(r, y, frame)

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
