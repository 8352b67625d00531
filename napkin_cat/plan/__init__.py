"""Layer 5, plan: the pseudocode functor (paper §5.1-5.3) — room for the loop-nest IR and its runners.

May import: every layer up to rewriting.
"""
