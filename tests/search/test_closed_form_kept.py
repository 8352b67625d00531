"""kkt-35d: whether a kernel (its block's curve, some tiles whole) has a closed large-M optimum
(:func:`~napkin_cat.search.faces.closed_form`) is asked once per derivation and kept (``on_face(…, known=)``, the
call's store of forms) instead of once per candidate that holds the kernel and has no top-degree form.  Checked
against the route that asks it every time (``known=None``) on causal attention (a kernel with no closed form, solved
on a face): the same answer (``srepr`` of ``H``, the
regimes' bounds, ``H`` and tiles) and fewer questions; and on stub kernels, one with a closed form only with a tile
whole, one with none (mutations: the store keyed without the tiles whole, or without the kernel, answer one with
another's and fail ``test_kept_per_kernel_and_tiles``)."""
from __future__ import annotations

import sympy

import napkin_cat as nc
from napkin_cat.errors import NapkinError
from napkin_cat.search import candidates, faces

L = nc.library


def _answer(f, monkeypatch, kept: bool):
    asked = []
    closed = faces.closed_form
    on_face = faces.on_face

    def counted(*args):
        asked.append(args)
        return closed(*args)

    def direct(curve, prog, whole, M, ref, at, known=None):
        return on_face(curve, prog, whole, M, ref, at, known if kept else None)
    monkeypatch.setattr(faces, "closed_form", counted)
    monkeypatch.setattr(candidates, "on_face", direct)
    r = nc.derive(f, memory="M")
    regimes = [(str(g.lower), str(g.upper), sympy.srepr(sympy.sympify(g.H)),
                sorted((str(k), sympy.srepr(sympy.sympify(v))) for k, v in g.tiles.items())) for g in r.regimes]
    return (sympy.srepr(r.H), regimes), len(asked)


def test_kept_as_asked_every_time(monkeypatch):
    for f, faced in ((L.causal_attention(), True),):
        with monkeypatch.context() as m:
            kept, n_kept = _answer(f, m, True)
        with monkeypatch.context() as m:
            direct, n_direct = _answer(f, m, False)
        assert kept == direct
        assert n_kept <= n_direct
        if faced:
            assert 0 < n_kept < n_direct


class _Stub:
    """A kernel's curve: a closed large-M optimum with the tiles ``closed_with`` whole (None: with none whole)."""

    def __init__(self, closed_with):
        self.cost, self.level, self.closed_with = self, 1, closed_with

    def symbolic_optimum(self, M):
        if self.closed_with is not None:
            raise NapkinError("no closed form with no tile whole")
        return sympy.Integer(1), {}


class _Optimum:
    def __init__(self, H):
        self.H = H


def test_kept_per_kernel_and_tiles(monkeypatch):
    M = nc.symbol("M")
    g = nc.symbol("g_n")
    monkeypatch.setattr(faces, "optimal", lambda c, memory, level, exact, whole:
                        _Optimum(sympy.Integer(1) if tuple(whole) == c.closed_with else None))
    monkeypatch.setattr(faces, "face_form", lambda prog, M, ref, at: ("face", prog))
    a, b = _Stub((g,)), _Stub(None)
    asks = [(a, (g,)), (a, ()), (b, ()), (b, (g,)), (a, (g,)), (a, ())]
    want = [faces.on_face(c, "p", w, M, {}, 1.0) for c, w in asks]
    assert want == [None, ("face", "p"), None, ("face", "p"), None, ("face", "p")]
    known = {}
    assert [faces.on_face(c, "p", w, M, {}, 1.0, known) for c, w in asks] == want
    assert len(known) == 4
