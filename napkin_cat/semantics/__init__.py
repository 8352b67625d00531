"""Layer 3, semantics: the numpy functor, what a diagram computes.

``evaluate`` interprets a diagram layer by layer (regions run as loops and folds,
so a rewritten diagram really runs its tiled algorithm); ``equivalent`` compares two
diagrams on random sizes, tiles and data.

May import: :mod:`napkin_cat.errors`, :mod:`napkin_cat.syntax`, :mod:`napkin_cat.algorithms`.
"""
