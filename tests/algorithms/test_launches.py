"""One count of thread blocks (issue 31, family 7): :mod:`napkin_cat.algorithms.launches` is what the plan runs.

The independent route is the plan IR: :func:`counted` enumerates the grid loops outside every kernel of
``nc.plan(d, sizes)`` (their bounds evaluated index by index, as the runner does) and counts, per kernel statement,
the distinct indices around it.  On library algorithms and random partitions of them (streams, groups over one
or two axes, woven head axes, split streams, kernels one level down, Grids nested along one axis, kernels in
sequence, ragged sizes) the one count equals it launch by launch.  The cases the four rules of old counted
wrongly are named: a kernel's level-2 groups (the search multiplied them in), a split stream inside another stream
or a level-2 kernel (its parts run in the kernel's block; the time model and ``r.blocks`` counted them), Grids
nested along one axis at ragged sizes (``⌈a/g⌉ · ⌈g/h⌉`` is not what runs), ragged tiles under ``min_blocks``
(the search required ``a/g`` groups where ``⌈a/g⌉`` run), and the timed search's tiles (not held to
``min_blocks``).  Then ``nc.derive(..., min_blocks=B)``'s ``r.blocks``, ``nc.hardware.predict``'s blocks and
waves and the timed search are checked against it on one diagram each.
"""
from __future__ import annotations

import math

import pytest
import sympy
from hypothesis import HealthCheck, assume, given, settings, strategies as st

import napkin_cat as nc
from napkin_cat.algorithms.launches import blocks, kernel_launches
from napkin_cat.codegen.launch import launches
from napkin_cat.errors import NapkinError
from napkin_cat.plan.ir import GridLoop, Kernel, StreamLoop
from napkin_cat.syntax.sizes import Sizes, symbols_of
from rewrites import flash_attention


def counted(p) -> list:
    """Per kernel statement outside every kernel, in program order: the distinct indices of the grid loops around
    it, each loop's trips ``⌈full/tile⌉`` evaluated at the sizes and the indices of the loops around it."""
    seen: dict = {}

    def run(stmts, env, index):
        for s in stmts:
            if isinstance(s, Kernel):
                seen.setdefault(id(s), set()).add(index)
            elif isinstance(s, GridLoop):
                trips = sympy.ceiling(sympy.sympify(s.full).subs(env) / sympy.sympify(s.tile).subs(env))
                for t in range(int(trips)):
                    run(s.body, {**env, s.index: t}, index + (t,))
            else:
                assert not isinstance(s, StreamLoop), "a stream outside every kernel"
    run(p.body, dict(p.sizes), ())
    return [len(v) for v in seen.values()]


def one_count(d, sizes) -> list:
    """The one definition's blocks of every launch, in order (a split kernel: its parts, then its combine)."""
    return [int(Sizes(sizes).subs(e)) for k in kernel_launches(d) for e in k.launches]


def check(d, sizes, p=None):
    p = p or nc.plan(d, sizes)
    got = counted(p)
    assert one_count(d, sizes) == got
    assert blocks(d, sizes) == min(int(Sizes(sizes).subs(k.blocks)) for k in kernel_launches(d))
    # each launch counted at the sizes (numbers put in first) is its symbolic count substituted, and the plan's
    assert [k.blocks_at(Sizes(sizes)) for k in kernel_launches(d)] == \
        [int(Sizes(sizes).subs(k.blocks)) for k in kernel_launches(d)]
    assert [launch.blocks for launch in launches(p)] == got       # what the C/CUDA/Triton kernels launch
    return got


# ---------------------------------------------------------------- named structures, the old rules' disagreements
def _tiled():
    return nc.group(nc.group(nc.stream(nc.library.matmul(), "b", "s_b"), "a", "g_a"), "c", "g_c")


def _flash():
    return flash_attention(nc.library.attention()).diagram


