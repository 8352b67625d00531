"""The CPU time model times each contraction record by its own box (cpurec): a record carries its box's arrays
(``OpCost.arrays``), so two products of one name ("·") and different shapes in one kernel are each timed at their
own smallest dimension and cblas_sgemm calls, not at the least over every box of the name (which timed a
4 096 × 256 × 256 layer beside a 256 → 4 head as if it were as narrow as the head)."""
from __future__ import annotations

import pytest
import sympy

import napkin_cat as nc
from napkin_cat.cost.iocost import cost
from napkin_cat.hardware import load_cpu, predict_cpu
from napkin_cat.hardware.cputime import matrix_dims, product_dims
from napkin_cat.hardware.predict import kernels_of
from napkin_cat.hardware.toy import primitive_boxes
from napkin_cat.testing.scaling import deep_mlp as mlp

DEV = "epyc-zen3-dev"


def layer(i):
    """Layer i of :func:`mlp` alone: n×ci → n×c(i+1)."""
    b = nc.Builder(nc.types(f"n c{i}, c{i} c{i + 1}"))
    return b.build(b(nc.einsum(f"n c{i}, c{i} c{i + 1} -> n c{i + 1}"), *b.inputs))


def grouped(f):
    return nc.group(nc.kernel(f), "n", "g_n")


@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("widths, g_n", [((256, 256, 4), 64), ((256, 256, 4), 512), ((8, 512, 256), 32),
                                         ((128, 64, 32), 128)])
def test_two_products_of_one_name_in_a_kernel_are_timed_as_each_alone(widths, g_n, threads):
    """Independent route: the tensor term of mlp(2) fused in one kernel equals the sum of the tensor terms of its
    two layers, each built alone as its own kernel at the same tiles and timed by the model; and both equal the sum
    by hand of each product's FLOPs at the table's rate for its own min(g_n, m/n, k) plus its calls' cost."""
    cpu = load_cpu(DEV)
    sizes = {"n": 512, "g_n": g_n, **{f"c{i}": w for i, w in enumerate(widths)}}
    (fused,) = predict_cpu(grouped(mlp(2)), cpu, sizes, threads=threads).kernels
    alone = [predict_cpu(grouped(layer(i)), cpu, {k: sizes[k] for k in ("n", "g_n", f"c{i}", f"c{i + 1}")},
                         threads=threads).kernels[0] for i in range(2)]
    assert fused.blocks == alone[0].blocks == alone[1].blocks
    assert fused.terms["tensor"] == pytest.approx(sum(k.terms["tensor"] for k in alone), rel=1e-12)
    blocks = 512 // g_n
    at_once = blocks / -(-blocks // threads)
    by_hand = 0.0
    for i in range(2):
        m, n_, k = g_n, widths[i + 1], widths[i]
        flops, calls = 2 * 512 * n_ * k, blocks
        by_hand += flops / cpu.contraction_rate(min(m, n_, k)) + calls * cpu.contraction_call
    assert fused.terms["tensor"] == pytest.approx(by_hand / at_once, rel=1e-12)


def test_a_wide_layer_beside_a_narrow_head_is_not_timed_at_the_heads_width():
    """The case the by-name minimum got wrong: a 256 × 256 layer and a 256 → 4 head in one kernel; the wide layer
    alone is timed at its own width (64, the tile), and the fused kernel's tensor time is below what timing both at
    the head's width 4 (and the head's FLOPs per call) would give."""
    cpu = load_cpu(DEV)
    sizes = {"n": 512, "g_n": 64, "c0": 256, "c1": 256, "c2": 4}
    (fused,) = predict_cpu(grouped(mlp(2)), cpu, sizes).kernels
    least_call = 2 * 64 * 4 * 256
    narrow = sum(f / cpu.contraction_rate(4) + f / least_call * cpu.contraction_call
                 for f in (2 * 512 * 256 * 256, 2 * 512 * 256 * 4))
    assert cpu.contraction_rate(64) > cpu.contraction_rate(4)
    assert fused.terms["tensor"] < narrow


@pytest.mark.parametrize("relabelled", [True, False])
def test_each_record_carries_its_own_boxs_dimensions_through_the_tiles(relabelled):
    """Each tensor record's arrays give the dimensions of its own box at the tiles, through a group and a stream:
    2·m·n·k is the record's FLOPs per execution (each of the three shapes differs), and, where the partitions are
    built (relabelled), the kernel's primitive boxes read by product_dims, in the same order, agree (second route).
    A partition record (``relabelled=False``) draws its inside as it was: the record's arrays are the boxes seen
    through the tiles (the walk's relabelling), not the boxes as drawn."""
    d = nc.group(nc.stream(nc.kernel(mlp(3)), "c0", "s_c0", relabelled=relabelled), "n", "g_n",
                 relabelled=relabelled)
    (box,) = kernels_of(d)
    records = [o for o in cost(box).ops if o.pipeline == "tensor"]
    assert len(records) == 3
    shapes = [matrix_dims(*o.arrays) for o in records]
    assert [2 * sympy.Mul(*s) for s in shapes] == [o.flops for o in records]
    assert len(set(shapes)) == 3                     # three shapes: a key by name would merge them
    assert nc.symbol("g_n") in shapes[0][0].free_symbols and nc.symbol("s_c0") in shapes[0][2].free_symbols
    if relabelled:
        assert shapes == [product_dims(b) for b in primitive_boxes(box) if b.name == "·"]
