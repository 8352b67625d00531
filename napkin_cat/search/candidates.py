"""A candidate of the symbolic mode: one winning algorithm's closed form ``H`` in ``M``, where it starts and ends.

A candidate (:class:`Candidate`) is made of its kernels' large-M forms (each kernel's free tiles
solved against the top-degree part of its exact columns, :mod:`.top_columns`, or on a face of its tile box,
:mod:`.faces`; tiles set whole as a clamp asks), summed; it holds from its smallest memory up to where a tile
reaches its axis or a kernel's binding column changes (:func:`past_at`, :func:`open_tiles`).  The envelope
(:mod:`.envelope`) orders candidates by their value at the reference sizes (:func:`ref_form`, made from the parts
without the summed closed form, which is made where it is read).

>>> import napkin_cat as nc
>>> M, d = nc.symbol("M"), nc.symbol("d")
>>> ref_form([d * (d + M), d ** 2 / M], {}, {d: 4})
4*M + 16 + 16/M
"""
from __future__ import annotations

import functools
import math

import sympy

from napkin_cat.cost.maxima import column_max
from napkin_cat.cost.optimum import clamped, optimal
from napkin_cat.errors import NapkinError
from napkin_cat.search.breakpoints import Breakpoint, reaching
from napkin_cat.search.crossings import at_reference
from napkin_cat.search.faces import on_face
from napkin_cat.search.held_alike import held_alike, shifted
from napkin_cat.search.lower_envelope import guarded
from napkin_cat.search.top_columns import beyond_closed_forms, float_functions, top_columns, top_form
from napkin_cat.cost.expanded import expand


