"""A symbolic derive makes (by the rules) only the candidates that win an interval of ``M``, each where read.

The envelope (:mod:`napkin_cat.search.envelope`) compares every candidate's closed form, read off its kernels'
curves; the diagram and trace are needed only for the regimes, and each regime's only when read (the derivation's
own ``diagram`` and ``trace``, the last piece's, too: a caller that reads only ``H`` makes none).  Second route:
the number of constructions is counted at the construction itself (``napkin_cat.search.space.make``), and each
regime's algorithm, made lazily, is the one its trace replays to and costs what its variant's kernels say; whether
a piece's stream skips by a mask from data, known before it is made (read off its kernels' costs), is what its made
diagram says
(:func:`~napkin_cat.search.derivation.masked_by_data`).
"""
from __future__ import annotations

import pytest

import napkin_cat as nc
from napkin_cat.search import space
from napkin_cat.cost.numeric import densities
from napkin_cat.search.derivation import masked_by_data
from napkin_cat.search.results import Later, held


def test_only_the_regimes_are_made(monkeypatch):
    made = []
    real = space.make

    def counting(*args, **kwargs):
        made.append(args[2])
        return real(*args, **kwargs)
    monkeypatch.setattr(space, "make", counting)
    r = nc.derive(nc.library.attention(), memory="M")
    assert len(r.candidates) > len(r.regimes) >= 2      # a candidate that wins nowhere exists here
    assert made == []                                    # none, not even the last piece's (the derivation's own)
    assert all(isinstance(held(g, "diagram"), Later) for g in r.regimes)
    assert isinstance(held(r, "diagram"), Later) and isinstance(held(r, "trace"), Later)
    assert r.diagram is r.regimes[-1].diagram and len(made) == 1     # read: the last piece's, made once for both
    assert r.trace is r.regimes[-1].trace and r.trace.replay(r.start) == r.diagram
    [g.diagram for g in r.regimes]
    assert len(made) == len({str(g.variant) for g in r.regimes}) <= len(r.regimes)   # (a form past a tile's axis:
    #                                                     the same algorithm with that tile whole, issue 35)
    for g in r.regimes:                                  # each regime's algorithm is the one its trace makes
        assert g.trace.replay(r.start) == g.diagram
        assert nc.cost(g.diagram).H == g.cost.H


@pytest.mark.parametrize("f", [nc.library.document_attention, nc.library.causal_attention])
def test_a_piece_knows_before_it_is_made_whether_it_skips_by_data(f):
    r = nc.derive(f(), memory="M")
    later = [(g, held(g, "diagram")) for g in r.regimes if isinstance(held(g, "diagram"), Later)]
    assert later, "every piece made in the call: the test would check nothing"
    facts = [d.facts["masked"] for _, d in later]
    assert facts == [masked_by_data(g.diagram) for g, _ in later]
    assert any(facts) == (f is nc.library.document_attention)    # its fused stream skips by document ids


@pytest.mark.parametrize("f", [nc.library.document_attention, nc.library.attention])
def test_the_densities_assumed_are_the_made_algorithms(f, monkeypatch):
    """The densities a symbolic derive states (``assumptions``) are read before its algorithm is made where its
    last piece skips by no mask from data; second route: made, the algorithm's own densities and its pieces' costs'
    name the same symbols.  Mutation: skipping ``densities`` of the derivation's diagram where its piece is masked
    (``_assuming``) loses document attention's density (fails)."""
    made = []
    real = space.make
    monkeypatch.setattr(space, "make", lambda *a, **k: made.append(a[2]) or real(*a, **k))
    r = nc.derive(f(), memory="M", density=0.25)
    masked = held(r.regimes[-1], "diagram").facts["masked"]     # (the last piece: the derivation's algorithm)
    assert isinstance(held(r, "diagram"), Later) != masked
    assert masked == (f is nc.library.document_attention)
    assert masked or made == []          # made where a density may be named (its pieces' costs read), else not
    named = {s for s in densities(r.diagram)} | {a.symbol for g in r.regimes for a in g.cost.assumptions}
    assert {a.symbol for a in r.assumptions} == named and bool(named) == masked
    assert all(float(a.value) == 0.25 for a in r.assumptions)
