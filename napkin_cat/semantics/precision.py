"""The precision an evaluation computes in, and the tolerance two evaluations of one function may differ by.

The numpy functor computes in float64 (:func:`~napkin_cat.semantics.equivalent.equivalent` draws float64 inputs);
a conversion box (a kind whose record says ``conversion``: a cast) rounds its operand to its output's number
format, and whatever is computed from the rounded value carries that error.  An evaluation's unit roundoff ``u`` is
that of the narrowest floating-point format a conversion in it rounds to, or an array of it declares (below), or
its outputs' numpy type, when narrower; else float64's::

    u(format) = 2^-(mantissa bits + 1)        float64 2^-53, fp32 2^-24, fp16 2^-11, bf16 2^-8, fp8 2^-4

Two evaluations of one function (the same sums in other orders: tiles, streams, rewrites) agree, by default, when
every finite output entry satisfies::

    |a − b| ≤ rtol·|b| + atol,     rtol = min(C·n·u, √u),   atol = rtol·max|b|,   C = SAFETY = 4

with ``n`` the sum of the lengths of the axes the diagrams' inputs and outputs carry at the trial's sizes (plus
``κ``, below, where that is not enough).  Why:

* a sum of ``n`` terms, added in any order, is within ``γ_n·Σ|xᵢ|`` of its exact value, ``γ_n = n·u/(1 − n·u)``
  (Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed., §4.2); a chain of sums along several
  axes (attention's scores over ``d``, then its weighted sum over ``x``) is, to first order, within ``γ`` of the sum
  of their lengths; two evaluations differ by at most the sum of their errors, ``2·γ_n``; ``C = 4`` doubles that for
  the few roundings per term outside the sums (an exponential, a division, a cast);
* that error is relative to the terms' magnitudes, not to an entry that cancelled to nearly nothing, hence ``atol``:
  the output's scale (its largest finite magnitude) times ``rtol``;
* the worst case grows past any use where ``n·u`` nears 1 (fp16, bf16 and fp8 at a few hundred terms), while
  rounding errors of independent signs grow like ``√n·u`` (ibid., §2.8); so no more than half the format's digits
  are given up: ``√u`` (float64 1.5e-8, fp32 2.4e-4, fp16 2.2e-2, bf16 6.3e-2).  In fp32 a whole output off by
  1e-3 is therefore always rejected, at any sizes (its largest entry: ``1e-3 > 2·√u``).  In bf16 and fp8 the cap
  is loose (``2·√u`` is 12.5% and 50% of the output's scale; attention with P and V cast to bf16 is 0.15% off its
  function at q = 32, x = 48, d = 16, and one 10% off still passes): there, pass ``rtol=`` to ask for more.

**Declared formats.**  A format an array declares (``formats={"P": "fp16"}``, ``dtype="bf16"``) is what the kernels
store it in, so the function is defined to that format's precision: a kernel holding a value (a constant, a
partial sum, ``O``) rounded once more to it is a correct implementation.  Evaluation does not round there (the
numpy functor rounds at casts only), so the declared format's ``u`` sets the tolerance: the comparison is made in
the narrowest format declared anywhere in either diagram (inputs, every box's outputs, inside regions).  The format
an array gets when none is named (:data:`UNDECLARED`, fp32) declares nothing: a diagram whose arrays all carry it
compares in float64, as it evaluates (a cast to fp32 makes it fp32).  Rounding where a format is declared instead
(evaluating as the kernels store) would give the same tolerance and change what ``nc.evaluate`` computes.

**Growth past n** (``κ``, :func:`agreements`).  ``n`` bounds the growth of a sum's rounding errors; others grow
past it: ``exp(x − LSE)`` rounds ``LSE`` at the logits' magnitude before the exponential, ``|LSE|·u`` off where the
one-pass SoftMax is not.  Where a float64 comparison fails by ``n``, both evaluations are run again with every
value they compute moved by a random relative ``δ`` (``evaluate(..., perturb=seed)``), and how far each output
moves, in units of ``δ`` and of its scale, is ``κ``: ``rtol = min(C·(n + κ)·u, √u)``.  A wrong algorithm is off by
its error whatever ``κ``; the √u cap holds.

Measured on the library's own checks (tests/semantics, rewriting, search, library, algorithms, testing, syntax, io:
11,470 comparisons in float64 that agree): the largest ``|a − b| / ((|b| + max|b|)·n·u)`` is 0.64, against the
``C = 4`` allowed; the wrong algorithms those tests reject are 2.4e12 and more.  So a comparison made in float64
tolerates about 1e-14 at small sizes (the 1e-6 it had before let a 1e-7 error through), one with a cast to fp32
about 1e-5 (non-causal ALiBi at q = 61, x = 139, d = 20: 5e-6 off, rtol 5.2e-5).

>>> import napkin_cat as nc
>>> p = precision_of(nc.library.alibi_attention(0.3, causal=False))
>>> p.format, p.unit_roundoff == 2.0 ** -24
('fp32', True)
>>> precision_of(nc.library.attention()).format
'float64'
>>> f"{default_rtol(precision_of(nc.library.attention()), 220):.2e}"
'9.77e-14'
"""
from __future__ import annotations

