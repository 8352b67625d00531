"""Obligations of split streams (``napkin_cat.algorithms.splits``, rule ``split_stream``): every merge ``⊕``
satisfies ``fold(x₁ ⧺ x₂) == fold(x₁) ⊕ fold(x₂)`` on random chunkings, with extreme values (logits up to ±3e3,
means far from zero), and is associative; the rule's obligation (equivalence at random sizes and parts, the
partial states' transfers) holds."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import napkin_cat as nc
from napkin_cat.algorithms.schedule import stream_schedule
from napkin_cat.algorithms.splits import merge_of
from napkin_cat.algorithms.streaming import analyse
from rewrites.splits import split_stream

proves = pytest.mark.proves


def _mean_var():
    b = nc.Builder(nc.types("n d"))
    (X,) = b.inputs
    mu = b(nc.reduce("mean", "n d -> n"), X)
    c = b(nc.elementwise("sub", "n d, n -> n d"), X, mu)
    return b.build(mu, b(nc.reduce("mean", "n d -> n"), b(nc.elementwise("square", "n d"), c)))


REDUCERS = {   # name: (function, streamed axis)
    "sum": (lambda: nc.reduce("sum", "n d -> n"), "d"),
    "max": (lambda: nc.reduce("max", "n d -> n"), "d"),
    "logsumexp": (lambda: nc.reduce("logsumexp", "n d -> n"), "d"),
    "mean": (lambda: nc.reduce("mean", "n d -> n"), "d"),
    "mean and variance": (_mean_var, "d"),
    "softmax-contraction": (nc.library.attention, "x"),
}


def _schedule(name):
    f, axis = REDUCERS[name]
    return stream_schedule(analyse(nc.kernel(f()).boxes[0].arg, axis)), f()


def _fold(sched, xs, axis_pos, cuts, env):
    """Each reducer's state after the trips on ``xs[cuts[0]:cuts[-1]]`` (from its empty state), cut at ``cuts``."""
    from napkin_cat.semantics.evaluate import evaluate
    states = [None if r.kind == "monoid" else
              [np.full(tuple(env[str(a.size)] if not isinstance(a.size, int) else a.size for a in s.array.axes),
                       s.init) for s in r.state] for r in sched.reducers]
    for lo, hi in zip(cuts, cuts[1:]):
        chunk = [x if p is None else np.take(x, range(lo, hi), axis=p) for x, p in zip(xs, axis_pos)]
        vals = dict(zip(sched.dom, chunk))
        for item in (*sched.head, *sched.trip):
            if hasattr(item, "box"):
                out = evaluate(nc.Diagram.id(item.box.dom).then(item.box), *[vals[v] for v in item.ins])
                vals.update(zip(item.outs, out if isinstance(out, tuple) else (out,)))
                continue
            r = item
            ins = [vals[v] for v in r.inputs]
            if r.kind == "monoid":
                part = evaluate(nc.Diagram.id(r.op.box.dom).then(r.op.box), *ins)
                states[r.k] = [part] if states[r.k] is None else [r.accumulator.combine(states[r.k][0], part)]
            else:
                out = evaluate(r.step, *states[r.k], *ins)
                states[r.k] = list(out) if isinstance(out, tuple) else [out]
    return states


def _merge(sched, a, b):
    out = []
    for r, d, x, y in zip(sched.reducers, sched.merges, a, b, strict=True):
        got = nc.evaluate(d, *x, *y)
        out.append(list(got) if isinstance(got, tuple) else [got])
    return out


def _close(a, b):
    for x, y in zip(a, b, strict=True):
        for u, v in zip(x, y, strict=True):
            np.testing.assert_allclose(u, v, rtol=1e-9, atol=1e-9 * max(1.0, float(np.max(np.abs(v)))))


@proves("split_stream")
@pytest.mark.parametrize("name", list(REDUCERS))
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_every_merge_folds_two_parts_into_the_whole(name, data):
    sched, f = _schedule(name)
    axis = REDUCERS[name][1]
    n = data.draw(st.integers(2, 12))
    rows = data.draw(st.integers(1, 3))
    rng = np.random.default_rng(data.draw(st.integers(0, 10 ** 6)))
    env = {a.name: rows for arr in f.dom.inside for a in arr.axes if a.name != axis}
    env[axis] = n
    scale, shift = data.draw(st.sampled_from([1.0, 30.0, 1e-3])), data.draw(st.sampled_from([0.0, 1e3]))
    xs = [rng.normal(size=tuple(env[a.name] for a in arr.axes)) * scale + shift for arr in f.dom.inside]
    pos = [arr.names.index(axis) if axis in arr.names else None for arr in f.dom.inside]
    cut = sorted(data.draw(st.sets(st.integers(1, n - 1), min_size=1, max_size=3)))
    whole = _fold(sched, xs, pos, [0, n], env)
    parts = [_fold(sched, xs, pos, [lo, hi], env) for lo, hi in zip([0, *cut], [*cut, n])]
    left = parts[0]
    for p in parts[1:]:
        left = _merge(sched, left, p)
    _close(left, whole)
    if len(parts) >= 3:                      # associativity: (a ⊕ b) ⊕ c == a ⊕ (b ⊕ c)
        right = _merge(sched, parts[1], parts[2])
        _close(_merge(sched, _merge(sched, parts[0], parts[1]), parts[2]), _merge(sched, parts[0], right))
    assert all(merge_of(r) is not None for r in sched.reducers)


@proves("split_stream")
def test_split_stream_is_sound():
    proof = split_stream.obligation.discharge(split_stream, trials=16)
    assert proof.rewrites >= 16 and proof.max_error < 1e-9 and proof.cost_checked
