"""The numpy meaning of the regions: a Kernel runs its inside, a Grid loops, a Stream folds.

These are the paper's equivalences read as programs (Figs. weaved_algorithm and
recursive_decomposition): a Grid splits its axis into groups, runs the inside on each and
joins the results; a Stream runs its head once, its trip once per slice (folding the
reducers' accumulators, online softmax included), and its tail once.  A tile that does not
divide its axis leaves a shorter last group or slice (a ragged tile), and the inside of that
tile sees its axis at the shorter size.  The numpy meaning is an algebra of the schedule fold
(:mod:`napkin_cat.algorithms.schedule`): its values are arrays, its context the sizes.  The
interpreter of a flat diagram is passed in, so this module knows regions and nothing of it.

>>> import numpy as np, napkin_cat as nc
>>> flash = nc.group(nc.stream(nc.library.attention(), "x", "s_x"), "q", "g_q")
>>> Q, K, V = np.ones((4, 2)), np.ones((6, 2)), np.ones((6, 2))
>>> nc.evaluate(flash, Q, K, V, sizes={"g_q": 2, "s_x": 3}).shape
(4, 2)
>>> nc.evaluate(flash, Q, K, V, sizes={"g_q": 3, "s_x": 4}).shape   # ragged: groups 3 + 1, slices 4 + 2
(4, 2)
"""
from __future__ import annotations

import numpy as np

from napkin_cat.algorithms.bubbles import Partition, Region
from napkin_cat.algorithms.splits import part_bounds
from napkin_cat.algorithms.schedule import Phases, advance, fold_region, relabelled, schedule_of
from napkin_cat.algorithms.ring import ring_pieces, ring_shard
from napkin_cat.errors import DeviceError, ShapeError
from napkin_cat.semantics.devices import run_devices
from napkin_cat.semantics.primitives import run_primitive
from napkin_cat.syntax.adapter import Bubble


def _slices(total: int, size: int):
    """Consecutive slices of ``size`` covering ``total``; the last one is shorter when ``size`` does
    not divide ``total`` (a ragged tile: the paper's recursive decomposition allows any split)."""
    return [slice(k, min(k + size, total)) for k in range(0, total, size)]


def _cut(x, position, sl):
    idx = [slice(None)] * np.ndim(x)
    idx[position] = sl
    return tuple(idx)


def bind(region: Partition, env, what: str):
    """``(full size, tile size, inner env)`` with the tile size bound inside."""
    total = env.size(region.full_size(), f"axis {region.axis!r}")
    tile = region.size if isinstance(region.size, int) else \
        env.size(region.size, f"the {what} size of {region.axis!r} ({region.size})")
    if tile < 1:
        raise ShapeError(f"the {what} size of {region.axis!r} ({region.size}) is {tile}; it must be a positive "
                         f"integer (any size from 1 up; one that does not divide {total} leaves a shorter last tile)")
    inner = env.child()
    if not isinstance(region.size, int):
        inner[region.size] = tile
    return total, tile, inner


def _short_env(region, env, n: int):
    """The env of a last, shorter tile of ``n`` of a partition with a symbolic tile: the tile reads ``n``."""
    inner = env.child()
    inner[region.size] = n
    return inner


