"""The built-in online forms of the mean and of the mean and variance: a running count, mean and sum of squares.

``reduce_mean`` has no monoid (a mean of means weighs each by its count), so it streams with its count in the
state.  Over the streamed axis alone, folding chunk ``b`` (its count ``n_b``, mean ``x̄_b`` and sum of squared
deviations ``M2_b``) into the state ``(k, m, M2)`` of the chunks before is Chan, Golub and LeVeque's pairwise
update, Welford's when ``n_b = 1``::

    k′ = k + n_b      δ = x̄_b − m      m′ = m + δ·n_b/k′      M2′ = M2 + M2_b + δ²·k·n_b/k′

* ``mean_online``: ``mean_x X`` alone; state ``(k, m)``; the finish is ``m``;
* ``mean_variance_online``: ``μ = mean_x X`` read by ``X − μ`` whose only reader is ``square``, whose only reader is
  ``mean_x`` (the variance, as a LayerNorm writes it); state ``(k, m, M2)``; the finish is ``(m, M2/k)``.

Each chunk's deviations are taken from its own mean, so the variance never subtracts two large sums (the one-pass
``E[x²] − E[x]²`` loses every digit when the mean dwarfs the spread).  The state starts at ``(0, 0, 0)``: the first
chunk's weight ``n_b/k′`` is 1.  Their obligation, proved in ``proofs/test_moments.py`` over random chunkings with
means far from zero::

    finish(B(… B(B((0, 0, 0), x₁), x₂) …, xₙ))  ==  (mean, variance) of x₁ ⧺ … ⧺ xₙ

>>> import napkin_cat as nc
>>> from napkin_cat.algorithms.streaming import analyse
>>> (r,) = analyse(nc.reduce("mean", "n d -> n"), "d").reducers
>>> r.kind, [(s.name, s.init) for s in r.state]
('mean_online', [('k', 0.0), ('m', 0.0)])
>>> b = nc.Builder(nc.types("n d")); (X,) = b.inputs
>>> mu = b(nc.reduce("mean", "n d -> n"), X)
>>> c = b(nc.elementwise("sub", "n d, n -> n d"), X, mu)
>>> var = b(nc.reduce("mean", "n d -> n"), b(nc.elementwise("square", "n d"), c))
>>> [(r.kind, len(r.ops)) for r in analyse(b.build(mu, var), "d").reducers]
[('mean_variance_online', 4)]
"""
from __future__ import annotations

from napkin_cat.algorithms.accumulators import Binding, StateArray, build_state_diagrams, label, register
from napkin_cat.syntax.relabel import remembered
from napkin_cat.syntax.construct import elementwise, reduce


def _sig(names) -> str:
    return " ".join(names) or "()"   # () is an array without axes


def _fmt(*arrays) -> dict:
    first = arrays[0]
    return dict(level=first.level, dtype=first.dtype, sizes={a.name: a.size for arr in arrays for a in arr.axes})


def _alone(box, axis):
    """The reduced axes of a reduction box, or the reason it is not over ``axis`` alone."""
    core = [a.name for a in box.dom.inside[0].axes if a.name not in box.data.weave_names]
    return None if core == [axis] else (f"{label(box)} over {core} streams along one of its axes only when it "
                                        f"reduces that axis alone; here it reduces {core}")


class _Moments:
    """The chunk statistics and the pairwise update, as boxes of a :class:`~napkin_cat.syntax.builder.Builder`."""

    def __init__(self, x, rows):
        self.x, self.rows = x, rows
        self.red = f"{_sig(x.names)} -> {_sig(rows.names)}"
        self.fx, self.fr = _fmt(x, rows), _fmt(rows)

    def binary(self, b, name, u, v):
        r = _sig(self.rows.names)
        return b(elementwise(name, f"{r}, {r} -> {r}", **self.fr), u, v)

    def chunk(self, b, chunk):
        """``(n_b, x̄_b)``: the chunk's count and mean."""
        return b(reduce("count", self.red, **self.fx), chunk), b(reduce("mean", self.red, **self.fx), chunk)

    def squares(self, b, chunk, mean):
        """``M2_b``: the chunk's sum of squared deviations from its own mean."""
        x, r = _sig(self.x.names), _sig(self.rows.names)
        dev = b(elementwise("sub", f"{x}, {r} -> {x}", **self.fx), chunk, mean)
        return b(reduce("sum", self.red, **self.fx), b(elementwise("square", x, **self.fx), dev))

    def merge_mean(self, b, k, m, n, mean):
        """``(k′, m′, δ, n_b/k′)``: the count and mean after the chunk."""
        k2 = self.binary(b, "add", k, n)
        delta = self.binary(b, "sub", mean, m)
        w = self.binary(b, "div", n, k2)
        return k2, self.binary(b, "add", m, self.binary(b, "mul", delta, w)), delta, w


