"""What the cost walk shares between candidates (issue 35: the cost of one candidate), each against a second route.

The search costs hundreds of fresh candidate diagrams that partition the same kernels alike.  The walk keeps, by
value and per process, what is a pure function of its key:

* a partition record's inside view (:func:`napkin_cat.cost.scope.inside_view`), by the view around it, the axis and
  the ``(size, full)`` it is seen with: an equal fresh record builds no relabelling, and a record is costed as the
  built partition it stands for (the built diagram needs no view: the second route);
* a level's live total (:data:`napkin_cat.cost.live.TOTALS`), by its numbered terms and arithmetic: a diagram costed
  again builds no total, and the records of both arithmetics stay theirs;
* ``trips(size, full)`` per arithmetic (:func:`napkin_cat.cost.scope.trips`);
* :func:`~napkin_cat.syntax.wiring.trace_values` runs over the plan without a Step per layer: it numbers values as
  :func:`~napkin_cat.syntax.wiring.traverse` does (written here with ``traverse``: the second route).
"""
import sympy

import napkin_cat as nc
from napkin_cat.algorithms.bubbles import Partition
from napkin_cat.cost import live, scope
from napkin_cat.cost.iocost import cost
from napkin_cat.cost.polynomial import POLYNOMIAL, SYMPY, Poly
from napkin_cat.errors import NapkinError
from napkin_cat.syntax.wiring import trace_values, traverse
from napkin_cat.testing.checks import algorithm
from napkin_cat.testing.programs import random_program


def _matmul(slice_b: str, relabelled: bool):
    """matmul grouped along a and c, streamed along b in slices ``slice_b``: a record (insides as drawn) or built."""
    k = nc.stream(nc.kernel(nc.library.matmul()), "b", slice_b, relabelled=relabelled)
    return nc.group(nc.group(k, "a", "g_a", relabelled=relabelled), "c", "g_c", relabelled=relabelled)


def _fields(c):
    return c.H, c.H_bytes, c.flops, c.M, [(g.axes, g.tiles, g.N_g, g.H_g) for g in c.groups], list(c.streams)


def test_equal_records_share_their_inside_views_and_cost_as_built(monkeypatch):
    scope.INSIDE.clear()
    scope.VIEWS.clear()
    calls = []
    inside_view = Partition.inside_view

    def counting(self, view):
        calls.append(self.axis)
        return inside_view(self, view)
    monkeypatch.setattr(Partition, "inside_view", counting)
    first = cost(_matmul("s_b", relabelled=False))
    built = len(calls)
    again = cost(_matmul("s_b", relabelled=False))        # a fresh, equal record
    assert built == 3 and len(calls) == built              # its three partitions' views: none built again
    other = cost(_matmul("u_b", relabelled=False))         # other slices of b: the stream's own view, no other
    assert calls[built:] == ["b"]
    for record, tile in ((first, "s_b"), (again, "s_b"), (other, "u_b")):
        assert _fields(record) == _fields(cost(_matmul(tile, relabelled=True)))
    u, s = nc.symbol("u_b"), nc.symbol("s_b")
    assert {u, s} & other.M[1].free_symbols == {u} and {u, s} & first.M[1].free_symbols == {s}


def test_live_totals_are_built_once_and_stay_in_their_arithmetic():
    tried = 0
    for seed in range(8):
        p = random_program(seed, n_ops=4)
        try:
            alg, _ = algorithm(p, seed)
        except NapkinError:
            continue
        tried += 1
        c = cost(alg, arithmetic=SYMPY)
        n = len(live.TOTALS)
        assert cost(alg, arithmetic=SYMPY) == c and len(live.TOTALS) == n      # costed again: no total built
        poly = cost(alg, arithmetic=POLYNOMIAL)
        for lvl, cols in poly.columns.items():
            assert all(isinstance(v, Poly) for v in cols)
            assert [v.as_expr() for v in cols] == c.columns[lvl]
    assert tried >= 5


def test_trips_are_kept_per_arithmetic():
    b, s = nc.symbol("b"), nc.symbol("s_b")
    assert scope.trips(s, b, SYMPY) == b / s
    assert scope.trips(s, b, POLYNOMIAL) == POLYNOMIAL.of(b / s) and isinstance(scope.trips(s, b, POLYNOMIAL), Poly)
    assert scope.trips(4, 12, POLYNOMIAL) == 3 and scope.trips(sympy.Integer(5), 20, SYMPY) == 4


def _numbered(diagram):
    """The values view written with :func:`traverse`: each computing box's (and merge's) outputs numbered afresh."""
    ops, fresh = [], [len(diagram.dom)]

    def on_box(step):
        outs = list(range(fresh[0], fresh[0] + len(step.box.cod)))
        fresh[0] += len(outs)
        ops.append((step.box, list(step.ins), outs))
        return outs
    cod = traverse(diagram, range(len(diagram.dom)), on_box, merge=on_box)
    return ops, list(range(len(diagram.dom))), list(cod)


def test_trace_values_numbers_values_as_the_traversal_does():
    diagrams = [random_program(seed).diagram for seed in range(10)] + [nc.library.attention(),
                                                                       nc.library.transformer_block()]
    diagrams.append(nc.Diagram.copy(nc.types("a"), 3) >> nc.Diagram.merge(nc.types("a"), 3))
    for d in diagrams:
        assert trace_values(d) == _numbered(d)