class Numpy:
    """The numpy algebra of the schedule fold: values are arrays, ``ctx`` is the env of sizes."""

    def __init__(self, interpret):
        self.interpret = interpret

    def op(self, op, xs, env, dests):
        if isinstance(op.box, Bubble):
            return run_region(op.box, xs, env, self.interpret)
        return run_primitive(op.box, xs, env)

    def kernel(self, node, xs, env, dests):
        return self.interpret(node.inside, xs, env)

    def grid(self, node, xs, env, dests):
        """``split_a ; (F ⊗ … ⊗ F) ; join_a``: the inside on every group of the axis, results joined."""
        box = node.region
        total, g, inner = bind(box, env, "group")
        pos_in = [arr.names.index(box.axis) if box.axis in arr.names else None for arr in box.dom.inside]
        parts = []
        for sl in _slices(total, g):
            n = sl.stop - sl.start
            inside, group_env = (node.inside, inner) if n == g else \
                (node.inside, _short_env(box, inner, n)) if not isinstance(box.size, int) else \
                (relabelled(box, n).arg, inner)
            chunk = [x if p is None else x[_cut(x, p, sl)] for x, p in zip(xs, pos_in)]
            parts.append(self.interpret(inside, chunk, group_env.within(box.axis, sl.start, n)))
        return [np.concatenate([p[j] for p in parts], axis=arr.names.index(box.axis))
                for j, arr in enumerate(box.cod.inside)]

    def shard(self, node, xs, env, dests):
        """The inside on every device's shard, the devices in lockstep (:mod:`napkin_cat.semantics.devices`)."""
        return run_devices(node, xs, env, self.interpret, lambda b, ins, e: run_region(b, ins, e, self.interpret),
                           self.ring_device)

    def ring(self, node, xs, env, dests, run):
        """A ring runs only inside a device region, which gives it every device's shards (:meth:`ring_device`)."""
        raise DeviceError(f"{node.region.name}: a ring passes shards between devices; it runs inside a device region "
                          f"(nc.ring(nc.shard(...), axis)) only")

    def ring_device(self, box, p: int, ins: list, env) -> list:
        """Device ``p``'s part of the ring ``box`` (``ins[q]``: device ``q``'s inputs): :meth:`ring_fold` with trip
        ``t``'s slices device ``(p − t) mod P``'s streamed inputs."""
        P, where = len(ins), [schedule_of(box).dom.index(v) for v in schedule_of(box).streamed]
        return self.ring_fold(box, p, P, ins[p], env, ([ins[ring_shard(p, t, P)][k] for k in where] for t in range(P)))

    def ring_fold(self, box, p: int, P: int, mine: list, env, arriving) -> list:
        """Device ``p``'s part of the ring ``box`` over ``P`` devices, ``mine`` its inputs: the stream's head on them,
        trip ``t`` on the streamed arrays ``arriving`` yields ``t``-th (shard ``(p − t) mod P``, folded piece by
        piece, each at its own place along the axis: one piece under the contiguous order, two under zigzag; every
        trip's taken, an empty shard's too, so that a ring that moves them stays in step), the finish and the tail.
        The lockstep run takes them from the other devices' inputs (:meth:`ring_device`), a rank from its neighbour
        (:mod:`napkin_cat.distributed.device`): the same operations in the same order."""
        node = schedule_of(box)
        run = Phases(node, self)
        pieces = ring_pieces(box, lambda e: env.size(e, f"a size of {box.name}"))
        vals = run.head(mine, env)
        states = run.init(env)
        if box.axis in env.maps:      # a device's pieces: the trips place each piece at its own positions
            own, maps = 0, {a: m for a, m in env.maps.items() if a != box.axis}
        else:                         # where the axis's shards start: 0 at top level
            own, maps = env.tiles.get(box.axis, (0, None))[0] - pieces[p][0][0], env.maps
        for t, slices in zip(range(P), arriving):
            at = 0
            for lo, hi in pieces[ring_shard(p, t, P)]:
                n = hi - lo
                if n == 0:                           # an empty shard (fewer values than devices): nothing to fold
                    continue
                trip_run = run if n == box.size else Phases(schedule_of(relabelled(box, n)), self)
                chunk = {v: x[_cut(x, node.position(v), slice(at, at + n))] for v, x in zip(node.streamed, slices)}
                at += n
                trip_env = env.child()
                trip_env.tiles = {**env.tiles, box.axis: (own + lo, n)}       # the piece's own place along the axis
                trip_env.maps = maps
                states, _ = trip_run.trip({**vals, **chunk}, states, trip_env)
        return run.tail(run.finish(vals, states, env), env)

    def _trips(self, node, vals, states, env, total, size, run, *, skip=None, only=None):
        """``states`` after a trip on every slice of ``size`` of ``total``; the sliced outputs' slices.  With
        ``skip`` (:class:`~napkin_cat.algorithms.skipping.Skip`), a slice on which a mask is never true is not run:
        its trip would leave the states as they are."""
        pieces = {v: [] for v in node.sliced}
        for sl in (only if only is not None else _slices(total, size)):
            n, trip_run, trip_env = sl.stop - sl.start, run, env
            if n != size and node.region is not None:     # a shorter last slice: the inside sees n
                if isinstance(node.region.size, int):
                    trip_run = Phases(schedule_of(relabelled(node.region, n)), self)
                else:
                    trip_env = _short_env(node.region, env, n)
            trip_env = trip_env.within(node.axis, sl.start, n)
            if skip is not None and skip.skipped(_tile_of(trip_env)):
                continue
            chunk = {v: vals[v][_cut(vals[v], node.position(v), sl)] for v in node.streamed}
            states, made = trip_run.trip({**vals, **chunk}, states, trip_env)
            for v in pieces:
                pieces[v].append(made[v])
        return states, pieces

    def stream(self, node, xs, env, dests, run):
        """Head once, the trip folded over slices of the stream size, the reducers' finish and the tail once.

        A sliced output (``node.sliced``) is made by the maps slice by slice: ``y = y₁ ⧺ y₂ ⧺ …``.
        """
        total, s, inner = bind(node.region, env, "stream")
        if node.parts is not None:
            return self._split(node, xs, env, inner, total, s, run)
        vals = run.head(xs, inner)
        states, pieces = self._trips(node, vals, run.init(inner), inner, total, s, run,
                                     skip=node.skip if env.skip else None)
        for v in node.sliced:
            vals[v] = np.concatenate(pieces[v], axis=node.position(v))
        return run.tail(run.finish(vals, states, inner), inner)

    def _split(self, node, xs, env, inner, total, s, run):
        """A split stream (:mod:`napkin_cat.algorithms.splits`): each part's head and trips from the empty state,
        the parts' states merged in order (a part without a slice adds the empty state: nothing), then the
        finishes and the tail."""
        slices = list(_slices(total, s))
        parts = node.parts if isinstance(node.parts, int) else env.size(node.parts, f"the parts of {node.axis!r}")
        bounds = part_bounds(len(slices), parts)
        merged = vals = None
        for lo, hi in zip(bounds, bounds[1:]):
            vals = run.head(xs, inner)
            if lo == hi:           # a part with no slice: its state is the empty one, the identity of every merge
                continue
            states, _ = self._trips(node, vals, run.init(inner), inner, total, s, run, only=slices[lo:hi])
            merged = states if merged is None else run.merge(merged, states, inner)
        return run.tail(run.finish(vals, merged, inner), inner)

    def merge(self, r, diagram, a, b, env):
        """Two parts' states merged by the reducer's merge diagram (a monoid's empty state is None)."""
        if r.kind == "monoid" and (a is None or b is None):
            return a if b is None else b
        out = self.interpret(diagram, list(a) + list(b), env)
        return list(out) if isinstance(out, (tuple, list)) else [out]

    def init(self, r, env, dests):
        """Each state array filled with its ``init`` (a monoid starts empty: its first part is its state)."""
        if r.kind == "monoid":
            return None
        return [np.full(tuple(env.size(a.size, f"axis {a.name!r} of the state {s.name!r}") for a in s.array.axes),
                        s.init) for s in r.state]

    def monoid(self, r, state, xs, env):
        """``combine(state, F(chunk))``."""
        part = run_primitive(r.op.box, xs, env)[0]
        return [part] if state is None else [r.accumulator.combine(state[0], part)]

    def step(self, r, state, xs, env):
        """``B(state, chunk)``."""
        return self.interpret(r.step, list(state) + list(xs), env)

    def finish(self, r, state, env, dests):
        return self.interpret(r.finish, state, env)

    def advance_kernel(self, node, state, xs, env):
        """A kernel's inside advanced as is (its Loads and Saves are identities)."""
        return advance(node.child, self, state, xs, env)

    def advance_grid(self, node, state, xs, env):
        """The inside advanced on each group's slice of the state and of the inputs."""
        box = node.region
        total, g, inner = bind(box, env, "group")
        pos_in = [arr.names.index(box.axis) if box.axis in arr.names else None for arr in box.dom.inside]
        pos_st = [s.array.names.index(box.axis) for s in node.state]
        new = [np.array(x, copy=True) for x in state]
        for sl in _slices(total, g):
            n = sl.stop - sl.start
            group_env = _short_env(box, inner, n) if n != g and not isinstance(box.size, int) else inner
            chunk = [x if p is None else x[_cut(x, p, sl)] for x, p in zip(xs, pos_in)]
            res = advance(node.short_child(n), self, [x[_cut(x, p, sl)] for x, p in zip(new, pos_st)], chunk,
                          group_env.within(box.axis, sl.start, n))
            for x, p, y in zip(new, pos_st, res):
                x[_cut(x, p, sl)] = y
        return new

    def advance_loop(self, node, state, xs, env, run):
        """A sub-loop's head, then its trips over the slice (a diagram's: one trip)."""
        s = node.schedule
        vals = run.head(xs, env)
        total = max([vals[v].shape[s.position(v)] for v in s.streamed] + [1])     # the slice's real extent
        size = total
        if node.region is not None:
            _, size, env = bind(node.region, env, "stream")
        parts, _ = self._trips(s, vals, node.split(state), env, total, size, run)
        return node.join(parts)


