"""The GPU time model times each tensor record as its own product (partrec): ``products_of`` reads a record's sides
off the arrays it carries (``OpCost.arrays``, through the relabelling of the partition records around it), not off
the boxes of its label paired in the order of the walk.  That pairing gave a kernel whose two products named "·"
run in different phases (one in a stream's head, one in its body: the walk meets the head's first, the diagram the
body's) each the other's sides, so the narrow one's padding was charged to the wide one; and it read a partition
record's boxes as drawn (the whole axis, not its tile).

Checks, each by a second route:

* each product's sides multiply to its record's FLOPs per run (``2·m·n·k``: the FLOPs come from the cost functor,
  the sides from the arrays), on built partitions and on records;
* on the H100 model, a kernel with two products named "·" of different shapes (one padded ×2 on the tensor cores)
  is predicted as each product timed alone at the same tiles, summed: its compute seconds, its products'
  placements, its FLOPs;
* a record's products are its built partition's (a prediction of a record needs a plan: refused, as before).

Mutation caught: the old pairing by label and walk order, boxes as drawn (the two-product kernel: the head's product
gets the body's sides; the records: their sides are the whole axes).
"""
from __future__ import annotations

import pytest
import sympy

import napkin_cat as nc
from napkin_cat.cost.iocost import cost
from napkin_cat.hardware.model import load
from napkin_cat.hardware.products import products_of, side

H100 = load("h100-sxm5")


def two_products(*which):
    """A kernel's function with two products named "·" of different shapes: ``P·Q`` (n × b · b × m) reduced over
    ``b``, and ``R·S`` (n × k · k × l), which does not read ``b`` (a stream along ``b`` runs it in its head);
    ``which``: the outputs kept ("PQ", "RS")."""
    b = nc.Builder(nc.types("n b, b m, n k, k l") if len(which) == 2 else
                   nc.types("n b, b m") if which == ("PQ",) else nc.types("n k, k l"))
    outs = []
    if "PQ" in which:
        P, Q, *rest = b.inputs
        outs.append(b(nc.einsum("n b, b m -> n m"), P, Q))
    else:
        rest = list(b.inputs)
    if "RS" in which:
        R, S = rest[-2:]
        outs.append(b(nc.einsum("n k, k l -> n l"), R, S))
    return b.build(*outs)


def partitioned(f, relabelled=True):
    k = nc.kernel(f)
    if any("b" in a.names for a in f.dom.inside):
        k = nc.stream(k, "b", "s_b", relabelled=relabelled)
    return nc.group(k, "n", "g_n", relabelled=relabelled)


SIZES = {"n": 512, "b": 256, "m": 128, "k": 256, "l": 4, "g_n": 64, "s_b": 64}


def kernels():
    yield "two products", partitioned(two_products("PQ", "RS"))
    yield "two products, record", partitioned(two_products("PQ", "RS"), relabelled=False)
    yield "flash attention, record", nc.group(nc.stream(nc.kernel(nc.library.attention()), "x", "s_x",
                                                        relabelled=False), "q", "g_q", relabelled=False)
    yield "mlp", nc.group(nc.stream(nc.kernel(nc.library.mlp()), "f", "s_f"), "n", "g_n")


@pytest.mark.parametrize("name,algorithm", list(kernels()), ids=[n for n, _ in kernels()])
def test_a_products_sides_multiply_to_its_records_flops(name, algorithm):
    (box,) = algorithm.boxes
    c = cost(box)
    products = products_of(box, c.ops, H100, {})
    assert len(products) == sum(1 for o in c.ops if o.pipeline == "tensor") >= 2
    for p in products:
        m, n, k = (side(p.use, d) for d in "mnk")
        assert sympy.simplify(2 * m * n * k - p.op.flops) == 0, (p.name, p.op.flops)
        assert sympy.simplify(p.flops - p.op.flops * p.op.trips) == 0


def test_the_head_and_the_body_product_are_each_its_own():
    """The walk meets ``R·S`` (the stream's head) first, the diagram ``P·Q`` first: each keeps its own sides."""
    (box,) = partitioned(two_products("PQ", "RS")).boxes
    c = cost(box)
    by_role = {p.op.role: p.use for p in products_of(box, c.ops, H100, {})}
    assert (by_role["head"].m, by_role["head"].n, by_role["head"].k) == ("g_n", "l", "k")
    assert (by_role["body"].m, by_role["body"].n, by_role["body"].k) == ("g_n", "m", "s_b")


def _compute(kt) -> float:
    return kt.terms["tensor"] + kt.terms["general"]


def test_two_same_named_products_are_timed_as_each_alone_on_the_h100():
    fused = nc.hardware.predict(partitioned(two_products("PQ", "RS")), H100, SIZES)
    alone = [nc.hardware.predict(partitioned(two_products(w)), H100,
                                 {k: v for k, v in SIZES.items() if k in ({"n", "b", "m", "g_n", "s_b"} if w == "PQ"
                                                                          else {"n", "k", "l", "g_n"})})
             for w in ("PQ", "RS")]
    (f,) = fused.kernels
    each = [p.kernels[0] for p in alone]
    assert _compute(f) == pytest.approx(sum(_compute(k) for k in each), rel=1e-12)
    assert f.products == {**each[0].products, **each[1].products}
    assert f.flops == {p: sum(k.flops.get(p, 0) for k in each) for p in f.flops}
    # by hand: R·S is padded ×2 (l = 4 against the instruction's 8 columns) where it stays on the tensor cores
    rs = next(name for name in f.products if "×l" in name)
    assert f.products[rs] in ("tensor cores, padded ×2", "CUDA cores")


@pytest.mark.parametrize("name", ["two products", "flash attention", "grouped-query attention"])
def test_a_records_products_are_its_built_partitions(name):
    """The GPU model times a record's products as its built partition's (names, padding, seconds per placement, the
    rows that set the issuing threads): the record's arrays are seen through its relabelling.  (A prediction of a
    record is refused: its on-chip forms need a plan, which a record has not.)"""
    def drawn(relabelled):
        if name == "two products":
            return partitioned(two_products("PQ", "RS"), relabelled)
        f = nc.library.attention() if name == "flash attention" else nc.library.grouped_query_attention()
        d = nc.group(nc.stream(nc.kernel(f), "x", "s_x", relabelled=relabelled), "q", "g_q", relabelled=relabelled)
        return d if name == "flash attention" else nc.group(d, "g", "g_g", relabelled=relabelled)
    mine, built = (products_of(d.boxes[0], cost(d.boxes[0]).ops, H100, {}) for d in (drawn(False), drawn(True)))
    assert [p.name for p in mine] == [p.name for p in built] and len(mine) >= 2
    for p, q in zip(mine, built):
        for field in ("flops", "pad", "tensor", "cuda", "joint"):
            assert sympy.simplify(getattr(p, field) - getattr(q, field)) == 0, (p.name, field)
    assert {side(p.use, "m") for p in mine} == {side(p.use, "m") for p in built}
