"""Layer 3, cost: the IO-cost functor and its optima (paper §2.2-2.4, §4, Appendix A.2).

``cost`` reads transfers H, memory M and FLOPs per level off an algorithm (a
monoid-valued functor; ``nc.cost`` is :func:`napkin_cat.cost.functor.cost`); ``optimal``
solves ``H*(a, M)`` for tile sizes; hierarchies give the multi-level, quantization,
caching and cross-transfer models.

May import: :mod:`napkin_cat.errors`, :mod:`napkin_cat.syntax`, :mod:`napkin_cat.algorithms`.
"""
