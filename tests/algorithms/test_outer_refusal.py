"""A 2-D loop refused before its inner stream is cut out (``inner_streams.refused_outer``, issue 35).

Two routes, on the blocks of the transformer block and of attention's saved backward (every run of two to twelve
operations), the library's functions and random programs (:func:`napkin_cat.testing.programs.random_program`):

* **sound**: every pair (outer, inner) of reduced axes the cheap test refuses is refused by the full check, done
  without it: the reduction of ``inner`` cut out of the kernel's inside (``nest_reduction``) and the streaming
  analysis of the cut along ``outer`` (``analyse``), one of which raises;
* **the same candidates**: ``variants`` lists the same partitions with the cheap test as without it (the test
  switched off), and ``nc.derive`` answers the same ``H`` with the same winner.
"""
import pytest

import napkin_cat as nc
from napkin_cat.algorithms import partition_facts
from napkin_cat.algorithms.inner_streams import cone_boundary, nest_reduction, refused_outer, value_arrays
from napkin_cat.algorithms.partition_facts import KernelFacts
from napkin_cat.algorithms.partitions import stream_of
from napkin_cat.algorithms.streaming import analyse
from napkin_cat.errors import NapkinError
from napkin_cat.search.variants import reduced_axes, variants
from napkin_cat.syntax.builder import build_values
from napkin_cat.syntax.wiring import trace_values
from napkin_cat.testing.programs import LIBRARY_FUNCTIONS, random_program


def blocks(f, widths=range(2, 13)):
    """Every run of two to twelve consecutive operations of ``f`` (in the order ``trace_values`` lists them) as a
    function of its own: what it reads from outside to what is read after it (the blocks the search fuses)."""
    ops, dom, cod = trace_values(f)
    arrays = value_arrays(f, ops, dom)
    out = []
    for w in widths:
        for i in range(len(ops) - w + 1):
            run, rest = ops[i:i + w], ops[:i] + ops[i + w:]
            made = {v for _, _, outs in run for v in outs}
            ins = list(dict.fromkeys(v for _, vs, _ in run for v in vs if v not in made))
            read = {v for _, vs, _ in rest for v in vs} | set(cod)
            outs = [v for _, _, vs in run for v in vs if v in read]
            if outs:
                out.append(build_values(run, ins, outs, arrays))
    return out


def independent():
    """Two reductions apart, ``Σ_c A[a, c] + Σ_b B[a, b]``: the cone of either reads no input carrying the other."""
    return (nc.einsum("a c -> a") @ nc.einsum("a b -> a")) >> nc.elementwise("add", "a, a -> a")


def corpus():
    out = [make() for make in LIBRARY_FUNCTIONS.values()] + [independent()]
    out += [random_program(seed, n_ops=2 + seed % 5).diagram for seed in range(20)]
    out += blocks(nc.library.transformer_block())
    out += blocks(nc.grad(nc.library.attention(lse=True), wrt=[0, 1, 2], saved=True, aux=1))
    return [f for f in out if KernelFacts.applies(f) and len(reduced_axes(f)) >= 2]


def fully_refused(inside, outer: str, inner: str) -> bool:
    """The full check, without the cheap test: the cut, then the outer stream's analysis of the cut trip."""
    try:
        cut = nest_reduction(inside, inner, lambda d: stream_of(d, {"axis": inner, "size": nc.symbol("s_i")},
                                                                relabelled=False))
        analyse(cut, outer)
    except NapkinError:
        return True
    return False


CORPUS = corpus()


def test_the_cheap_refusal_refuses_only_what_the_full_check_refuses():
    refused = kept = 0
    for f in CORPUS:
        inside = nc.kernel(f).boxes[0].arg
        ops, dom, cod = trace_values(inside)
        arrays = value_arrays(inside, ops, dom)
        for inner in reduced_axes(f):
            try:
                boundary = cone_boundary(ops, dom, cod, arrays, inner)
            except NapkinError:
                continue
            for outer in reduced_axes(f):
                if outer == inner or not any(outer in a.names for a in inside.dom.inside):
                    continue
                why = refused_outer(ops, dom, arrays, boundary, inner, outer)
                if why is None:
                    kept += 1
                    continue
                refused += 1
                assert f"{inner!r}" in why and f"{outer!r}" in why, why
                assert fully_refused(inside, outer, inner), (f, outer, inner, why)
    assert refused > 50 and kept > 0, (refused, kept)   # the corpus exercises both answers


def described(fs):
    return [[(v.describe(), v.tiles) for v in variants(f)] for f in fs]


def test_the_same_candidates_remain(monkeypatch):
    with_it = described(CORPUS)
    monkeypatch.setattr(partition_facts, "refused_outer", lambda *args: None)
    assert described(CORPUS) == with_it
    assert any("inside" in d for vs in with_it for d, _ in vs)    # a 2-D loop is among them


@pytest.mark.parametrize("make, sizes", [
    (nc.library.linear_cross_entropy, {"n": 4096, "v": 32768, "e": 1024}),
    (nc.library.attention, {"q": 4096, "x": 4096, "d": 128}),
])
def test_derive_answers_the_same(monkeypatch, make, sizes):
    f = make()
    got = nc.derive(f, memory=2 ** 14, sizes=sizes)
    monkeypatch.setattr(partition_facts, "refused_outer", lambda *args: None)
    want = nc.derive(f, memory=2 ** 14, sizes=sizes)
    assert got.H == want.H and got.diagram == want.diagram


def test_a_cone_that_reads_no_slice_is_left_to_the_full_check():
    """The cone of ``c`` reads no input carrying ``b``: it runs once, before the trips, not per trip, so the stream
    along ``b`` takes it though none of its outputs carries ``b`` (placed by ``nc.stream``, the second route)."""
    f = independent()
    facts = KernelFacts(f)
    for outer, inner in (("b", "c"), ("c", "b")):
        assert facts.nests(outer, "s_" + outer, inner, "s_" + inner)
        nc.stream(nc.stream(f, outer, "s_" + outer), inner, "s_" + inner)    # placing accepts it too
    assert any(v.inner for v in variants(f))