import math
from dataclasses import astuple, dataclass

import numpy as np

from napkin_cat.semantics.footprint import value_at
from napkin_cat.syntax.adapter import Bubble, Diagram
from napkin_cat.syntax.array import Array
from napkin_cat.syntax.flat import layers
from napkin_cat.syntax.primitive import converts

#: ``C`` of the default tolerance ``min(C·n·u, √u)`` (module docstring): two evaluations' errors, doubled for the
#: roundings per term outside the sums
SAFETY = 4
#: the format the numpy functor computes in when nothing rounds: float64, 52 mantissa bits
EVALUATION_FORMAT, EVALUATION_MANTISSA = "float64", 52
#: the format an array gets when none is named (the library's default, fp32): it declares nothing, so a diagram
#: whose arrays all carry it compares in float64, as its evaluation computes
UNDECLARED = Array().dtype


@dataclass(frozen=True)
class Precision:
    """The format an evaluation's results are rounded to (its narrowest) and where the rounding is.

    ``format``: the format's name (``"float64"`` when nothing rounds); ``mantissa``: its mantissa bits;
    ``where``: what rounds to it (a box's name and the diagram, ``"first"`` or ``"second"``), empty for float64."""

    format: str = EVALUATION_FORMAT
    mantissa: int = EVALUATION_MANTISSA
    where: str = ""

    @property
    def unit_roundoff(self) -> float:
        """``u = 2^-(mantissa + 1)``: the largest relative error of rounding to nearest in the format."""
        return 2.0 ** -(self.mantissa + 1)

    def narrowest(self, other: "Precision") -> "Precision":
        """The less precise of the two (self on a tie)."""
        return other if other.mantissa < self.mantissa else self

    def __str__(self):
        return self.format + (f" ({self.where})" if self.where else "")


def precision_of(diagram: Diagram, who: str = "") -> Precision:
    """The narrowest floating-point format a conversion box anywhere in ``diagram`` (inside its regions too)
    rounds to; float64, the numpy functor's own, when none does.  Remembered on the diagram (it is immutable).

    >>> import napkin_cat as nc
    >>> str(precision_of(nc.library.alibi_attention(0.3), "first"))
    'fp32 (cast in the first diagram)'
    """
    memo = diagram.__dict__
    got = memo.get("_precision")
    if got is None:
        got = memo["_precision"] = _narrowest_conversion(diagram)
    return Precision(got.format, got.mantissa, f"{got.where} in the {who} diagram" if who and got.where else
                     got.where)


