"""A call's searches share its prepared forms (issue 35): the GPU derive searches without and with the SM count as a
requirement, and prepares the function, its forms' graphs and kernel-split spaces once for both.

Second route: the same derive with each search preparing its own forms (:class:`Preparation` made per search) gives
the same answer: the forms depend only on the function, the rule book, the depth and the sizes.
"""
from __future__ import annotations

import importlib

import pytest

import napkin_cat as nc
from napkin_cat.errors import ArgumentError
from napkin_cat.hardware.timed import derive_for_time
from napkin_cat.search.context import KernelCache
from napkin_cat.search.forms import Preparation

forms_module = importlib.import_module("napkin_cat.search.forms")
paths = importlib.import_module("napkin_cat.search.paths")
derivation = importlib.import_module("napkin_cat.search.derivation")

MM = dict(a=1024, b=512, c=1024)


def _counted(monkeypatch):
    """Count the forms prepared and the kernel-split spaces made, per call of the library."""
    count = {"forms": 0, "spaces": 0}
    real_forms, real_space = forms_module.prepared_forms, paths.Space.__init__

    def forms(*args, **kw):
        count["forms"] += 1
        return real_forms(*args, **kw)

    def space(self, *args, **kw):
        count["spaces"] += 1
        return real_space(self, *args, **kw)
    monkeypatch.setattr(forms_module, "prepared_forms", forms)
    monkeypatch.setattr(paths.Space, "__init__", space)
    return count


def test_gpu_derive_prepares_once_for_both_searches(monkeypatch):
    mm = nc.einsum("a b, b c -> a c", dtype="bf16", out_dtype="fp32")
    count = _counted(monkeypatch)
    shared = derive_for_time(mm, "h100-sxm5", MM, cache=KernelCache())
    once = dict(count)
    real = derivation.derive

    def own(*args, prepared=None, **kw):        # each search its own preparation (before this change)
        return real(*args, prepared=Preparation(), **kw)
    monkeypatch.setattr(importlib.import_module("napkin_cat.hardware.structures"), "derive_transfers", own)
    count.update(forms=0, spaces=0)
    apart = derive_for_time(mm, "h100-sxm5", MM, cache=KernelCache())
    assert once["forms"] == 1 and count["forms"] == 2          # two searches ran, one preparation
    assert 0 < once["spaces"] and count["spaces"] == 2 * once["spaces"]
    assert (shared.H, str(shared.variant), shared.optimum.sizes) == (apart.H, str(apart.variant), apart.optimum.sizes)
    assert shared.prediction.time == apart.prediction.time and shared.timings == apart.timings


def test_preparation_keys_on_what_forms_depend_on():
    f, g = nc.library.attention(), nc.library.attention()
    book = nc.rewriting.registry.rulebook()
    p = Preparation()
    first = p.forms(f, book, 2, {"q": 64, "x": 64, "d": 8})
    assert p.forms(f, book, 2, {"d": 8, "x": 64, "q": 64}) is first         # the same sizes in another order
    assert p.forms(f, book, 2, {"q": 64, "x": 64, "d": 16}) is not first     # other sizes: prepared again
    assert p.forms(g, book, 2, {"q": 64, "x": 64, "d": 8}) is not first      # another function object
    assert p.forms(f, book, 1, {"q": 64, "x": 64, "d": 8}) is not first      # another depth
    assert [x.prepared for x in first] == [x.prepared for x in Preparation().forms(f, book, 2, {"q": 64, "x": 64,
                                                                                               "d": 8})]


def test_prepared_must_be_a_preparation():
    with pytest.raises(ArgumentError, match="Preparation"):
        nc.derive(nc.library.attention(), memory=2 ** 12, sizes=dict(q=64, x=64, d=8), prepared={})