class MeanForm:
    """The online form of ``reduce_mean`` over the streamed axis alone: state ``(k, m)``."""

    name = "mean_online"
    kind = "reduce_mean"

    def match(self, plan, i: int):
        box, ins, outs = plan.ops[i]
        why = _alone(box, plan.axis)
        if why:
            return why
        state, step_d, finish_d = remembered(box, (self, plan.axis), lambda: self._diagrams(box))
        return Binding(self, (i,), (ins[0],), state, step_d, finish_d, (outs[0],))

    def _diagrams(self, box):
        """``(state, step, finish)`` of the online mean of ``box``'s input (its state ``(k, m)``)."""
        x, rows = box.dom.inside[0], box.cod.inside[0]
        mo = _Moments(x, rows)
        state = (StateArray("k", rows, 0.0), StateArray("m", rows, 0.0))

        def step(b, st, chunk):
            k, m = st
            n, mean = mo.chunk(b, chunk)
            k2, m2, _, _ = mo.merge_mean(b, k, m, n, mean)
            return [k2, m2]
        return (state, *build_state_diagrams(self.name, state, [x], step, lambda b, st: st[1], [rows]))


class MeanVarianceForm:
    """The online form of ``μ = mean_x X ; mean_x (X − μ)²`` (see the module docstring): state ``(k, m, M2)``."""

    name = "mean_variance_online"
    kind = "reduce_mean"

    def _chain(self, plan, i):
        """``(sub, square, mean)`` op indices of the variance read off ``μ``, or the reason there is none."""
        box, ins, outs = plan.ops[i]
        axis = plan.axis

        def only(v, kind):
            users = plan.uses.get(v, [])
            if len(users) == 1 and users[0][0] >= 0 and getattr(plan.ops[users[0][0]][0], "data", None) is not None \
                    and plan.ops[users[0][0]][0].data.kind == kind:
                return users[0]
            return None
        for j, port in plan.uses.get(outs[0], []):
            sub = plan.ops[j] if j >= 0 else None
            if sub is None or getattr(sub[0], "data", None) is None or sub[0].data.kind != "sub" or port != 1 \
                    or sub[1][0] != ins[0]:
                continue
            sq = only(sub[2][0], "square")
            mean = only(plan.ops[sq[0]][2][0], "reduce_mean") if sq else None
            if mean and _alone(plan.ops[mean[0]][0], axis) is None:
                return j, sq[0], mean[0]
        return f"{label(box)}'s mean is not centred, squared and averaged over {axis!r} (a variance) alone"

    def match(self, plan, i: int):
        box, ins, outs = plan.ops[i]
        why = _alone(box, plan.axis)
        if why:
            return why
        chain = self._chain(plan, i)
        if isinstance(chain, str):
            return chain
        sub, sq, var = chain
        var_out = plan.ops[var][2][0]
        state, step_d, finish_d = remembered(box, (self, plan.axis, plan.arrays[var_out]),
                                             lambda: self._diagrams(box, plan.arrays[var_out]))
        return Binding(self, (i, sub, sq, var), (ins[0],), state, step_d, finish_d, (outs[0], var_out))

    def _diagrams(self, box, variance):
        """``(state, step, finish)`` of the online mean and ``variance`` of ``box``'s input (state ``(k, m, M2)``)."""
        x, rows = box.dom.inside[0], box.cod.inside[0]
        mo = _Moments(x, rows)
        state = (StateArray("k", rows, 0.0), StateArray("m", rows, 0.0), StateArray("M2", rows, 0.0))

        def step(b, st, chunk):
            k, m, m2 = st
            n, mean = mo.chunk(b, chunk)
            k2, mnew, delta, w = mo.merge_mean(b, k, m, n, mean)
            cross = mo.binary(b, "mul", mo.binary(b, "mul", b(elementwise("square", _sig(rows.names), **mo.fr),
                                                                delta), k), w)
            return [k2, mnew, mo.binary(b, "add", mo.binary(b, "add", m2, mo.squares(b, chunk, mean)), cross)]

        def finish(b, st):
            k, m, m2 = st
            return m, mo.binary(b, "div", m2, k)

        return (state, *build_state_diagrams(self.name, state, [x], step, finish, [rows, variance]))


MEAN_VARIANCE = register(MeanVarianceForm())
MEAN = register(MeanForm())

__all__ = ["MeanForm", "MeanVarianceForm", "MEAN", "MEAN_VARIANCE"]