def _narrowest_conversion(diagram: Diagram) -> Precision:
    """The narrowest of the formats ``diagram``'s casts round to and of those it declares (:func:`declared`)."""
    best = Precision()
    for i, arr in enumerate(diagram.dom.inside):
        best = best.narrowest(_declared(arr, f"input {i}"))
    for _, box in layers(diagram):
        if isinstance(box, Bubble):
            for inside in box.size_parts()[1]:
                best = best.narrowest(_narrowest_conversion(inside))
            continue
        cast = converts(getattr(getattr(box, "data", None), "kind", None))
        for arr in box.cod.inside:
            if cast and arr.dtype.family == "float":
                best = best.narrowest(Precision(arr.dtype.name, arr.dtype.mantissa, box.name))
            best = best.narrowest(_declared(arr, f"{box.name}'s output"))
    return best


def _declared(arr, what: str) -> Precision:
    """The format ``arr`` declares, where it is a floating-point format narrower than :data:`UNDECLARED`."""
    if arr.dtype.family == "float" and arr.dtype.mantissa < UNDECLARED.mantissa:
        return Precision(arr.dtype.name, arr.dtype.mantissa, f"declared on {what}")
    return Precision()


def precision_of_values(values, who: str = "") -> Precision:
    """The narrowest numpy floating type among ``values`` (arrays), as a :class:`Precision`; float64 when none is
    narrower (integer and boolean values round nothing).

    >>> import numpy as np
    >>> precision_of_values([np.zeros(2), np.zeros(2, np.float32)], "first").format
    'float32'
    """
    best = Precision()
    for y in values:
        dtype = np.asarray(y).dtype
        if np.issubdtype(dtype, np.floating):
            bits = np.finfo(dtype).nmant
            best = best.narrowest(Precision(dtype.name, bits, f"its outputs, in the {who} diagram" if who else
                                            "its outputs"))
    return best


def default_rtol(precision: Precision, n: int) -> float:
    """``min(C·n·u, √u)``: the relative tolerance of a comparison made in ``precision`` whose axes add up to ``n``
    (module docstring); ``atol`` is it times the output's largest magnitude.

    >>> default_rtol(Precision("fp32", 23), 220) == 4 * 220 * 2.0 ** -24
    True
    >>> default_rtol(Precision("fp32", 23), 10**6) == 2.0 ** -12, default_rtol(Precision("bf16", 7), 9) == 2.0 ** -4
    (True, True)
    """
    u = precision.unit_roundoff
    return min(SAFETY * max(int(n), 1) * u, u ** 0.5)


def comparison_precision(d1: Diagram, d2: Diagram, y1=(), y2=()) -> Precision:
    """The precision a comparison of ``d1`` with ``d2`` evaluates in: the narrowest of their casts'
    (:func:`precision_of`) and of their outputs' numpy types ``y1``, ``y2`` (:func:`precision_of_values`).

    >>> import napkin_cat as nc
    >>> f = nc.cast("a", to="fp16") >> nc.cast("a", to="fp32", dtype="fp16")
    >>> str(comparison_precision(nc.elementwise("exp", "a"), f))
    'fp16 (cast in the second diagram)'
    """
    return (precision_of(d1, "first").narrowest(precision_of(d2, "second"))
            .narrowest(precision_of_values(y1, "first")).narrowest(precision_of_values(y2, "second")))


def axes_length(diagrams, env: dict) -> int:
    """The ``n`` of the default tolerance: the sum of the lengths of the distinct axes the diagrams' inputs and
    outputs carry at the bindings ``env`` (symbol → int; a length they do not determine counts 1); every sum a
    diagram takes runs along some of them.

    >>> import napkin_cat as nc
    >>> from napkin_cat.syntax.sizes import Sizes
    >>> axes_length([nc.einsum("a b -> b")], Sizes({"a": 3, "b": 5}).env)
    8
    """
    axes = {(a.name, a.size) for d in diagrams for arr in (*d.dom.inside, *d.cod.inside) for a in arr.axes}
    return sum(value_at(env, size) or 1 for _, size in axes)


