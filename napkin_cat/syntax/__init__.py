"""Layer 1, syntax: neural circuit diagrams as morphisms of a markov category (paper §2.1).

Axes and their sizes, number formats, primitive kinds (item-level signature, numpy
meaning, FLOPs, accumulator), the one adapter that names discopy, einops-style
constructors, weaving, the straight-line ``Builder``, the value-flow view of a
diagram, and the functors on types (rename, substitute, recolor).

May import: :mod:`napkin_cat.errors` and itself.  Nothing here knows about
algorithms (bubbles are extended through methods this layer declares), costs,
rewriting or pictures.
"""
