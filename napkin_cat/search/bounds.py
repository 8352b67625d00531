"""Lower bounds on the transfers at one level, where one is known, read off the diagram's structure.

* **compulsory** (any diagram): every input is loaded into the level at least once and every output
  saved once, ``Σ |inputs| + Σ |outputs|``; only the outputs where a mask may skip trips
  (:func:`moved_whole`: a masked stream need not read every row of an input);
* **one contraction** ``A(a, b) · B(b, c) → C(a, c)`` (with batch axes carried by all three):
  Hong and Kung (1981), with the constant of Smith et al., "A communication-optimal matrix
  multiplication" (2019): at least ``2·N/√M − 2M`` values loaded for ``N`` multiply-adds (the
  batch axes multiply ``N = |a||b||c|``): a run cut into segments of ``M`` loads has at most ``2M``
  operands per segment, and Loomis–Whitney caps what they can compute.  The ``+ |a||c|`` of the
  output stores is *not* added: it is a property of the square-tiled schedule, and a skinny product
  whose short axis fits on chip beats ``2N/√M + |a||c|`` (``tests/search``: a = 96, b = 40, c = 3000 at
  M = 1024 moves 771,840 < 1,008,000);
* **attention** ``O = SoftMax(X₁ · X₂) · X₃`` (the first contraction sums the feature axes ``d``, the
  SoftMax and the second contraction run over ``x``): Saha and Ye, "The I/O complexity of
  attention, or how optimal is FlashAttention?" (2024): ``Ω(|S|·d²/M)`` for ``M ≥ d²`` and
  ``Ω(|S|·d/√M)`` below (matrix-multiplication-like), ``|S|`` the size of the score array.  The
  constant of that Ω is not known; it is taken as 1, so a ratio to it is a gap up to a constant.
* **attention's backward** (a diagram that *is* ``nc.grad(f, wrt)`` of such an ``f``): Li and Xu's bound
  (:func:`attention_backward`).  The candidate ``f`` is rebuilt from the diagram's own first product and
  SoftMax (the second product written to the cotangent's array), and confirmed by building its gradient again
  (each construction of :data:`GRADIENT_FORMS`, each ``wrt`` the outputs allow) and comparing the two diagrams
  up to isomorphism: a diagram that only looks like a gradient keeps the compulsory bound.

Each bound is the largest of the compulsory one and the structural one.  The structures are
recognised from the boxes' kinds and the axes on their wires, never from names.

>>> import napkin_cat as nc
>>> M = nc.symbol("M")
>>> lower_bound(nc.library.matmul(), M).source
'Hong-Kung / Smith et al. 2019 (one contraction)'
>>> skinny = {"a": 4096, "b": 64, "c": 64}            # B fits on chip: compulsory ab + bc + ac only
>>> [lower_bound(nc.library.matmul(), M).at({**skinny, "M": m}) for m in (2 ** 10, 2 ** 13)]
[1046528, 528384]
>>> lower_bound(nc.library.attention(), M).at({"q": 4096, "x": 4096, "d": 128, "M": 2 ** 14})
16777216
>>> lower_bound(nc.grad(nc.library.multi_head_attention()), M).source
"Li-Xu 2024, arXiv 2410.09397 (attention's backward; Θ, constant taken as 1)"
>>> lower_bound(nc.library.mlp(), M).source
'compulsory (inputs read once, outputs written once); no stronger bound is known for this diagram'
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

import sympy

from napkin_cat.autodiff import grad
from napkin_cat.cost.iocost import numel
from napkin_cat.errors import ArgumentError, NapkinError
from napkin_cat.rewriting.isomorphism import isomorphic
from napkin_cat.syntax.adapter import Ty
from napkin_cat.syntax.axis import symbol
from napkin_cat.syntax.builder import Builder
from napkin_cat.syntax.construct import einsum
from napkin_cat.syntax.dtype import BOOL
from napkin_cat.syntax.flat import layers
from napkin_cat.syntax.wiring import trace_values

COMPULSORY = "compulsory (inputs read once, outputs written once)"
#: the compulsory bound's source where a mask may skip trips (:func:`moved_whole`)
COMPULSORY_MASKED = "compulsory (outputs written once; a mask may skip reading inputs)"


def reads_positions(d) -> bool:
    """Whether a box of ``d`` (or of a region in it) computes positions: a mask of them may skip trips."""
    return any(getattr(getattr(box, "data", None), "kind", None) == "position"
               or (hasattr(box, "arg") and reads_positions(box.arg)) for _, box in layers(d))


def applies_mask(d) -> bool:
    """Whether an op of ``d`` (or of a region in it) applies a ``bool`` value to values that are not ``bool`` (a
    ``where``, a ``select``, a cast to numbers): the only ops by which a stream of an algorithm of ``d`` may skip
    trips (:func:`~napkin_cat.algorithms.skipping.skip_of` looks for masks there and nowhere else).

    >>> import napkin_cat as nc
    >>> applies_mask(nc.library.document_attention()), applies_mask(nc.library.attention())
    (True, False)
    """
    for _, box in layers(d):
        if hasattr(box, "arg") and applies_mask(box.arg):
            return True
        if getattr(box, "data", None) is not None and any(a.dtype == BOOL for a in box.dom.inside) \
                and not any(a.dtype == BOOL for a in box.cod.inside):
            return True
    return False


def moved_whole(d, density=None) -> tuple:
    """The arrays every algorithm of ``d`` moves whole through a level (each value read, or written, at least once):
    its inputs and outputs; only its outputs where a stream may skip trips: where an op applies a mask
    (:func:`applies_mask`) made from positions (keys no query sees are never loaded) or, where ``density`` < 1
    (None: not known), read from data (a stream then runs that fraction of its trips, reading that fraction of what
    it reads per trip).  Outputs are written whole either
    way: a stream that skips trips only reduces (:func:`~napkin_cat.algorithms.skipping.skip_of`: no sliced
    outputs), its reducers' results written after it.

    >>> import napkin_cat as nc
    >>> [len(moved_whole(f)) for f in (nc.library.attention(), nc.library.causal_attention())]
    [4, 1]
    >>> [len(moved_whole(nc.library.document_attention(), rho)) for rho in (1, 0.5)]
    [6, 1]
    """
    skips = applies_mask(d) and (density != 1 or reads_positions(d))
    return tuple(d.cod.inside) if skips else (*d.dom.inside, *d.cod.inside)


@dataclass(frozen=True)
class Bound:
    """``H`` = max(``compulsory``, ``theorem``) (expressions in the sizes and the memory), its ``source``,
    and whether it is ``structural`` (a theorem about this diagram's structure) or only the compulsory one."""

    compulsory: sympy.Expr
    theorem: sympy.Expr | None
    source: str

    @property
    def structural(self) -> bool:
        return self.theorem is not None

    @property
    def H(self) -> sympy.Expr:
        return self.compulsory if self.theorem is None else sympy.Max(self.compulsory, self.theorem)

    def at(self, env: dict):
        """The bound at concrete sizes and memory (each part substituted, then the larger taken)."""
        env = {symbol(k) if isinstance(k, str) else k: v for k, v in env.items()}
        parts = [self.compulsory] + ([self.theorem] if self.theorem is not None else [])
        values = [sympy.sympify(p).subs(env) for p in parts]
        return max(values) if all(v.is_number for v in values) else sympy.Max(*values)

    def at_memories(self, env: dict, M, memories) -> list:
        """:meth:`at` for each memory of ``memories`` (the value of the symbol ``M``) at the sizes ``env``: the sizes
        substituted once, then each memory (a theorem's conditions in the sizes are settled once, not per memory).

        >>> import napkin_cat as nc
        >>> M, env = nc.symbol("M"), {"q": 64, "x": 64, "d": 8}
        >>> b = lower_bound(nc.library.attention(), M)
        >>> b.at_memories(env, M, [16, 256]) == [b.at({**env, M: 16}), b.at({**env, M: 256})]
        True
        """
        env = {symbol(k) if isinstance(k, str) else k: v for k, v in env.items()}
        sized = replace(self, compulsory=sympy.sympify(self.compulsory).subs(env),
                        theorem=None if self.theorem is None else sympy.sympify(self.theorem).subs(env))
        return [sized.at({M: m}) for m in memories]


def _kind(box) -> str | None:
    """A primitive box's kind; None for a region (a kernel, a loop), whose structure no recogniser reads."""
    return getattr(box.data, "kind", None)


def _size(names, arr_of) -> sympy.Expr:
    out = sympy.Integer(1)
    for n in names:
        out *= arr_of[n]
    return out


def _axes(*arrays) -> dict:
    return {a.name: a.size for arr in arrays for a in arr.axes}


def _contraction(diagram, ops, M):
    if len(ops) != 1:
        return None
    (box, ins, outs), = ops
    if _kind(box) != "contract" or len(box.dom) != 2 or sorted(ins) != [0, 1]:
        return None
    A, B = (set(a.names) for a in box.dom.inside)
    C = set(box.cod.inside[0].names)
    batch, a, c, b = A & B & C, (A & C) - B, (B & C) - A, (A & B) - C
    if not (a and b and c) or A - (batch | a | b) or B - (batch | b | c):
        return None
    s = _axes(*box.dom.inside, *box.cod.inside)
    n = _size(batch, s)
    na, nb, nc_ = _size(a, s), _size(b, s), _size(c, s)
    return 2 * n * na * nb * nc_ / sympy.sqrt(M) - 2 * M, "Hong-Kung / Smith et al. 2019 (one contraction)"


def _attention_parts(diagram, ops):
    """``(|S|, d, K)``: the score array's size, the summed feature size and the keys' array, where ``diagram`` is
    ``SoftMax(X₁ · X₂) · X₃`` (structure only, see module); else None."""
    if [_kind(op[0]) for op in ops] != ["contract", "softmax", "contract"]:
        return None
    (c1, i1, o1), (sm, i2, o2), (c2, i3, o3) = ops
    n_in = len(diagram.dom)
    if len(c1.dom) != 2 or i2 != o1 or len(c2.dom) != 2 or o2[0] not in i3 or len(diagram.cod) != 1:
        return None
    other = [v for v in i3 if v != o2[0]]
    if sorted(list(i1) + other) != list(range(n_in)):
        return None
    S = c1.cod.inside[0]
    d = [n for n in set(c1.dom.inside[0].names) & set(c1.dom.inside[1].names) if n not in S.names]
    over = [n for n in S.names if n not in sm.data.weave_names]
    if not d or not over or any(n in c2.cod.inside[0].names for n in over):
        return None
    keys = next(a for a in c1.dom.inside if set(over) <= set(a.names))
    return numel(S), _size(d, _axes(*c1.dom.inside)), keys


def _attention(diagram, ops, M):
    found = _attention_parts(diagram, ops)
    if found is None:
        return None
    nS, D, _ = found
    return (sympy.Piecewise((nS * D ** 2 / M, M >= D ** 2), (nS * D / sympy.sqrt(M), True)),
            "Saha-Ye 2024 (attention; Ω, constant taken as 1)")


def attention_backward(forward, M, wrt=None) -> Bound:
    """The lower bound for ``nc.grad(forward, wrt)`` (every input's gradient by default), ``forward`` recognised as
    attention by its structure (as for the forward's bound): Θ(min{(|S|·d² + |K|·d²)/M, (|S|·d + |K|·d)/√M}),
    ``|S|`` the score array's size (q·x, times the batch axes) and ``|K|`` the keys' (x·d): the backward IO bound
    of Li and Xu, "Fine-grained I/O complexity of attention backward passes" (arXiv 2410.09397), constant taken
    as 1.  For a proper subset of the gradients (``wrt``) only its score-array part, min{|S|·d²/M, |S|·d/√M}, is
    kept: each of dQ, dK, dV recomputes the scores (a contraction of |S|·d multiply-adds) and contracts them
    with an array of d features, the structure of the forward's (Saha–Ye) bound, while the |K| terms are the
    whole backward's.  The compulsory part: the inputs and one cotangent per output read, one gradient per
    input in ``wrt`` written.

    derive's default gap report finds it by itself for a gradient diagram ``nc.grad`` made from such a forward
    (:func:`lower_bound`); pass it (``bound=``) for one it does not confirm.

    >>> import napkin_cat as nc
    >>> b = attention_backward(nc.library.attention(), "M")
    >>> int(b.at({"q": 4096, "x": 4096, "d": 128, "M": 2 ** 16}))       # (2^24·2^14 + 2^19·2^14) / 2^16
    4325376
    >>> lower_bound(nc.grad(nc.library.attention()), "M") == b
    True
    """
    M = symbol(M) if isinstance(M, str) else M
    ops, _, _ = trace_values(forward)
    found = _attention_parts(forward, ops)
    if found is None:
        raise ArgumentError(f"attention_backward takes attention's forward diagram (SoftMax(X₁·X₂)·X₃: a "
                            f"contraction, a SoftMax, a contraction); got one with operations "
                            f"{[_kind(op[0]) for op in ops]}")
    inputs = forward.dom.inside
    positions = list(range(len(inputs))) if wrt is None else [wrt] if isinstance(wrt, int) else list(wrt)
    if any(isinstance(p, bool) or not isinstance(p, int) or not 0 <= p < len(inputs) for p in positions) \
            or len(set(positions)) != len(positions):
        raise ArgumentError(f"attention_backward: wrt={wrt!r}; give distinct input positions of the forward "
                            f"(0 … {len(inputs) - 1})")
    nS, D, keys = found
    nK = numel(keys)
    compulsory = sum((numel(a) for a in (*inputs, *forward.cod.inside, *(inputs[p] for p in positions))),
                     sympy.Integer(0))
    if len(set(positions)) == len(inputs):
        theorem = sympy.Min((nS * D ** 2 + nK * D ** 2) / M, (nS * D + nK * D) / sympy.sqrt(M))
        return Bound(compulsory, theorem, BACKWARD)
    theorem = sympy.Min(nS * D ** 2 / M, nS * D / sympy.sqrt(M))
    return Bound(compulsory, theorem, BACKWARD_PART)


BACKWARD = "Li-Xu 2024, arXiv 2410.09397 (attention's backward; Θ, constant taken as 1)"
BACKWARD_PART = "Li-Xu 2024, arXiv 2410.09397 (part of attention's backward: the score-array terms; constant 1)"


@dataclass(frozen=True)
class GradientForm:
    """One way a gradient diagram is built from a forward ``f``: ``split`` reads the gradient's input arrays as
    ``[(f's inputs, f's outputs, options)]`` (every reading to try), ``make(f, wrt, options)`` builds it again."""

    split: Callable
    make: Callable


def _plain_split(dom):
    return [(dom[:-1], dom[-1:], {})] if len(dom) > 1 else []


def _plain_make(forward, wrt, options):
    return grad(forward, wrt=wrt, **options)


#: The gradient constructions the backward recogniser tries (``nc.grad(f, wrt)``: f's inputs, then one cotangent
#: per output); a construction with more inputs (saved forward outputs) joins as one more row.
GRADIENT_FORMS = [GradientForm(_plain_split, _plain_make)]


def _second_contractions(P, V, O):
    """Every contraction box ``P, V → O`` (both operand orders), as a forward's second product is written."""
    sizes = {a.name: a.size for arr in (P, V, O) for a in arr.axes}
    out = []
    for first, second in ((P, V), (V, P)):
        sig = f"{' '.join(first.names)}, {' '.join(second.names)} -> {' '.join(O.names)}"
        try:
            box = einsum(sig, dtype=first.dtype, out_dtype=O.dtype, level=O.level, sizes=sizes)
        except NapkinError:
            continue
        if box.dom.inside == (first, second) and box.cod.inside == (O,):
            out.append((box, first is P))
    return out


def _forwards(diagram, ops, inputs, outputs):
    """The attention forwards ``SoftMax(X₁·X₂)·X₃`` on ``inputs`` → ``outputs`` whose first product and SoftMax
    are operations of ``diagram`` (their boxes read from it, the second product written to ``outputs``)."""
    if len(inputs) != 3 or len(outputs) != 1:
        return
    for c1, ins, outs in ops:
        if _kind(c1) != "contract" or len(ins) != 2 or len(set(ins)) != 2 or max(ins) >= len(inputs):
            continue
        sm = next((op[0] for op in ops if _kind(op[0]) == "softmax" and op[1] == outs), None)
        if sm is None or len(sm.cod) != 1:
            continue
        third, = set(range(3)) - set(ins)
        for c2, p_first in _second_contractions(sm.cod.inside[0], inputs[third], outputs[0]):
            b = Builder(Ty(*inputs))
            X = b.inputs
            P = b(sm, b(c1, X[ins[0]], X[ins[1]]))
            yield b.build(b(c2, P, X[third]) if p_first else b(c2, X[third], P))


def _wrts(inputs, grads):
    """Every ``wrt`` (distinct input positions) whose arrays are ``grads``, in order."""
    def extend(prefix):
        if len(prefix) == len(grads):
            yield prefix
            return
        for p, a in enumerate(inputs):
            if p not in prefix and a == grads[len(prefix)]:
                yield from extend(prefix + [p])
    yield from extend([])


def _attention_gradient(diagram, ops, M):
    """Attention's backward: ``diagram`` *is* a gradient construction (:data:`GRADIENT_FORMS`) of a forward the
    attention recogniser accepts, rebuilt from the diagram's own first product and SoftMax and confirmed by
    building its gradient again (the two diagrams isomorphic); else None."""
    if not any(_kind(op[0]) == "softmax" for op in ops):
        return None
    dom, cod = diagram.dom.inside, diagram.cod.inside
    for form in GRADIENT_FORMS:
        for inputs, outputs, options in form.split(dom):
            for forward in _forwards(diagram, ops, inputs, outputs):
                if _attention_parts(forward, trace_values(forward)[0]) is None:
                    continue
                for wrt in _wrts(inputs, cod):
                    if isomorphic(form.make(forward, wrt, options), diagram):
                        b = attention_backward(forward, M, wrt)
                        return b.theorem, b.source
    return None


RECOGNISERS = [_contraction, _attention, _attention_gradient]


def lower_bound(diagram, M) -> Bound:
    """The best known lower bound on the values moved through one level of memory ``M`` (see module)."""
    M = symbol(M) if isinstance(M, str) else M
    ops, _, _ = trace_values(diagram)
    whole = moved_whole(diagram)
    compulsory = sum((numel(a) for a in whole), sympy.Integer(0))
    for recognise in RECOGNISERS:
        found = recognise(diagram, ops, M)
        if found is not None:
            expr, source = found
            return Bound(compulsory, expr, source)
    said = COMPULSORY if len(whole) == len(diagram.dom.inside) + len(diagram.cod.inside) else COMPULSORY_MASKED
    return Bound(compulsory, None, said + "; no stronger bound is known for this diagram")