class Candidate:
    """A winning algorithm: its closed form ``H`` in ``M`` and its smallest memory ``smallest``.

    ``whole``: per kernel, the tiles (the block's names) set to their axes (:func:`~.envelope.clamped_candidates`);
    ``smallest``: where such a form starts to hold (its parent's :attr:`until`, a
    :class:`~napkin_cat.search.breakpoints.Breakpoint`).  ``until``: the memory where the first tile that still
    grows with ``M`` reaches its axis at the reference sizes (``oo`` if none does), or, before it, where a kernel's
    binding column changes (:mod:`.top_columns`; no tile reaches its axis there); ``reaching``: that tile per
    kernel.  ``start`` and ``end``: the two as breakpoints (``at``: the value at the reference sizes, what the
    envelope orders by; the closed form read only where a piece of the answer ends there)."""

    def __init__(self, made, M, sizes, env, ref, whole=None, smallest=None, note=None, forms=None):
        self.made, self.whole, self.note = made, whole or [() for _ in made.parts], note
        self._ref, self._H_ref, self._at_ref, self._M = ref, None, None, M
        if smallest is None:
            first = sympy.sympify(column_max(made.smallest(sizes), exact=False)).subs(env)
            smallest = Breakpoint(at_reference(first, ref), first)
        self.start = smallest
        switch = []     # where a kernel's form stops being its top-degree model's optimum (:mod:`.top_columns`)
        bounds = []     # the kernels whose interior point has no closed form here (:func:`_parts`)
        parts = _parts(made, M, self.whole, {} if forms is None else forms, ref, smallest.at, switch, bounds)
        self.beyond = tuple(dict.fromkeys(bounds))     # its kernels' programs whose interior point is not solved
        if bounds:      # (a note written when read, as :func:`_jump`'s: the prior one read first)
            prior = self._note
            self.note = lambda: _beyond_note(bounds, prior() if callable(prior) else prior)
        self._parts, self._env, self._H, self._tiles = parts, env, None, None
        self.end, self.reaching, self.past = _until(made.parts, parts, self.whole, M, env, ref, smallest)
        if switch and not self.past and (self.end is None or min(b.at for b in switch) < self.end.at):
            self.end = min(switch, key=lambda b: b.at)      # the same tiles free past it, another form
            self.reaching = [() for _ in made.parts]

    @property
    def note(self):
        """A note on this form (None, or text; one written when read, :func:`_jump`, is written once)."""
        if callable(self._note):
            self._note = self._note()
        return self._note

    @note.setter
    def note(self, value):
        self._note = value

    @property
    def H(self):
        """The closed form: the sum of the kernels' forms (:func:`_parts`), the sizes given put in, expanded; made
        where read (a piece of the answer, a crossing that ends one, ``Derivation.candidates``), once.  The
        envelope orders the candidates by :attr:`H_ref`, made from the parts without it."""
        if self._H is None:
            parts, env = self._parts, self._env
            # (expanded part by part: a part recurs across the candidates that hold its kernel, expanded once)
            self._H = expand(sympy.Add(*[h for h, _ in parts]).subs(env)) if env else \
                sympy.Add(*[expand(h) for h, _ in parts])
        return self._H

    @property
    def tiles(self) -> dict:
        """The tiles of every kernel (the kernels' names → forms in ``M``, the sizes given put in), made where read,
        once."""
        if self._tiles is None:
            self._tiles = {}
            for _, t in self._parts:
                self._tiles.update({k: sympy.sympify(v).subs(self._env) for k, v in t.items()})
        return self._tiles

    @property
    def H_ref(self):
        """``H`` at the reference sizes, a form in ``M`` alone, made once: where :attr:`H` is made, it at the sizes
        (:func:`at_reference_sizes`); else the parts at the sizes, expanded (:func:`ref_form`: the same expression,
        ``tests/search/test_lazy_candidates.py``), and ``H`` is not made."""
        if self._H_ref is None:
            self._H_ref = at_reference_sizes(self._H, self._ref) if self._H is not None else \
                ref_form([h for h, _ in self._parts], self._env, self._ref)
        return self._H_ref

    @property
    def ref(self) -> dict:
        """The reference sizes (symbols → numbers) that order the candidates: :attr:`H_ref` is ``H`` there."""
        return self._ref

    @property
    def at_ref(self):
        """:attr:`H_ref` as a float function of the memory (``inf`` where it is not a non-negative number), made
        once (:func:`~.top_columns.float_functions`: ``sympy.lambdify(M, H_ref, "math")``'s code, bit for bit)."""
        if self._at_ref is None:
            self._at_ref = guarded(self._float_ref)
        return self._at_ref

    @functools.cached_property
    def _float_ref(self):
        """:attr:`H_ref`'s float function of the memory, unguarded (it raises where the form is no real number)."""
        return float_functions([self._M], [self.H_ref])[0]

    def value_at(self, at: float):
        """:attr:`H_ref` at ``M = at`` as a sympy ``Float``: by its float function where that gives a finite real
        number (sympy's value there, to rounding), else sympy's own (a pole: ``zoo``) — what
        :func:`~.envelope.clamped_candidates` compares where one form hands over to the next, without evaluating
        the form in sympy (:attr:`at_ref` reads the same float function).

        >>> import napkin_cat as nc
        >>> M = nc.symbol("M")
        >>> c = Candidate.__new__(Candidate)
        >>> c._M, c._H_ref, c._H, c._at_ref = M, 16 / (M - 4), None, None
        >>> c.value_at(8.0), c.value_at(4.0)
        (4.00000000000000, zoo)
        """
        try:
            v = self._float_ref(at)
        except (ValueError, ZeroDivisionError, OverflowError, TypeError):
            v = None
        if isinstance(v, float) and math.isfinite(v):
            return sympy.Float(v)
        return self.H_ref.xreplace({self._M: sympy.sympify(at)})

    @property
    def smallest(self):
        return self.start.expr

    @property
    def until(self):
        return sympy.oo if self.end is None else self.end.expr

    @property
    def until_at(self) -> float:
        return math.inf if self.end is None else self.end.at


def ref_form(parts, env, ref):
    """The sum of ``parts`` (forms in ``M`` and the sizes) with the sizes given (``env``) and then the reference
    sizes (``ref``) put in, expanded: ``at_reference_sizes(expand(Σ parts .subs(env)), ref)`` made without expanding
    the sum in the sizes (a polynomial in the sizes' symbols expands to many terms; at numbers, few).

    >>> import napkin_cat as nc
    >>> M, d = nc.symbol("M"), nc.symbol("d")
    >>> ref_form([d * (d + M), d ** 2 / M], {}, {d: 4})
    4*M + 16 + 16/M
    """
    if env:
        return expand(at_reference_sizes(sympy.Add(*parts).subs(env), ref))
    pairs = tuple(sorted(((k, sympy.sympify(v)) for k, v in ref.items()), key=lambda kv: str(kv[0])))
    return sympy.Add(*[_part_at(h, pairs) for h in parts])    # (like terms gathered exactly: rational coefficients)


@functools.lru_cache(maxsize=4096)
def _part_at(h, pairs: tuple):
    """A part of a candidate's form, expanded, at the sizes ``pairs`` (sorted ``(symbol, number)`` pairs): a pure
    function of its key (a part recurs across the candidates that hold its kernel: put at the sizes once)."""
    return at_reference_sizes(expand(h), dict(pairs))


