"""Cost and optimum commute with a renaming of axes that keeps sizes (:mod:`napkin_cat.search.relabelling`).

Second route: the derive of a stack whose blocks name their axes apart equals the derive of the stack sharing names,
its answer renamed (H, tiles in order, the algorithm's boxes up to names), and the renamed stack searches exactly
the segment problems the shared one does (a count, never a time).
"""
from __future__ import annotations

import re

import numpy as np
import pytest

import napkin_cat as nc
from napkin_cat.errors import NapkinError
from napkin_cat.search import derivation
from napkin_cat.search.blocks import OpGraph
from napkin_cat.search.context import KernelCache, search_of
from napkin_cat.search.relabelling import relabelled
from napkin_cat.syntax.relabel import axis_names
from napkin_cat.testing import random_program

L = nc.library
SIZES = {"n": 8, "e": 8, "h": 2, "d": 4, "f": 16}


def own_names(k: int):
    """k transformer blocks in a row, block i > 0 with its own axes d{i} and f{i} (same sizes as the shared stack;
    block 0 keeps d and f, so a test may share its kernels with the shared stack's and search the rest)."""
    blocks = [L.transformer_block()] + [nc.rename_axis(nc.rename_axis(L.transformer_block(), "d", f"d{i}"), "f",
                                                       f"f{i}") for i in range(1, k)]
    return L.in_a_row(blocks)


def _derive(f, sizes, monkeypatch, cache, memory=512):
    """The derive of ``f`` reading ``cache``, and the Search (:mod:`napkin_cat.search.context`) it used."""
    seen = []

    def spy(*a, **kw):
        seen.append(search_of(*a, **kw))
        return seen[-1]
    monkeypatch.setattr(derivation, "search_of", spy)
    r = nc.derive(f, sizes=sizes, memory=memory, cache=cache)
    return r, seen


def _shape(diagram) -> list:
    """The algorithm's boxes with every axis name and number dropped: its shape up to names."""
    return [re.sub(r"[A-Za-z_]*\d+|\b[a-z]\b", "·", str(b.name)) for b in diagram.boxes]


def test_renamed_stack_derives_as_the_shared_one(monkeypatch):
    """Two blocks with their own axis names (same sizes) against the stack sharing names: the answer renamed, and
    the segments of the second block moved from the first's (counted by the call's Search), none searched twice."""
    k = 2
    cache = KernelCache()       # one cold cache: the first block's kernels are the shared stack's, the second's new
    # (memory 384: since fuse-35 a kernel may hold a rename view, so one kernel can span block 0 and block 1's
    # attention; in the shared stack it then holds two different axes both named d, which the own-names stack keeps
    # apart, so the two are no renaming of each other where such a kernel wins: at 512 the own-names stack moves
    # 1392, the shared 1520; at 1024, 1264 and 1392)
    shared, s_search = _derive(L.transformer_stack(k), SIZES, monkeypatch, cache, memory=384)
    own_sizes = {**SIZES, **{f"d{i}": 4 for i in range(1, k)}, **{f"f{i}": 16 for i in range(1, k)}}
    own, o_search = _derive(own_names(k), own_sizes, monkeypatch, cache, memory=384)
    (s,), (o,) = s_search, o_search
    assert own.H == shared.H
    ts = shared.optimum.exact_sizes or shared.optimum.sizes
    to = own.optimum.exact_sizes or own.optimum.sizes
    assert list(to.values()) == list(ts.values())                      # tiles equal under the renaming
    assert _shape(own.diagram) == _shape(shared.diagram)                # the algorithm equal up to names
    # the count: the own-names stack searches the segment problems the shared one does, the rest moved by renaming
    assert o.renamed > 0 and o.searched == s.searched
    # and the answer is what the cost functor counts on the own-names diagram at its tiles
    at = {**own_sizes, **{str(a): int(v) for a, v in to.items()}}
    assert nc.cost(own.diagram, sizes=at).H.get(1, 0) == own.H


def test_the_key_keeps_sizes_by_value():
    """Two axes of different sizes are never conflated: the renaming is an isomorphism only where sizes agree."""
    mm = OpGraph(nc.engine.to_netlist(nc.einsum("a b, b c -> a c")))
    xy = OpGraph(nc.engine.to_netlist(nc.einsum("x y, y z -> x z")))
    assert relabelled(mm, mm.full, {"a": 4, "b": 8, "c": 4}) == relabelled(xy, xy.full, {"x": 4, "y": 8, "z": 4})
    assert relabelled(mm, mm.full, {"a": 4, "b": 8, "c": 4}) != relabelled(xy, xy.full, {"x": 8, "y": 4, "z": 4})
    assert relabelled(mm, mm.full, {"a": 4, "b": 4, "c": 4}) != relabelled(mm, mm.full, {"a": 4, "b": 4, "c": 5})
    assert relabelled(mm, mm.full, {"a": 4, "b": 8}) is None          # a size missing (symbolic): names kept


@pytest.mark.parametrize("seed", range(8))
def test_random_programs_relabelled(seed):
    """On random programs (``nc.testing``), the key is invariant under a renaming of every axis that keeps sizes,
    changes when one axis's size changes (a renaming that forgot sizes would not), and the derive of the renamed
    program moves what the original's does."""
    p = random_program(seed)
    names = sorted(axis_names(p.diagram))
    g = p.diagram
    for a in names:
        g = nc.rename_axis(g, a, f"{a}_r")
    renamed = {f"{a}_r" if a in names else a: v for a, v in p.sizes.items()}
    sized = [a for a in names if a in p.sizes]       # axes sized by the call (others carry their size)
    one, two = OpGraph(nc.engine.to_netlist(p.diagram)), OpGraph(nc.engine.to_netlist(g))
    assert relabelled(one, one.full, p.sizes) == relabelled(two, two.full, renamed) is not None
    for a in sized:
        bumped = {**renamed, f"{a}_r": renamed[f"{a}_r"] + 1}
        assert relabelled(one, one.full, p.sizes) != relabelled(two, two.full, bumped)
    memory = 64 + 4 * sum(int(np.prod([p.sizes.get(a.name, a.size) for a in x.axes])) for x in p.diagram.dom.inside)
    assert _outcome(g, renamed, memory) == _outcome(p.diagram, p.sizes, memory)


def _outcome(f, sizes, memory):
    """The derive's H, or the type of its typed refusal (a program with no operation, say)."""
    try:
        return nc.derive(f, sizes=sizes, memory=memory, cache=KernelCache()).H
    except NapkinError as e:
        return type(e).__name__
