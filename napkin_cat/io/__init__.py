"""Layer 7, io: JSON in and out (no pickle, no eval, no code execution from the input).

May import: every layer below it.  It registers the diagram codec that rewriting
traces use to carry their diagrams.
"""
