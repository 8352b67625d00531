"""A kernel split of a form with no operation (a rename alone, or ``within=0``) is refused by a typed error where
it is asked for, :class:`~napkin_cat.search.paths.Space`, as ``nc.derive`` refuses the diagram.

Before, ``Space(OpGraph(netlist of nc.renaming("n e -> m e")))`` raised ``IndexError: list index out of range``
(``OpGraph.linked(0)`` read the data flow of an operation that is not there).

Second route: the graph's operations counted from its netlist (``len(graph) == 0``) and ``nc.derive``'s refusal of
the same diagram; a one-operation program (the smallest with an operation) still gets its one-kernel split.

Mutation caught: the check removed from ``Space.__init__``: the IndexError again, not a RewriteError."""
from __future__ import annotations

import pytest

import napkin_cat as nc
from napkin_cat.errors import RewriteError
from napkin_cat.search.blocks import OpGraph
from napkin_cat.search.paths import Space


def test_a_rename_alone_has_no_split_and_says_why():
    d = nc.renaming("n e -> m e")
    graph = OpGraph(nc.engine.to_netlist(d))
    assert len(graph) == 0
    with pytest.raises(RewriteError, match="no operation"):
        nc.derive(d)
    with pytest.raises(RewriteError, match="needs an operation; the form has none"):
        Space(graph)


def test_an_empty_segment_is_refused_and_one_operation_is_one_kernel():
    graph = OpGraph(nc.engine.to_netlist(nc.library.attention()))
    with pytest.raises(RewriteError, match="within=0 has none"):
        Space(graph, within=0)
    one = OpGraph(nc.engine.to_netlist(nc.elementwise("exp", "n e")))
    assert len(one) == 1
    space = Space(one)
    assert space.full == 1 and (0, 1) in space.into[1]
