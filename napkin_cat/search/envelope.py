"""Symbolic mode: ``H*(M)`` as the lower envelope of the winning algorithms' closed forms, a ``Piecewise``.

1. **Candidates.** The search (:func:`napkin_cat.search.space.select`) runs at *reference sizes*
   (``reference``, else the ``sizes`` given, else 1024, 1088, 1152, … for the axes in order) over memories
   from 1 to 2⁴⁰ (powers of two); every algorithm that wins somewhere is a candidate, made by the rules.
2. **Closed forms.** A candidate's ``H*(M)`` is the sum of its kernels' large-M forms
   (:meth:`~napkin_cat.search.curves.Curve.symbolic`, sums of powers of ``M``); it holds from the
   candidate's smallest memory (every tile 1) up.  A kernel that holds, whatever its free tiles, terms of its
   columns' leading degree (a whole tile's intermediate ``a·c`` beside the ``c·g_e`` weight tile of a fused chain)
   has its free tiles solved for the memory less those terms, ``K`` (:mod:`~napkin_cat.search.held_alike`:
   ``g_e = (M − ac)/c``, ``H(M − K)``), so a form leaves out only terms of lower degree than ``M``'s.  The free
   tiles are solved against the top-degree part of the kernel's exact columns (:mod:`~.top_columns`: swiglu's
   ``2·g_n·g_f``, not the paper's ``g_n·g_f``); where the column that binds changes with ``M`` (the fused chain's
   ``c·(g_a + g_e)`` below ``≈ 4c²``, ``g_a·g_e`` above) the form ends there and the next one, the same tiles free,
   starts (:func:`clamped_candidates` with no tile set whole).
3. **Envelope.** Ordered at the reference sizes, the cheapest candidate wins on each interval of ``M``;
   an interval ends where the next winner starts to fit (its smallest memory) or where the two closed
   forms cross.  A crossing ``H_A(M) = H_B(M)`` is solved symbolically: with ``u = M^{1/L}`` (``L`` the
   common denominator of the exponents) it is a polynomial in ``u``, whose positive root that matches
   the reference crossing is the breakpoint, in the sizes (``d``, ``q``, ``x`` for attention).
4. **Within the axes.** A form holds only up to the memory where one of its tiles (a group's, or a stream that is
   a tile) reaches its axis (``g_c = √M`` reaches ``c`` at ``M = c²``); past it the same algorithm with that tile
   whole is the next candidate (:func:`clamped_candidates`: its own large-M form in the other tiles,
   :func:`~napkin_cat.cost.optimum.clamped`; a constant once every tile is whole), so ``H`` never falls below
   reading the inputs and writing the outputs once (matmul: ``ac + 2abc/√M`` up to ``c²``, ``ab + ac + abc²/M`` up
   to ``ac``, then ``ab + ac + bc``).  The two forms agree where the tile reaches its axis when the leading memory
   terms stay the same; where not, the piece's notes say how far ``H`` jumps there.  A candidate past the memory
   where it stops holding wins only where no other candidate holds.  A form that reaches its axis below its own
   smallest memory never held (the paper's memory model left out what every group holds alike: GQA's whole K and
   V): the form past it starts where its algorithm runs (:func:`start_whole`).  Likewise a form with a tile already
   past its axis at its first memory (:func:`past_at`; the transformer block's ``g_n = √(d(M + dn)/n) ≥ d > n`` at
   every memory, so no crossing to find) describes no algorithm anywhere: it is left out, and its clamped form (the
   tiles past their axes whole) takes its place from where that algorithm runs, again while the clamped form has
   such a tile.  A form past a clamp starts where the one before it stops only where what its algorithm needs
   there exceeds that memory by terms of lower degree (:func:`start_whole`); else where its algorithm runs.

5. **Probed between the grid memories.** An algorithm that wins the reference search only between two memories of
   the grid is no candidate of steps 1-4 (the 2-layer MLP's backward at ``n, i, f, o = 40, 24, 72, 24``: two from
   ``M = 2984`` and ``3104``, both between ``2¹¹`` and ``2¹²``, 1.2-1.4× below the envelope there).  So the search
   runs again at each piece's first, middle and last memory and just below where each algorithm found so starts
   (:mod:`.probes`); one that moves less there than the envelope states by more than :data:`PROBE_GAIN` is a
   candidate, and the envelope is drawn again, until a round finds none (at most :data:`PROBE_ROUNDS`).

**What the mode promises** (at the reference sizes, which order the candidates): each piece at ``M`` is an algorithm
(the regime's diagram, its tiles the piece's) whose ``H`` the piece states, and whose memory by the cost functor's
exact columns exceeds ``M`` only by terms of lower degree than ``M``'s (a whole tile's row or column beside it:
matmul's all-whole ``ab + ac + bc`` from ``ac``, its algorithm needs ``ac + a + c``; a growing form's ``g_n + g_f``
beside its ``2·g_n·g_f``).  Every constant piece (every tile whole or 1) starts where its algorithm fits up to such
lower-order terms (``tests/search/test_symbolic_exact_need.py``), and every growing piece's algorithm at its tiles
fits in ``M`` up to them (``tests/search/test_symbolic_growing_need.py``).

The result is ``Piecewise((nan, M < smallest), (H₁, M < b₁), …, (H_k, True))``: ``nan`` where nothing fits.
"""
from __future__ import annotations

