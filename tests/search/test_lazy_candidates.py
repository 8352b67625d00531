"""A symbolic derive's candidates: each closed form ``H`` (the sum of its kernels' forms, expanded in the sizes) is
made where read (a piece of the answer, a crossing that ends one, a note, ``Derivation.candidates``), not for every
candidate; the envelope orders them by ``H_ref``, made from the parts at the reference sizes
(:func:`~napkin_cat.search.candidates.ref_form`).  Checked against the exact route (``H`` made, then the reference sizes
put in): the same expression (srepr), so the order, the crossings and the answer are the same; and by a count of
the closed forms the derive made."""
from __future__ import annotations

import sympy

import napkin_cat as nc
from napkin_cat.search import envelope
from napkin_cat.search.candidates import Candidate, at_reference_sizes, ref_form
from napkin_cat.search.results import Derivation, Later, held

M, d, n = nc.symbol("M"), nc.symbol("d"), nc.symbol("n")


def _recorded(monkeypatch):
    """Every candidate made, and the set of those whose closed form ``H`` was read (by id)."""
    made, read = [], set()
    init, H = Candidate.__init__, Candidate.H

    def recorded(self, *a, **k):
        init(self, *a, **k)
        made.append(self)

    def counted(self):
        read.add(id(self))
        return H.fget(self)

    monkeypatch.setattr(Candidate, "__init__", recorded)
    monkeypatch.setattr(Candidate, "H", property(counted))
    return made, read


def test_ref_form_is_the_closed_form_at_the_sizes():
    """The law on a form with sizes in its coefficients, a radical in ``M`` and the sizes given put in first."""
    parts = [d * n * (M + d) ** 2 / M, sympy.sqrt(d * (M + d * n) / n), n ** 2 / sympy.sqrt(M)]
    ref = {d: 48, n: 64}
    for env in ({}, {n: 64}):
        H = sympy.expand(sympy.Add(*parts).subs(env)) if env else sympy.Add(*[sympy.expand(h) for h in parts])
        assert sympy.srepr(ref_form(parts, env, ref)) == sympy.srepr(at_reference_sizes(H, ref))


def test_candidates_ordered_without_their_closed_forms(monkeypatch):
    """Each candidate's ``H_ref`` (what orders the envelope) is the closed form at the reference sizes, the same
    expression as the exact route's; most candidates' ``H`` is never made by the derive; reading
    ``Derivation.candidates`` makes the others, the same forms the pieces state."""
    made, read = _recorded(monkeypatch)
    r = nc.derive(nc.library.mlp(), memory="M")
    assert len(made) > 10
    during = set(read)
    assert 0 < len(during) < len(made)       # the pieces' and crossings' forms only
    pieces = {sympy.srepr(g.H) for g in r.regimes}
    assert isinstance(held(r, "candidates"), Later)      # not made by the derive
    cands = r.candidates
    assert len(cands) == len(made) and all(isinstance(label, str) for label, _ in cands)
    assert pieces <= {sympy.srepr(h) for _, h in cands}
    assert read == {id(c) for c in made}     # made where read
    for c in made:                           # the order's form = the closed form at the sizes (the slow route)
        assert sympy.srepr(c.H_ref) == sympy.srepr(at_reference_sizes(c.H, c.ref))


def test_lazy_forms_state_the_same_answer(monkeypatch):
    """The answer with every candidate's closed form made as it is built (the route before) is the answer made
    lazily: the same ``H`` (srepr), pieces and candidates, on attention with a projection's kernels (a clamped form
    and a crossing)."""
    f = nc.library.multi_head_attention()
    lazy = nc.derive(f, memory="M")
    init = Candidate.__init__

    def eager(self, *a, **k):
        init(self, *a, **k)
        assert self.H is not None

    monkeypatch.setattr(Candidate, "__init__", eager)
    slow = nc.derive(f, memory="M")
    assert sympy.srepr(lazy.H) == sympy.srepr(slow.H)
    assert [str(g.variant) for g in lazy.regimes] == [str(g.variant) for g in slow.regimes]
    assert [(label, sympy.srepr(h)) for label, h in lazy.candidates] == \
        [(label, sympy.srepr(h)) for label, h in slow.candidates]


def test_numeric_candidates_are_a_tuple():
    """A numeric derive's candidates (label, {M: H}) are given as they are: a plain tuple, the field's default
    otherwise."""
    r = nc.derive(nc.library.matmul(), memory=[256, 1024], sizes={"a": 32, "b": 32, "c": 32})
    assert isinstance(held(r, "candidates"), tuple) and r.candidates and isinstance(r.candidates[0][1], dict)
    assert Derivation(None, None, None).candidates == ()
    assert envelope.Candidate is Candidate
