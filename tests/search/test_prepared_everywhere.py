"""A function searched whole is also given the forms of one ``prepare`` rule at every place it applies
(:func:`napkin_cat.search.forms.prepared_forms`).  The normal form merges each contraction into its one reader, and a
three-operand contraction alone needs far more memory than two products; breadth first, with more places than its
limit of forms leaves room for, never split every merge, so ``x·W₁·W₂ → relu → ·W₃·W₄`` moved 4.3× (two pairs) and
5.3× (three pairs) what its products and maps move each alone at ``M = 4096``.

The second route: each operation as written derived alone, its value written out and read back by the next, is an
algorithm of the whole function; the derive of the whole must move at most their sum."""
from __future__ import annotations

import pytest

import napkin_cat as nc
from napkin_cat.search.envelope import boundary_names
from tests.answers import assert_runs_counts_and_replays

SIZE = 512


def chain(spec: str):
    """``spec``: ``m`` a product by the next weight, any other letter ``r`` a relu; the function and its operations
    as written, each a diagram of its own."""
    k = spec.count("m")
    b = nc.Builder(nc.types(", ".join(["n a0"] + [f"a{i} a{i + 1}" for i in range(k)])))
    x, i, ops = b.inputs[0], 0, []
    for s in spec:
        if s == "m":
            op = nc.einsum(f"n a{i}, a{i} a{i + 1} -> n a{i + 1}")
            x = b(op, x, b.inputs[1 + i])
            i += 1
        else:
            op = nc.elementwise("relu", f"n a{i}")
            x = b(op, x)
        ops.append(op)
    return b.build(x), ops


def sizes(f) -> dict:
    return {n: SIZE for n in boundary_names(f)}


@pytest.mark.parametrize("spec,memory", [("mmrmm", 2 ** 12), ("mmrmm", 2 ** 16), ("mmrmmrmm", 2 ** 12),
                                         ("mmmrm", 2 ** 12), ("mrmmm", 2 ** 16)])
def test_the_whole_moves_at_most_its_operations_apart(spec, memory):
    f, ops = chain(spec)
    whole = nc.derive(f, memory=memory, sizes=sizes(f)).H
    apart = sum(nc.derive(op, memory=memory, sizes=sizes(op)).H for op in ops)
    assert whole <= apart


def test_every_merge_split_runs_counts_what_it_states_and_computes_the_function():
    f, _ = chain("mmrmm")
    small = {n: 64 for n in boundary_names(f)}
    r = nc.derive(f, memory=2 ** 9, sizes=small)
    rules = [s.rule for s in r.trace.steps]
    assert rules.count("contraction_merge") == rules.count("pairwise_contraction") == 2   # both merges split
    assert_runs_counts_and_replays(f, r, small, scale=0.2, seed=1)
