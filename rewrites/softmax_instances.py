"""Random SoftMaxes written by hand, the instances of :data:`rewrites.normal_form.written_softmax` (and the shapes
the other normal forms draw from): rows and the axis reduced over, scores read off random inputs, a shift by the
max, the mean, a constant or an input, and the exponentials over their sum::

    softmax_x(S) = exp(S − c) / Σ_x exp(S − c)      for every shift c constant along x

>>> import numpy as np
>>> d = written_softmax_instance(np.random.default_rng(0))
>>> {b.name for b in d.boxes} >= {"exp", "sum"}
True
"""
from __future__ import annotations

import numpy as np
import sympy

import napkin_cat as nc
from napkin_cat.rewriting import shape_of
from rewrites.softmax import extreme_inputs
from rewrites.normal_form_boxes import spelled


def random_axes(rng, pool, low, high):
    return [str(n) for n in rng.permutation(pool)[:int(rng.integers(low, high + 1))]]


def rows_and_over(rng):
    """Row axes (one or two, maybe none) and reduced axes (one or two), interleaved in a random order."""
    rows = random_axes(rng, ["n", "h", "b"], 0 if rng.random() < 0.15 else 1, 2)
    over = random_axes(rng, ["v", "w"], 1, 2 if rng.random() < 0.3 else 1)
    names = [str(n) for n in rng.permutation(rows + over)]
    return names, rows, over


def maybe_permuted(rng, names):
    return [str(n) for n in rng.permutation(names)] if rng.random() < 0.3 else list(names)


def scores_source(rng, b, X, names, consts=(0.5, 3)):
    """The scores: the input, or the input through a map (a softcap's tanh, a positive scale: a negative one
    makes a masked score +∞, where the written forms and the primitives differ, see the module docstring)."""
    sig = spelled(names)
    k = int(rng.integers(3))
    if k == 1:
        return b(nc.elementwise("scale", sig, const=consts[int(rng.integers(len(consts)))]), X)
    if k == 2:
        return b(nc.elementwise("tanh", sig), X)
    return X


def shifted_exp(rng):
    """What a written SoftMax and a written log-sum-exp share: exp(x − max x) over random axes (``over``), the row
    statistic's axes in a random order ``r``; returns the names, rows, ``over``, signatures, builder, scores S, max
    and exp."""
    names, rows, over = rows_and_over(rng)
    sig, r = spelled(names), spelled(maybe_permuted(rng, rows))
    b = nc.Builder(nc.types(sig))
    (X,) = b.inputs
    S = scores_source(rng, b, X, names)
    mx = b(nc.reduce("max", f"{sig} -> {r}"), S)
    e = b(nc.elementwise("exp", sig), b(nc.elementwise("sub", f"{sig}, {r} -> {sig}"), S, mx))
    return names, rows, over, sig, r, b, S, mx, e


def exp_over_sum(rng, b, shifted, names, over):
    """e = exp(shifted) ; e / Σ_over e, the sum's rows in a random order, the division's output maybe in another."""
    sig, r = spelled(names), spelled(maybe_permuted(rng, [n for n in names if n not in over]))
    e = b(nc.elementwise("exp", sig), shifted)
    z = b(nc.reduce("sum", f"{sig} -> {r}"), e)
    out = [n for n in names if n not in over] + [n for n in names if n in over] if rng.random() < 0.3 else names
    return b(nc.elementwise("div", f"{sig}, {r} -> {spelled(out)}"), e, z)


#: the shifts a random written SoftMax subtracts (each constant along the reduced axes A)
SHIFTS = ("max", "mean", "constant", "input")


def written_softmax_instance(rng):
    """exp(x − c) / Σ_A exp(x − c) over random axes A, c a random shift constant along A: the max or the mean of the
    scores over A (and maybe some of the rows), a constant (a ``shift`` box), or an input over some of the rows in a
    random order; the scores maybe after a map, maybe read again after.  At times beside it the same form with a
    shift that varies along A (an input over every axis): the rule refuses it (a mutant that takes it fails)."""
    names, rows, over = rows_and_over(rng)
    sig = spelled(names)
    shift = SHIFTS[int(rng.integers(len(SHIFTS)))]
    kept = maybe_permuted(rng, [n for n in rows if rng.random() < 0.7])
    if shift == "input" and not kept:
        shift = "constant"
    decoy = rng.random() < 0.3
    b = nc.Builder(nc.types(", ".join([sig] + [spelled(kept)] * (shift == "input") + [sig] * decoy)))
    X, *others = b.inputs
    S = scores_source(rng, b, X, names, consts=(0.5, 2))
    if shift == "constant":
        shifted = b(nc.elementwise("shift", sig, const=[-30, 30, 2.5][int(rng.integers(3))]), S)
    else:
        c = others.pop(0) if shift == "input" else b(nc.reduce(shift, f"{sig} -> {spelled(kept)}"), S)
        shifted = b(nc.elementwise("sub", f"{sig}, {spelled(kept)} -> {sig}"), S, c)
    outs = [exp_over_sum(rng, b, shifted, names, over)]
    if decoy:
        outs.append(exp_over_sum(rng, b, b(nc.elementwise("sub", f"{sig}, {sig} -> {sig}"), S, others.pop(0)),
                                  names, over))
    if rng.random() < 0.3:
        outs.append(b(nc.elementwise("neg", sig), S))
    return b.build(*outs)


