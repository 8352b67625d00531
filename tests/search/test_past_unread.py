"""search/envelope.clamped_candidates: a form past an axis from its first memory (``Candidate.past``: no algorithm,
never a candidate of the envelope) has its ``H`` at the reference sizes left unmade; the derive is the one that
made it (its only reader was the jump note of a form that held)."""
from __future__ import annotations

import sympy

import napkin_cat as nc
from napkin_cat.search import candidates as cmod


def _derive_logging(monkeypatch):
    """swiglu's symbolic derive (one past form at its default reference sizes), every candidate made and every
    candidate whose ``H_ref`` was made logged."""
    made, read = [], []
    init, href = cmod.Candidate.__init__, cmod.Candidate.H_ref

    def logged_init(self, *args, **kwargs):
        init(self, *args, **kwargs)
        made.append(self)

    def logged_href(self):
        read.append(self)
        return href.fget(self)
    monkeypatch.setattr(cmod.Candidate, "__init__", logged_init)
    monkeypatch.setattr(cmod.Candidate, "H_ref", property(logged_href))
    return nc.derive(nc.library.swiglu_mlp(), memory="M"), made, read


def test_past_form_h_ref_unmade(monkeypatch):
    r, made, read = _derive_logging(monkeypatch)
    past = [c for c in made if c.past]
    assert past, "swiglu at its reference sizes has a form past an axis from its first memory"
    assert not any(c.past for c in read)
    assert any(not c.past for c in read)          # (the others are read: the envelope orders by them)
    assert len(r.regimes) > 1
    # the past form's own H at the reference sizes is a finite number at its first memory (what was made before)
    for c in past:
        v = c.H_ref.xreplace({nc.symbol("M"): sympy.sympify(c.end.at)})
        assert v.is_finite
