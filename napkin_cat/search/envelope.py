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
4. **Within the axes.** A form holds only up to the memory where one of its tiles (a group's, or a stream that is a
   tile) reaches its axis (``g_c = √M`` reaches ``c`` at ``M = c²``); past it the same algorithm with that tile whole
   is the next candidate (:func:`clamped_candidates`: its own large-M form in the other tiles,
   :func:`~napkin_cat.cost.optimum.clamped`; a constant once every tile is whole), so ``H`` never falls below reading
   the inputs and writing the outputs once (matmul: ``ac + 2abc/√M`` up to ``c²``, ``ab + ac + abc²/M`` up to ``ac``,
   then ``ab + ac + bc``).  The two forms agree where the tile reaches its axis when the leading memory terms stay
   the same; where not, the piece's notes say how far ``H`` jumps there.  A candidate past the memory where it stops
   holding wins only where no other candidate holds.  A form that reaches its axis below its own smallest memory
   never held (the paper's memory model left out what every group holds alike: GQA's whole K and V): the form past it
   starts where its algorithm runs (:func:`start_whole`).  Likewise a form with a tile already past its axis at its
   first memory (:func:`~.candidates.past_at`; the transformer block's ``g_n = √(d(M + dn)/n) ≥ d > n`` at every
   memory, so no crossing to find) describes no algorithm anywhere: it is left out, and its clamped form (the tiles
   past their axes whole) takes its place from where that algorithm runs, again while the clamped form has such a
   tile.  A form past a clamp starts where the one before it stops only where what its algorithm needs there exceeds
   that memory by terms of lower degree (:func:`start_whole`); else where its algorithm runs.

5. **Probed between the grid memories.** An algorithm that wins the reference search only between two memories of
   the grid is no candidate of steps 1-4 (the 2-layer MLP's backward at ``n, i, f, o = 40, 24, 72, 24``: two from
   ``M = 2984`` and ``3104``, both between ``2¹¹`` and ``2¹²``, 1.2-1.4× below the envelope there).  So the search
   runs again at each piece's first, middle and last memory and just below where each algorithm found so starts
   (:mod:`.probes`); one that moves less there than the envelope states by more than :data:`PROBE_GAIN` is a
   candidate, and the envelope is drawn again, until a round finds none (at most :data:`PROBE_ROUNDS`).  The first
   round also probes the least memory that runs any algorithm (what a numeric derive's refusal names) where the
   envelope starts above it: an algorithm that fits only between the grid's memories below its first piece (swiglu
   at its default reference sizes from 3, the grid's 2 and 4 aside), so the answer starts where a numeric derive does.

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

from napkin_cat.cost.lagrange import MAX_DEGREE, remembered
from napkin_cat.cost.maxima import column_max
from napkin_cat.cost.optimum import Optimum, clamped
from napkin_cat.errors import MemoryLimitError, NapkinError
from napkin_cat.search.bounds import lower_bound
from napkin_cat.search.candidates import Candidate
from napkin_cat.search.breakpoints import Breakpoint
from napkin_cat.search.held_on import HeldOn
from napkin_cat.search.held_alike import leading_need
from napkin_cat.search.lower_envelope import lower_envelope
from napkin_cat.search.probes import envelope_at, probe_memories, spans_at
from napkin_cat.search.results import Derivation, Later, Regime, held
from napkin_cat.search.space import Makers, check_sizes, select, smallest_memory
from napkin_cat.search.unbound_tiles import unbound
from napkin_cat.syntax.sizes import Sizes, as_sizes
from napkin_cat.cost.expanded import expand

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
        # (H before, read only for a form that held: a form past an axis from its first memory is no candidate)
        before = None if c.past else c.value_at(at)
        nxt = Candidate(c.made, M, sizes, env, ref, whole=whole, smallest=start, forms=forms)
        at = max(at, start.at)
        after = nxt.value_at(at)   # (where it starts: a form shifted by what it holds)
        if after.is_finite is False:    # its pole: the tiles, solved for M less what it holds, are 0 there (no
            start = runs_from(c, whole, sizes, env, ref)[0]     # algorithm): it starts where its algorithm runs
            if start.at <= at:
                raise NapkinError(f"the form of {c.made.variant} past M = {at:.6g} has a pole where its algorithm "
                                  f"runs (at the reference sizes): no closed large-M form there")
            nxt = Candidate(c.made, M, sizes, env, ref, whole=whole, smallest=start, forms=forms)
            at = start.at
            after = nxt.value_at(at)
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
            out.append(HeldOn(c, M, ref))    # (also where the form past c's end was passed over to a later start)
        out.append(nxt)
        c = nxt
    return out


def _whole_from_start(reaching) -> str:
    """The note of a form whose tiles are set whole from its first memory on (:func:`~.candidates.past_at`)."""
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
        least += [expand(sympy.sympify(col).xreplace(ones)) for col in prog.columns]
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
    anchor = min(c.start.at for c in cands)     # (the grid of the first drawing, continued below where needed)
    pieces = lower_envelope(cands, M, ref_env, drawn, anchor)
    probed, below = set(GRID), set()
    least = min(smallest_memory(f, search, ref_sizes) for f in prepared)   # what a numeric derive's refusal names
    if least < spans_at(pieces, ref_env)[0][1]:
        below.add(least)        # (an algorithm that fits only between grid memories below the first piece)
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
        pieces = lower_envelope(cands, M, ref_env, drawn, anchor)
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
                      bound=bound, gap=last.gap, candidates=Later(functools.partial(_labelled, cands)),
                      notes=_unsolved(cands))


def _unsolved(cands) -> tuple:
    """The derivation's note where some candidate holds a kernel whose interior KKT point is beyond the closed forms
    (:func:`~napkin_cat.search.top_columns.beyond_closed_forms`): that candidate's form is a face of its tile box, so
    the envelope can state more than the optimum wherever the kernel's interior point would have won (causal
    attention at the reference sizes: up to 1.24x the numeric search's H from M = 4096 to 2^16.5)."""
    kernels = tuple(dict.fromkeys(k for c in cands for k in c.beyond))
    if not kernels:
        return ()
    return (f"an upper bound, not the optimum, wherever these kernels' interior optimum would win: its stationarity "
            f"equation is past the closed forms solved (univariate degree <= {MAX_DEGREE}), so their algorithms "
            f"enter the envelope on a face of the tile box only; nc.derive with a number for memory= and sizes= "
            f"searches the tiles exactly: " + "; ".join(kernels),)


def _labelled(cands) -> tuple:
    """``((variant, H), …)`` of the candidates (``Derivation.candidates``): each closed form made here, where read."""
    return tuple((str(c.made.variant), c.H) for c in cands)
