"""A kernel's tiling program solved on the faces of its box where no interior KKT point exists (issue 35, faces-35).

The tiling program ``min H  s.t.  C_j ≤ M, 1 ≤ g ≤ n_g`` is a geometric program over a box: convex in log-tiles,
its optimum at a memory lies in the interior of one face of the box (some tiles at 1, some whole, the rest free).
The top-degree model (:mod:`.top_columns`) solves the interior: the KKT points of the columns' top-degree parts.
Where the program has none (projected attention's ``QKᵀ`` kernel at ``n 10 e 24 h 2 d 12``:
``d·h·n²/g_n + d·e·h·n²/(g_m·g_n) + e·h·n²/(g_h·g_m)`` s.t. ``g_h·g_m·(d + g_n) = M`` has its optimum at
``g_h = 1``), the kernel had no large-M form and every algorithm holding it was left out: the symbolic answer was
``nan`` where a numeric derive finds algorithms.

**Law.** Each face fixes a set ``F`` of the free tiles, each at 1 or at its axis (the restricted program: those
tiles substituted, :func:`pinned` and :func:`~napkin_cat.cost.optimum.clamped`); its interior optimum is the
top-degree model's KKT point of that restricted program (:func:`~.top_columns.top_form`, ``K`` its own
:func:`~.held_alike.held_alike`).  The faces are solved smallest ``|F|`` first; of the smallest size with a face
feasible at the reference sizes just above the memory ``at`` (every tile real and in its box ``1 ≤ g ≤ n``, ``H``
finite), the cheapest there is the form (a feasible face's point is an algorithm, so it costs at least the
optimum).  It holds until another face solved (of that size or smaller) becomes the cheaper feasible one (found on
a geometric scan at the reference sizes, then bisection: a :class:`~napkin_cat.search.breakpoints.Breakpoint` at
that number, like a clamp's), or until its own form ends (:func:`~.top_columns.top_form`'s end); where a free tile
reaches its axis the envelope clamps it as for any form.

>>> import napkin_cat as nc
>>> from napkin_cat.cost.tiling import TilingProgram
>>> d, e, h, n, M = (nc.symbol(s) for s in ("d", "e", "h", "n", "M"))
>>> gh, gm, gn = (nc.symbol(s) for s in ("g_h", "g_m", "g_n"))
>>> qk = TilingProgram(d * h * n ** 2 / gn + d * e * h * n ** 2 / (gm * gn) + e * h * n ** 2 / (gh * gm),
...                    (gh * gm * (d + gn),), (gh, gm, gn), ("h", "m", "n"), (h, n, n))
>>> H, tiles, end, K = face_form(qk, M, {d: 12, e: 24, h: 2, n: 10}, 26.0)
>>> tiles[gh], tiles[gn], H        # no face of one tile fits at 26: g_h = 1, g_n whole, g_m = M/(d + n)
(1, n, d*h*n + e*h*n*(d + n)**2/M)
"""
from __future__ import annotations

import functools
import itertools
import math

import sympy

from napkin_cat.cost.optimum import clamped, fixed_at, optimal
from napkin_cat.errors import NapkinError
from napkin_cat.search.breakpoints import Breakpoint, bisected
from napkin_cat.search.held_alike import held_alike, shifted
from napkin_cat.search.top_columns import memory_functions, top_form

#: the memories scanned for where another face becomes the cheaper: ``at · 2^(k/STEPS)`` up to ``2^LAST``
STEPS, LAST = 16, 44


def pinned(prog, names):
    """``prog`` with each tile named in ``names`` set to 1 (moved to ``fixed``, so a form's tiles report it).

    >>> import napkin_cat as nc
    >>> from napkin_cat.cost.tiling import TilingProgram
    >>> a, g = nc.symbol("a"), nc.symbol("g_a")
    >>> pinned(TilingProgram(a / g, (g,), (g,), ("a",), (a,)), ["g_a"]).H
    a
    """
    names = {str(w) for w in names}
    unknown = sorted(names - {str(t) for t in prog.tiles})
    if unknown:
        raise NapkinError(f"pinned={unknown}: not tiles of this program; its tiles are {[str(t) for t in prog.tiles]}")
    return _pinned(prog, frozenset(names))


@functools.lru_cache(maxsize=512)
def _pinned(prog, names: frozenset):
    return fixed_at(prog, {t: sympy.Integer(1) for t in prog.tiles if str(t) in names})


def faces(prog, size: int):
    """The faces that fix ``size`` of the free tiles of ``prog``: ``(ones, wholes)`` name tuples (a tile without an
    axis size is never whole)."""
    _, _, free, _ = prog.restricted()
    fulls = dict(zip(prog.tiles, prog.fulls))
    for chosen in itertools.combinations(free, size):
        for bounds in itertools.product((1, 0), repeat=size):
            if any(not b and fulls[t] == sympy.oo for t, b in zip(chosen, bounds)):
                continue
            yield (tuple(str(t) for t, b in zip(chosen, bounds) if b),
                   tuple(str(t) for t, b in zip(chosen, bounds) if not b))


def face_program(prog, ones, wholes):
    """The restricted program of the face: the tiles ``ones`` at 1, ``wholes`` at their axes."""
    return pinned(clamped(prog, wholes), ones)


def face_form(prog, M, ref: dict, at: float):
    """``(H, tiles, end, K)``: the form of ``prog`` on its cheapest feasible face just above the memory ``at`` at the
    reference sizes ``ref`` (module docstring), the tiles solved for ``M − K`` (:func:`~.held_alike.shifted` not
    applied: ``K`` given for the caller to apply), ``end`` a Breakpoint or None; None where no face is feasible."""
    pairs = tuple(sorted(((k, sympy.sympify(v)) for k, v in ref.items()), key=lambda kv: str(kv[0])))
    got = _face_form(prog, M, pairs, float(at))
    if got is None:
        return None
    H, tiles, end, K = got
    return H, tiles, (None if end is None else Breakpoint(end, sympy.Float(end, 15))), K


