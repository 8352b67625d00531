"""The other partitions of each kernel of a derived algorithm, and the algorithm made with some of them.

The search of fewest transfers picks one partition per kernel; partitions that move as much (a contraction over
``h·d`` streamed along ``h`` or along ``d``) differ in what else a machine charges: the least tile each allows,
the tensor-core shapes, the registers.  A search by another objective (the GPU time model's,
:mod:`napkin_cat.hardware.timed`) reads, per kernel, every partition of its block that the rule book can build
(:meth:`Alternatives.options`, the variants :mod:`.variants` offers, the chosen one first), and has the algorithm made
by the rules with the partitions it prefers (:meth:`Alternatives.made`): the kernel split is the search's, each
kernel's partition the caller's.  A kernel's time depends on its own tiles alone, so choosing kernel by kernel is
choosing over their product (:mod:`napkin_cat.hardware.separable`).

>>> import napkin_cat as nc
>>> r = nc.derive(nc.einsum("h n d, h d e -> n e"), memory=2 ** 12, sizes={"h": 4, "n": 64, "d": 32, "e": 64})
>>> alt = r.regimes[0].alternatives
>>> [v.describe() for v in alt.options(0)]
['group e,n · stream d', 'group e,n · stream h', 'group e · sweep n', 'group n · sweep e']
>>> alt.made({0: alt.options(0)[1]}).variant.kernels[0].stream
'h'
"""
from __future__ import annotations

from napkin_cat.search.paths import playable


class Alternatives:
    """Per kernel of the algorithm made from ``path`` (``[(block, Variant, Curve)]`` of ``form``), the partitions of
    its block the book can build; ``made`` builds the algorithm with some replaced (see the module docstring)."""

    def __init__(self, start, form, path, book, level, search, makers):
        self.start, self.form, self.path, self.book, self.level = start, form, list(path), book, level
        self.search, self.makers = search, makers
        self._options = {}

    def __len__(self) -> int:
        return len(self.path)

    def key(self, k: int):
        """Kernel ``k``'s canonical key (equal kernels of any algorithm, any form: equal keys)."""
        return self.form.graph.key(self.path[k][0]), self.level

    def options(self, k: int) -> list:
        """Kernel ``k``'s partitions the book can build, the one chosen first (each a
        :class:`~napkin_cat.search.variants.Variant`; ``v.diagram`` the partitioned kernel alone)."""
        found = self._options.get(k)
        if found is None:
            block, chosen, _ = self.path[k]
            ok = playable(tuple(self.book.roles))
            others = [v for v, curve in self.search.choice(self.form.graph, block).options
                      if ok(curve) and partition_of(v) != partition_of(chosen)]
            found = self._options[k] = [chosen, *others]
        return found

    def made(self, chosen: dict):
        """The algorithm with kernel ``k``'s partition ``chosen[k]`` (one of :meth:`options`), the others as they
        were, made by the rules: an object with ``diagram``, ``trace``, ``variant`` and ``cost``."""
        curves = {}
        for k, v in chosen.items():
            block = self.path[k][0]
            curves[k] = next(c for w, c in self.search.choice(self.form.graph, block).options if w is v) \
                if v is not self.path[k][1] else self.path[k][2]
        path = [(block, chosen.get(k, v), curves.get(k, curve)) for k, (block, v, curve) in enumerate(self.path)]
        return self.makers.get_made(self.start, self.form, path, self.book, self.level)


def partition_of(v) -> tuple:
    """What tells a kernel's partitions apart: its stream, groups, whether it sweeps, streams inside, parts."""
    return v.stream, v.groups, v.sliced, v.inner, v.parts
