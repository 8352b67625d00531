"""The built-in online forms: log-sum-exp streamed by its running max and rescaled sum.

``reduce_logsumexp`` over the streamed axis streams as SoftMax does (paper Table 4's SoftMax₁ without its
output): the state is the running max ``μ`` (−∞ for an empty stream) and the rescaled sum ``z`` (0); each
trip runs ``(μ, z) ← logsumexp_online(x, μ, z)``; the finish is ``μ + log z``.  Its obligation, proved in
``proofs/test_online_logsumexp.py`` over random chunkings with extreme and masked (−∞) logits::

    μ + log z  after  B(… B(B((−∞, 0), x₁), x₂) …, xₙ)  ==  log Σ exp(x₁ ⧺ … ⧺ xₙ)

A slice of −∞ leaves ``(μ, z)`` as it is (``neutral``): a masked slice may be skipped (:mod:`.skipping`).

>>> import napkin_cat as nc
>>> from napkin_cat.algorithms.streaming import analyse
>>> (r,) = analyse(nc.reduce("logsumexp", "n v -> n"), "v").reducers
>>> r.kind, [(s.name, s.init) for s in r.state]
('logsumexp_online', [('μ', -inf), ('z', 0.0)])
"""
from __future__ import annotations

import math

from napkin_cat.algorithms.accumulators import Binding, StateArray, build_state_diagrams, label, register
from napkin_cat.syntax.relabel import remembered
from napkin_cat.syntax.construct import apply, elementwise


def _sig(names) -> str:
    return " ".join(names) or "()"   # () is an array without axes (a full reduction's rows)


def _sizes(*arrays) -> dict:
    return {a.name: a.size for arr in arrays for a in arr.axes}


class LogSumExpForm:
    """The online form of ``reduce_logsumexp`` over the streamed axis alone (see the module docstring)."""

    name = "logsumexp_online"
    kind = "reduce_logsumexp"

    @staticmethod
    def neutral(consts) -> bool:
        """A trip whose logits are all −∞ leaves the state unchanged."""
        return consts[0] == -math.inf

    def match(self, plan, i: int):
        box, ins, outs = plan.ops[i]
        axis = plan.axis
        x, out = box.dom.inside[0], box.cod.inside[0]
        core = [a.name for a in x.axes if a.name not in box.data.weave_names]
        if core != [axis]:
            return (f"{label(box)} over {core} streams along one of its axes only when it reduces that axis alone; "
                    f"here it reduces {core}")
        state, step_d, finish_d = remembered(box, (self, axis), lambda: self._diagrams(x, out, axis))
        return Binding(self, (i,), (ins[0],), state, step_d, finish_d, (outs[0],))

    def _diagrams(self, x, out, axis):
        """``(state, step, finish)`` of the online logsumexp of ``x`` along ``axis`` into ``out``."""
        rows = _sig(out.names)
        fmt = dict(level=out.level, dtype=out.dtype, **_sizes(out))
        state = (StateArray("μ", out, -math.inf), StateArray("z", out, 0.0))
        step_box = apply("logsumexp_online", f"{_sig(x.names)}, {rows}, {rows} -> {rows}, {rows}", core=[axis],
                         level=x.level, dtype=x.dtype, out_dtype=out.dtype, **_sizes(x, out))

        def step(b, st, chunk):
            mu, z = b(step_box, chunk, *st)
            return [mu, z]

        def finish(b, st):
            mu, z = st
            return b(elementwise("add", f"{rows}, {rows} -> {rows}", **fmt), mu,
                     b(elementwise("log", rows, **fmt), z))
        return (state, *build_state_diagrams(self.name, state, [x], step, finish, [out]))


LOGSUMEXP = register(LogSumExpForm())

__all__ = ["LogSumExpForm", "LOGSUMEXP"]
