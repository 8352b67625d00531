"""A symbolic derive makes (by the rules) only the candidates that win an interval of ``M``.

The envelope (:mod:`napkin_cat.search.envelope`) compares every candidate's closed form, read off its kernels'
curves; the diagram and trace are needed only for the regimes.  Second route: the number of constructions is
counted at the construction itself (``napkin_cat.search.space.make``), and each regime's algorithm, made lazily,
is the one its trace replays to and costs what its variant's kernels say.
"""
from __future__ import annotations

import napkin_cat as nc
from napkin_cat.search import space


def test_only_the_regimes_are_made(monkeypatch):
    made = []
    real = space.make

    def counting(*args, **kwargs):
        made.append(args[2])
        return real(*args, **kwargs)
    monkeypatch.setattr(space, "make", counting)
    r = nc.derive(nc.library.attention(), memory="M")
    assert len(r.candidates) > len(r.regimes) >= 2      # a candidate that wins nowhere exists here
    assert len(made) == len({str(g.variant) for g in r.regimes}) <= len(r.regimes)   # (a form past a tile's axis:
    #                                                     the same algorithm with that tile whole, issue 35)
    for g in r.regimes:                                  # each regime's algorithm is the one its trace makes
        assert g.trace.replay(r.start) == g.diagram
        assert nc.cost(g.diagram).H == g.cost.H
