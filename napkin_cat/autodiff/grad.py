"""``nc.grad``: reverse-mode differentiation as a functor from diagrams to diagrams.

For ``f : X₁ ⊗ … ⊗ Xₙ → Y₁ ⊗ … ⊗ Yₘ`` the gradient diagram is the vector-Jacobian product::

    grad(f) : X₁ ⊗ … ⊗ Xₙ ⊗ Y₁ ⊗ … ⊗ Yₘ → X_{w₁} ⊗ … ⊗ X_{wₖ}        (w = wrt, all inputs by default)
    grad(f)(x, ȳ) = (∂⟨ȳ, f(x)⟩/∂x_w)_w

built structurally from the values view of ``f`` (:func:`~napkin_cat.syntax.wiring.trace_values`): the
boxes are visited in reverse, each box's cotangents are its vector-Jacobian product, itself a diagram
(:mod:`.vjps`), and the wiring transposes: a value read twice (a copy) sums its cotangents, a value never
read (a discard) has none (a zero where an input needs one).  The forward values a product needs are
recomputed in the gradient diagram, and only those (a box whose value no cotangent reads is not emitted)::

    grad(f >> g) reads grad(g) at f's outputs, then grad(f)        (the chain rule, by construction)

The result is an ordinary diagram: evaluable, costable, rewritable, drawable.  ``aux = k`` leaves f's last k
outputs without a cotangent; ``saved=True`` also takes f's outputs as the forward pass saved them (after f's
inputs, before the cotangents) and reads them, with the laws of :mod:`.saved` (FlashAttention-2's backward
from ``attention(lse=True)``: D = rowsum(dO ∘ O), P = exp(β·S − L)).

>>> import numpy as np, napkin_cat as nc
>>> f = nc.einsum("a b, b -> a", a=2, b=3)
>>> g = grad(f)
>>> g.dom, g.cod
(Ty(Array(a[2]×b[3]), Array(b[3]), Array(a[2])), Ty(Array(a[2]×b[3]), Array(b[3])))
>>> A, v, ybar = np.arange(6.).reshape(2, 3), np.ones(3), np.array([1., 2.])
>>> dA, dv = nc.evaluate(g, A, v, ybar)
>>> dA.tolist(), dv.tolist()                  # ȳ vᵀ and Aᵀ ȳ
([[1.0, 1.0, 1.0], [2.0, 2.0, 2.0]], [6.0, 9.0, 12.0])
"""
from __future__ import annotations

from napkin_cat.autodiff.saved import Saved
from napkin_cat.autodiff.vjps import Context, vjp_of
from napkin_cat.errors import GradError
from napkin_cat.syntax.adapter import Diagram, Ty
from napkin_cat.syntax.builder import Builder
from napkin_cat.syntax.wiring import trace_values


def _positions(wrt, n: int) -> list[int]:
    """The input positions to differentiate with respect to: at least one (a gradient with respect to nothing has
    no outputs), each once, each one of the diagram's ``n`` inputs."""
    if n == 0:
        raise GradError("the diagram has no input: there is nothing to differentiate with respect to")
    if wrt is None:
        return list(range(n))
    if isinstance(wrt, (str, bytes)) or not (isinstance(wrt, int) or hasattr(wrt, "__iter__")):
        raise GradError(f"wrt={wrt!r}: give an input position or a list of them, 0 … {n - 1}")
    wrt = [wrt] if isinstance(wrt, int) and not isinstance(wrt, bool) else list(wrt)
    for w in wrt:
        if isinstance(w, bool) or not isinstance(w, int) or not 0 <= w < n:
            raise GradError(f"wrt={w!r}: differentiate with respect to input positions 0 … {n - 1} "
                            f"(the diagram has {n} input(s))")
    if len(set(wrt)) != len(wrt):
        raise GradError(f"wrt={wrt} names an input twice")
    if not wrt:
        raise GradError(f"wrt={wrt!r} names no input: a gradient with respect to nothing has no outputs; give one "
                        f"or more input positions 0 … {n - 1}, or wrt=None for all {n}")
    return wrt


