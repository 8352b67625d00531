"""A kernel across two segments renames its own axes apart (issue xblock-35): names never decide the answer.

The search renames a function's axes apart within each segment only (alike segments stay alike and are solved once),
but seam fusion may join a kernel across two segments, two blocks: names kept, that kernel saw the two blocks' ``d``
(and ``f``, ``h``, ``m``) as one axis, so it could stream or group neither alone and a stack sharing names derived
worse than the same stack with its own (1,520 against 1,392 for two transformer blocks at M 512).  Law: a block across
segments is the kernel of its own axes renamed apart (:func:`napkin_cat.rewriting.apart.apart_within`, α-conversion:
values, transfers and FLOPs kept), built by the rule book's ``axes_apart`` with ``within=`` before its kernels, so::

    H(shared names) = H(own names)          on stacks of blocks, residual or not, at every memory

Second routes: the own-names stack's derive; the plan's runner counting the transfers against H and the cost
functor at the tiles; numpy against the function; the trace replayed.  Mutation: ``OpGraph.renamed_apart`` made to
rename nothing brings the gap back (:func:`test_without_the_kernel_renaming_the_gap_returns`).
"""
from __future__ import annotations

import pytest

import napkin_cat as nc
from napkin_cat.rewriting.apart import apart_names, apart_within
from napkin_cat.rewriting.netlist import to_netlist
from napkin_cat.search.blocks import OpGraph
from napkin_cat.search.context import KernelCache
from napkin_cat.search.segments import cut as cut_of
from tests.answers import assert_runs_counts_and_replays

L = nc.library
T = {"n": 8, "e": 8, "h": 2, "d": 4, "f": 16}
NE = {"n": 8, "e": 8, "f": 16}


def _mlp(kind):
    if kind == "swiglu":
        return nc.rename_axis(L.swiglu_mlp(), "o", "e")
    return nc.rename_axis(nc.rename_axis(L.mlp(activation=kind), "i", "e"), "o", "e")


def transformers(k, own):
    if not own:
        return L.transformer_stack(k), T
    blocks = [nc.rename_axis(nc.rename_axis(L.transformer_block(), "d", f"d{i}"), "f", f"f{i}") for i in range(k)]
    return L.in_a_row(blocks), {"n": 8, "e": 8, "h": 2, **{f"{a}{i}": T[a] for i in range(k) for a in "df"}}


def mlps(kinds, own, residual=True):
    blocks = [_mlp(k) if not own else nc.rename_axis(_mlp(k), "f", f"f{i}") for i, k in enumerate(kinds)]
    sizes = NE if not own else {"n": 8, "e": 8, **{f"f{i}": 16 for i in range(len(kinds))}}
    return L.in_a_row(blocks, residual=residual), sizes


CASES = {   # name → (build(own) → (f, sizes), memory, H before the fix with names shared)
    "transformer x2 at 1024": (lambda own: transformers(2, own), 1024, 1392),
    "transformer x3 at 512": (lambda own: transformers(3, own), 512, 2344),
    "transformer x4 at 1024": (lambda own: transformers(4, own), 1024, 3040),
    "gelu x6 residual at 1024": (lambda own: mlps(("gelu",) * 6, own), 1024, 2064),
    "relu x8 residual at 1024": (lambda own: mlps(("relu",) * 8, own), 1024, 2752),
    "gelu, swiglu, relu x2 residual at 1024": (lambda own: mlps(("gelu", "swiglu", "relu") * 2, own), 1024, 2272),
}


def _derive(f, sizes, memory, cache=None):
    return nc.derive(f, memory=memory, sizes=sizes, cache=KernelCache() if cache is None else cache)


