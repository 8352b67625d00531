"""Fusion across a rename view (issue fuse-35): a kernel may hold a rename inside where it holds the view's producer
and every reader of it, and nothing else reads the view; the rename is then folded into the kernel's indexing
(:meth:`~napkin_cat.search.blocks.OpGraph.absorbed`).  Since block-37 / sym-35 fusion never joined both ends of a view,
so the transformer block at a memory that holds everything was three kernels (503 values at n 4 e 6 h 2 d 3 f 5)
where one kernel moves the compulsory 287.

Law: a block holding both ends of a view is one kernel exactly when it holds all the view's readers and the view is
no output (else the view would be both inside a kernel and in global memory); its kernel is ``subdiagram`` with the
rename applied to the value made inside, loading nothing for it (``moved`` = the kernel's ports).

Second routes: the plan's runner counting the transfers (= H = the cost functor on the algorithm), the outputs of the
algorithm against the function evaluated unfused (numpy), the compulsory traffic from the arrays' sizes.

Mutations caught: the partial-view refusal dropped in ``OpGraph._spans_now`` (test_a_view_read_outside...: linked
True, the derive's construction fails); ``graph.absorbed`` left out of ``construct.make`` (ConstructionError in every
one-kernel test); ``final_readers`` replaced by ``readers`` in ``BlockKernels._sub`` (the kernel writes the value the
view renames: H above the compulsory traffic, and moved ≠ subdiagram).
"""
from __future__ import annotations

import numpy as np
import pytest
import sympy

import napkin_cat as nc
from napkin_cat.search.blocks import OpGraph
from napkin_cat.syntax.primitive import is_view

LIB = {"n": 4, "e": 6, "h": 2, "d": 3, "f": 5}
MID = {"n": 10, "e": 18, "h": 3, "d": 6, "f": 30}


def compulsory(f, sizes) -> int:
    env = {nc.symbol(k): v for k, v in sizes.items()}
    return sum(int(sympy.prod([sympy.sympify(a.size).subs(env) for a in arr.axes]))
               for arr in (*f.dom.inside, *f.cod.inside))


def views_between_kernels(diagram) -> int:
    return sum(1 for box in diagram.boxes if is_view(box) and box.cod.inside[0].level == 0)


def checked(f, r, sizes, seed=0):
    """The derived algorithm run by the counting runner: its transfers = H = the cost functor's; its outputs = f's."""
    rng = np.random.default_rng(seed)
    env = nc.Sizes(sizes).env
    xs = [rng.standard_normal(tuple(int(env[a.size]) for a in arr.axes)) * 0.3 for arr in f.dom.inside]
    at = dict(r.optimum.sizes)
    out, ran = nc.plan(r.diagram, at).run(*xs)
    assert ran.transfers.get(1, 0) == int(nc.cost(r.diagram, sizes=at).H[1]) == r.H
    assert np.allclose(out, nc.evaluate(f, *xs, sizes=sizes), rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize("sizes, memory", [(LIB, 2 ** 50), (MID, 1500), (MID, 2 ** 50)])
def test_the_block_at_a_memory_that_holds_it_is_one_kernel_holding_its_views(sizes, memory):
    f = nc.library.transformer_block()
    r = nc.derive(f, memory=memory, sizes=sizes)
    assert r.H == compulsory(f, sizes) == nc.cost(nc.kernel(f), sizes=sizes).H[1]
    assert views_between_kernels(r.diagram) == 0 and sum(1 for b in r.diagram.boxes if b.name.startswith("Kernel")) == 1
    checked(f, r, sizes)


@pytest.mark.parametrize("sizes, memory", [(LIB, 64), (LIB, 120), (MID, 200), (MID, 600)])
def test_the_block_at_smaller_memories_moves_what_it_counts(sizes, memory):
    """Where kernels hold views inside and others leave them between kernels, each partitioned: counted = H."""
    f = nc.library.transformer_block()
    r = nc.derive(f, memory=memory, sizes=sizes)
    assert r.H >= compulsory(f, sizes)
    checked(f, r, sizes, seed=memory)


def exp_rename_exp(view_is_output: bool):
    """``exp ; rename_{n→m} ; exp`` (and the view an output of the function too)."""
    b = nc.Builder(nc.types("h n"))
    (X,) = b.inputs
    Y = b(nc.renaming("h n -> h m"), b(nc.elementwise("exp", "h n"), X))
    Z = b(nc.elementwise("exp", "h m", m="n"), Y)
    return b.build(Y, Z) if view_is_output else b.build(Z)


def test_a_view_read_only_inside_is_held_inside_one_kernel():
    f = exp_rename_exp(False)
    g = OpGraph(nc.engine.to_netlist(f))
    assert g.connected(0b11) and g.linked(0b11) and not g.direct(0b11) and g.absorbed(0b11) == g.views
    r = nc.derive(f, memory=2 ** 20, sizes={"h": 3, "n": 8})
    assert r.H == 2 * 3 * 8 and views_between_kernels(r.diagram) == 0
    checked(f, r, {"h": 3, "n": 8})


def test_a_view_read_outside_stays_between_kernels():
    """The view is an output too: one kernel of both exps would need it inside and in global memory; refused."""
    f = exp_rename_exp(True)
    g = OpGraph(nc.engine.to_netlist(f))
    assert not g.connected(0b11) and not g.linked(0b11) and g.connected(0b01) and g.connected(0b10)
    r = nc.derive(f, memory=2 ** 20, sizes={"h": 3, "n": 8})
    assert views_between_kernels(r.diagram) == 1 and r.H == 3 * 3 * 8 + 3 * 8   # x, exp x written, read, exp exp x
    checked(f, r, {"h": 3, "n": 8})


def test_moved_is_the_kernel_of_every_block_holding_a_view():
    """``moved(b)`` (read off the graph) = the arrays of ``subdiagram(b)`` for the block's connected blocks of up to
    6 operations and the whole, those holding a view inside among them; none loads a view of a value it makes."""
    g = OpGraph(nc.engine.to_netlist(nc.library.transformer_block()), share=True)
    holding = 0
    blocks = [block for _, _, block in g.blocks(max_ops=6)] + [g.full]
    for block in blocks:
        if not g.connected(block):
            continue
        sub = g.subdiagram(block)
        assert g.moved(block) == (*sub.dom.inside, *sub.cod.inside)
        if g.absorbed(block):
            holding += 1
            assert sum(1 for b in sub.boxes if is_view(b)) == len(g.absorbed(block))
    assert holding > 0 and len(g.absorbed(g.full)) == 2