def _aux(aux, saved, m: int) -> int:
    if not isinstance(saved, bool):
        raise GradError(f"saved={saved!r}: saved is True (the gradient also takes f's outputs, as the forward "
                        "pass saved them) or False")
    if isinstance(aux, bool) or not isinstance(aux, int):
        raise GradError(f"aux={aux!r}: aux is the number of f's last outputs that are auxiliary (an int)")
    if m == 0:
        raise GradError("the diagram has no output, so it has no gradient (grad differentiates ⟨ȳ, f(x)⟩ for the "
                        "cotangents ȳ of f's outputs)")
    if not 0 <= aux < m:
        raise GradError(f"aux={aux}: f has {m} output(s); aux is 0 … {m - 1} (at least one output is "
                        "differentiated)")
    return aux


def grad(diagram: Diagram, wrt=None, *, saved: bool = False, aux: int = 0) -> Diagram:
    """The vector-Jacobian product of ``diagram`` (see the module docstring); ``wrt``: input positions.

    ``aux = k``: f's last k outputs are auxiliary: no cotangent input for them (they do not enter ⟨ȳ, f(x)⟩).
    ``saved``: the gradient also takes all of f's outputs, as the forward pass saved them, after f's inputs
    and before the cotangents, and reads them instead of recomputing them, with the two laws of
    :mod:`.saved` (a contraction's saved output in SoftMax's pairing; SoftMax from a saved log-sum-exp)::

        grad(f, saved=True, aux=k) : X₁ ⊗ … ⊗ Xₙ ⊗ Y₁ ⊗ … ⊗ Yₘ ⊗ Y₁ ⊗ … ⊗ Y_{m−k} → X_{w₁} ⊗ … ⊗ X_{wₖ}

    Its value is grad(f)'s when the saved inputs are f's outputs at x (the caller's contract).
    """
    if not isinstance(diagram, Diagram):
        raise GradError(f"nc.grad takes a diagram, got {type(diagram).__name__}")
    aux = _aux(aux, saved, len(diagram.cod))
    positions = _positions(wrt, len(diagram.dom))
    ops, dom_ids, cod_ids = trace_values(diagram)
    outs_ty = diagram.cod.inside
    b = Builder(Ty(*diagram.dom.inside, *(outs_ty if saved else ()), *outs_ty[:len(outs_ty) - aux]))
    producer = {}
    for k, (_, _, outs) in enumerate(ops):
        for o in outs:
            producer[o] = k
    wires = {v: b.inputs[i] for i, v in enumerate(dom_ids)}
    arrays = {v: a for v, a in zip(dom_ids, diagram.dom.inside)}
    for box, _, outs in ops:
        for o, a in zip(outs, box.cod.inside):
            arrays[o] = a
    keep = Saved(ops, producer, arrays, cod_ids) if saved else None
    if saved:
        for j, v in enumerate(cod_ids):
            wires.setdefault(v, b.inputs[len(dom_ids) + j])

    def value(v):
        """The forward value ``v`` in the gradient diagram (its producer emitted on first use)."""
        if v not in wires:
            box, ins, outs = ops[producer[v]]
            made = keep.softmax(ctx, box, ins, outs) if keep is not None else None
            if made is None:
                made = b(box, *[value(i) for i in ins])
            for o, w in zip(outs, made if isinstance(made, tuple) else (made,)):
                wires[o] = w
        return wires[v]

    ctx = Context(b, value, keep)
    cots = ctx.cots
    first = len(dom_ids) + (len(cod_ids) if saved else 0)
    for j, v in enumerate(cod_ids[:len(cod_ids) - aux]):
        cots.setdefault(v, []).append(b.inputs[first + j])
    for box, ins, outs in reversed(ops):
        ybar = [ctx.total(cots.get(o), arrays[o]) for o in outs]
        if all(c is None for c in ybar):
            continue
        rule = vjp_of(box)
        xbar = rule(ctx, box, ins, outs, ybar)
        if len(xbar) != len(ins):
            raise GradError(f"the VJP of {box.name!r} gave {len(xbar)} cotangents for {len(ins)} inputs")
        for v, c in zip(ins, xbar):
            if c is not None:
                if c.array.names != arrays[v].names:
                    old, c = c, ctx.permute(c, arrays[v])
                    if keep is not None:
                        keep.follow(v, old, c)
                cots.setdefault(v, []).append(c)
    results = []
    for p in positions:
        v = dom_ids[p]
        c = ctx.total(cots.get(v), arrays[v])
        if c is not None and c.array.dtype != arrays[v].dtype:     # accumulated in fp32 (vjps.SUMS)
            c = b.convert(c, arrays[v].dtype)
        results.append(c if c is not None else ctx.zeros_like(value(v)))
    return b.build(*results)
