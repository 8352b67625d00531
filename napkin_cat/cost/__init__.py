"""Layer 3, cost: the IO-cost functor and its optima (paper §2.2-2.4, §4, Appendix A.2).

``cost`` reads transfers H, memory M and FLOPs per level off an algorithm (a
monoid-valued functor); ``optimal`` solves ``H*(a, M)`` for tile sizes; hierarchies
give the multi-level, quantization, caching and cross-transfer models.

May import: :mod:`napkin_cat.errors`, :mod:`napkin_cat.syntax`, :mod:`napkin_cat.algorithms`.
"""

import sys
import types

from napkin_cat.cost.functor import cost


class _CallablePackage(types.ModuleType):
    """The layer's folder and the stable surface's ``nc.cost`` share a name: an import of this package by
    path (pytest's importlib mode) rebinds ``napkin_cat.cost`` to it, so calling it is the cost functor."""

    def __call__(self, diagram, hierarchy=None, *, sizes=None):
        return cost(diagram, hierarchy, sizes=sizes)


sys.modules[__name__].__class__ = _CallablePackage
