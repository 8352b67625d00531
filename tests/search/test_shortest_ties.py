"""A memory's kernel split never depends on the other memories asked with it (issue 31, tie-breaking).

``paths.shortest_splits`` answers every memory of a list in one pass and skips an edge whose block's bound cannot
beat the best path known at *every* memory.  Its answer per memory is the least ``(H, kernels, tie)``: of equal
transfers, fewer kernels.  A block whose transfers equal its bound (its compulsory transfers) can tie the best
path on H and win on kernels, so a skip that drops it on ``bound >= best`` loses the tie, and only where no other
memory of the list keeps the edge: ``random_program(601)`` (a form softmax is prepared into) at memory 16 found
3 kernels alone and 2 inside ``[4, 8, …]``, both 401 values moved; ``nc.derive(random_program(1032), memory=32)``
chose 3 kernels and ``memory=[16, 32]`` 2 at 32, both 452.

Checked here, on prepared forms of random programs (:func:`napkin_cat.testing.programs.random_program`) and of
attention, at several memories, against a route that shares nothing with the search:

* the answer at each memory alone equals its answer inside the list (H, kernels, tie and the path's blocks);
* both equal the least ``(H, kernels, tie)`` over every chain of the space's edges, each block at each of its
  partitions, with no bound and no memo of blocks (a dynamic programme over down-sets: the sum of triples keeps
  their lexicographic order, so the least chain into a down-set extends the least chain into its predecessor).

``nc.derive`` itself is compared at one memory alone, inside a list of others and with ``sizes`` in another order
(H, the algorithm's kernels and its serialised diagram).
"""
import hashlib

import pytest

import napkin_cat as nc
from napkin_cat.rewriting.registry import rulebook
from napkin_cat.search.context import KernelCache, search_of
from napkin_cat.search.forms import prepared_forms
from napkin_cat.search.paths import playable, shortest_splits
from napkin_cat.testing.programs import random_program

MEMORIES = [16, 32, 2 ** 12]
CASES = {"random_program(601)": lambda: random_program(601), "random_program(1032)": lambda: random_program(1032),
         "attention": lambda: (nc.library.attention(), {"q": 16, "x": 16, "d": 4})}


def _case(name):
    made = CASES[name]()
    diagram, sizes = (made.diagram, dict(made.sizes)) if hasattr(made, "diagram") else made
    return diagram, {str(k): int(v) for k, v in sizes.items()}


def exhaustive(space, search, evaluate, n) -> list:
    """Per point: the least ``(H, kernels, tie)`` over every chain of the space's edges (None where none fits);
    ``tie`` is the transfers again, as the search's ``tie`` is where nothing is masked."""
    best = {}

    def least(b, k):
        if b == 0:
            return (0, 0, 0)
        if (b, k) not in best:
            found = None
            for a, block in space.into[b]:
                before = least(a, k)
                if before is None:
                    continue
                for _, curve in search.choice(space.graph, block).options:
                    h = evaluate(curve, k)
                    if h is not None:
                        cand = (before[0] + h, before[1] + 1, before[2] + h)
                        found = cand if found is None or cand < found else found
            best[(b, k)] = found
        return best[(b, k)]
    return [least(space.full, k) for k in range(n)]


def _triple(found, evaluate, k):
    if found is None:
        return None
    H, kernels, path = found
    return (H, kernels, sum(evaluate(curve, k) for _, _, curve in path))


@pytest.mark.parametrize("name", CASES)
def test_each_memory_alone_as_in_a_list_and_the_least_kernels_of_equal_transfers(name):
    diagram, sizes = _case(name)
    book = rulebook()
    ok = playable(book.roles)
    given = nc.Sizes(sizes)
    forms = [f for f in prepared_forms(diagram, book, 2, sizes=sizes) if f.cut is None and len(f.graph)]
    assert forms, name
    apart = search_of(1, KernelCache())      # the searches of one memory alone (the list's has its own)
    for form in forms:
        search = search_of(1, KernelCache())

        def evaluate(curve, k, memories=MEMORIES):
            return curve.at_all(sizes, memories)[k][0] if ok(curve) else None

        def lower(ch):
            return ch.compulsory_at(given)
        together = shortest_splits(form.space, search, MEMORIES, evaluate, lower, tie=evaluate)
        want = exhaustive(form.space, search_of(1, KernelCache()), evaluate, len(MEMORIES))
        for k, m in enumerate(MEMORIES):
            def one(curve, _, m=m):
                return evaluate(curve, 0, [m])
            (alone,) = shortest_splits(form.space, apart, [m], one, lower, tie=one)
            blocks = [None if f is None else [b for b, _, _ in f[2]] for f in (alone, together[k])]
            rules = [s.rule for s in form.steps]
            assert blocks[0] == blocks[1], (name, rules, m, blocks)
            got = (_triple(alone, one, 0), _triple(together[k], evaluate, k))
            assert got[0] == got[1] == want[k], (name, rules, m, got, want[k])


def _fingerprint(r):
    return r.H, str(r.variant), hashlib.sha1(nc.dumps(r.diagram).encode()).hexdigest()


def test_derive_at_one_memory_alone_as_in_a_list():
    """(``random_program(1032)`` at 32: 3 kernels alone and 2 inside ``[16, 32]`` under the H-only skip, 452
    values moved both; its sizes are a dict of three axes, given here in two orders.)"""
    name, memories = "random_program(1032)", [16, 32]
    diagram, sizes = _case(name)
    assert len(sizes) == 3, sizes
    together = nc.derive(diagram, memory=memories, sizes=sizes)
    turned = dict(reversed(list(sizes.items())))
    for m in memories:
        alone = _fingerprint(nc.derive(diagram, memory=m, sizes=sizes))
        assert _fingerprint(together.at(m)) == alone, (name, m)
        assert _fingerprint(nc.derive(diagram, memory=m, sizes=turned)) == alone, (name, m)
