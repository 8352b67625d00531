"""kkt-35d: a face's ``H`` and tiles at the reference sizes are read as float functions of ``M`` by
:func:`~napkin_cat.search.top_columns.memory_functions` (lambdify's code, compiled once) where
:mod:`~napkin_cat.search.faces` called ``sympy.lambdify`` with ``M`` swapped for a positive dummy.  Checked bit for
bit against that route on the forms of real faces (each face of a two-tile program with a cross term, solved by
``top_form`` on the face, shifted by what it holds alike, and the whole box's point), on a scan's worth of
memories.  (The dummy-order mutation of ``memory_functions`` is caught by ``test_float_functions.py``, on the
block's point with a product of radicals; these face forms hold none and do not catch it.)"""
from __future__ import annotations

import sympy

import napkin_cat as nc
from napkin_cat.cost.tiling import TilingProgram
from napkin_cat.errors import NapkinError
from napkin_cat.search.faces import face_program, faces
from napkin_cat.search.held_alike import held_alike, shifted
from napkin_cat.search.top_columns import memory_functions, top_form

M = nc.symbol("M")
n, e, d, h = (nc.symbol(s) for s in ("n", "e", "d", "h"))
gn, ge = nc.symbol("g_n"), nc.symbol("g_e")
REF = {n: 64, e: 68, d: 48, h: 4}


def _old(M, expr):
    """What faces did before: ``M`` swapped for a positive dummy, then ``sympy.lambdify``."""
    Mp = sympy.Dummy("Mp", positive=True)
    sub = {M: Mp}
    return sympy.lambdify(Mp, [x.xreplace(sub) for x in expr] if isinstance(expr, list) else expr.xreplace(sub),
                          "math")


def _outcome(fn, m):
    try:
        return ("value", repr(fn(m)))
    except (ValueError, ZeroDivisionError, OverflowError, TypeError) as err:
        return ("error", type(err))


def test_face_functions_as_lambdify_bit_for_bit():
    prog = TilingProgram(d * e * h * n / gn + d * e * h * n ** 2 / (ge * gn) + e * n + e * h * n ** 2 / ge,
                         (d * ge + d * gn + ge * gn,), (ge, gn), ("e", "n"), (e, n))
    ref = {k: sympy.Integer(v) for k, v in REF.items()}
    exprs = []
    for size in (1, 2):
        for ones, wholes in faces(prog, size):
            try:
                face = face_program(prog, ones, wholes)
            except NapkinError:
                continue
            K = held_alike(face, ref)
            if not face.restricted()[2]:
                continue
            top = top_form(face, M, K, ref, 1.0)
            if top is None:
                continue
            Hs, ts = shifted(top[0], top[1], K, M)
            exprs += [sympy.sympify(Hs).xreplace(ref), [sympy.sympify(v).xreplace(ref) for v in ts.values()]]
    top = top_form(prog, M, 0, ref, 1.0)         # the whole box's point: tiles with products of radicals in M
    exprs += [sympy.sympify(top[0]).xreplace(ref), [sympy.sympify(v).xreplace(ref) for v in top[1].values()]]
    assert len(exprs) >= 4 and any(x.has(sympy.sqrt) or x.atoms(sympy.Pow) for x in exprs[-1])
    grid = [2.0 ** (k / 16) for k in range(16 * 44)] + [0.5, 4096.0 * 1.000001]
    for expr, fn in zip(exprs, memory_functions(M, exprs)):
        old = _old(M, expr)
        for m in grid:
            assert _outcome(fn, m) == _outcome(old, m), (expr, m)