@dataclass(frozen=True)
class Agreement:
    """How one output of two evaluations compares (:func:`agreement`); truthy when within tolerance.

    ``specials``: NaN and ±inf sit in the same places (and the shapes agree); ``error``: the largest gap between
    finite entries; ``compared``: how many finite pairs there were; ``rtol``, ``atol``: the tolerance applied;
    ``kappa``: the condition number it allowed for (:func:`agreements`; 0 when not measured)."""

    ok: bool
    specials: bool
    error: float
    compared: int
    rtol: float
    atol: float
    kappa: float = 0.0

    def __bool__(self):
        return self.ok


def agreement(a, b, precision: Precision, n: int, rtol: float | None = None,
              atol: float | None = None) -> Agreement:
    """Compare ``a`` (an evaluation) with ``b`` (the reference): NaN and ±inf in the same places, and every finite
    pair within ``|a − b| ≤ rtol·|b| + atol`` — the law of this module: ``rtol = min(C·n·u, √u)`` with ``u`` the
    ``precision``'s unit roundoff, ``atol = rtol·max|b|`` over the finite entries; an explicit ``rtol`` or
    ``atol`` replaces its default (what ``np.allclose(a, b, rtol, atol, equal_nan=True)`` checks, where the specials
    agree).

    >>> import numpy as np
    >>> b = np.array([1.0, 2.0, np.inf])
    >>> ok = agreement(b * (1 + 1e-15), b, Precision(), 3)
    >>> bool(ok), ok.compared, f"{ok.rtol:.2e}"
    (True, 2, '1.33e-15')
    >>> bool(agreement(b * (1 + 1e-7), b, Precision(), 3)), bool(agreement(b * (1 + 1e-7), b, Precision("fp32", 23), 3))
    (False, True)
    """
    a, b = np.asarray(a, float), np.asarray(b, float)
    r = default_rtol(precision, n) if rtol is None else float(rtol)
    if a.shape != b.shape:
        return Agreement(False, False, float("nan"), 0, r, 0.0 if atol is None else float(atol))
    specials = bool(np.array_equal(np.isnan(a), np.isnan(b))
                    and np.array_equal(np.where(np.isinf(a), a, 0), np.where(np.isinf(b), b, 0)))
    finite = np.isfinite(a) & np.isfinite(b)
    gap = np.abs(a[finite] - b[finite])
    error = float(gap.max()) if gap.size else 0.0
    at = (r * float(np.abs(b[finite]).max()) if gap.size else 0.0) if atol is None else float(atol)
    ok = specials and bool(np.all(gap <= at + r * np.abs(b[finite])))
    return Agreement(ok, specials, error if specials else float("nan"), int(finite.sum()), r, at)


#: the relative perturbation that measures how an evaluation's rounding errors grow: √u of float64, so that the
#: response stands well above float64's own rounding while staying first order
PERTURBATION = 2.0 ** -26


def perturbed(xs, rng=0) -> list:
    """``xs`` with every floating-point entry moved by a relative ``δ·r`` (``δ`` = :data:`PERTURBATION`, ``r``
    uniform in [−1, 1] from ``rng``, a numpy Generator or a seed); integer and boolean arrays (indices, masks)
    unchanged.  ``evaluate(..., perturb=seed)`` applies it to every primitive's results: a model of rounding each
    value once, ``δ`` in place of ``u``.

    >>> import numpy as np
    >>> x, i = perturbed([np.ones(3), np.arange(3)])
    >>> bool(np.all(np.abs(x - 1) <= PERTURBATION)), i.tolist()
    (True, [0, 1, 2])
    """
    rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    out = []
    for x in xs:
        x = np.asarray(x)
        if np.issubdtype(x.dtype, np.floating):
            with np.errstate(invalid="ignore", over="ignore"):
                x = x * (1 + PERTURBATION * rng.uniform(-1.0, 1.0, size=x.shape))
        out.append(x)
    return out


