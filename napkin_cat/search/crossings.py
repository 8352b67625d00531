"""Where two closed forms of a symbolic derive cross (:mod:`.envelope`): the crossing found by number at the reference
sizes, then its closed form in the sizes.

Law: two candidates' large-M forms ``H_a(M)``, ``H_b(M)`` (sums of powers of ``M``, :func:`~napkin_cat.cost.optimum.
power_terms`) cross at a root of ``H_a − H_b``; the root the envelope needs is the one equal, at the reference sizes, to
the crossing the bisection finds (:func:`crossing`), so the closed form is picked by its value, never guessed.  Forms
whose memory is shifted by the same ``K`` (what a kernel holds whatever its free tiles, :mod:`.held_alike`) are
solved in ``M − K``.

>>> import sympy
>>> M, a = sympy.symbols("M a", positive=True)
>>> crossing_root(a ** 3 / M, a ** 2, M, {a: 10}, 10.0)        # a³/M = a² at M = a
a
"""
from __future__ import annotations

import functools
import math

import sympy

from napkin_cat.cost.expanded import expand, expanded
from napkin_cat.cost.maxima import numbers_for
from napkin_cat.cost.op_count import count_ops
from napkin_cat.cost.optimum import power_terms
from napkin_cat.cost.seeded import roots as seeded_roots
from napkin_cat.errors import NapkinError


def at_reference(expr, env) -> float:
    """``expr`` at the reference sizes ``env``, a float; NapkinError naming the expression where it is not a number.

    A pure function of ``expr`` and ``env`` (``subs`` with a dict does not depend on its order): the process keeps its
    answers (bounded, :func:`_at_pairs`), as the envelope reads each breakpoint at every drawing, in its spans and
    where it drops an empty piece (a block's crossings are closed forms of thousands of terms).

    >>> import sympy
    >>> at_reference(sympy.Symbol("n") + 1, {sympy.Symbol("n"): 3})
    4.0
    """
    expr = sympy.sympify(expr)
    try:
        pairs = tuple(sorted(env.items(), key=lambda kv: str(kv[0])))
        hash(pairs)
    except TypeError:       # (a size that is no hashable number: read as it is)
        return _evaluated(expr, env)
    return _at_pairs(expr, pairs)


@functools.lru_cache(maxsize=4096)
def _at_pairs(expr, pairs: tuple) -> float:
    """:func:`at_reference` of the sorted ``(symbol, number)`` pairs ``pairs``."""
    return _evaluated(expr, dict(pairs))


def _put_in(expr, env, at):
    """``expr.subs(env)``, by ``xreplace`` of ``at`` (:func:`~napkin_cat.cost.maxima.numbers_for` of ``env``, read once
    by the caller) where every key is a symbol and every value a number: every one put in at once."""
    return expr.xreplace(at) if at is not None else expr.subs(env)


def _evaluated(expr, env: dict) -> float:
    v = _put_in(expr, env, numbers_for(env))
    try:
        return float(v)
    except TypeError:
        raise NapkinError(f"cannot evaluate {expr} at the reference sizes {env}") from None


def crossing(fa, fb, lo: float, hi: float) -> float:
    """Where two closed forms ``fa``, ``fb`` (numbers in, numbers out: at the reference sizes) cross in [lo, hi],
    ``fa ≤ fb`` at ``lo`` and ``fa > fb`` at ``hi``: bisection on log M to a relative 1e-12.

    >>> round(crossing(lambda m: m / 100, lambda m: 1.0, 1.0, 1000.0), 6)      # M/100 = 1 at M = 100
    100.0
    """
    for _ in range(200):   # the crossing at the reference sizes, by bisection on log M
        mid = math.sqrt(lo * hi)
        if (fa(mid) - fb(mid)) > 0:
            hi = mid
        else:
            lo = mid
        if hi / lo < 1 + 1e-12:
            break
    target = math.sqrt(lo * hi)
    return target


def crossing_root(Ha, Hb, M, ref, target):
    """The symbolic root of ``Ha = Hb`` in ``M`` that equals ``target`` at the reference sizes, or None.  Forms
    whose memory is shifted by one ``K`` (:func:`~.held_alike.shifted`; the other form's too, or constant) are
    solved in ``M − K`` and the root shifted back.

    A pure function of its arguments (sympy expressions compare by structure): the process keeps its answers
    (bounded), as the envelope asks the same crossing again each time it is rebuilt with more candidates."""
    pairs = tuple(sorted(ref.items(), key=lambda kv: str(kv[0])))
    return _crossing_root(sympy.sympify(Ha), sympy.sympify(Hb), M, pairs, float(target))


