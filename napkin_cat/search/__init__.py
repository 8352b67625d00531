"""Layer 5, search: cost-guided derivation (``nc.derive``) — room for the derivation search.

May import: every layer up to rewriting; it finds rule sets through a registry, never by
importing ``rewrites``.
"""
