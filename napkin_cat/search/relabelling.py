"""A block's key up to a renaming of axes: two kernels that differ only in their axes' names are one problem.

A stack of blocks whose blocks name their axes apart (``f0``, ``f1``, … for equal widths) holds isomorphic segments
whose :meth:`~napkin_cat.search.block_kernel.BlockKernels.key` differ only by names.  A renaming of axes that keeps
every size is an isomorphism of the diagram category's types, and the cost functor reads sizes, never names, so
**cost and optimum commute with a renaming of axes**::

    rename(ρ)(f) = f'  with  size(ρ(a)) = size(a) for every axis a   ⟹   H*(f', M) = H*(f, M),
                                                                          tiles*(f') = ρ(tiles*(f))

:func:`relabelled` is the canonical form the search keys such blocks by: the block's key with every axis renamed in
order of first appearance (``#0``, ``#1``, …), each array's axes carrying their sizes by value (so two axes of
different sizes are never conflated), and the sympy parameters of its boxes (``1/sqrt(d)``) written in the renamed
size symbols.  Where some axis has no numeric size (a symbolic derive) there is no such form (None): names stay.

>>> import napkin_cat as nc
>>> from napkin_cat.search.blocks import OpGraph
>>> one = OpGraph(nc.engine.to_netlist(nc.library.mlp()))
>>> two = OpGraph(nc.engine.to_netlist(nc.rename_axis(nc.library.mlp(), "f", "g")))
>>> same = {"n": 8, "i": 4, "f": 16, "g": 16, "o": 4}
>>> one.key(one.full) == two.key(two.full), relabelled(one, one.full, same) == relabelled(two, two.full, same)
(False, True)
>>> relabelled(one, one.full, same) == relabelled(two, two.full, {**same, "g": 12})     # sizes kept by value
False
>>> relabelled(one, one.full, {"n": 8}) is None, relabelled(one, one.full, same) is None    # a size missing: none
(True, False)
"""
from __future__ import annotations

import sympy

from napkin_cat.syntax.array import Array
from napkin_cat.syntax.primitive import Spec


class _Names:
    """Axis names renamed in order of first appearance, sizes read from ``env`` (a size symbol's name → int)."""

    def __init__(self, env: dict):
        self.env, self.names = env, {}

    def name(self, name: str) -> str:
        return self.names.setdefault(name, f"#{len(self.names)}")

    def size(self, size):
        got = sympy.sympify(size)
        got = got.xreplace({s: self.env[s.name] for s in got.free_symbols if s.name in self.env})
        if not got.is_Integer:
            raise LookupError(size)
        return int(got)

    def walk(self, x):
        if isinstance(x, tuple):
            return tuple(self.walk(y) for y in x)
        if isinstance(x, Array):
            return ("array", tuple((self.name(a.name), self.size(a.size)) for a in x.axes), x.level, x.dtype.name)
        if isinstance(x, Spec):
            return ("spec", x.kind, self.walk(x.params), tuple((self.name(w.name), w.inputs) for w in x.weaves))
        if isinstance(x, sympy.Basic):
            return x.xreplace({s: sympy.Symbol(self.names[s.name]) for s in x.free_symbols if s.name in self.names})
        return x


def relabelled(graph, block: int, sizes) -> tuple | None:
    """The key of ``block`` in ``graph`` (:meth:`~napkin_cat.search.block_kernel.BlockKernels.key`) up to a renaming
    of axes that keeps sizes (module docstring), at ``sizes`` (axis name → int); None where an axis of the block has
    no numeric size there."""
    env = {str(k): sympy.Integer(int(v)) for k, v in dict(sizes).items()
           if isinstance(v, int) or getattr(v, "is_Integer", False)}
    names = _Names(env)
    try:
        names.walk(graph.key(block).parts)          # first pass: every axis named in order of first appearance
        return ("relabelled", names.walk(graph.key(block).parts))
    except LookupError:
        return None


__all__ = ["relabelled"]
