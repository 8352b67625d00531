"""The index inputs of a compiled op and their legal ranges: an integer tensor a gather reads a table at is checked
at call time to lie in the table, as torch's own indexing is, instead of read as 0.

A diagram's ``gather`` reads 0 at an index outside its table (the convention that lets a tile of the table be read
alone: :func:`~napkin_cat.syntax.indices.gather`), so ``cross_entropy`` at a target ``v`` or ``−1`` computes a
finite, wrong loss.  A torch user's ``F.cross_entropy`` or ``x[t]`` raises there; so does a compiled op, before
any kernel runs.  For every gather whose index is an input of the diagram (through copies and renamings), at the
call's sizes::

    0 ≤ min(t) ≤ max(t) < n        n = the size of the axis the gather reads along, at this call

An index computed from inputs (``t + 1``) is not checked here: the translation of a model checks such indices on its
own graph (:func:`~napkin_cat.torch.exported.check_indices`).

>>> import torch, napkin_cat as nc
>>> ranges = IndexRanges(nc.library.cross_entropy())
>>> ranges
IndexRanges(input 1 (n) indexes axis v of a gather (table n×v))
>>> x, t = torch.zeros(2, 5), torch.tensor([0, 5], dtype=torch.int32)
>>> ranges.check([x, t], {"n": 2, "v": 5}, "the op")
Traceback (most recent call last):
...
napkin_cat.errors.IndexingError: input 1 (n) of the op indexes axis 'v' of a gather (table n×v) and takes the ...
"""
from __future__ import annotations

import sympy

from napkin_cat.errors import IndexingError
from napkin_cat.rewriting.closed import source
from napkin_cat.rewriting.netlist import INPUT, to_netlist

#: the boxes a wire passes through unchanged in its values (an index renamed is the same index)
PASSING = ("rename",)


def describe(array) -> str:
    """An array's axes as a message names them (``q×d``; ``item`` for none)."""
    return "×".join(array.names) or "item"


class IndexRanges:
    """The gathers of ``diagram`` whose index is one of its inputs: ``(input, axis, its size, the table's
    array)`` each (see the module docstring)."""

    def __init__(self, diagram):
        net = to_netlist(diagram)
        self.reads = []
        for nid, node in net.nodes.items():
            if node.kind != "box" or node.spec.kind != "gather":
                continue
            src = source(net, net.ins[nid][1])
            while src[0] != INPUT and net.nodes[src[0]].kind == "box" and net.nodes[src[0]].spec.kind in PASSING:
                src = source(net, net.ins[src[0]][0])
            if src[0] != INPUT:
                continue
            table = node.dom[0]
            kept = set(node.cod[0].names)
            (axis,) = [a for a in table.axes if a.name not in kept]
            self.reads.append((src[1], axis.name, sympy.sympify(axis.size), table))
        self.inputs = diagram.dom.inside

    def __repr__(self):
        return "IndexRanges(" + ", ".join(f"input {k} ({describe(self.inputs[k])}) indexes axis {a} of a gather "
                                          f"(table {describe(t)})" for k, a, _, t in self.reads) + ")"

    def check(self, tensors, sizes: dict, what: str):
        """Refuse (:class:`~napkin_cat.errors.IndexingError`) an index input with a value outside its table at
        ``sizes`` (axis name → the call's size)."""
        for k, name, size, table in self.reads:
            t = tensors[k]
            if not t.numel():
                continue
            n = int(size.subs({s: sizes[str(s)] for s in size.free_symbols if str(s) in sizes}))
            lo, hi = int(t.min()), int(t.max())
            if lo < 0 or hi >= n:
                raise IndexingError(f"input {k} ({describe(self.inputs[k])}) of {what} indexes axis {name!r} of a "
                                    f"gather (table {describe(table)}) and takes the values {lo} … {hi}; the legal "
                                    f"range at this call is 0 … {n - 1} ({name} = {n}; negative indices do not count "
                                    f"from the end)")


__all__ = ["IndexRanges"]