CASES = {
    # ⌈10/3⌉·⌈7/2⌉ = 16 (the search's rule of old: 10/3 · 7/2 = 35/3)
    "ragged matmul": (_tiled, {"a": 10, "b": 6, "c": 7, "g_a": 3, "g_c": 2, "s_b": 2}, [16]),
    # heads woven and grouped: ⌈5/2⌉·⌈3/2⌉
    "multi-head attention": (lambda: nc.group(nc.group(nc.stream(nc.library.multi_head_attention(), "x", "s_x"),
                                                       "q", "g_q"), "h", "g_h"),
                             {"h": 3, "q": 5, "x": 7, "d": 2, "g_q": 2, "g_h": 2, "s_x": 3}, [6]),
    # FlashDecoding: ⌈5/2⌉ groups × 3 parts, then the combine over the groups' rows (one block per query row)
    "flash decoding": (lambda: nc.group(nc.stream(nc.library.attention(), "x", "s_x", parts="P"), "q", "g_q"),
                       {"q": 5, "x": 10, "d": 3, "g_q": 2, "s_x": 4, "P": 3}, [9, 5]),
    # more parts than slices: the empty parts still launch
    "parts past the slices": (lambda: nc.stream(nc.library.matmul(), "b", "s_b", parts="P"),
                              {"a": 2, "b": 3, "c": 2, "s_b": 2, "P": 4}, [4, 1]),
    # the level-2 kernel's Grids (h_a, h_c) run inside the block: ⌈9/4⌉·⌈7/6⌉ blocks (the search's rule of old
    # multiplied them in: 1911/32)
    "level-2 kernel": (lambda: nc.group(nc.group(nc.stream(nc.kernel(_tiled(), level=2), "b", "u_b"), "a", "h_a"),
                                        "c", "h_c"),
                       {"a": 9, "b": 13, "c": 7, "g_a": 4, "g_c": 6, "s_b": 6, "h_a": 2, "h_c": 3, "u_b": 4}, [6]),
    # a split stream in a level-2 kernel runs its parts in the block: ⌈9/4⌉·⌈7/6⌉ (the time model of old: × 3)
    "split in a level-2 kernel": (lambda: nc.group(nc.stream(nc.kernel(_tiled(), level=2), "b", "u_b", parts="P"),
                                                   "a", "h_a"),
                                  {"a": 9, "b": 13, "c": 7, "g_a": 4, "g_c": 6, "s_b": 6, "h_a": 2, "u_b": 4, "P": 3},
                                  [6]),
    # a split stream inside a sliced stream: its parts run in the block (all rules of old: 2)
    "split inside a stream": (lambda: nc.stream(nc.stream(nc.library.attention(), "q", "s_q", sliced=True),
                                                "x", "s_x", parts="P"),
                              {"q": 3, "x": 8, "d": 2, "s_q": 2, "s_x": 2, "P": 2}, [1]),
    # Grids nested along a: the outer tiles 7 + 3, cut in 3s: 3 + 1 (the rules of old: ⌈10/7⌉·⌈7/3⌉ = 6)
    "grids nested along one axis": (lambda: nc.group(nc.group(nc.stream(nc.library.matmul(), "b", "s_b"), "a", "g_a"),
                                                     "a", "h_a"),
                                    {"a": 10, "b": 4, "c": 3, "g_a": 7, "h_a": 3, "s_b": 2}, [4]),
    "a sub-loop of flash attention": (lambda: nc.stream(_flash(), "x", "u_x"),
                                      {"q": 9, "x": 13, "d": 3, "g_q": 4, "s_x": 6, "u_x": 4}, [3]),
    "kernels in sequence": (lambda: nc.unfused(nc.library.attention()), {"q": 3, "x": 5, "d": 2}, [1, 1, 1]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_one_count_is_what_the_plan_runs(name):
    make, sizes, want = CASES[name]
    assert check(make(), sizes) == want


def test_the_printers_launch_grids_nested_along_one_axis():
    """The kernel printers launch the innermost tiles, not the outer Grid with the inner one run in the block."""
    make, sizes, want = CASES["grids nested along one axis"]
    (launch,) = launches(nc.plan(make(), sizes))
    assert launch.blocks == want[0] and [g.tile for g in launch.grids] == [nc.symbol("g_a"), nc.symbol("h_a")]


def test_a_derived_causal_attention_counts_alike():
    """Derived with its masked trips skipped: the blocks are its groups."""
    r = nc.derive(nc.library.causal_attention(), 128, sizes={"q": 16, "x": 16, "d": 4})
    assert check(r.diagram, r.optimum.sizes) == [r.blocks]


# ---------------------------------------------------------------- random partitions of library algorithms
LIBRARY = {"matmul": nc.library.matmul, "attention": nc.library.attention,
           "mha": nc.library.multi_head_attention, "gqa": nc.library.grouped_query_attention,
           "causal": nc.library.causal_attention, "layer_norm": nc.library.layer_norm}


def _axes(d):
    return sorted({a.name for arr in (*d.dom.inside, *d.cod.inside) for a in arr.axes})


@st.composite
def partitioned(draw):
    """A library algorithm streamed (maybe split) and grouped along random axes, sometimes one level down or with
    a second Grid along a grouped axis, with random (ragged) sizes; None where the draw is illegal."""
    name = draw(st.sampled_from(sorted(LIBRARY)))
    d = f = LIBRARY[name]()
    names = _axes(f)
    try:
        s = draw(st.one_of(st.none(), st.sampled_from(names)), label="stream")
        if s:
            d = nc.stream(d, s, f"s_{s}", parts="P" if draw(st.booleans(), label="split") else None)
        groups = draw(st.lists(st.sampled_from(names), max_size=2, unique=True), label="groups")
        for g in groups:
            d = nc.group(d, g, f"g_{g}")
        if not s and not groups:
            return None
        if groups and draw(st.booleans(), label="nested grid"):
            d = nc.group(d, groups[0], f"h_{groups[0]}")
        elif draw(st.integers(0, 3), label="level 2") == 0:
            d = nc.kernel(d, level=2)
    except NapkinError:
        return None
    sizes = {}
    found = sorted(map(str, symbols_of(d)))
    for n in found:
        if not n.startswith(("s_", "g_", "h_")) and n != "P":
            sizes[n] = draw(st.integers(1, 6), label=n)
    for n in found:
        if n.startswith(("s_", "g_")):
            sizes[n] = draw(st.integers(1, sizes[n[2:]]), label=n)
    for n in found:
        if n.startswith("h_"):
            sizes[n] = draw(st.integers(1, sizes[f"g_{n[2:]}"]), label=n)
    if "P" in found:
        sizes["P"] = draw(st.integers(1, 4), label="P")
    return d, sizes


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(case=partitioned().filter(lambda c: c is not None))
def test_random_partitions_count_alike(case):
    d, sizes = case
    try:
        p = nc.plan(d, sizes)
    except NapkinError:          # refused, typed (a split stream one level down whose reducer has no merge)
        assume(False)
    check(d, sizes, p)


# ---------------------------------------------------------------- the callers: derive, predict, the timed search
def test_derive_min_blocks_and_predict_count_the_blocks_the_plan_launches():
    """Two kernels (S = QKᵀ grouped; the rest grouped and split): each kernel's groups Π ⌈n/g⌉ (times its parts),
    from the variant's record, are what the plan launches, what ``r.blocks`` reports (the narrowest), and what the
    time model fills its waves with."""
    S = {"q": 32, "x": 512, "d": 32}
    r = nc.derive(nc.library.attention(), 2 ** 10, sizes=S, min_blocks=16)
    assert len(r.variant.kernels) == 2 and any(k.parts for k in r.variant.kernels)
    want, per_kernel = [], []
    for k in r.variant.kernels:
        groups = math.prod(math.ceil(S[a] / r.optimum.sizes[k.tiles[a]]) for a in k.groups)
        P = r.optimum.sizes[k.parts] if k.parts else 1
        # a split's combine: one block per row of the groups its state has: online softmax's μ, z (q) and o (q d)
        # share q only, so a group over d is no row of the combine (it would load μ, z once per d row)
        rows = math.prod(S[a] for a in k.groups if a == "q")
        want += [groups * P, rows] if k.parts else [groups]
        per_kernel.append(groups * P)
    assert counted(nc.plan(r.diagram, r.optimum.sizes)) == want
    # the one definition (KernelLaunch.launches: the parts and the combine's rows) counts what the plan launches
    at = Sizes({**S, **r.optimum.sizes})
    assert [int(at.subs(n)) for k in kernel_launches(r.diagram) for n in k.launches] == want
    assert r.blocks == min(per_kernel) >= 16
    gpu = nc.hardware.load("h100-sxm5")
    t = nc.hardware.predict(r.diagram, gpu, r.optimum.sizes)
    assert [kt.blocks for kt in t.kernels] == per_kernel and t.blocks == r.blocks
    assert [kt.waves for kt in t.kernels] == [math.ceil(b / (gpu.sm_count * kt.resident))
                                              for b, kt in zip(per_kernel, t.kernels)]


def test_the_timed_search_launches_the_blocks_it_is_asked_for():
    """The time model picks tiles again; those it picks must still launch ``min_blocks`` (of old: 128 < 132)."""
    r = nc.derive(nc.library.attention(), sizes={"q": 128, "x": 1024, "d": 64}, hardware="h100-sxm5",
                  min_blocks=132)
    (k,) = r.variant.kernels
    assert k.parts               # 128 rows make at most 128 groups
    groups = math.ceil(128 / r.optimum.sizes[k.tiles["q"]])
    P = r.optimum.sizes[k.parts]
    assert counted(nc.plan(r.diagram, r.optimum.sizes)) == [groups * P, 128]     # the combine: one block per row
    assert groups * P == r.blocks == r.prediction.blocks >= 132
    timed = [{str(t): v for t, v in tiles.items()} for label, tiles, _, _ in r.timings if label == str(r.variant)]
    assert timed and all(math.ceil(128 / t[str(k.tiles["q"])]) * t[str(k.parts)] >= 132 for t in timed)


def test_min_blocks_with_ragged_tiles_counts_the_groups_that_run():
    """tiles='any': the search's optimum is the least H over every tiling whose ⌈a/g_a⌉·⌈c/g_c⌉ groups reach B,
    found here by brute force over the paper's formula (of old it required (a/g_a)(c/g_c) ≥ B: H = 660)."""
    a, b, c, M, B = 10, 8, 10, 64, 9
    r = nc.derive(nc.library.matmul(), M, sizes={"a": a, "b": b, "c": c}, tiles="any", min_blocks=B)
    (k,) = r.variant.kernels
    assert not k.parts
    best = min(a * b * math.ceil(c / gc) + b * c * math.ceil(a / ga) + a * c
               for ga in range(1, a + 1) for gc in range(1, c + 1) for s in range(1, b + 1)
               if ga * s + s * gc + ga * gc <= M and math.ceil(a / ga) * math.ceil(c / gc) >= B)
    assert r.H == best == nc.cost(r.diagram, sizes=r.optimum.sizes).H[1]
    assert counted(nc.plan(r.diagram, r.optimum.sizes)) == [r.blocks] and r.blocks >= B