def _beyond_note(bounds: list, prior=None) -> str:
    """The note of a form holding kernels whose interior point is beyond the closed forms (:func:`_parts`)."""
    text = ("an upper bound where these kernels' interior optimum is a root the closed forms do not reach "
            "(napkin_cat.search.top_columns.beyond_closed_forms): their form is the cheapest face of the tile box or "
            "another column's point, and the optimum of their relaxed program can lie below it: "
            + "; ".join(dict.fromkeys(bounds)))
    return text if not prior else f"{prior}; {text}"


def _parts(made, M, whole, forms: dict, ref, at: float = 1.0, switch: list | None = None,
           bounds: list | None = None):
    """Per kernel ``(H*, tiles)`` in the large-M form, the tiles of ``whole[k]`` set to their axes, the free tiles
    solved for the memory the kernel does not hold whatever they are (:func:`~.held_alike.shifted`).  ``forms``: the
    call's large-M forms of a block's curve with some tiles whole, by the curve and those tiles (a block's curve is
    shared by the candidates that hold its kernel, and each of their clamped forms asks for it again).

    A grouped kernel's free tiles are solved against the top-degree part of its exact columns
    (:func:`~.top_columns.top_form`, the optimum just above ``at`` at the reference sizes); where that optimum
    changes (another column binds), the breakpoint is appended to ``switch``."""
    out = []
    for (curve, names), fixed in zip(made.parts, whole):
        if curve.grouped:
            key = (id(curve), tuple(map(str, fixed)), "alike")
            if key not in forms:
                prog = curve.program
                prog = clamped(prog, fixed) if fixed else prog
                forms[key] = (curve, held_alike(prog, ref), prog)
            _, K, prog = forms[key]
            top = top_form(prog, M, K, ref, at)
            if top is None and bounds is not None and beyond_closed_forms(prog, M):   # (its columns solved: kept)
                restricted, tops, _, _ = top_columns(prog)
                bounds.append(f"{restricted} with {' or '.join(map(str, tops))} = M")
            if top is None and (face := on_face(curve, prog, fixed, M, ref, at, forms)) is not None:
                top, K = face[:3], face[3]      # no closed form: the cheapest face of its box (:mod:`.faces`)
            if top is not None:
                H, sizes, end = top
                if end is not None and switch is not None:
                    switch.append(end)
                h = H.xreplace(names) if names else H
                t = {names.get(k, k): (sympy.sympify(v).xreplace(names) if names else v) for k, v in sizes.items()}
                out.append(shifted(h, t, K, M))
                continue
        else:
            K = 0
        if not fixed:
            h, t = curve.symbolic_optimum(M)
            h = h.xreplace(names) if names else h
            t = {names.get(k, k): (sympy.sympify(v).xreplace(names) if names else v) for k, v in t.items()}
        else:
            key = (id(curve), tuple(map(str, fixed)))
            if key not in forms:
                o = optimal(curve.cost, memory=M, level=curve.level, exact=False, whole=fixed)
                if o.H is None:
                    raise NapkinError(f"no closed large-M form with {list(map(str, fixed))} whole: {o.notes}")
                forms[key] = (curve, o.H, o.sizes)     # (the curve kept: its id stays its own for the call)
            _, H, sizes = forms[key]
            h = H.xreplace(names) if names else H
            t = {names.get(k, k): (sympy.sympify(v).xreplace(names) if names else v) for k, v in sizes.items()}
        out.append(shifted(h, t, K, M))
    return out


def _until(curves, parts, whole, M, env, ref, start):
    """``(breakpoint, reaching, past)``: the memory past which a tile of some kernel's program (a group's tile or a
    stream that is a tile, :func:`~napkin_cat.cost.tiling.program`) would exceed its axis in the large-M form (its
    form no longer describes an algorithm), the first at the reference sizes ``ref``
    (:func:`~napkin_cat.search.breakpoints.reaching`), or None; ``reaching``: per kernel, the tiles (the block's
    names) that reach their axes there.  ``curves``: per kernel its block's curve and the renaming of its tiles to
    the kernel's (``made.parts``).

    ``past``: whether some tile is already past its axis at the form's first memory ``start`` (a
    :class:`~napkin_cat.search.breakpoints.Breakpoint`) at the reference sizes: the form describes no algorithm at
    any memory (``g_n = √(d(M + dn)/n) ≥ d > n`` for every ``M``; no crossing to find), so it stops holding at
    ``start`` itself and those tiles (every one past its axis there) are the ones set whole (:func:`past_at`)."""
    over = past_at(curves, parts, whole, M, env, ref, start.at)
    if any(over):
        return start, over, True
    found = []    # (breakpoint, kernel, tile)
    for k, tile, t, n in open_tiles(curves, parts, whole, env):
        if t.has(M):
            b = reaching(t, n, M, ref)
            if b is not None:
                found.append((b, k, tile))
    if not found:
        return None, None, False
    first = min(b.at for b, *_ in found)
    reaching_ = [() for _ in curves]
    root = None
    for b, k, tile in found:
        if b.at <= first * (1 + 1e-9):
            reaching_[k] += (tile,)
            root = b if root is None else root
    return root, reaching_, False


