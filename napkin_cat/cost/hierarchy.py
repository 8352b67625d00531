"""Memory hierarchies and the multi-level performance model (paper §4, Appendix A.2).

A level has a name, a drawing color, a capacity (values; symbolic allowed), a
weighted transfer cost ``Ḣ⁻¹`` (inverse bandwidth; symbolic allowed), a maximum
number of children and a kind: ``plain``, intermediate ``cache`` or ``cross``
(cross-transfer: thread-block clusters, multi-GPU).  The total weighted cost of an
algorithm whose two-level optimum is ``H*(a, M) = Σ α_t M^-β_t`` is::

    H* = Σ_ℓ Ḣ_ℓ⁻¹ H*(a, M_ℓ)                                   (eq. levels)
    M_ℓ = N_c^max M_c            for a cache or cross-transfer level ℓ with child c
    Ḣ_x⁻¹ = Ḣ⁻¹_{h→c} − Ḣ⁻¹_{x→c},  Ḣ_c⁻¹ ↦ Ḣ⁻¹_{x→c}   for a cross-transfer level x

>>> import sympy, napkin_cat as nc
>>> M = nc.symbol("M")
>>> h = two_level()
>>> [lv.name for lv in h.levels], h.levels[1].capacity
(['global', 'shared'], M)
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import sympy

from napkin_cat.syntax.axis import symbol
from napkin_cat.errors import LevelError
from napkin_cat.cost.optimum import optimal

LEVEL_COLORS = ["black", (0.96, 0.65, 0.14), (0.49, 0.83, 0.13), (0.29, 0.56, 0.89),
                (0.58, 0.40, 0.74), (0.55, 0.34, 0.29)]
KINDS = ("plain", "cache", "cross")


def _expr(v):
    if isinstance(v, str):
        return symbol(v)
    return sympy.sympify(v) if v is not None else None


@dataclass(frozen=True)
class Level:
    """One level of a hierarchy (values, not bytes: see :func:`quantize` for bytes)."""

    name: str
    capacity: object = sympy.oo
    weight: object = 0
    max_children: object = 1
    kind: str = "plain"
    color: object = None

    def __post_init__(self):
        if self.kind not in KINDS:
            raise LevelError(f"level {self.name!r}: kind {self.kind!r} is not one of {KINDS}")
        object.__setattr__(self, "capacity", _expr(self.capacity))
        object.__setattr__(self, "weight", _expr(self.weight))
        object.__setattr__(self, "max_children", _expr(self.max_children))


@dataclass(frozen=True)
class Hierarchy:
    """Levels from the top (level 0, global) down."""

    levels: tuple
    name: str = "hierarchy"

    def __post_init__(self):
        levels = tuple(lv if lv.color is not None else replace(lv, color=LEVEL_COLORS[i % len(LEVEL_COLORS)])
                       for i, lv in enumerate(self.levels))
        object.__setattr__(self, "levels", levels)
        if not levels:
            raise LevelError("a hierarchy needs at least one level")
        for i, lv in enumerate(levels):
            if lv.kind != "plain" and i == len(levels) - 1:
                raise LevelError(f"level {lv.name!r} is a {lv.kind} level but has no child level below it")

    def __getitem__(self, level: int) -> Level:
        self.check_levels([level])
        return self.levels[level]

    def check_levels(self, used):
        for lvl in used:
            if not 0 <= lvl < len(self.levels):
                raise LevelError(f"level {lvl} is missing from hierarchy {self.name!r}, which has levels "
                                 f"0..{len(self.levels) - 1} ({', '.join(l.name for l in self.levels)})")

    def effective(self) -> list:
        """``[(level index, Ḣ_ℓ⁻¹, M_ℓ)]`` for every level below the top (Appendix A.2)."""
        n = len(self.levels)
        weights = [lv.weight for lv in self.levels]
        memory = [lv.capacity for lv in self.levels]
        for i in range(n - 2, 0, -1):
            lv, child = self.levels[i], self.levels[i + 1]
            if lv.kind in ("cache", "cross"):
                memory[i] = child.max_children * memory[i + 1]
            if lv.kind == "cross":
                weights[i] = child.weight - lv.weight
                weights[i + 1] = lv.weight
        return [(i, weights[i], memory[i]) for i in range(1, n)]

    def total(self, optimum, bytes_per_value=None) -> sympy.Expr:
        """``Σ_ℓ Ḣ_ℓ⁻¹ H*(a, M_ℓ)`` from an :class:`~napkin_cat.cost.optimum.Optimum` (its ``.terms``).

        With ``bytes_per_value`` q, capacities and weights are read as bytes:
        ``M_ℓ = M_bytes/q``, ``Ḣ_ℓ⁻¹ = q Ḣ_bytes⁻¹`` (eq. quant).
        """
        q = 1 if bytes_per_value is None else sympy.sympify(bytes_per_value)
        total = sympy.Integer(0)
        for _, w, M in self.effective():
            total += q * w * sum((a * (M / q) ** (-b) for a, b in optimum.terms), sympy.Integer(0))
        return total


    def per_level(self, c, *, streams=1) -> tuple:
        """``({ℓ: Optimum}, Σ_ℓ Ḣ_ℓ⁻¹ H*_ℓ)`` for a multi-level algorithm's cost ``c``: each level's own tiles
        (the Grids of its kernels) optimised under the level's effective capacity (``nc.optimal(c, M_ℓ,
        level=ℓ)``), and the weighted total of the levels' optimal transfers (eq. levels, level by level).

        >>> import napkin_cat as nc
        >>> mm = nc.group(nc.group(nc.stream(nc.library.matmul(), "b", "s_b"), "a", "g_a"), "c", "g_c")
        >>> two = nc.group(nc.group(nc.stream(nc.kernel(mm, level=2), "b", "u_b"), "a", "h_a"), "c", "h_c")
        >>> h = Hierarchy((Level("global"), Level("smem", "M_1", "w_1"), Level("registers", "M_2", "w_2")))
        >>> optima, total = h.per_level(nc.cost(two))
        >>> optima[2].sizes[nc.symbol("h_a")], total
        (sqrt(M_2), w_1*(a*c + 2*a*b*c/sqrt(M_1)) + w_2*(2*a*b*c + 2*a*b*c/sqrt(M_2)))

        (At level 2 the accumulator's round trip per level-1 slice, ``2ac·b/s_b``, is ``2abc`` at the paper's
        stream size 1.)
        """
        self.check_levels(c.levels)
        optima, total = {}, sympy.Integer(0)
        for level, weight, memory in self.effective():
            if level in c.H:
                optima[level] = optimal(c, memory, level, streams=streams)
                total += weight * optima[level].H
        return optima, total


def two_level(memory="M") -> Hierarchy:
    """The paper's default: global level 0 (black, unlimited, free) and level 1 (orange, memory M)."""
    return Hierarchy((Level("global", sympy.oo, 0), Level("shared", memory, 1)), name="two-level")


