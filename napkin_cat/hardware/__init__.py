"""Layer 6, hardware: GPU models as data, divisor constraints, configuration / clock / overlap tables (§5-6).

May import: every layer up to plan and search.
"""