def at_reference_sizes(expr, ref, M=None, at=None):
    """``expr.subs(ref)``, then ``.subs(M, at)`` where ``M`` is given, by ``xreplace`` (every key a symbol, every
    value a number: the same expression, without ``subs``'s pattern matching; in two steps as the two ``subs``, so a
    float memory meets the same exact form).

    >>> import napkin_cat as nc
    >>> M, d = nc.symbol("M"), nc.symbol("d")
    >>> at_reference_sizes((M - 2 * d) / d, {d: 64}), at_reference_sizes((M - 2 * d) / d, {d: 64}, M, 256.0)
    (M/64 - 2, 2.00000000000000)
    """
    out = sympy.sympify(expr).xreplace({k: sympy.sympify(v) for k, v in ref.items()})
    return out if M is None else out.xreplace({M: sympy.sympify(at)})


def past_at(curves, parts, whole, M, env, ref, at: float) -> list:
    """Per kernel, the tiles of its program (the block's names; not yet in ``whole``) whose large-M form exceeds
    the tile's axis at ``M = at`` at the reference sizes ``ref``: the law ``t(at) ≤ n`` is what a tile of an
    algorithm keeps (``tests/search/test_symbolic_past_axis.py``)."""
    over = [() for _ in curves]
    pairs = tuple(sorted(((k, sympy.sympify(v)) for k, v in ref.items()), key=lambda kv: str(kv[0])))
    at_ = sympy.sympify(at)
    for k, tile, t, n in open_tiles(curves, parts, whole, env):
        try:
            tv, nv = complex(at_sizes(t, pairs).xreplace({M: at_})), complex(at_sizes(n, pairs))
        except (TypeError, ValueError):
            continue
        if abs(tv.imag) <= 1e-9 * abs(tv) and abs(nv.imag) <= 1e-9 * abs(nv) and tv.real > nv.real * (1 + 1e-9):
            over[k] += (tile,)
    return over


@functools.lru_cache(maxsize=4096)
def at_sizes(expr, pairs: tuple):
    """``at_reference_sizes(expr, dict(pairs))`` (``pairs``: sorted ``(symbol, number)`` pairs), kept: a pure function
    of its key (a kernel's tile and axis recur in every candidate that holds the kernel; :func:`past_at` reads them
    at each one's first memory).  **Law:** ``at_sizes(e, pairs).xreplace({M: at})`` is
    ``at_reference_sizes(e, dict(pairs), M, at)`` (its two steps, the first kept; ``tests/search/test_at_sizes.py``).

    >>> import napkin_cat as nc
    >>> M, d = nc.symbol("M"), nc.symbol("d")
    >>> at_sizes((M - 2 * d) / d, ((d, sympy.Integer(64)),)).xreplace({M: sympy.Float(256.0)})
    2.00000000000000
    """
    return at_reference_sizes(expr, dict(pairs))


def open_tiles(curves, parts, whole, env):
    """Each tile still free in a grouped kernel's program (not in ``whole``, with a finite axis) as
    ``(kernel, tile, t, n)``: the tile (the block's name), its large-M form ``t`` and its axis ``n`` in the sizes,
    the block's names read as the kernel's (``curves``: ``made.parts``; ``parts``: per kernel ``(H, tiles)``) — the
    one walk :func:`_until` (where a tile reaches its axis) and :func:`past_at` (a tile already past it) share."""
    for k, ((curve, names), (_, tiles), fixed) in enumerate(zip(curves, parts, whole)):
        if not curve.grouped:
            continue
        prog = curve.program
        done = {str(w) for w in fixed}
        for tile, full in zip(prog.tiles, prog.fulls):
            if str(tile) in done or full == sympy.oo:
                continue
            t = sympy.sympify(tiles.get(names.get(tile, tile), 1)).subs(env)
            yield k, tile, t, (sympy.sympify(full).xreplace(names) if names else sympy.sympify(full)).subs(env)
