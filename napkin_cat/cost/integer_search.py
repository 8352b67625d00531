"""The exact integer optimum: every tile a legal value (a divisor of its axis), every column within memory.

``H*(a, M) = min { H(g) : g_i ∈ V_i,  C_j(g) ≤ M for every column j }`` over the tiles of every
group, where ``V_i`` is the divisors of the tile's axis ``n_i`` unless the caller gives the legal
values (the hardware's divisor constraints, say). The candidates (the product of the lists) are
scored at once with numpy in
log coordinates (``P(g) = Σ α_k exp(E_k · log g)``); the few candidates within rounding of the
best are then re-scored in exact rational arithmetic, so the answer is exact, and ties go to the
least memory, then to the smallest later tiles.

Tiles that no term of ``H`` and no column share are independent problems (the kernels of an algorithm
separated by global memory: each has its own tiles, its own columns, its own transfers): each group is
searched alone and the optima add up, ``H* = Σ_k H*_k`` with every column of kernel ``k`` within memory
(:mod:`~napkin_cat.cost.independent_tiles`), so the candidates are the sum, not the product, of the kernels' grids.

>>> from fractions import Fraction
>>> H = ((Fraction(1), Fraction(1)), ((-1, 0), (0, -1)))      # 1/g_a + 1/g_c
>>> C = [((Fraction(1), Fraction(1), Fraction(1)), ((1, 1), (1, 0), (0, 1)))]   # g_a g_c + g_a + g_c
>>> best(H, C, [divisors(8), divisors(8)], 30)
(Fraction(1, 2), (4, 4))
"""
from __future__ import annotations

import itertools
import math
from fractions import Fraction
from functools import lru_cache

import numpy as np
import sympy

from napkin_cat.cost.independent_tiles import combined, independent_parts
from napkin_cat.cost.grid_scores import KEPT_ROWS, grid_blocks, kept_scores, peaked_blocks, posynomial_scores, scored
from napkin_cat.cost.stairs import NEAR, kept_stairs
from napkin_cat.cost.tied_tiles import by_products, by_seen
from napkin_cat.errors import AxisError

#: the most tilings one search scores (the product of the tiles' legal values, per independent group): forty times
#: the largest grid of the library's searches (92,575: multi-head attention at any tile, g_x × g_q × g_h); 2^24
#: tilings took 48 s on a loaded two-core machine.  Sizes with very many divisors (720720 has 240) over three tiles
#: are refused, naming the tiles' counts
MAX_CANDIDATES = 1 << 22


@lru_cache(maxsize=4096)
def divisors(n: int) -> tuple:
    """The divisors of ``n`` in increasing order, from its prime factors (an axis of 2^62 has 63 divisors, found
    at once; trial division to √n took minutes).

    >>> divisors(12), len(divisors(2 ** 62))
    ((1, 2, 3, 4, 6, 12), 63)
    """
    out = [1]
    for p, e in sympy.factorint(n).items():
        out = [d * p ** k for d in out for k in range(e + 1)]
    return tuple(sorted(out))


def check_grid(values, names=()) -> None:
    """Refuse a search over more than :data:`MAX_CANDIDATES` tilings (``values``: each tile's legal values;
    ``names``: the tiles', for the message).

    >>> check_grid([range(4096)] * 3, ["g_a", "g_b", "g_c"])
    Traceback (most recent call last):
    ...
    napkin_cat.errors.AxisError: the exact tile search would score 68719476736 tilings (g_a: 4096 values, ...
    """
    total = 1
    for v in values:
        total *= len(v)
    if total > MAX_CANDIDATES:
        shown = ", ".join(f"{n}: {len(v)} values" for n, v in zip(list(names) or range(len(values)), values))
        raise AxisError(f"the exact tile search would score {total} tilings ({shown}), more than its limit of "
                        f"{MAX_CANDIDATES}: give sizes with fewer divisors (powers of two have few), or fewer legal "
                        f"tiles (candidates=)")