@functools.lru_cache(maxsize=1024)
def _crossing_root(Ha, Hb, M, pairs: tuple, target: float):
    """:func:`crossing_root` of the sorted ``(symbol, number)`` pairs ``pairs``."""
    ref = dict(pairs)
    ks = [k for k in shifts(Ha, M) | shifts(Hb, M) if not k.has(M)]
    if len(ks) == 1:
        at = {M: M + ks[0]}
        root = power_root(Ha.xreplace(at), Hb.xreplace(at), M, ref, target - at_reference(ks[0], ref))
        return None if root is None else root + ks[0]
    return power_root(Ha, Hb, M, ref, target)


@functools.lru_cache(maxsize=1024)
def shifts(H, M) -> frozenset:
    """``{M − a}`` for each sum ``a`` in ``H`` with ``M`` among its terms: the memory shifts ``K`` of ``M − K``
    (expanded) that :func:`crossing_root` may solve in (one form's, memoised: a form meets several others).

    >>> import sympy
    >>> M, K = sympy.symbols("M K", positive=True)
    >>> sorted(shifts(1 / (M - K) + sympy.sqrt(M + 1), M), key=str)
    [-1, K]
    """
    return frozenset(expand(M - a) for a in sympy.sympify(H).atoms(sympy.Add) if M in a.args)


@functools.lru_cache(maxsize=1024)
def off_powers(H, M) -> tuple:
    """The terms of ``H`` expanded that are no power of ``M`` times a coefficient free of it, as ``(x, c)``: the
    term ``c·x`` with ``c`` its number (``as_coeff_Mul``), sorted by ``x``'s sort key; one form's, memoised.

    ``Ha − Hb`` expanded is a sum of powers of ``M`` exactly where these cancel: expanding distributes over the
    sum, and sympy adds the terms of ``expand(Ha) − expand(Hb)`` by their ``x`` (summing their numbers), so a
    term ``x`` no power of ``M`` survives in the difference unless its numbers on the two sides are equal.  So
    :func:`power_root` reads the two forms' lists, each expanded once, before it expands their difference.

    >>> import sympy
    >>> M, a = sympy.symbols("M a", positive=True)
    >>> off_powers(a / M + 3 * a * sympy.sqrt(M + 1), M)
    ((a*sqrt(M + 1), 3),)
    """
    out: dict = {}
    for term in sympy.Add.make_args(expanded(H)):     # (sympy.expand's, each repeated subexpression expanded once)
        if off_power(term, M):
            c, x = term.as_coeff_Mul()
            out[x] = out.get(x, sympy.Integer(0)) + c
    return tuple(sorted(out.items(), key=lambda xc: xc[0].sort_key()))


def off_power(term, M) -> bool:
    """Whether a term of an expanded form is no power of ``M`` times a coefficient free of it: whether
    ``term.as_coeff_exponent(M)[0].has(M)``, read off the term's factors (:func:`collected_power`) where that decides
    it, else asked of sympy (its ``collect``, seconds on a block's forms).

    >>> import sympy
    >>> M, a = sympy.symbols("M a", positive=True)
    >>> [off_power(t, M) for t in (3 * a, a * M ** sympy.Rational(3, 2), a * M * sympy.sqrt(M + a), a / (M - a * M))]
    [False, False, True, False]
    """
    if not term.has(M):
        return False
    k = collected_power(term, M)
    if k is UNKNOWN:
        return bool(term.as_coeff_exponent(M)[0].has(M))
    return k is None


#: :func:`collected_power` cannot tell (sympy's ``collect`` asked instead)
UNKNOWN = object()


def collected_power(e, M):
    """The power ``k`` of ``M`` where sympy's ``collect(e, M)`` is ``M^k`` times factors free of ``M`` (0: free of
    it), None where it keeps ``M`` in another factor, :data:`UNKNOWN` where this does not tell.

    The law, ``collect``'s own: it collects each factor of a product, the base of a power and each term of a sum
    first, then gathers a sum's terms by their power of ``M``; a sum whose terms all carry one power ``M^k`` becomes
    ``M^k`` times a sum free of it (``−M√g + Mg = M(g − √g)``), which an integer power splits; a sum whose terms
    carry two powers (one may be ``M⁰``: ``M + dn``) stays a sum in ``M``.  A non-integer power of a sum that
    collects to ``M^k`` times more (split only where sympy knows the rest's sign) and a function of ``M`` are
    :data:`UNKNOWN` (``tests/search/test_crossings.py`` checks this against ``as_coeff_exponent`` on every term of
    the forms three symbolic derives compare; checked once on 3,212 terms of 13 programs' forms, a block's too).

    >>> import sympy
    >>> M, a = sympy.symbols("M a", positive=True)
    >>> [collected_power(e, M) for e in (a, M ** 2 * a, a / (M - a * M), M + a, sympy.sqrt(M * a - M))]
    [0, 2, -1, None, <object ...>]
    """
    if not e.has(M):
        return 0
    if e == M:
        return 1
    if e.is_Mul:
        total = 0
        for f in e.args:
            k = collected_power(f, M)
            if k is None or k is UNKNOWN:
                return k
            total += k
        return total
    if e.is_Pow:
        if e.exp.has(M):
            return UNKNOWN
        k = collected_power(e.base, M)
        if k is None or k is UNKNOWN or k == 0:
            return k
        return k * e.exp if e.base == M or e.exp.is_Integer else UNKNOWN
    if e.is_Add:
        ks = {collected_power(t, M) for t in e.args}
        if UNKNOWN in ks:
            return UNKNOWN
        return ks.pop() if len(ks) == 1 and None not in ks else None
    return UNKNOWN


