"""Split streams: a stream's slices cut into ``P`` parts run by parallel blocks, then their states merged.

``Stream(b, s, parts=P)`` runs as ``P`` blocks (FlashDecoding, split-K).  Part ``p`` runs the head and the
trips on slices ``⌈pT/P⌉ … ⌈(p+1)T/P⌉ − 1`` of the ``T = ⌈b/s⌉`` slices from the empty state, and writes its
state (its *partial*) to global memory; the combine reads the ``P`` partials back, folds them
with each reducer's **merge** ``⊕`` (a diagram ``state ⊗ state → state``), then runs the finishes and the tail
once.  The law that makes it the stream (proved in ``proofs/test_splits.py`` for every merge)::

    fold_B(init, x₁ ⧺ x₂) == fold_B(init, x₁) ⊕ fold_B(init, x₂)          (⊕ associative)

so ``finish(⊕_p fold_B(init, part_p)) == finish(fold_B(init, x))``: the split computes what the stream does.

============================  ==========================================================================
reducer                       merge ``⊕``
============================  ==========================================================================
a monoid (sum, max, min,      its accumulator: ``a ⊕ b = a + b`` (``max``, ``min``)
contraction)
online log-sum-exp            ``μ = max(μ₁, μ₂)``, ``z = e^{μ₁−μ} z₁ + e^{μ₂−μ} z₂``
online SoftMax-contraction    the same, and ``o = e^{μ₁−μ} o₁ + e^{μ₂−μ} o₂`` (FlashDecoding's combine)
running mean (and variance)   Chan, Golub and LeVeque's pairwise update (:mod:`.moments`)
============================  ==========================================================================

A reducer whose form gives no merge is not split (a RewriteError names it).  Cost (each functor's stream
handler): the head ``P`` times, every trip once, the partials written and read back (``2·P·|state|``
transfers at the stream's level), ``P − 1`` merges, the finishes and the tail once.  A split stream that is the
whole of its kernel launches ``P`` blocks per group (the one count of blocks: :mod:`.launches`).

>>> import napkin_cat as nc
>>> d = nc.group(nc.stream(nc.library.attention(), "x", "s_x", parts="P"), "q", "g_q")
>>> blocks(d, {"q": 1, "x": 64, "d": 8, "g_q": 1, "s_x": 4, "P": 8})
8
"""
from __future__ import annotations

from napkin_cat.algorithms.accumulators import build_state_diagrams
from napkin_cat.algorithms.launches import blocks  # noqa: F401 (the one count of blocks, where callers found it)
from napkin_cat.errors import NapkinError, RewriteError
from napkin_cat.syntax.construct import elementwise, transfer


def _sig(arr) -> str:
    return " ".join(arr.names) or "()"   # () is an array without axes


def _fmt(*arrays) -> dict:
    return dict(level=arrays[0].level, dtype=arrays[0].dtype,
                sizes={a.name: a.size for arr in arrays for a in arr.axes})


def _bin(b, name, u, v, out=None):
    """``name(u, v)`` elementwise, ``v`` broadcast to ``u``'s axes (or ``out``'s), in the wider of their number
    formats (a bf16 output state rescaled by an fp32 factor is rescaled in fp32)."""
    wide = max((u.array.dtype, v.array.dtype), key=lambda t: t.bytes)
    u, v = b.convert(u, wide), b.convert(v, wide)
    a, c = u.array, v.array
    o = out or a
    return b(elementwise(name, f"{_sig(a)}, {_sig(c)} -> {_sig(o)}", **_fmt(o, a, c)), u, v)


def _as(b, wires, like):
    """Each of ``wires`` in the number format of the state it merges into (``like``)."""
    return [b.convert(w, s.array.dtype) for w, s in zip(wires, like)]


def _exp(b, w):
    return b(elementwise("exp", _sig(w.array), **_fmt(w.array)), w)


def online_merge(b, st1, st2):
    """``(μ, z, o…)`` of two parts: rescale each by ``e^{μᵢ−μ}`` and add (μ finite: a part holds a value)."""
    mu1, z1, *o1 = st1
    mu2, z2, *o2 = st2
    mu = _bin(b, "max", mu1, mu2)
    d1, d2 = _exp(b, _bin(b, "sub", mu1, mu)), _exp(b, _bin(b, "sub", mu2, mu))
    z = _bin(b, "add", _bin(b, "mul", z1, d1), _bin(b, "mul", z2, d2))
    return _as(b, [mu, z] + [_bin(b, "add", _bin(b, "mul", a, d1), _bin(b, "mul", c, d2)) for a, c in zip(o1, o2)],
               st1)