@functools.lru_cache(maxsize=512)
def _face_form(prog, M, pairs: tuple, at: float):
    ref = dict(pairs)
    _, _, free, _ = prog.restricted()
    fulls = {t: sympy.sympify(n).xreplace(ref) for t, n in zip(prog.tiles, prog.fulls)}
    start = max(at, 1.0) * (1 + 1e-6)
    solved = []     # the faces of every size so far: a smaller one may take over where it becomes feasible
    for size in range(1, len(free) + 1):
        solved += [s for s in (_solved_face(prog, ones, wholes, M, ref, at, fulls)
                               for ones, wholes in faces(prog, size)) if s is not None]
        values = [_value(s, M, ref, start, fulls) for s in solved]
        if all(v is None for v in values):
            continue
        i = min((k for k, v in enumerate(values) if v is not None), key=lambda k: values[k])
        H, tiles, end, K, _ = solved[i]
        ends = [e for e in (_overtaken(solved, i, M, ref, start, fulls), None if end is None else end.at)
                if e is not None]
        return H, tiles, (min(ends) if ends else None), K
    return None


def _solved_face(prog, ones, wholes, M, ref, at, fulls):
    """``(H, tiles, end, K, (H_ref, tiles_ref))`` of one face, ``H`` and its tiles shifted by its ``K`` and read at
    the reference sizes as float functions of ``M``; None where the face has no point."""
    try:
        face = face_program(prog, ones, wholes)
    except NapkinError:
        return None
    K = held_alike(face, ref)
    if face.restricted()[2]:
        top = top_form(face, M, K, ref, at)
        if top is None:
            return None
        H, tiles, end = top
    else:       # every tile fixed: a constant form
        H, tiles, end = face.restricted()[0], dict(face.fixed), None
        tiles.update({t: sympy.Integer(1) for t in face.tiles})
    Hs, ts = shifted(H, tiles, K, M)
    keys = [t for t in ts if t in fulls]
    # (lambdify's code for M swapped for a positive dummy, bit for bit, compiled once: top_columns.memory_functions)
    h, t = memory_functions(M, [sympy.sympify(Hs).xreplace(ref), [sympy.sympify(ts[k]).xreplace(ref) for k in keys]])
    return H, tiles, end, K, (h, t, [fulls[k] for k in keys])


def _value(solved, M, ref, m: float, fulls):
    """``H`` of a solved face at the memory ``m`` at the reference sizes, None where its point is no algorithm there
    (a tile not real or outside its box ``1 ≤ g ≤ n``; ``H`` not finite)."""
    h, t, axes = solved[4]
    try:
        tv = [complex(x) for x in t(m)]
        v = complex(h(m))
    except (ValueError, ZeroDivisionError, OverflowError, TypeError):
        return None
    for x, n in zip(tv, axes):
        if abs(x.imag) > 1e-9 * max(1.0, abs(x.real)) or not 1 - 1e-9 <= x.real <= float(n) * (1 + 1e-9):
            return None
    if abs(v.imag) > 1e-9 * max(1.0, abs(v.real)) or not math.isfinite(v.real):
        return None
    return v.real


def _overtaken(solved, i, M, ref, start: float, fulls):
    """The memory (a float) where a face other than ``solved[i]`` becomes the cheaper feasible one at the reference
    sizes, on a geometric scan from ``start`` while ``solved[i]`` stays feasible, then bisection; None if none."""
    def cheaper(m):
        own = _value(solved[i], M, ref, m, fulls)
        if own is None:
            return None
        return any(v is not None and v < own * (1 - 1e-9)
                   for k, s in enumerate(solved) if k != i for v in [_value(s, M, ref, m, fulls)])
    lo = start
    for k in range(1, int(STEPS * max(0.0, LAST - math.log2(start))) + 2):
        m = start * 2 ** (k / STEPS)
        c = cheaper(m)
        if c is None:
            return None     # its own point stops being an algorithm: the envelope's clamp (a tile reaches its axis)
        if not c:
            lo = m
            continue
        return bisected(lambda mid: not cheaper(mid), lo, m)
    return None


def on_face(curve, prog, whole, M, ref: dict, at: float, known: dict | None = None):
    """:func:`face_form` of a kernel's program ``prog`` (its block's ``curve``, the tiles ``whole`` set whole) where
    neither its top-degree model nor its large-M optimum has a closed form (the kernel would be left out); None
    where one has (the answer as before) or no face is feasible.  ``known``: a dict the caller owns (a derivation's
    call) keeping whether the curve with those tiles whole has a closed large-M optimum (:func:`closed_form`, a
    pure function of them), so the candidates that hold the kernel ask it once."""
    if known is None:
        closed = closed_form(curve, whole, M)
    else:
        key = (id(curve), tuple(map(str, whole)), M, "closed")
        if key not in known:
            known[key] = (curve, closed_form(curve, whole, M))     # (the curve kept: its id stays its own)
        closed = known[key][1]
    return None if closed else face_form(prog, M, ref, at)


def closed_form(curve, whole, M) -> bool:
    """Whether the kernel's large-M optimum has a closed form with the tiles ``whole`` set whole
    (:func:`~napkin_cat.cost.optimum.optimal`; none whole: the curve's own, ``curve.symbolic_optimum``)."""
    try:
        if whole:
            return optimal(curve.cost, memory=M, level=curve.level, exact=False, whole=whole).H is not None
        curve.symbolic_optimum(M)
        return True
    except NapkinError:
        return False
