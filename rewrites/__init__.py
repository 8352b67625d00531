"""The theorem library: rewrite rules of the paper as data (built on napkin_cat's public API)."""
