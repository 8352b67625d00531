"""Where a symbolic envelope is checked against the reference search: memories inside its pieces, and its ``H`` there.

The symbolic mode (:mod:`.envelope`) draws its envelope over the algorithms that win the reference search at the
memories of its grid (powers of two).  An algorithm that wins only between two grid memories is never a candidate:
the 2-layer MLP's backward at ``n, i, f, o = 40, 24, 72, 24`` streams ``f`` twice and groups ``i`` whole from
``M = 2984`` (19,272 transfers), and streams ``n`` with ``o`` and ``f`` whole at ``M = 3127`` (16,584), both between
``2¹¹`` and ``2¹²``, where the envelope stated 23,304.  So the envelope is probed: at each piece's ends and between
them (:func:`probe_memories`) the reference search runs again, and an algorithm it finds cheaper there than the
envelope's ``H`` (:func:`envelope_at`) joins the candidates, until no probe finds one.  The law the probes keep, at
the reference sizes, at every probed memory ``m``::

    envelope(m) ≤ H_search(m)        (the search's optimum at integer tiles; the envelope's forms relax them)

>>> import sympy
>>> pieces = [(0, sympy.Integer(4), sympy.Integer(100), None), (1, sympy.Integer(100), sympy.oo, None)]
>>> spans = spans_at(pieces, {})
>>> spans
[(0, 4.0, 100.0), (1, 100.0, inf)]
>>> probe_memories(spans)
[4, 20, 99, 100, 142]
>>> envelope_at(spans, [lambda m: 7 + 100 / m, lambda m: 9.0], 20)
12.0
"""
from __future__ import annotations

import math

import sympy

from napkin_cat.search.crossings import at_reference


def spans_at(pieces, ref) -> list:
    """The envelope's ``pieces`` (``(candidate, lower, upper, note)``, ends in the sizes) as ``(candidate, lower,
    upper)`` floats at the reference sizes ``ref`` (``inf`` for an open end): worked out once per drawing."""
    out = []
    for w, lower, upper, _ in pieces:
        lo = at_reference(lower, ref)
        out.append((w, lo, math.inf if upper == sympy.oo else at_reference(upper, ref)))
    return out


def probe_memories(spans) -> list:
    """The integer memories at which the envelope's ``spans`` (:func:`spans_at`) are probed: each piece's first
    integer memory, the geometric middle of its ends and its last integer memory; for the last piece (open above)
    its first memory and ``√2`` times it.  Sorted, each once."""
    out = set()
    for _, lo, hi in spans:
        first = max(1, math.ceil(lo))
        if hi == math.inf:
            out.update((first, math.ceil(first * math.sqrt(2))))
            continue
        last = math.ceil(hi) - 1
        if last < first:
            continue
        out.update((first, min(max(first, round(math.sqrt(lo * hi))), last), last))
    return sorted(out)


def envelope_at(spans, fs, m: float) -> float:
    """The envelope's ``H`` at memory ``m`` at the reference sizes: ``fs[candidate](m)`` (a float function of the
    memory) of the span that holds ``m`` (:func:`spans_at`; ``inf`` below the first, where nothing fits)."""
    for w, lo, hi in spans:
        if lo <= m < hi:
            return fs[w](m)
    return math.inf