def _tile_of(env):
    """The positions each axis's tile covers at ``env``: its partition's ``(start, extent)``, or the whole axis
    (:meth:`~napkin_cat.semantics.env.Env.interval`: a mapped axis's smallest interval holding them)."""
    return env.interval


def run_kernel(box, xs: list, env, interpret) -> list:
    """A kernel computes what its inside computes (its Loads and Saves are identities); so does any region
    registered with this meaning."""
    return interpret(box.arg, xs, env)


def run_grid(box, xs: list, env, interpret) -> list:
    """``split_a ; (F ⊗ … ⊗ F) ; join_a``: the inside on every group of the axis, results joined."""
    return fold_region(box, Numpy(interpret), xs, env)


def run_stream(box, xs: list, env, interpret) -> list:
    """Head once, the trip folded over slices of the stream size, the tail once."""
    return fold_region(box, Numpy(interpret), xs, env)


def run_shard(box, xs: list, env, interpret) -> list:
    """The inside on every device's shard of the axis, the devices in lockstep."""
    return fold_region(box, Numpy(interpret), xs, env)


#: region kind → its numpy meaning ``run(box, xs, env, interpret)``; a new region registers here.
REGION_SEMANTICS = {"kernel": run_kernel, "grid": run_grid, "stream": run_stream, "shard": run_shard,
                    "ring": run_stream}


def run_region(box: Region, xs: list, env, interpret) -> list:
    """Run a region by its registered meaning, or say that it has none."""
    try:
        run = REGION_SEMANTICS[box.region]
    except (KeyError, AttributeError):
        raise ShapeError(f"{box.name}: no numpy meaning is registered for this region; register "
                         f"run(box, xs, env, interpret) in napkin_cat.semantics.regions.REGION_SEMANTICS "
                         f"(known: {sorted(REGION_SEMANTICS)})") from None
    return run(box, xs, env, interpret)
