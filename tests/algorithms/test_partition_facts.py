"""A kernel's partitions decided axis by axis (``algorithms/partition_facts.py``, issue 35) against placing them.

Two routes, on random programs (:func:`napkin_cat.testing.programs.random_program`) and the library's functions:

* **legality**: ``KernelFacts`` answers, per stream choice (none, a stream, a sweep, a stream inside a stream) and per
  group axis, what building the partition answers: ``nc.stream`` / ``nc.group`` (relabelled, the diagram the rules
  build) on the kernel accept it or refuse it;
* **the record**: a candidate drawn from the facts is the diagram ``stream``/``group`` draw with
  ``relabelled=False``, the groups in any order (one, and every pair both ways).
"""
import itertools

import pytest

import napkin_cat as nc
from napkin_cat.algorithms.partition_facts import KernelFacts
from napkin_cat.errors import NapkinError
from napkin_cat.search.variants import axis_names, carried_axes, reduced_axes, swept_axes, tile_name, variants, \
    walked_variants
from napkin_cat.testing.programs import LIBRARY_FUNCTIONS, random_program

SEEDS = range(20)
LIBRARY = {**LIBRARY_FUNCTIONS, "transformer block": nc.library.transformer_block}


def built(make):
    try:
        return make()
    except NapkinError:
        return None


def choices(f, names):
    """``(stream, sliced, inner)`` of every stream choice worth asking: none, each reduced axis streamed, each
    output-and-input axis swept, each pair of reduced axes nested."""
    reduced = reduced_axes(f)
    out = [(None, False, ())] + [(a, False, ()) for a in reduced] + [(a, True, ()) for a in swept_axes(f)]
    return out + [(a, False, (b,)) for a in reduced for b in reduced if a != b]


def drawn(f, level, names, stream, sliced, inner, groups, relabelled):
    """The candidate placed by the partition functions, or None where one of them refuses."""
    k = nc.kernel(f, level)
    try:
        if stream is not None:
            k = nc.stream(k, stream, names("s", stream), sliced=sliced, relabelled=relabelled)
        for c in inner:
            k = nc.stream(k, c, names("s", c), relabelled=relabelled)
        for a in groups:
            k = nc.group(k, a, names("g", a), relabelled=relabelled)
    except NapkinError:
        return None
    return k


def check(f, level=1):
    taken = set(axis_names(f))

    def names(prefix, axis):
        return tile_name(prefix, axis, taken)
    facts = KernelFacts(f, level)
    kinds = set()
    for stream, sliced, inner in choices(f, names):
        if stream is None:
            legal = True
        elif inner:
            legal = facts.nests(stream, names("s", stream), inner[0], names("s", inner[0]))
        else:
            legal = facts.streams(stream, names("s", stream), sliced)
        placed = drawn(f, level, names, stream, sliced, inner, (), True)
        assert legal == (placed is not None), (stream, sliced, inner)
        if not legal:
            continue
        carried = [a for a in carried_axes(f) if a != stream]
        grouping = {a: facts.groups(a, names("g", a)) for a in carried}
        for a in carried:
            assert grouping[a] == (drawn(f, level, names, stream, sliced, inner, (a,), True) is not None), \
                (stream, inner, a)
        legal_groups = [a for a in carried if grouping[a]]
        orders = [()] + [(a,) for a in legal_groups] + list(itertools.permutations(legal_groups, 2))
        tiles = {a: names("s", a) for a in ((stream,) if stream else ()) + inner}
        tiles.update({a: names("g", a) for a in carried})
        for groups in orders:
            record = facts.record(stream, sliced, inner, groups, tiles)
            assert record == drawn(f, level, names, stream, sliced, inner, groups, False), (stream, inner, groups)
            kinds.add((stream is not None, sliced, bool(inner), len(groups)))
    return kinds


@pytest.mark.parametrize("name", sorted(LIBRARY))
def test_library_facts_are_what_placing_finds(name):
    kinds = check(LIBRARY[name]())
    assert (False, False, False, 0) in kinds and len(kinds) > 1, kinds    # the whole kernel, and something more


def test_random_facts_are_what_placing_finds():
    kinds = set()
    for seed in SEEDS:
        p = random_program(seed, n_ops=2 + seed % 5)
        kinds |= check(p.diagram, 1 + seed % 2)
    assert {k[:3] for k in kinds} >= {(False, False, False), (True, False, False), (True, True, False)}, kinds
    assert any(k[3] >= 2 for k in kinds), kinds


def test_the_two_dimensional_loop_is_decided():
    """Fused linear cross-entropy: the stream along the hidden axis inside the vocabulary's (the one 2-D loop)."""
    kinds = check(nc.library.linear_cross_entropy())
    assert (True, False, True, 1) in kinds, kinds


def test_variants_of_an_algorithm_are_walked():
    """A diagram with kernels already is partitioned where ``group`` finds its kernels: no facts, the walk."""
    algo = nc.group(nc.kernel(nc.library.matmul(), level=2), "a", "t_a")
    assert not KernelFacts.applies(algo) and KernelFacts.applies(nc.library.matmul())
    got = [(v.describe(), v.record) for v in variants(algo)]
    assert got == [(v.describe(), v.record) for v in walked_variants(algo)] and got


def test_a_refused_record_says_why():
    facts = KernelFacts(nc.library.attention())
    with pytest.raises(nc.RewriteError, match="'d'"):
        facts.record("d", False, (), (), {"d": "s_d"})
    with pytest.raises(nc.RewriteError, match="'x'"):
        facts.record(None, False, (), ("x",), {"x": "g_x"})