def quantization_factors(optimum, q_from, q_to) -> dict:
    """Per term ``β_t``: the factor ``(q_to/q_from)^(1+β_t)`` by which transfers scale (eq. quant).

    >>> import napkin_cat as nc
    >>> att = nc.group(nc.stream(nc.library.attention(), "x", "s_x"), "q", "g_q")
    >>> quantization_factors(nc.optimal(nc.cost(att)), 4, 2)
    {0: 1/2, 1: 1/4}
    """
    r = sympy.Rational(q_to, q_from) if isinstance(q_to, int) and isinstance(q_from, int) \
        else sympy.sympify(q_to) / sympy.sympify(q_from)
    return {b: r ** (1 + b) for _, b in optimum.terms}


def cross_transfer_gain(optimum, M_c, N, w_parent_to_child, w_cross) -> sympy.Expr:
    """``ΔH*(N) = ΔḢ⁻¹(N) Σ_t α_t M_c^-β_t (1 − N^-β_t)`` (Appendix A.2, Additional notes)."""
    dw = sympy.sympify(w_parent_to_child) - sympy.sympify(w_cross)
    return dw * sum((a * sympy.sympify(M_c) ** (-b) * (1 - sympy.sympify(N) ** (-b))
                     for a, b in optimum.terms), sympy.Integer(0))


# H800 SM-to-SM bandwidths by cluster size, and GMEM→SMEM, TB/s (Luo et al. 2024, via the paper)
H800_CLUSTER_BANDWIDTH = {2: 3.27e12, 4: 2.65e12}
H800_GMEM_SMEM_BANDWIDTH = 2.04e12
