"""The GPU time search per connected component of the kernel–tile graph (issue 35): the same winner as timing every
assignment of every tile of the structure at once.

Second route: :func:`exhaustive`, the search as it was before (the product of every tile's values, each assignment
timed whole, its transfers the whole structure's symbolic cost substituted, or counted by the fold where a mask read
from data skips trips), kept here as the reference.  The fast path's best row must be its best (tiles, exact time,
transfers, each kernel's time), and every row the fast path reports must be the reference's row for those tiles.
Programs: derived structures of an MLP, attention (split streams at a short query count) and a document mask (its
trips counted), on two GPU models, and hand-made programs whose kernels share a tile (one component) or not.
"""
from __future__ import annotations

import itertools
from fractions import Fraction

import pytest
import sympy

import napkin_cat as nc
from napkin_cat.cost.numeric import folded
from napkin_cat.hardware import timed
from napkin_cat.errors import LoweringError
from napkin_cat.hardware.errors import HardwareError
from napkin_cat.hardware.predict import LAUNCH, KernelForm, bound_densities, environment, kernels_of
from napkin_cat.hardware.separable import components
from napkin_cat.hardware.timed import LARGEST, structure_timings, tile_values


TIMED: dict = {}         # (diagram, GPU, sizes, level, density) → every assignment timed (min_blocks filters it)


def exhaustive(diagram, gpu, env, *, level=1, min_blocks=None, density=1):
    """Every assignment of every tile of ``diagram`` timed whole: ``[(T, H, −tiles, tiles, kernel times)]``, least
    first (the reference the fast path must agree with); with ``min_blocks``, those whose every kernel has as many
    blocks.  Each structure is timed once per GPU, sizes, level and density (the tests ask it with and without
    ``min_blocks``)."""
    key = (diagram, gpu.name, frozenset(env.items()), level, density)
    if key not in TIMED:
        TIMED[key] = every_assignment(diagram, gpu, env, level=level, density=density)
    return [r for r in TIMED[key] if min_blocks is None or min(k.blocks for k in r[4]) >= min_blocks]


def every_assignment(diagram, gpu, env, *, level, density):
    """:func:`exhaustive` without a bound on the blocks, raising what the time model raises."""
    values = tile_values(gpu, diagram, env, largest=LARGEST)
    tiles = list(values)
    first = {**env, **{t: v[0] for t, v in values.items()}}
    rho = bound_densities(diagram, density)
    forms = [KernelForm(b, gpu, overlap="sequential", ceilings={}, level=level, sample=first, density=rho)
             for b in kernels_of(diagram)]
    whole = nc.cost(diagram).at_density(density)
    H = sympy.sympify(whole.H.get(level, 0))
    rows = []
    for combo in itertools.product(*(values[t] for t in tiles)):
        at = {**env, **dict(zip(tiles, combo))}
        try:
            kts = [f.at(at, launch=LAUNCH) for f in forms]
        except HardwareError:
            continue
        moved = folded(diagram, at, density=rho).H.get(level, 0) if whole.estimated else int(H.subs(at))
        rows.append((sum(Fraction(k.time) for k in kts), moved, tuple(-v for v in combo), dict(zip(tiles, combo)),
                     kts))
    return sorted(rows, key=lambda e: e[:3])


def agree(diagram, gpu, sizes, **options):
    """The fast path against :func:`exhaustive` on one structure: the number of assignments the reference timed."""
    gpu = nc.hardware.load(gpu)
    env = environment(sizes)
    fast = structure_timings(diagram, gpu, env, overlap="sequential", ceilings={}, level=1, largest=LARGEST,
                             launch=LAUNCH, **options)
    ref = exhaustive(diagram, gpu, env, **options)
    assert bool(fast) == bool(ref)
    if not ref:
        return 0
    t, h, tiles, kts = fast[0]
    assert (t, h, tiles) == (ref[0][0], ref[0][1], ref[0][3])
    assert list(tiles) == list(ref[0][3])                 # the structure's tile order (the ties' order)
    assert [k.time for k in kts] == [k.time for k in ref[0][4]]
    by_tiles = {tuple(r[3].values()): r for r in ref}
    for t, h, tiles, kts in fast:                         # every row reported is that assignment's own time
        r = by_tiles[tuple(tiles.values())]
        assert (t, h) == (r[0], r[1]) and [k.time for k in kts] == [k.time for k in r[4]]
    assert len(fast) <= len(ref)
    return len(ref)