def shifted_inputs(rng, diagram, sizes):
    """Input 0 (the scores): logits at scale 1, 10 or 30, some entries (a whole row, at times) masked to −300;
    others normal.  A masked score is finite, so every shift of its row is (a mean of a row holding −∞ is −∞, and
    x − (−∞) is NaN by hand), and these scores minus any shift the proofs draw neither overflow ``exp`` nor make a
    row's sum 0: the written form is defined, and computes in floating point what the primitive computes."""
    xs = moderate_inputs(rng, diagram, sizes)
    xs[0] = np.where(np.isneginf(xs[0]), -300.0, xs[0])
    return xs


def finite_row_inputs(rng, diagram, sizes):
    """Extreme logits with masked (−∞) entries (:func:`rewrites.softmax.extreme_inputs`), a row masked whole given
    one finite entry back: where the written form is defined (an all −∞ row is NaN by hand, −∞ by the primitive)."""
    xs = extreme_inputs(rng, diagram, sizes)
    names = diagram.dom.inside[0].names
    over = {n for box in diagram.boxes if getattr(box.data, "kind", None) == "reduce_max"
            for n in box.dom.inside[0].names if n not in box.data.weave_names}
    axes = tuple(i for i, n in enumerate(names) if n in over)
    x = xs[0]
    dead = np.all(np.isneginf(x), axis=axes, keepdims=True)
    first = np.zeros(x.shape, bool)
    first[tuple(slice(0, 1) if i in axes else slice(None) for i in range(x.ndim))] = True
    xs[0] = np.where(dead & first, 0.0, x)
    return xs


def exp_over_sum_of_shifted():
    """exp(xᵢ − c) / Σⱼ exp(xⱼ − c) = exp(xᵢ) / Σⱼ exp(xⱼ) for any c the same for every j (exp(−c) cancels): SoftMax,
    whatever c is (the max, a mean, a constant, a value from elsewhere); a shift cⱼ that varies along the sum does not
    cancel (the condition ``constant_shift`` is needed)."""
    xs = sympy.symbols("x1:5", real=True)
    c, cs = sympy.Symbol("c", real=True), sympy.symbols("c1:5", real=True)
    total = sum(sympy.exp(y) for y in xs)
    for x in xs:
        written = sympy.exp(x - c) / sum(sympy.exp(y - c) for y in xs)
        assert sympy.cancel(sympy.expand(written - sympy.exp(x) / total)) == 0, x
    varying = sympy.exp(xs[0] - cs[0]) / sum(sympy.exp(y - k) for y, k in zip(xs, cs))
    at = {**dict.fromkeys(xs, 0), **dict.fromkeys(cs, 0), cs[0]: 1}
    assert sympy.simplify((varying - sympy.exp(xs[0]) / total).subs(at)) != 0


def moderate_inputs(rng, diagram, sizes):
    """Input 0 (the scores): logits at scale 1, 10 or 30, some entries (a whole row, at times) masked to −∞;
    others normal.  Finite scores this small neither overflow ``exp`` nor underflow a probability, so a form
    written without the max (or a log of a SoftMax) computes in floating point what its primitive computes."""
    xs = []
    for i, arr in enumerate(diagram.dom.inside):
        x = rng.normal(size=shape_of(arr, sizes))
        if i == 0:
            x = x * [1.0, 10.0, 30.0][int(rng.integers(3))]
            x[rng.random(x.shape) < [0.0, 0.2, 0.5][int(rng.integers(3))]] = -np.inf
        xs.append(x)
    return xs


__all__ = ["moderate_inputs", "SHIFTS", "exp_over_sum", "exp_over_sum_of_shifted", "finite_row_inputs",
           "maybe_permuted", "random_axes", "rows_and_over", "scores_source", "shifted_exp", "shifted_inputs",
           "written_softmax_instance"]