def moments_merge(b, st1, st2):
    """``(k, m[, M2])`` of two parts by the pairwise update: ``δ = m₂ − m₁``, ``m = m₁ + δ k₂/k``,
    ``M2 = M2₁ + M2₂ + δ² k₁ k₂ / k``."""
    k1, m1, *r1 = st1
    k2, m2, *r2 = st2
    k = _bin(b, "add", k1, k2)
    delta = _bin(b, "sub", m2, m1)
    w = _bin(b, "div", k2, k)
    m = _bin(b, "add", m1, _bin(b, "mul", delta, w))
    if not r1:
        return [k, m]
    sq = b(elementwise("square", _sig(delta.array), **_fmt(delta.array)), delta)
    cross = _bin(b, "mul", _bin(b, "mul", sq, k1), w)
    return [k, m, _bin(b, "add", _bin(b, "add", r1[0], r2[0]), cross)]


#: accumulator form name → ``merge(builder, state wires, state wires) -> state wires``; a user's form adds its own
MERGES = {"logsumexp_online": online_merge, "softmax_contraction_to_unscaled": online_merge,
          "mean_online": moments_merge, "mean_variance_online": moments_merge}


def merge_of(r):
    """The merge diagram ``state ⊗ state → state`` of a reducer of a stream schedule, or RewriteError."""
    if r.kind == "monoid":
        (s,) = r.state
        op = r.accumulator.merge
        if op is None:
            raise RewriteError(f"{r.name}: its accumulator {r.accumulator.name!r} declares no merge, so the stream is "
                               f"not split across blocks: give it merge=<the elementwise kind computing its combine>")
        d, _ = build_state_diagrams(f"{r.name} merge", r.state, [s.array], lambda b, st, x: [_bin(b, op, st[0], x)],
                                    lambda b, st: st[0], [s.array])
        return d
    if r.kind == "nested":
        region = r.advance.region
        inside = getattr(region, "name", None) or "a diagram run on each slice"
        level = getattr(r.advance, "level", None)
        instead = (f"build the level-{level} kernel first and split the stream inside it (nc.kernel(f, level={level}) "
                   f"before nc.stream(..., parts=P)), or" if level is not None else "")
        raise RewriteError(f"the stream's trip advances a region nested in it ({inside}) on its state, and two parts' "
                           f"states of a nested region have no merge, so the stream is not split across blocks: "
                           f"{instead} keep this stream unsplit")
    fn = MERGES.get(r.name)
    if fn is None or r.kind != "step":
        raise RewriteError(f"the stream's reducer {r.name!r} ({r.kind}) has no merge of two partial states, so its "
                           f"stream is not split across blocks; the merges known: monoids and {sorted(MERGES)} "
                           f"(napkin_cat.algorithms.splits.MERGES)")
    n = len(r.state)
    d, _ = build_state_diagrams(f"{r.name} merge", r.state, [s.array for s in r.state],
                                lambda b, st, *other: fn(b, list(st), list(other)), lambda b, st: st[:1],
                                [r.state[0].array])
    assert len(d.cod) == n
    return d


def partial_moves(schedule) -> list:
    """The Save (and Load) boxes that write each reducer's state out of its level and read it back: one partial's
    transfers (a split pays them ``P`` times).  The plan keeps the partials in global memory
    (:mod:`napkin_cat.plan.partials`); a move counts at its deeper end, the state's level, wherever it goes."""
    out = []
    for r in schedule.reducers:
        for s in r.state:
            arr = s.array
            if arr.level < 1:
                continue
            out.append(transfer("save", arr).boxes[0])
            out.append(transfer("load", arr.replace(level=arr.level - 1)).boxes[0])
    return out


def part_bounds(trips: int, parts: int) -> list:
    """Where part ``p`` starts among ``trips`` slices: ``⌈p·T/P⌉`` for p = 0 … P (the plan's bounds too,
    :mod:`napkin_cat.plan.partials`).  With more parts than slices some parts hold none, part 0 never: such a
    block writes the empty state, which every merge into a state that holds a value leaves unchanged.

    >>> part_bounds(2, 4)
    [0, 1, 1, 2, 2]
    """
    if not isinstance(parts, int) or parts < 1:
        raise NapkinError(f"a split stream runs in 1 or more parts, got {parts}")
    return [-(-p * trips // parts) for p in range(parts + 1)]


def check_splittable(schedule) -> None:
    """RewriteError unless every reducer has a merge and the stream neither writes slices nor skips trips."""
    if schedule.sliced:
        raise RewriteError("a sliced stream writes its output slice by slice: there is no state to split")
    if schedule.skip is not None:
        raise RewriteError("a stream that skips masked trips is not split (a part could hold no value)")
    if not schedule.reducers:
        raise RewriteError(f"the stream along {schedule.axis!r} reduces nothing: there is no state to split")
    for r in schedule.reducers:
        merge_of(r)


__all__ = ["MERGES", "merge_of", "online_merge", "moments_merge", "partial_moves", "part_bounds",
           "check_splittable", "blocks"]