def mlp():
    up = nc.einsum("n d, d h -> n h") >> nc.elementwise("relu", "n h")
    return up @ nc.Id("h e") >> nc.einsum("n h, h e -> n e")


def shared(couple: bool):
    """Three kernels: the first two grouped along n by one tile (``couple``) or two (the second also along h: its
    blocks are not the first's), the third on its own tiles."""
    a = nc.group(nc.stream(nc.kernel(nc.einsum("n d, d h -> n h")), "d", "s_d"), "n", "g_n")
    b = nc.group(nc.group(nc.kernel(nc.elementwise("relu", "n h")), "h", "g_h"), "n", "g_n" if couple else "g_m")
    c = nc.group(nc.stream(nc.kernel(nc.einsum("n h, h e -> n e")), "h", "s_h"), "e", "g_e")
    return (a >> b) @ nc.Id("h e") >> c


SHARED = {"n": 256, "d": 128, "h": 128, "e": 128}


@pytest.mark.parametrize("couple", [True, False])
@pytest.mark.parametrize("gpu", ["h100-sxm5", "h100-pcie"])
def test_hand_made_kernels_sharing_a_tile_or_not(couple, gpu):
    d = shared(couple)
    reads = [timed.kernel_reads(b, f) for b, f in zip(kernels_of(d), forms_of(d, gpu, SHARED))]
    parts = components(reads, list(tile_values(nc.hardware.load(gpu), d, environment(SHARED))))
    assert [k for k, _ in parts] == ([(0, 1), (2,)] if couple else [(0,), (1,), (2,)])
    assert agree(d, gpu, SHARED) and agree(d, gpu, SHARED, min_blocks=4)


def forms_of(d, gpu, sizes):
    gpu = nc.hardware.load(gpu)
    env = environment(sizes)
    values = tile_values(gpu, d, env)
    first = {**env, **{t: v[0] for t, v in values.items()}}
    return [KernelForm(b, gpu, overlap="sequential", ceilings={}, level=1, sample=first) for b in kernels_of(d)]


def test_a_shared_tile_ignored_gives_another_winner(monkeypatch):
    """The coupled program is one where the coupling matters: each kernel timed apart (the shared tile chosen twice,
    the last choice kept) does not reproduce the whole product's winner."""
    def apart(reads, tiles):
        return [((k,), tuple(t for t in tiles if t in r)) for k, r in enumerate(reads)]
    monkeypatch.setattr(timed, "components", apart)
    with pytest.raises(AssertionError):
        agree(shared(True), "h100-sxm5", SHARED)


@pytest.mark.parametrize("f, sizes, gpu, options", [
    (mlp, {"n": 64, "d": 128, "h": 256, "e": 64}, "h100-sxm5", {}),
    (mlp, {"n": 64, "d": 128, "h": 256, "e": 64}, "h200", {"min_blocks": 8}),
    (nc.library.attention, {"q": 64, "x": 512, "d": 64}, "h100-pcie", {"min_blocks": 16}),   # split parts
    (nc.library.document_attention, {"q": 128, "x": 256, "d": 64}, "h100-sxm5", {"density": 0.25}),
])
def test_derived_structures_agree_with_every_assignment_timed(f, sizes, gpu, options):
    memories = [2 ** k for k in range(10, 16, 2)]
    r = nc.derive(f(), memory=memories, sizes=sizes, **options)
    structures = {str(g.variant): g.diagram for g in r.regimes}
    several, timed_ = 0, 0
    for d in structures.values():
        try:
            n = agree(d, gpu, sizes, **options)
        except (HardwareError, LoweringError):          # no legal tiles on this GPU: the reference refuses it too
            with pytest.raises((HardwareError, LoweringError)):
                exhaustive(d, nc.hardware.load(gpu), environment(sizes), **options)
            continue
        several += n and len(kernels_of(d)) > 1
        timed_ += n > 0
    assert timed_ and (several or f is not mlp)