def growth(y, moved) -> float:
    """``κ = max|ỹ − y| / (δ·max|y|)`` over the finite entries of each output pair (``y`` an evaluation's outputs,
    ``moved`` those of the same evaluation with its values :func:`perturbed`), the largest over the outputs: how many
    times the relative error of one rounding its outputs carry, relative to their scale.

    >>> import numpy as np
    >>> x = np.full(1000, 20.0)                 # exp at 20: a relative error δ of x is one of 20·δ of exp(x)
    >>> round(growth([np.exp(x)], [np.exp(perturbed([x])[0])]))
    20
    """
    kappa = 0.0
    for a, b in zip(y, moved):
        a, b = np.asarray(a, float), np.asarray(b, float)
        if a.shape != b.shape:
            continue
        finite = np.isfinite(a) & np.isfinite(b)
        if finite.any():
            scale = float(np.abs(a[finite]).max())
            if scale > 0:
                kappa = max(kappa, float(np.abs(b[finite] - a[finite]).max()) / (PERTURBATION * scale))
    return kappa


def agreements(y1, y2, precision: Precision, n: int, rtol: float | None = None, atol: float | None = None,
               rerun=None) -> list:
    """The :func:`agreement` of each output pair of ``y1`` with ``y2`` (two evaluations' outputs), by the law
    ``rtol = min(C·(n + κ)·u, √u)``.  ``κ = κ₁ + κ₂`` is how much each evaluation's rounding errors grow
    (:func:`growth`), measured by ``rerun()``: both evaluations again, every value they compute moved by a
    relative ``δ`` (``evaluate(..., perturb=seed)``).  A sum's errors grow by its length (``n`` covers them);
    others grow past it: ``exp(x − LSE)`` with ``LSE`` rounded at a magnitude of 300 is ``300·u`` off, where the
    one-pass SoftMax is not.  ``κ ≥ 0`` only widens the tolerance, so it is measured only where a pair disagrees
    without it, in float64 (a cast to a narrower format turns a perturbation into a step of that format's ulp, so
    ``κ`` is 0 there), with the default ``rtol`` and a ``rerun`` given.

    >>> import numpy as np
    >>> x = np.array([300.0, 299.0, 298.5])     # logits of 300: SoftMax, and exp(x − LSE) which rounds LSE first
    >>> def one(x, r=lambda v: v):
    ...     e = r(np.exp(r(x - x.max())))
    ...     return (r(e / r(e.sum())),)
    >>> def two(x, r=lambda v: v):
    ...     lse = r(x.max() + r(np.log(r(r(np.exp(r(x - x.max()))).sum()))))
    ...     return (r(np.exp(r(x - lse))),)
    >>> [bool(a) for a in agreements(one(x), two(x), Precision(), 3)]        # n·u alone: 7.7e-15 is too far
    [False]
    >>> rng = np.random.default_rng(0)
    >>> r = lambda v: perturbed([v], rng)[0]
    >>> [(bool(a), a.kappa > 50) for a in agreements(one(x), two(x), Precision(), 3,
    ...                                               rerun=lambda: (one(x, r), two(x, r)))]
    [(True, True)]
    """
    got = [agreement(a, b, precision, n, rtol, atol) for a, b in zip(y1, y2)]
    if all(got) or rerun is None or rtol is not None or precision.mantissa < EVALUATION_MANTISSA:
        return got
    with np.errstate(all="ignore"):
        m1, m2 = rerun()
    kappa = growth(y1, m1 if isinstance(m1, tuple) else (m1,)) + growth(y2, m2 if isinstance(m2, tuple) else (m2,))
    return [Agreement(*astuple(agreement(a, b, precision, n + math.ceil(kappa), rtol, atol))[:-1], kappa)
            for a, b in zip(y1, y2)]