@pytest.fixture(scope="module")
def derived():
    """``derived(case, own)``: the case's stack (shared or own names) derived once for the module (the runs below
    read the first test's shared derives instead of repeating them), the stacks' searches sharing one kernel cache
    (costed once per canonical form and level, a kernel across segments keyed with its renaming: the blocks of the
    two, three and four transformer stacks are costed once, not per stack; the mutant derives cold under its
    patch)."""
    made, kernels = {}, KernelCache()

    def derive(case, own):
        if (case, own) not in made:
            build, memory, _ = CASES[case]
            f, sizes = build(own)
            made[case, own] = f, sizes, _derive(f, sizes, memory, kernels)
        return made[case, own]
    return derive


@pytest.mark.parametrize("case", sorted(CASES))
def test_stacks_across_segments_derive_as_own_names(case, derived):
    _, _, before = CASES[case]
    (_, _, shared), (_, _, own) = derived(case, False), derived(case, True)
    assert shared.H == own.H < before
    assert any(dict(st.params).get("within") for st in shared.trace if st.rule == "axes_apart")


@pytest.mark.parametrize("case", ["transformer x3 at 512", "gelu x6 residual at 1024"])
def test_the_answer_runs_counts_and_replays(case, derived):
    """H = the runner's count = the cost functor at the tiles; the algorithm computes f; the trace (the kernels'
    renaming among its steps) replays from f to it."""
    f, sizes, r = derived(case, False)
    at, ran = assert_runs_counts_and_replays(f, r, sizes, scale=0.3, seed=2)
    assert ran.transfers.get(1, 0) == nc.cost(r.diagram, sizes=at).H.get(1, 0)


@pytest.mark.parametrize("case", ["transformer x2 at 1024", "gelu x6 residual at 1024"])
def test_without_the_kernel_renaming_the_gap_returns(case, monkeypatch):
    """The mutant: a kernel across segments keeps the names (``renamed_apart`` renames nothing): the shared stack
    derives what it did before the fix, worse than the own-names one."""
    build, memory, before = CASES[case]
    monkeypatch.setattr(OpGraph, "renamed_apart", lambda self, block: {})
    (f, s), (g, o) = build(False), build(True)
    assert _derive(f, s, memory).H == before > _derive(g, o, memory).H


def test_apart_within_is_the_functions_law_in_a_kernel():
    """Over every box, a kernel renames apart what the function does (an output's class aside); a kernel that sees
    one block of a stack renames nothing; a class some box outside the kernel sees is never renamed."""
    f, _ = mlps(("gelu",) * 3, False, residual=False)
    net = to_netlist(f)
    boxes = [n for n, node in net.nodes.items() if node.kind == "box"]
    whole, everything = apart_names(net), apart_within(net, boxes)
    assert whole and set(whole) <= set(everything)
    assert apart_within(net, boxes[:len(boxes) // 3]) == {}
    later = apart_within(net, boxes[len(boxes) // 3:])        # blocks 2 and 3: block 3's f renamed from block 2's
    seen_outside = {(w, a) for n in boxes[:len(boxes) // 3] for w in (*net.ins[n], *net.outs[n])
                    for a in net.wires[w].array.names}
    assert later and not seen_outside & set(later)


def test_a_kernel_across_segments_has_its_own_key():
    """Equal keys, equal kernels: a block whose kernel renames apart is keyed with the renaming (its subdiagram holds
    the new names), the same block of an uncut graph keeps the plain key and names."""
    f = L.transformer_stack(2)
    cut, plain = OpGraph(to_netlist(f)), OpGraph(to_netlist(f))
    parts, _ = cut_of(cut)
    cut.cut_at(parts)
    block = parts[0] | parts[1] | parts[2] | parts[3]        # block 1 and block 2's attention
    names = cut.renamed_apart(block)
    assert names and plain.renamed_apart(block) == {} and cut.renamed_apart(parts[3]) == {}
    assert cut.key(block) != plain.key(block)
    renamed = {a.name for b in cut.subdiagram(block).boxes for arr in b.cod.inside for a in arr.axes}
    assert set(names.values()) <= renamed
    assert not set(names.values()) & {a.name for b in plain.subdiagram(block).boxes for arr in b.cod.inside
                                      for a in arr.axes}