def undominated(columns) -> tuple:
    """``columns`` (posynomials as ``(coeffs, exponents)``) less each one another bounds term by term: ``A`` is
    dropped where some other column ``B`` has every monomial of ``A`` with at least its coefficient, every
    coefficient of ``A`` positive and none of ``B`` negative, so ``B(g) ≥ A(g)`` at every positive tiling and the
    largest column, the memory a tiling needs, is the same at every tiling; the tiles each kept column reads cover
    the dropped one's (:mod:`~napkin_cat.cost.independent_tiles` splits the tiles alike).  Order kept; of equal
    columns the first.

    >>> one = Fraction(1)
    >>> C = [((one,), ((1, 1),)), ((one, one), ((1, 1), (1, 0))), ((one,), ((0, 2),))]   # ab, ab + a, b²
    >>> undominated(C) == (C[1], C[2])
    True
    """
    terms = []
    for coeffs, exps in columns:
        t: dict = {}
        for a, e in zip(coeffs, exps):     # (a monomial written twice: its coefficients add)
            t[e] = t.get(e, 0) + a
        terms.append(t)
    positive = [all(a > 0 for a in t.values()) for t in terms]
    keep = []
    for i, a in enumerate(terms):
        if positive[i] and any(    # (every monomial of A in B: its keys a subset, checked first, in C)
                j != i and positive[j] and a.keys() <= b.keys() and (a != b or j < i)
                and all(b[e] >= k for e, k in a.items()) for j, b in enumerate(terms)):
            continue
        keep.append(columns[i])
    return tuple(keep)


