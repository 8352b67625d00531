"""Layer 7, render: pictures in the paper's visual language (matplotlib PNG/SVG, TikZ).

``layout`` turns a diagram into backend-free lines, shapes and labels; ``draw`` and
``tikz`` are the two backends; ``strip`` draws a derivation, one rewrite per row.

May import: every layer below it (errors up to hardware).
"""
