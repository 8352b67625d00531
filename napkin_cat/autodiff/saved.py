"""What the forward pass saved, read by the gradient diagram (``nc.grad(f, saved=True)``): two laws.

With ``saved`` the gradient diagram takes f's outputs as inputs and reads them instead of recomputing them
(``value(v)`` of :func:`~napkin_cat.autodiff.grad.grad`).  Two laws let it read them where they are not
the value asked for itself but determine it, both recognised from the arrays on the wires and f's trace:

(i) **the adjoint identity** (SoftMax's VJP).  SoftMax's product pairs its cotangent with its output over
    the SoftMax axes X: ``s = Σ_X ȳ ⊙ y``.  When ȳ is (only) the cotangent that a contraction
    ``z = Σ y · V · …`` sent back to y (``ȳ = Aᵀz̄`` for the linear map ``A : y ↦ z``) and z was saved::

        Σ_X ȳ ⊙ y = ⟨Aᵀz̄, y⟩_X = ⟨z̄, Ay⟩ = Σ_{axes of z not in y} z̄ ⊙ z

    provided the contraction sums exactly the axes X of y and keeps y's other axes (A does not mix the rows
    over which the pairing is taken).  In attention's backward: ``D = rowsum(dP ∘ P) = rowsum(dO ∘ O)``, a
    pass over q×d instead of one over q×x×d.

(ii) **SoftMax from a saved log-sum-exp**.  When f saved ``L = logsumexp_X(β·S)`` (a ``reduce_logsumexp``
    over the SoftMax axes X of S, or of ``scale_β(S)``) of the scores S whose SoftMax_β the gradient needs::

        softmax_β(S) = exp(β·S − L)            (L broadcast over X; −∞ scores give 0)

    so the probabilities are recomputed from S and the one value per row L, not from a row's maximum and sum.

Otherwise the current forms are kept.

>>> import numpy as np, napkin_cat as nc
>>> f = nc.library.attention(q=3, x=4, d=2, lse=True)
>>> g = nc.grad(f, saved=True, aux=1)              # Q, K, V, O, L, dO -> dQ, dK, dV
>>> [str(a) for a in g.dom.inside]
['q[3]×d[2]', 'x[4]×d[2]', 'x[4]×d[2]', 'q[3]×d[2]', 'q[3]', 'q[3]×d[2]']
>>> kinds = [(b.data.kind, b.dom.inside[0].names) for b in g.boxes if getattr(b, "data", None) is not None]
>>> [names for k, names in kinds if k == "reduce_sum"]            # (i): D = Σ_d dO ⊙ O, not Σ_x dP ⊙ P
[('q', 'd')]
>>> [k for k, _ in kinds if k in ("softmax", "reduce_logsumexp", "exp")]     # (ii): P = exp(β·S − L)
['exp']
>>> rng = np.random.default_rng(0)
>>> Q, K, V, dO = (rng.normal(size=s) for s in ((3, 2), (4, 2), (4, 2), (3, 2)))
>>> O, L = nc.evaluate(f, Q, K, V)
>>> all(np.allclose(a, b) for a, b in zip(nc.evaluate(g, Q, K, V, O, L, dO),
...                                       nc.evaluate(nc.grad(nc.library.attention()), Q, K, V, dO)))
True
"""
from __future__ import annotations

import sympy

from napkin_cat.syntax.array import Array
from napkin_cat.syntax.sizes import vanishes


class Saved:
    """f's saved outputs (value ids) and the two laws above, for one gradient diagram under construction."""

    def __init__(self, ops, producer: dict, arrays: dict, ids):
        self.ops, self.producer, self.arrays, self.ids = ops, producer, arrays, set(ids)
        self.origin: dict = {}          # (value, cotangent wire id) -> (z, z̄): the contraction z it came from

    def _made(self, v, kind: str):
        """The op making ``v`` if it is of ``kind`` (None otherwise, or for an input of f)."""
        k = self.producer.get(v)
        if k is None or getattr(getattr(self.ops[k][0], "data", None), "kind", None) != kind:
            return None
        return self.ops[k]

    # ------------------------------------------------------------------ (ii) SoftMax from log-sum-exp
    def logsumexp_of(self, box, ins):
        """The saved ``L = logsumexp_X(β·S)`` of SoftMax_β over X of ``S = ins[0]`` (a value id), or None."""
        (s,) = ins
        rows = set(box.data.weave_names)
        beta = sympy.sympify(box.data.param("beta", 1))
        for v in sorted(self.ids, key=str):
            op = self._made(v, "reduce_logsumexp")
            if op is None or len(op[1]) != 1:
                continue
            u = op[1][0]
            if set(self.arrays[u].names) != set(self.arrays[s].names) or set(self.arrays[v].names) != rows:
                continue
            if u == s and beta == 1:
                return v, u
            scale = self._made(u, "scale")
            if scale is not None and scale[1] == [s] and vanishes(
                    sympy.sympify(scale[0].data.param("c", 1)) - beta):
                return v, u
        return None

    def softmax(self, ctx, box, ins, outs):
        """``exp(β·S − L)`` for the SoftMax ``box`` (law ii), or None where f saved no log-sum-exp of its S."""
        if getattr(getattr(box, "data", None), "kind", None) != "softmax":
            return None
        found = self.logsumexp_of(box, ins)
        if found is None:
            return None
        lse, scaled = found
        u = ctx.x(scaled)
        y = ctx.ew("exp", ctx.box("sub", [u, ctx.x(lse)], u.array.axes))
        out = self.arrays[outs[0]]
        y = ctx.b.convert(y, out.dtype)
        return y if y.array.names == out.names else ctx.permute(y, out)

    # ------------------------------------------------------------------ (i) the adjoint identity
    def note(self, operand, wire, z, zbar):
        """``wire`` is the cotangent the contraction making ``z`` (cotangent ``zbar``) sent to ``operand``."""
        if z in self.ids:
            self.origin[operand, wire.id] = (z, zbar)

    def follow(self, operand, old, new):
        """``new`` is ``old`` permuted: the same contribution to ``operand``."""
        if (operand, old.id) in self.origin:
            self.origin[operand, new.id] = self.origin[operand, old.id]

    def pairing(self, ctx, box, ins, outs, contributions):
        """``Σ_{z ∖ y} z̄ ⊙ z`` for ``Σ_X ȳ ⊙ y`` of the SoftMax ``box`` (law i), or None where it does not hold."""
        if not contributions or len(contributions) != 1 or (outs[0], contributions[0].id) not in self.origin:
            return None
        z, zbar = self.origin[outs[0], contributions[0].id]
        y = self.arrays[outs[0]]
        over = set(y.names) - set(box.data.weave_names)
        if set(y.names) - set(self.arrays[z].names) != over:
            return None
        x = self.arrays[ins[0]]
        rows = tuple(a for a in x.axes if a.name in box.data.weave_names)
        return ctx.sum_to(ctx.ew("mul", zbar, ctx.x(z)), Array(rows, x.level, zbar.array.dtype))
