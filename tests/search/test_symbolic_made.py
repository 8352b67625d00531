"""A symbolic derive makes (by the rules) only the candidates that win an interval of ``M``, each where read.

The envelope (:mod:`napkin_cat.search.envelope`) compares every candidate's closed form, read off its kernels'
curves; the diagram and trace are needed only for the regimes, and each regime's only when read (the call makes
the last piece's, the derivation's own ``diagram``).  Second route: the number of constructions is counted at the
construction itself (``napkin_cat.search.space.make``), and each regime's algorithm, made lazily, is the one its
trace replays to and costs what its variant's kernels say; whether a piece's stream skips by a mask from data,
known before it is made (read off its kernels' costs), is what its made diagram says
(:func:`~napkin_cat.search.derivation.masked_by_data`).
"""
from __future__ import annotations

import pytest

import napkin_cat as nc
from napkin_cat.search import space
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
    assert len(made) == 1                                # the last piece's: the derivation's own diagram
    assert sum(isinstance(held(g, "diagram"), Later) for g in r.regimes) >= 1
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
