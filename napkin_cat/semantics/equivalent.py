"""Equivalence of two diagrams: same outputs on random sizes, tiles and data.

Every size symbol of either diagram is bound (axis sizes anywhere, box and region parameters
such as β = d^(-1/2)).  The trials cycle through kinds of sizes, the strictest first, so that every
check, whatever its seed and however few its trials, makes the strictest trial:

* ``sizes ≥ 2`` (diagrams without tiles): every size at least 2 and the sizes distinct where the
  diagram allows (a size-1 axis hides a dropped scale, a mean taken for a sum, a transposition);
* ``ragged`` (diagrams with tiles): sizes as ``sizes ≥ 2``, and every tile at least 2 and, where the
  axis allows, *not* dividing it: at least two whole tiles and a shorter last one when the axis is free,
  else any tile from 2 to the axis size minus 1 that leaves a remainder (an axis of 3 takes 2);
* ``tiles ≥ 2``: every tile at least 2, each axis at least two whole tiles;
* ``random``: sizes in ``[low, high]``, each tile a random divisor of its axis.

A verdict with no finite output entry compared is a failure: NaN everywhere certifies nothing.

Finite entries agree within a tolerance that follows the precision the comparison evaluates in
(:mod:`napkin_cat.semantics.precision`): ``|a − b| ≤ rtol·|b| + atol`` with ``rtol = min(C·n·u, √u)`` (``u`` the unit
roundoff of the narrowest format either diagram's casts round to, float64's when none does; ``n`` the sum of the
axes' lengths at the trial) and ``atol = rtol·max|b|``; an explicit ``rtol`` or ``atol`` replaces its default.

>>> import napkin_cat as nc
>>> v = equivalent(nc.einsum("a b -> b a"), nc.einsum("a b -> b a"))
>>> bool(v), v.seed, len(v.tried), v.tried[0]["tiles"]
(True, 0, 3, 'sizes ≥ 2')
>>> bool(equivalent(nc.reduce("sum", "a -> "), nc.reduce("mean", "a -> "), seed=34))
False
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np
import sympy

from napkin_cat.algorithms.bubbles import Grid, Region, Stream
from napkin_cat.algorithms.devices import Shard
from napkin_cat.algorithms.device_shards import collective_cuts
from napkin_cat.algorithms.schedule import schedule_of
from napkin_cat.errors import AxisError, NapkinError
from napkin_cat.semantics.env import Env
from napkin_cat.semantics.evaluate import evaluate
from napkin_cat.semantics.footprint import check_diagrams, largest_array, value_at
from napkin_cat.semantics.precision import Precision, default_rtol, precision_of, precision_of_values
from napkin_cat.syntax.adapter import Diagram
from napkin_cat.syntax.flat import layers
from napkin_cat.syntax.sizes import Sizes, as_sizes, names_of, symbols_of

#: the kinds of trial, in the order the trials cycle through them (when the diagrams have tiles)
TRIAL_KINDS = ("ragged", "tiles ≥ 2", "random")
#: the kinds of trial of diagrams without tiles
UNTILED_KINDS = ("sizes ≥ 2", "random")
#: the most entries a drawn array may have before distinct sizes give way to sizes 2 and 3
LARGEST_DRAW = 1 << 20
#: the most trials one comparison runs: each evaluates both diagrams (the library's checks run 1 to 30)
MAX_TRIALS = 1000


@dataclass
class Equivalence:
    """The verdict of :func:`equivalent`; truthy when the diagrams agree.

    ``seed`` and ``tried`` (per trial: its number, kind of tiles and sizes) say what was compared;
    on disagreement ``message``, ``output``, ``max_error`` and ``sizes`` say where.  ``precision`` is the format
    the comparison evaluated in (its narrowest: :mod:`napkin_cat.semantics.precision`), ``rtol`` and ``atol``
    the largest tolerances applied (they follow the precision and the sizes unless given).
    """

    ok: bool
    message: str = ""
    output: int | None = None
    max_error: float = 0.0
    sizes: dict = field(default_factory=dict)
    trials: int = 0
    seed: int | None = None
    tried: list = field(default_factory=list)
    precision: Precision = field(default_factory=Precision)
    rtol: float = 0.0
    atol: float = 0.0

    def __bool__(self):
        return self.ok

    def __repr__(self):
        said = self.message or (f"{self.trials} trial(s), seed {self.seed}, max error {self.max_error:.3g} "
                                f"(in {self.precision}: rtol {self.rtol:.3g}, atol {self.atol:.3g})"
                                if self.seed is not None else "")
        tried = "; ".join(f"trial {t['trial']} ({t['tiles']}) {t['sizes']}" for t in self.tried)
        return f"Equivalence({self.ok}{': ' + said if said else ''}{' [' + tried + ']' if tried else ''})"


def tile_sizes(diagram: Diagram, shards: dict | None = None):
    """``(tile size, full axis size)`` of every Grid and Stream, outermost first; inside a device region a shard
    ``a/P`` reads as the largest, ``⌈a/P⌉`` (device 0's), where the tiles are drawn against it.  A whole diagram's
    are remembered on it (it is immutable; every trial of :func:`equivalent` asks them of both diagrams)."""
    if shards:
        return _tile_sizes(diagram, shards)
    memo = diagram.__dict__
    got = memo.get("_tile_sizes")
    if got is None:
        got = memo["_tile_sizes"] = tuple(_tile_sizes(diagram, None))
    return iter(got)


def _tile_sizes(diagram: Diagram, shards: dict | None):
    for _, box in layers(diagram):
        if isinstance(box, (Grid, Stream)):
            full = box.full_size()
            yield box.size, (sympy.sympify(full).subs(shards) if shards else full)
        if isinstance(box, Region):
            inner = shards
            if isinstance(box, Shard):     # every shard a/P (the region's, a co-shard, a collective's cut) at ⌈a/P⌉
                cut = {(a, part): whole for a, (part, whole) in box.sharded_axes().items()}
                cut.update(collective_cuts(schedule_of(box)))
                inner = {**(shards or {}), **{part: sympy.ceiling(sympy.sympify(whole) / box.devices)
                                              for (_, part), whole in cut.items() if not isinstance(part, int)}}
            yield from _tile_sizes(box.arg, inner)


def free_sizes(diagram: Diagram) -> list:
    """The size symbols of a diagram's inputs (what its input arrays' shapes bind)."""
    syms = set()
    for arr in diagram.dom.inside:
        for a in arr.axes:
            if not isinstance(a.size, int):
                syms |= a.size.free_symbols
    return sorted(syms, key=str)


def _whole_tiles(rng, tile: int, kind: str) -> int:
    """An axis size for ``tile``: two or three whole tiles, plus a shorter last one when ragged."""
    whole = tile * int(rng.integers(2, 4))
    return whole + int(rng.integers(1, tile)) if kind == "ragged" and tile >= 2 else whole


def _ragged_tiles(n: int) -> list:
    """Tiles of at least 2 that do not divide ``n``: those leaving two whole tiles first, else any below ``n``."""
    two = [t for t in range(2, n // 2 + 1) if n % t]
    return two or [t for t in range(2, n) if n % t]


def _bind_tile(env: dict, rng, tile, full, kind: str, tiles: set = frozenset()) -> bool:
    """Bind ``tile`` (and its axis, when free) so that the trial has its ``kind`` of tiles, where legal; False
    while the axis is another tile not bound yet (a nested partition: bound after its parent)."""
    if isinstance(full, sympy.Symbol) and full not in env:
        if full in tiles:
            return False
        t = tile if isinstance(tile, int) else value_at(env, tile)
        if t is None and isinstance(tile, sympy.Symbol):
            t = env[tile] = int(rng.integers(2, 4))
        if t is not None:
            env[full] = _whole_tiles(rng, t, kind)
        return True
    if not isinstance(tile, sympy.Symbol) or tile in env:
        return True
    n = value_at(env, full)
    if n is None:
        return False
    if kind == "ragged":
        options = _ragged_tiles(n)
    else:
        options = [t for t in range(2, n // 2 + 1) if n % t == 0]
    options = options or [t for t in range(2, n // 2 + 1)]
    if options:
        env[tile] = int(rng.choice(options))
    return True


def _draw_distinct(rng, symbols: list, env: dict, low: int, high: int):
    """Bind ``symbols`` to sizes of at least ``max(low, 2)``, distinct from each other and from the sizes
    already bound where the range allows (it grows past ``high`` as needed)."""
    lo = max(low, 2)
    used = {v for v in env.values() if isinstance(v, int)}
    pool = [v for v in range(lo, max(high, lo) + 1) if v not in used]
    top = max(high, lo)
    while len(pool) < len(symbols):
        top += 1
        if top not in used:
            pool.append(top)
    for s, v in zip(symbols, rng.permutation(pool)[:len(symbols)]):
        env[s] = int(v)


def _trial_sizes(rng, fixed: dict, d1, d2, kind: str, low: int, high: int) -> dict:
    """Bindings for one trial: sizes, then tiles of the trial's kind (a nested tile after its parent), then
    every other symbol, then divisors; a tile the bindings put past its axis (one tile symbol at two levels)
    is brought down to it."""
    env = dict(fixed)
    tiles = list(dict.fromkeys(list(tile_sizes(d1)) + list(tile_sizes(d2))))
    tile_symbols = {t for t, _ in tiles if isinstance(t, sympy.Symbol)}
    free = sorted((symbols_of(d1, params=True) | symbols_of(d2, params=True)) - tile_symbols, key=str)
    if kind != "random":
        # the sizes first, at least 2 and distinct, so that the tiles are drawn against them
        bound = [s for s in free if s not in env and (kind == "sizes ≥ 2" or
                                                      not any(s == full for _, full in tiles))]
        _draw_distinct(rng, bound, env, low, high)
        if largest_array(env, (d1, d2))[0] > LARGEST_DRAW:
            for s in bound:
                env[s] = int(rng.integers(2, 4))
        pending = list(tiles)
        while pending:
            left = [(t, f) for t, f in pending if not _bind_tile(env, rng, t, f, kind, tile_symbols)]
            if len(left) == len(pending):
                break
            pending = left
    for s in free:
        env.setdefault(s, int(rng.integers(low, high + 1)) if kind == "random" else int(rng.integers(2, 4)))
    for _ in range(len(tiles) + 1):
        for tile, full in tiles:
            if isinstance(tile, sympy.Symbol) and tile not in env and value_at(env, full) is not None:
                n = value_at(env, full)
                env[tile] = int(rng.choice([g for g in range(1, n + 1) if n % g == 0]))
    for _ in range(len(tiles) + 1):   # a tile symbol shared by nested partitions: each no larger than its axis
        changed = False
        for tile, full in tiles:
            t, n = value_at(env, tile), value_at(env, full)
            if isinstance(tile, sympy.Symbol) and t is not None and n is not None and t > n:
                if tile in fixed:   # the caller's tile is never changed behind their back
                    raise AxisError(f"sizes= gives the tile {tile} = {t}, past its axis ({full} = {n}): legal tiles "
                                    f"are 1 … {n}")
                env[tile], changed = n, True
        if not changed:
            break
    return env


def _evaluated(d: Diagram, xs: list, named: dict, evaluations: dict | None):
    """``evaluate(d, *xs)`` at the sizes ``named`` (those ``d`` carries), kept in ``evaluations`` when given."""
    sizes = Sizes(named).restrict(d)
    if evaluations is None:
        return evaluate(d, *xs, sizes=sizes)
    inputs = hashlib.sha256()
    for x in xs:
        inputs.update(f"{x.dtype}{x.shape}".encode())
        inputs.update(np.ascontiguousarray(x).tobytes())
    key = (id(d), tuple(sorted((str(k), v) for k, v in named.items())), inputs.hexdigest())
    if key not in evaluations:
        evaluations[key] = evaluate(d, *xs, sizes=sizes)
    return evaluations[key]


def _axes_length(diagrams, env: dict) -> int:
    """The sum of the lengths of the distinct axes the diagrams' inputs and outputs carry, at the bindings
    ``env``: the ``n`` of the default tolerance (every sum a diagram takes runs along some of them)."""
    axes = {(a.name, a.size) for d in diagrams for arr in (*d.dom.inside, *d.cod.inside) for a in arr.axes}
    return sum(value_at(env, size) or 1 for _, size in axes)


def _tolerance(name: str, value):
    """An explicit tolerance: a non-negative finite number (None: the precision's default)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)) or \
            not 0 <= float(value) < float("inf"):
        raise NapkinError(f"{name} must be a finite number ≥ 0 (or None: the default, which follows the precision "
                          f"the diagrams evaluate in), got {value!r}")
    return float(value)


def equivalent(d1: Diagram, d2: Diagram, *, seed: int = 0, trials: int = 3, sizes: dict | None = None,
               low: int = 1, high: int = 7, rtol: float | None = None, atol: float | None = None,
               scale: float = 1.0, evaluations: dict | None = None) -> Equivalence:
    """Compare two diagrams on random inputs (and random sizes and tiles for symbolic ones).

    ``sizes`` fixes some sizes (name → int); the others are drawn per trial (see the module doc).  An
    integer input (an index, a segment id) gets integers in ``[0, high]``, a mask random booleans.
    NaN and ±inf must sit in the same places; finite entries must agree to ``rtol``/``atol``; and
    some finite entry must have been compared.  By default the tolerance follows the precision the comparison
    evaluates in (the narrowest format either diagram's casts round to, else float64) and the sizes:
    ``rtol = min(C·n·u, √u)``, ``atol = rtol·max|b|`` (:mod:`napkin_cat.semantics.precision`, which says why); an
    explicit ``rtol`` or ``atol`` (a number ≥ 0) replaces its default.  The verdict says the precision and the
    largest tolerances applied.  ``evaluations``: a dict in which each diagram's outputs are kept
    by (the diagram, its sizes, its inputs' bytes) and looked up again, for comparisons along a chain
    ``d₀ ≟ d₁ ≟ d₂ …`` that meet a diagram twice at the same trial (:meth:`~napkin_cat.rewriting.trace.Trace.check`);
    the caller owns it and keeps the diagrams alive while it does.

    >>> import napkin_cat as nc
    >>> v = equivalent(nc.reduce("sum", "a -> "), nc.reduce("max", "a -> "), sizes={"a": 3})
    >>> bool(v), v.sizes
    (False, {'a': 3})
    >>> v = equivalent(nc.library.alibi_attention(0.3, causal=False), nc.library.alibi_attention(0.3, causal=False))
    >>> str(v.precision), v.rtol < 1e-4
    ('fp32 (cast in the first diagram)', True)
    """
    for name, d in (("first", d1), ("second", d2)):
        if not isinstance(d, Diagram):
            raise NapkinError(f"nc.equivalent compares two diagrams; the {name} is a {type(d).__name__}")
    if not isinstance(trials, int) or isinstance(trials, bool) or not 1 <= trials <= MAX_TRIALS:
        raise NapkinError(f"trials must be a positive int of at most {MAX_TRIALS}, got {trials!r}")
    for name, bound in (("low", low), ("high", high)):
        if isinstance(bound, bool) or not isinstance(bound, int) or not 1 <= bound <= LARGEST_DRAW:
            raise NapkinError(f"{name} must be an int 1 … {LARGEST_DRAW} (the range random sizes are drawn from), "
                              f"got {bound!r}")
    if high < low:
        raise NapkinError(f"random sizes are drawn from low … high: low = {low} is above high = {high}")
    rtol, atol = _tolerance("rtol", rtol), _tolerance("atol", atol)
    if d1.dom != d2.dom or d1.cod != d2.cod:
        return Equivalence(False, f"types differ: {d1.dom} → {d1.cod} vs {d2.dom} → {d2.cod}", seed=seed)
    rng = np.random.default_rng(seed)
    fixed = as_sizes(sizes).within(names_of(d1) | names_of(d2), "either diagram").env
    tiled = bool(list(tile_sizes(d1)) or list(tile_sizes(d2)))
    kinds = TRIAL_KINDS if tiled else UNTILED_KINDS     # the strictest first: every check makes it
    worst, compared, entries, tried = 0.0, 0, 0, []
    precision = precision_of(d1, "first").narrowest(precision_of(d2, "second"))
    rtols, atols = [0.0], [0.0]
    for t in range(trials):
        kind = kinds[t % len(kinds)]
        env = _trial_sizes(rng, fixed, d1, d2, kind, low, high)
        check_diagrams(env, (d1, d2))       # the sizes given may be too large to hold: refused, nothing drawn
        named = {str(k): v for k, v in sorted(env.items(), key=lambda kv: str(kv[0]))}
        tried.append({"trial": t, "tiles": kind, "sizes": named})
        xs = []
        for arr in d1.dom.inside:
            shape = tuple(Env(env).size(a.size, f"axis {a.name!r}") for a in arr.axes)
            if arr.dtype.family == "bool":
                xs.append(rng.random(size=shape) < 0.5)
            elif arr.dtype.is_integer:      # indices and segment ids: small non-negative integers
                xs.append(rng.integers(0, high + 1, size=shape))
            else:
                xs.append(rng.normal(size=shape) * scale)
        with np.errstate(all="ignore"):     # a diagram compared with itself (is it finite?) is evaluated once
            y1 = _evaluated(d1, xs, named, evaluations)
            y2 = y1 if d2 is d1 else _evaluated(d2, xs, named, evaluations)
        y1 = y1 if isinstance(y1, tuple) else (y1,)
        y2 = y2 if isinstance(y2, tuple) else (y2,)
        precision = precision.narrowest(precision_of_values(y1, "first")).narrowest(precision_of_values(y2, "second"))
        r = rtol if rtol is not None else default_rtol(precision, _axes_length((d1, d2), env))
        for j, (a, b) in enumerate(zip(y1, y2)):
            a, b = np.asarray(a, float), np.asarray(b, float)
            # NaN and ±inf must sit in the same places; the error is taken over finite entries
            same_specials = (a.shape == b.shape and np.array_equal(np.isnan(a), np.isnan(b))
                             and np.array_equal(np.where(np.isinf(a), a, 0), np.where(np.isinf(b), b, 0)))
            finite = np.isfinite(a) & np.isfinite(b) if a.shape == b.shape else np.zeros(0, bool)
            gap = np.abs(a[finite] - b[finite]) if a.shape == b.shape else np.zeros(0)
            err = float(gap.max()) if gap.size else 0.0
            magnitude = float(np.abs(b[finite]).max()) if gap.size else 0.0
            at = atol if atol is not None else r * magnitude
            rtols.append(r)
            atols.append(at)
            # np.allclose(a, b, rtol, atol, equal_nan=True) where the specials agree: NaN and ±inf in the same places
            # are equal, and every finite pair is within atol + rtol·|b| (its test, on the gaps taken once)
            if not same_specials or not np.all(gap <= at + r * np.abs(b[finite])):
                if not same_specials:
                    err = float("nan")
                what = ("has NaN/inf in other places" if not same_specials else
                        f"differs by up to {err:.3g} (tolerance in {precision}: rtol {r:.3g}, atol {at:.3g})")
                return Equivalence(False, f"output {j} {what} at sizes {named} (trial {t}, {kind} tiles, "
                                   f"seed {seed})", j, err, named, t + 1, seed, tried, precision, r, at)
            worst, compared, entries = max(worst, err), compared + int(finite.sum()), entries + a.size
    if entries and not compared:
        return Equivalence(False, f"no finite output was compared: every output entry is NaN or ±inf in all "
                           f"{trials} trial(s) (seed {seed}), so agreement certifies nothing",
                           None, 0.0, tried[-1]["sizes"] if tried else {}, trials, seed, tried, precision,
                           max(rtols), max(atols))
    return Equivalence(True, "", None, worst, {}, trials, seed, tried, precision, max(rtols), max(atols))