import functools
import math

import sympy

from napkin_cat.cost.lagrange import remembered
from napkin_cat.cost.maxima import column_max
from napkin_cat.cost.optimum import Optimum, clamped, optimal
from napkin_cat.errors import MemoryLimitError, NapkinError
from napkin_cat.search.bounds import lower_bound
from napkin_cat.search.breakpoints import Breakpoint, reaching
from napkin_cat.search.crossings import at_reference
from napkin_cat.search.faces import on_face
from napkin_cat.search.held_on import HeldOn
from napkin_cat.search.held_alike import held_alike, leading_need, shifted
from napkin_cat.search.lower_envelope import guarded, lower_envelope
from napkin_cat.search.probes import envelope_at, probe_memories, spans_at
from napkin_cat.search.results import Derivation, Later, Regime, held
from napkin_cat.search.space import Makers, check_sizes, select
from napkin_cat.search.top_columns import top_form
from napkin_cat.search.unbound_tiles import unbound
from napkin_cat.syntax.sizes import Sizes, as_sizes

#: Memories at which the reference search runs: 1 … 2⁴⁰ in steps of 2.
GRID = [2 ** k for k in range(0, 41)]
#: Default reference sizes: 1024, 1088, 1152, … (1024·(1 + k/16) for the k-th axis in order of appearance):
#: alike, so that no axis dominates the ordering, and distinct, so that no breakpoint degenerates.
REFERENCE_SIZES = tuple(1024 + 64 * k for k in range(16))
#: At most this many times the envelope is probed between grid memories and drawn again (:mod:`.probes`).
PROBE_ROUNDS = 4
#: A probe's algorithm joins the candidates where it moves less than the envelope states there (beyond rounding).
PROBE_GAIN = 1e-9


def boundary_names(diagram) -> list:
    """The names of the size symbols of the diagram's inputs and outputs, in order of first appearance."""
    names = []
    for arr in (*diagram.dom.inside, *diagram.cod.inside):
        for a in arr.axes:
            names += [str(s) for s in sorted(sympy.sympify(a.size).free_symbols, key=str) if str(s) not in names]
    return names


def reference_sizes(diagram) -> dict:
    return {n: REFERENCE_SIZES[k % len(REFERENCE_SIZES)] for k, n in enumerate(boundary_names(diagram))}