def _exact(poly, combo) -> Fraction:
    """``Σ α_k Π g_i^{e_ki}`` at the tiles ``combo``, exact: summed as one numerator over one denominator in
    integers (a tile with a negative exponent divides), reduced once at the end.

    >>> _exact(((Fraction(1, 2), Fraction(3)), ((1, -2), (0, 1))), (4, 6))     # 4/(2·36) + 3·6
    Fraction(325, 18)
    >>> _exact(((Fraction(1, 2),), ((-1,),)), (Fraction(8, 3),))      # a trip count read as a tile
    Fraction(3, 16)
    """
    coeffs, exps = poly
    num, den = 0, 1
    for alpha, e in zip(coeffs, exps):
        n, d = alpha.numerator, alpha.denominator
        for g, k in zip(combo, e):
            if k > 0:
                n *= g ** k
            elif k < 0:
                d *= g ** -k
        if den % d == 0:
            num += n * (den // d)
        else:
            num, den = num * d + n * den, den * d
    return Fraction(num, den)


def exact_at(poly):
    """``combo ↦ Σ α_k Π g_i^{e_ki}`` exactly, summed as :func:`_exact` sums it (one numerator over one denominator,
    the same steps), each term's coefficient and its tiles' powers read once: for a search that evaluates one
    posynomial at many tilings.

    >>> poly = ((Fraction(1, 2), Fraction(3)), ((1, -2), (0, 1)))
    >>> exact_at(poly)((4, 6)) == _exact(poly, (4, 6)) == Fraction(325, 18)
    True
    """
    terms = tuple((alpha.numerator, alpha.denominator, tuple((i, k) for i, k in enumerate(e) if k > 0),
                   tuple((i, -k) for i, k in enumerate(e) if k < 0)) for alpha, e in zip(*poly))

    def at(combo) -> Fraction:
        num, den = 0, 1
        for n, d, up, down in terms:
            for i, k in up:
                n *= combo[i] ** k
            for i, k in down:
                d *= combo[i] ** k
            if den % d == 0:
                num += n * (den // d)
            else:
                num, den = num * d + n * den, den * d
        return Fraction(num, den)
    return at


def best(H, columns, values, memory, names=(), exact=None):
    """``(H*, tiles)`` exactly, or ``None`` if no tiling fits; polynomials as ``(coeffs, exponents)``.

    ``values``: per tile, its legal values; ``coeffs`` are exact numbers (``int``/``Fraction``);
    ``memory`` a number.  Independent groups of tiles are searched apart
    (:mod:`~napkin_cat.cost.independent_tiles`), each over at most :data:`MAX_CANDIDATES` tilings
    (:func:`check_grid`; ``names``: the tiles', for its message).
    ``exact``: the transfers counted at a candidate, where ``H`` only estimates them (:func:`best_many`).
    """
    if exact is not None:
        return best_many(H, columns, values, [memory], names=names, exact=exact)[0]
    parts = independent_parts(H, columns, len(values))
    if parts is not None:
        return combined(parts, [best(h, cols, [values[i] for i in g], memory, [names[i] for i in g] if names else ())
                                 for g, h, cols in parts], len(values))
    check_grid(values, names)
    lists = [np.array(sorted(v), dtype=float) for v in values]
    limit = Fraction(memory)
    found = None
    for block in grid_blocks(lists):
        logs = np.log(block)
        fits = np.ones(len(block), dtype=bool)
        for col in columns:
            fits &= posynomial_scores(col, logs) <= float(limit) * (1 + 1e-12)
        scores = posynomial_scores(H, logs)
        while fits.any():
            # rounding can only blur the float ranking near its floor: settle those exactly
            near = np.flatnonzero(fits & (scores <= scores[fits].min() * (1 + 1e-9)))
            for k in near:
                combo = tuple(int(g) for g in block[k])
                peak = max((_exact(col, combo) for col in columns), default=Fraction(0))
                if peak > limit:
                    fits[k] = False
                    continue
                key = (_exact(H, combo), peak, combo[::-1])
                if found is None or key < found:
                    found = key
            if fits[near].any():
                break
    return None if found is None else (found[0], found[2][::-1])


def ragged_values(n: int, most: int = 160) -> tuple:
    """Tiles of an axis of size ``n`` when the last tile may be shorter: for each number of trips ``k`` the
    least tile that makes it, ``⌈n/k⌉`` (a larger tile with as many trips only holds more); at most about
    ``most`` of them (the largest tiles all kept, the smaller ones thinned geometrically), with the divisors.

    >>> ragged_values(10)
    (1, 2, 3, 4, 5, 10)
    """
    tiles = sorted({-(-n // k) for k in range(1, n + 1)}) if n <= 4 * most else None
    if tiles is None or len(tiles) > most:
        ks, k = [], 1.0
        while k <= n:
            ks.append(int(k))
            k = k + 1 if k < most // 2 else k * 1.05
        tiles = sorted({-(-n // k) for k in ks} | {1})
    return tuple(sorted(set(tiles) | set(divisors(n))))


def _exact_ragged(poly, combo, fulls) -> Fraction:
    """H with a shorter last tile: each trip factor ``n/g`` (a tile exponent -1) counts ``⌈n/g⌉`` trips."""
    coeffs, exps = poly
    total = Fraction(0)
    for alpha, e in zip(coeffs, exps):
        term = Fraction(alpha)
        for g, k, n in zip(combo, e, fulls):
            term *= Fraction(-(-n // g), n) if k == -1 else Fraction(g) ** k
        total += term
    return total


def best_many(H, columns, values, memories, fulls=None, caps=(), names=(), exact=None) -> list:
    """:func:`best` for several memory sizes at once: the candidates are scored once.

    ``fulls`` (each tile's axis size): tiles need not divide their axes; the last tile of an axis is shorter
    and a trip factor ``n/g`` of ``H`` counts ``⌈n/g⌉`` trips (memory is what a full tile holds).

    >>> from fractions import Fraction
    >>> H = ((Fraction(1), Fraction(1)), ((-1, 0), (0, -1)))
    >>> C = [((Fraction(1), Fraction(1), Fraction(1)), ((1, 1), (1, 0), (0, 1)))]
    >>> best_many(H, C, [divisors(8), divisors(8)], [2, 30, 100])
    [None, (Fraction(1, 2), (4, 4)), (Fraction(1, 4), (8, 8))]
    >>> best_many(H, C, [ragged_values(8), ragged_values(8)], [30], fulls=(8, 8))
    [(Fraction(1, 2), (4, 4))]

    ``caps``: posynomials that must stay at most 1 whatever the memory (a requirement on the tiles, such as
    enough groups: ``B·g_a·g_c/(a·c) ≤ 1``); with caps the tiles are searched jointly.  With ``fulls`` a cap's
    factors are trips, as ``H``'s are: ``n/g`` counts ``⌈n/g⌉`` (each tile ``g`` read as ``n/⌈n/g⌉``), so the
    cap above asks for ``⌈a/g_a⌉·⌈c/g_c⌉ ≥ B`` groups.

    >>> best_many(H, C, [divisors(8), divisors(8)], [100], caps=[((Fraction(4, 64),), ((1, 1),))])
    [(Fraction(1, 2), (4, 4))]
    >>> best_many(H, C, [ragged_values(8), ragged_values(8)], [100], fulls=(8, 8),
    ...           caps=[((Fraction(6, 64),), ((1, 1),))])    # 6 groups: ⌈8/4⌉·⌈8/3⌉ (8/4·8/3 would be short)
    [(Fraction(5, 8), (4, 3))]

    Without ``exact`` the answer is remembered by value (every argument but ``names``, :func:`searched`): kernels
    whose programs are equal at the sizes are searched once.

    ``exact``: ``exact(tiles) -> Fraction``, the transfers counted at a candidate where ``H`` only estimates them
    (a masked stream's trips that run: :mod:`napkin_cat.cost.trips`).  The estimate then ranks nothing: every
    candidate that fits is counted (once, whatever the memory) and the least count wins, so the answer is the
    exact optimum of what the algorithm moves.  The tiles are searched jointly.

    >>> best_many(H, C, [divisors(8), divisors(8)], [30], exact=lambda t: Fraction(abs(t[0] - 2) + t[1]))
    [(Fraction(1, 1), (2, 1))]
    """
    if exact is not None:
        check_grid(values, names)
        return _counted_many(columns, values, memories, caps, exact)
    if math.prod(len(v) for v in values) > MAX_CANDIDATES:    # (each independent group's grid is at most this)
        parts = None if caps else independent_parts(H, columns, len(values))
        for group in (range(len(values)),) if parts is None else (g for g, _, _ in parts):   # naming the tiles
            check_grid([values[i] for i in group], [names[i] for i in group] if names else ())
    return list(searched(H, tuple(columns), tuple(tuple(v) for v in values), tuple(memories),
                          None if fulls is None else tuple(fulls), tuple(caps)))


@lru_cache(maxsize=2048)
def searched(H, columns, values, memories, fulls, caps) -> tuple:
    """:func:`best_many` without a counting ``exact``: a pure function of its arguments, all of them numbers.

    Why this memo is the process's (issue 35: a cache belongs to the call unless its result is a pure function of its
    key): the answer reads nothing but the posynomials (exact coefficients and integer exponents), each tile's legal
    values, the memories, the axis sizes of a ragged search and the caps, and the key is all of them, compared by
    value (``Fraction`` and ``int``; the tiles' names only word an error, raised before).  Kernels of one search
    whose programs are equal at the sizes (a third of a symbolic block's: 543 distinct of 787) are searched once;
    bounded (2,048, least recently used) and locked (``lru_cache``).
    """
    return tuple(_best_many(H, list(columns), [list(v) for v in values], list(memories), fulls, caps))


def _best_many(H, columns, values, memories, fulls=None, caps=()) -> list:
    """The search of :func:`best_many` without a counting ``exact``: each block of the grid read at each memory
    through its staircase (:mod:`.stairs`: the tilings that can be settled first, kept between searches), and the
    whole block only where every tiling settled first is refused exactly (then the next best are settled, and so on).

    Per block and memory, the tilings that fit in floats (``peak ≤ m (1 + 10⁻¹²)``, within the caps) are ranked
    by their float transfers; those within rounding of the least are settled exactly (the caps at the tiles, the
    peak exactly where it is near the memory, the transfers), and the least of ``(H, peak, later tiles first)``
    among those that fit wins; where none does, they are dropped and the next are settled.  A block's answer at a
    memory where no tiling settled first is near it reads the memory only through how many tilings fit, and is kept
    so (:attr:`~.stairs.Stair.answers`)."""
    parts = None if caps else independent_parts(H, columns, len(values))
    if parts is not None:
        found = [_best_many(h, cols, [values[i] for i in g], memories,
                            None if fulls is None else tuple(fulls[i] for i in g)) for g, h, cols in parts]
        return [combined(parts, [f[j] for f in found], len(values)) for j in range(len(memories))]
    limits = [m if type(m) is int else Fraction(m) for m in memories]    # (an int compares exactly as it is)
    floats = [float(m) for m in limits]
    found = [None] * len(limits)
    key = (H, tuple(columns), tuple(tuple(v) for v in values), None if fulls is None else tuple(fulls), tuple(caps))
    settle = _Settling(H, columns, fulls, caps)
    for b, stair in enumerate(kept_stairs(*key)):
        least, top = stair.least, stair.top
        for j, limit in enumerate(limits):
            fl = floats[j]
            if least is None or least > fl * (1 + 1e-12):
                continue     # no candidate of the block fits this memory (the test below would find none)
            clear = top <= fl * (1 - 1e-9)    # every tiling fits clearly: the block's best is the same memory on
            if clear and stair.every is not None:
                mine = stair.every
            else:
                mine = _on_stair(stair, fl, limit, settle)
                if mine is _PAST:
                    mine = _in_block(key, b, stair.known, fl, limit, settle)
                if clear:
                    stair.every = mine
            if mine is not None and (found[j] is None or mine < found[j]):
                found[j] = mine
    return [None if f is None else (f[0], f[2][::-1]) for f in found]


_PAST = object()     # every tiling settled first is refused: the block is read whole


class _Settling:
    """The exact reading of a tiling (a row of a block): ``row(known, k, tiles)`` is ``[tiles, within the caps, exact
    H, exact peak]`` (the last two found on first use), kept in ``known``; ``peak(tiles)``, ``H(tiles)`` exactly."""

    def __init__(self, H, columns, fulls, caps):
        self.columns, self.fulls, self.caps = columns, fulls, caps
        # (a ragged trip count ⌈n/g⌉ reads its own tile, not a product: there, only the tiles H does not see)
        self.H = by_products([H], exact_at(H)) if fulls is None else \
            by_seen(H, lambda combo: _exact_ragged(H, combo, fulls))
        self._peak = None

    def row(self, known, k, combo):
        found = known.get(k)
        if found is None:
            fulls = self.fulls
            trips = combo if fulls is None else tuple(Fraction(n, -(-n // g)) for g, n in zip(combo, fulls))
            found = known[k] = [combo, not any(_exact(cap, trips) > 1 for cap in self.caps), None, None]
        return found

    def peak(self, combo) -> Fraction:
        if self._peak is None:     # each column's exact evaluator, made when a peak is first settled exactly
            ats = [exact_at(col) for col in self.columns]
            self._peak = by_products(self.columns, lambda c: max((at(c) for at in ats), default=Fraction(0)))
        return self._peak(combo)


def _settled(row, peak, fl, limit, settle):
    """A row's key ``(exact H, peak, later tiles first)`` at a memory, or None where it is refused exactly (the caps,
    or its peak settled exactly where its float is near the memory)."""
    if not row[1]:
        return None
    if peak > fl * (1 - 1e-9):   # near the limit: settle the memory exactly
        if row[3] is None:
            row[3] = settle.peak(row[0])
        if row[3] > limit:
            return None
        peak = row[3]
    if row[2] is None:        # (a float peak orders against a Fraction exactly, as Fraction(peak))
        row[2] = settle.H(row[0])
    return (row[2], peak, row[0][::-1])


def _on_stair(stair, fl, limit, settle):
    """The block's best at a memory read off its staircase, or :data:`_PAST` where every tiling settled first is
    refused (the search goes on past them)."""
    count = stair.fitting(fl * (1 + 1e-12))
    if not count:
        return None
    near, top = stair.near(count)
    quiet = top <= fl * (1 - 1e-9)      # no tiling settled first is near the memory: the answer reads the count only
    if quiet and count in stair.answers:
        return stair.answers[count]
    mine, known = None, stair.known
    for k, combo, peak in near:
        key = _settled(settle.row(known, k, combo), peak, fl, limit, settle)
        if key is not None and (mine is None or key < mine):
            mine = key
    if mine is None:
        return _PAST
    if quiet:
        stair.answers[count] = mine
    return mine


def _in_block(key, b, known, fl, limit, settle):
    """The best of the ``b``-th block of the grid ``key`` at a memory, read whole: the tilings that fit in floats,
    those within rounding of the least transfers settled exactly, dropped where refused, until one fits."""
    blocks = kept_scores(*key) if math.prod(len(v) for v in key[2]) <= KEPT_ROWS else scored(*key)
    block, peak, scores, capped, _, _ = next(itertools.islice(blocks, b, None))
    ints, peaks = block.astype(np.int64), peak.tolist()
    fits = (peak <= fl * (1 + 1e-12)) & capped
    mine = None
    while fits.any():
        near = np.flatnonzero(fits & (scores <= scores[fits].min() * (1 + 1e-9)))
        if len(near) > NEAR:   # many ties (tiles the transfers do not see): settle the first by float order
            order = np.lexsort(tuple(block[near, ::-1].T) + (peak[near], scores[near]))
            near = near[order[:NEAR]]
        for k in near.tolist():
            got = _settled(settle.row(known, k, tuple(ints[k].tolist())), peaks[k], fl, limit, settle)
            if got is None:
                fits[k] = False
            elif mine is None or got < mine:
                mine = got
        if fits[near].any():
            break
    return mine


def _counted_many(columns, values, memories, caps, exact) -> list:
    """:func:`best_many` where ``exact(tiles)`` is the objective: every candidate within memory and the caps is
    counted, once; ties go to the least memory, then to the smallest later tiles (as :func:`best_many`)."""
    limits = [Fraction(m) for m in memories]
    found = [None] * len(limits)
    counted: dict = {}
    for block, logs, peak in peaked_blocks(columns, values):
        capped = np.ones(len(block), dtype=bool)
        for cap in caps:
            capped &= posynomial_scores(cap, logs) <= 1 + 1e-12
        for k in np.flatnonzero(capped & (peak <= float(max(limits)) * (1 + 1e-12))):
            combo = tuple(int(g) for g in block[k])
            if any(_exact(cap, combo) > 1 for cap in caps):
                continue
            exact_peak = max((_exact(col, combo) for col in columns), default=Fraction(0))
            for j, limit in enumerate(limits):
                if exact_peak > limit:
                    continue
                if combo not in counted:
                    counted[combo] = Fraction(exact(combo))
                key = (counted[combo], exact_peak, combo[::-1])
                if found[j] is None or key < found[j]:
                    found[j] = key
    return [None if f is None else (f[0], f[2][::-1]) for f in found]