def cancel(a: tuple, b: tuple) -> bool:
    """Whether two forms' :func:`off_powers` cancel in their difference: the same terms with equal numbers.

    >>> import sympy
    >>> x = sympy.Symbol("x")
    >>> cancel(((x, sympy.Integer(2)),), ((x, sympy.Integer(2)),)), cancel(((x, sympy.Integer(2)),), ())
    (True, False)
    """
    da, db = dict(a), dict(b)
    return all((da.get(x, 0) - db.get(x, 0)).is_zero for x in {*da, *db})


def power_root(Ha, Hb, M, ref, target):
    """:func:`crossing_root` of two sums of powers of ``M``: with ``u = M^(1/L)`` (L the least common denominator of
    the exponents) ``Ha − Hb`` is a polynomial in ``u`` of degree ≤ 4, solved by radicals; the positive real root
    within 1e-6 of ``target`` at the reference sizes (to the power ``L``, rationalised where it is small,
    :data:`MAX_RADSIMP_OPS`), or None (at once where the two forms' terms that are no
    power of ``M`` do not cancel, :func:`off_powers`: their difference is no such sum).  Of degree 1, ``a·u + b``,
    the root is ``−b/a``, factored as sympy's ``roots`` factors it where ``a`` and ``b`` are polynomials, as it stands
    where they hold radicals (sympy's would ``simplify`` it: 8 CPU s on one crossing of a transformer block at small
    sizes, and a longer form, 243k characters of ``srepr`` against 3.7k, the same number).

    >>> import sympy
    >>> M, n = sympy.symbols("M n", positive=True)
    >>> power_root(n ** 2 / M, n, M, {n: 8}, 8.0)        # n²/M = n at M = n
    n
    """
    if not cancel(off_powers(Ha, M), off_powers(Hb, M)):
        return None
    try:
        terms = power_terms(expanded(Ha - Hb), M)
    except NapkinError:
        return None
    if not terms:
        return None
    L = 1
    for _, beta in terms:
        L = sympy.ilcm(L, sympy.Rational(beta).q)
    top = max(beta for _, beta in terms)
    u = sympy.Dummy("u", positive=True)
    poly = sympy.Add(*[alpha * u ** int(L * (top - beta)) for alpha, beta in terms])
    try:
        p = sympy.Poly(poly, u)
        if p.degree() > 4:
            return None
        if p.degree() == 1 and not (p.get_domain().is_Numerical or p.get_domain().is_Composite):
            roots = [-p.nth(0) / p.nth(1)]            # (radicals in its coefficients: sympy would simplify)
        else:
            roots = list(seeded_roots(p))     # (sympy's, its factorisation's points seeded)
    except (NotImplementedError, ValueError, sympy.PolynomialError):
        return None
    best, at = None, numbers_for(ref)
    for r in roots:
        try:
            v = complex(_put_in(sympy.sympify(r), ref, at).evalf())
        except (TypeError, ValueError):
            continue
        if v != v:   # nan: the root degenerates at the reference sizes
            continue
        if abs(v.imag) > 1e-9 * max(1.0, abs(v.real)) or v.real <= 0:
            continue
        err = abs(v.real ** int(L) - target) / target
        if best is None or err < best[0]:
            best = (err, r)
    if best is None or best[0] > 1e-6:
        return None
    root = best[1] ** int(L)
    return sympy.radsimp(root) if count_ops(root) <= MAX_RADSIMP_OPS else root


#: a crossing's root is rationalised (``sympy.radsimp``) only up to this many operations: a quartic's root by radicals
#: (causal attention's crossings, 828 operations) came out 3.3x longer for 0.4 s each, the same number
MAX_RADSIMP_OPS = 400


__all__ = ["crossing", "crossing_root", "power_root", "at_reference", "shifts", "off_powers", "off_power",
           "collected_power", "cancel"]