class Candidate:
    """A winning algorithm: its closed form ``H`` in ``M`` and its smallest memory ``smallest``.

    ``whole``: per kernel, the tiles (the block's names) set to their axes (:func:`clamped_candidates`);
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
        parts = _parts(made, M, self.whole, {} if forms is None else forms, ref, smallest.at, switch)
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
            self._H = sympy.expand(sympy.Add(*[h for h, _ in parts]).subs(env)) if env else \
                sympy.Add(*[sympy.expand(h) for h, _ in parts])
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
    def at_ref(self):
        """:attr:`H_ref` as a float function of the memory (``inf`` where it is not a non-negative number), made
        once."""
        if self._at_ref is None:
            self._at_ref = guarded(sympy.lambdify(self._M, self.H_ref, "math"))
        return self._at_ref

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
        return sympy.expand(at_reference_sizes(sympy.Add(*parts).subs(env), ref))
    pairs = tuple(sorted(((k, sympy.sympify(v)) for k, v in ref.items()), key=lambda kv: str(kv[0])))
    return sympy.Add(*[_part_at(h, pairs) for h in parts])    # (like terms gathered exactly: rational coefficients)


@functools.lru_cache(maxsize=4096)
def _part_at(h, pairs: tuple):
    """A part of a candidate's form, expanded, at the sizes ``pairs`` (sorted ``(symbol, number)`` pairs): a pure
    function of its key (a part recurs across the candidates that hold its kernel: put at the sizes once)."""
    return at_reference_sizes(sympy.expand(h), dict(pairs))


def _parts(made, M, whole, forms: dict, ref, at: float = 1.0, switch: list | None = None):
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
            if top is None and (face := on_face(curve, prog, fixed, M, ref, at)) is not None:
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
    for k, tile, t, n in open_tiles(curves, parts, whole, env):
        try:
            tv, nv = complex(at_reference_sizes(t, ref, M, at)), complex(at_reference_sizes(n, ref))
        except (TypeError, ValueError):
            continue
        if abs(tv.imag) <= 1e-9 * abs(tv) and abs(nv.imag) <= 1e-9 * abs(nv) and tv.real > nv.real * (1 + 1e-9):
            over[k] += (tile,)
    return over


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


def clamped_candidates(cand, M, sizes, env, ref, forms=None):
    """The forms that follow ``cand`` past its :attr:`~Candidate.until`: the tiles that reach their axes there set
    whole, the others at their own large-M form (every tile whole: a constant ``H``), each holding from where the
    one before it stops (:func:`start_whole`); a form whose own next tile is already past its axis where it starts is
    passed over."""
    out, c = [], cand
    while c.end is not None:
        whole = [tuple(f) + tuple(r) for f, r in zip(c.whole, c.reaching)]
        start = start_whole(c, whole, sizes, env, ref)
        at = c.end.at
        before = c.H_ref.xreplace({M: sympy.sympify(at)})
        nxt = Candidate(c.made, M, sizes, env, ref, whole=whole, smallest=start, forms=forms)
        at = max(at, start.at)
        after = nxt.H_ref.xreplace({M: sympy.sympify(at)})   # (where it starts: a form shifted by what it holds)
        if after.is_finite is False:    # its pole: the tiles, solved for M less what it holds, are 0 there (no
            start = runs_from(c, whole, sizes, env, ref)[0]     # algorithm): it starts where its algorithm runs
            if start.at <= at:
                raise NapkinError(f"the form of {c.made.variant} past M = {at:.6g} has a pole where its algorithm "
                                  f"runs (at the reference sizes): no closed large-M form there")
            nxt = Candidate(c.made, M, sizes, env, ref, whole=whole, smallest=start, forms=forms)
            at = start.at
            after = nxt.H_ref.xreplace({M: sympy.sympify(at)})
        if c.past:
            nxt.note = _whole_from_start(c.reaching)
        elif abs(float(after - before)) > 1e-9 * max(1.0, abs(float(before))):
            nxt.note = functools.partial(_jump, float(before), float(after), start, c.reaching)
        hold = not c.past and c.start.at <= c.end.at and (start.at > c.end.at * (1 + 1e-12) or float(after) > float(
            before) * (1 + 1e-9))   # H would rise past c's end: the algorithm there still runs (held_on)
        while nxt.end is not None and nxt.end.at <= at * (1 + 1e-12):
            whole = [tuple(f) + tuple(r) for f, r in zip(nxt.whole, nxt.reaching)]
            if nxt.past:        # a tile past its axis where it starts: whole from there, where that algorithm runs
                start = start_whole(nxt, whole, sizes, env, ref)
                at = max(at, start.at)
            nxt = Candidate(c.made, M, sizes, env, ref, whole=whole, smallest=start, note=nxt._note, forms=forms)
        if hold or (not c.past and c.start.at <= c.end.at < nxt.start.at / (1 + 1e-12)):
            out.append(HeldOn(c, M))    # (also where the form past c's end was passed over to a later start)
        out.append(nxt)
        c = nxt
    return out


def _whole_from_start(reaching) -> str:
    """The note of a form whose tiles are set whole from its first memory on (:func:`past_at`)."""
    return (f"{', '.join(str(t) for r in reaching for t in r)} whole from the first memory on: the large-M form "
            f"chooses it past its axis at every memory from there (at the reference sizes)")


def _jump(before: float, after: float, start, reaching) -> str:
    """The note of a form whose ``H`` jumps where the one before it stops holding (written when read: the
    breakpoint's closed form is solved only for a form that is a piece of the answer)."""
    return (f"H jumps from {before:.6g} to {after:.6g} at M = {start.expr} (at the reference sizes) where "
            f"{', '.join(str(t) for r in reaching for t in r)} reaches its axis: the large-M forms on either side "
            f"keep different leading memory terms")


def start_whole(c, whole, sizes, env, ref):
    """Where the form of ``c.made`` with the tiles of ``whole`` (per kernel, the block's names) at their axes starts:
    ``c.end``, where the tile of ``c``'s form reaches its axis, if ``c`` runs there (its smallest memory is below
    it at the reference sizes) and the new form's algorithm needs no more there but by terms of lower degree
    (:func:`~.held_alike.leading_need` of its need at most ``c.end``: matmul's ``ac + a + c`` past ``ac``); else the
    least memory that runs it, the tiles of ``whole`` at their axes and every other tile and stream 1 (the exact
    columns), if that is larger (the fused chain with its row tile whole needs ``ac + 2c + a`` where its parent's
    ``g_a`` reached ``a`` at ``a²b/c``: it starts at its need).

    The paper's memory model (what a group holds, cut to its leading terms) leaves out what every group holds alike,
    so a tile's large-M form can reach its axis far below the memory its algorithm needs at all (grouped-query
    attention whose group is the query heads holds the whole K and V: ``g_g = M/d`` reaches ``g`` at ``M = dg``,
    the algorithm needs ``2dx + gx + 2g``): that form never held, and the one past it holds only where it runs.
    Where ``c`` ran up to ``c.until``, its next form starts there (the two agree on ``H`` there; what the clamped
    algorithm needs beyond it is the large-M form's lower-order memory terms, as everywhere in this mode).
    """
    ran = c.start.at <= c.end.at and not c.past
    runs, grows, least = runs_from(c, whole, sizes, env, ref)
    sized = tuple(sorted(((k, sympy.sympify(v)) for k, v in {**ref, **env}.items()), key=lambda kv: str(kv[0])))
    if not grows and runs.at < c.end.at:       # a constant form holds from where its algorithm fits
        return runs
    if ran and max(_leading(col, sized) for col in least) <= c.end.at * (1 + 1e-9):
        return c.end
    return runs if runs.at > c.end.at else c.end


def runs_from(c, whole, sizes, env, ref):
    """``(start, grows, least)``: the least memory that runs the form of ``c.made`` with the tiles of ``whole`` (per
    kernel, the block's names) at their axes, every other tile and stream 1 (by the exact columns, a
    :class:`~napkin_cat.search.breakpoints.Breakpoint` at the reference sizes ``ref``); whether a tile is left to
    grow with ``M``; and the columns (per kernel) whose largest is that memory."""
    least, grows = [], False
    for (curve, _), fixed, first in zip(c.made.parts, whole, c.made.smallest(sizes)):
        prog = clamped(curve.program, fixed) if curve.grouped else None
        grows = grows or (prog is not None and bool(prog.restricted()[2]))      # a tile left to grow with M
        if not fixed:
            least.append(first)
            continue
        ones = {t: 1 for t in prog.tiles}
        least += [sympy.expand(sympy.sympify(col).xreplace(ones)) for col in prog.columns]
    sized = tuple(sorted(((k, sympy.sympify(v)) for k, v in {**ref, **env}.items()), key=lambda kv: str(kv[0])))

    def need():
        return sympy.sympify(column_max(least, exact=False)).subs(env)
    return Breakpoint(max(_largest(col, sized) for col in least), solve=need), grows, least


@functools.lru_cache(maxsize=4096)
def _largest(col, sized: tuple) -> float:
    """A column (or a ``Max`` of columns) at the sizes ``sized`` (sorted ``(symbol, number)`` pairs), as a number (a
    pure function of its key: the clamped forms of one algorithm share most columns, read once per process, bounded).
    """
    col = sympy.sympify(col)
    if isinstance(col, sympy.Max):
        return max(_largest(a, sized) for a in col.args)
    return float(col.xreplace(dict(sized)))


@functools.lru_cache(maxsize=4096)
def _leading(col, sized: tuple) -> float:
    """:func:`~.held_alike.leading_need` of a column at the sizes ``sized`` (sorted ``(symbol, number)`` pairs),
    memoised as :func:`_largest`."""
    return leading_need(col, dict(sized))


def symbolic(diagram, forms, book, search, M, sizes, reference):
    """Symbolic mode of :func:`napkin_cat.search.derivation.derive` (module docstring), in the derivation's
    :class:`~napkin_cat.search.context.Search`."""
    level = search.level
    names = boundary_names(diagram)
    env = check_sizes(diagram, sizes) if sizes else {}
    ref_sizes = dict(as_sizes(reference).of(diagram) if reference else sizes or reference_sizes(diagram))
    missing = [n for n in names if n not in ref_sizes]
    if missing:
        raise NapkinError(f"reference= must give every axis of the diagram; missing {missing}")
    ref = Sizes(ref_sizes).env
    ref[M] = M
    ref_env = {k: v for k, v in ref.items() if k != M}
    prepared, roles = forms, tuple(book.roles)
    makers, cands, seen, forms, drawn = Makers(), [], {}, {}, {}   # drawn: the envelope's folds so far

    def add(b):
        """The winner ``b`` (form, path) and its clamped forms as candidates, once."""
        made = makers.get_made(diagram, *b, book, level)
        if id(made) in seen:
            return
        seen[id(made)] = len(cands)
        try:
            with remembered(search.closed):    # steps alike across the candidates' programs worked out once
                cand = Candidate(made, M, sizes or {}, env, ref_env)
                cands.extend(c for c in [cand] + clamped_candidates(cand, M, sizes or {}, env, ref_env, forms)
                             if not c.past)        # (a form past an axis from its first memory: no algorithm)
        except NapkinError:     # a winner at some reference memory with no closed large-M form
            whole = unbound(made, M)    # a tile its leading memory model does not bind: whole from the start
            if not any(whole):          # (a masked kernel's trips can grow with its tile): the envelope is made
                return                  # of the others
            try:
                with remembered(search.closed):
                    cand = Candidate(made, M, sizes or {}, env, ref_env, whole=whole)
                    cands.extend(c for c in [cand] + clamped_candidates(cand, M, sizes or {}, env, ref_env, forms)
                                 if not c.past)
            except NapkinError:
                return

    for b in select(prepared, search, ref_sizes, GRID, roles=roles):
        if b is not None:
            add(b)
    if not cands:
        raise MemoryLimitError(f"no algorithm for this diagram fits level {level} with any memory up to 2^40 at "
                               f"the reference sizes {ref_sizes}")
    pieces = lower_envelope(cands, M, ref_env, drawn)
    probed, below = set(GRID), set()
    for _ in range(PROBE_ROUNDS):    # an algorithm that wins only between grid memories (:mod:`.probes`)
        spans = spans_at(pieces, ref_env)
        probes = sorted((set(probe_memories(spans)) | below) - probed)
        if not probes:
            break
        probed.update(probes)
        first, fs = len(cands), [c.at_ref for c in cands]
        for m, b in zip(probes, select(prepared, search, ref_sizes, probes, roles=roles)):
            made = None if b is None else makers.get_made(diagram, *b, book, level)
            if made is None or id(made) in seen:
                continue
            h = made.numeric(ref_sizes, m, probes)[0]
            if h is not None and h < envelope_at(spans, fs, m) * (1 - PROBE_GAIN):
                add(b)
        if len(cands) == first:
            break
        below = {math.ceil(c.start.at) - 1 for c in cands[first:] if c.start.at > 1}   # just below a new one starts
        pieces = lower_envelope(cands, M, ref_env, drawn)
    bound = lower_bound(diagram, M)
    bexpr = bound.H.subs(env) if bound.structural else None
    regimes, args = [], [(sympy.nan, M < pieces[0][1])]
    for w, lower, upper, note in pieces:
        c = cands[w]
        notes = ["sum of each kernel's large-M optimum (the top-degree part of its exact columns)"]
        notes += [note] if note else []
        if any(c.whole):
            notes.append("past the memory where their large-M forms reach their axes, these tiles are whole: "
                         + ", ".join(f"{t} = {c.tiles.get(t)}" for t in dict.fromkeys(
                             names.get(w, w) for (_, names), ws in zip(c.made.parts, c.whole) for w in ws)))
        if c.note:
            notes.append(c.note)
        if any(curve.cost.estimated for curve, _ in c.made.parts):    # (a kernel's: the algorithm's cost not made)
            notes.append("a masked stream's running trips are the symbolic estimate (napkin_cat.cost.trips: exact "
                         "where each band lies inside its axis and the slices line up; a union counts every trip); "
                         "nc.derive with sizes= counts them at the tiles it picks")
        opt = Optimum(c.H, dict(c.tiles), None, M, None, None, None, None, notes)
        cond = sympy.And(M >= lower, M < upper) if upper != sympy.oo else (M >= lower)
        cost = Later(functools.partial(getattr, c.made, "cost"))      # the algorithm's cost, made where read
        masked = any(curve.cost.assumptions for curve, _ in c.made.parts)   # (its kernels' costs name a density)
        piece = Later(functools.partial(getattr, c.made, "diagram"), masked=masked)   # made by the rules where read
        regimes.append(Regime(c.made.variant, c.H, piece, Later(functools.partial(getattr, c.made, "trace")),
                              cost, opt, bexpr,
                              (c.H / bexpr) if bexpr is not None else None, lower=lower, upper=upper,
                              condition=cond))
        args.append((c.H, M < upper) if upper != sympy.oo else (c.H, True))
    H = sympy.Piecewise(*args)
    last = regimes[-1]
    return Derivation(diagram, held(last, "diagram"), held(last, "trace"), H=H, cost=cost, optimum=last.optimum,
                      variant=last.variant, regimes=tuple(regimes), memory=M, level=level, sizes=sizes,
                      bound=bound, gap=last.gap, candidates=Later(functools.partial(_labelled, cands)))


def _labelled(cands) -> tuple:
    """``((variant, H), …)`` of the candidates (``Derivation.candidates``): each closed form made here, where read."""
    return tuple((str(c.made.variant), c.H) for c in cands)
