"""Arithmetic intensity of matrix multiplication on a GPU hierarchy (Appendix A.4).

The transfers per FLOP come from the cost functor's optimum of the derived tiled matmul
(``H*(a, M) / K`` with ``K`` its FLOPs: ``M^-1/2 + (2b)^-1``, ``b`` the streamed inner dimension).
Every level ℓ of the hierarchy moves its own ``H*(a, M_ℓ)`` at its own bandwidth ``Ḣ_ℓ`` (values per
second: bytes per second / bytes per value) while the tensor cores compute at ``K̇``; the level is not a
bottleneck when::

    H*(a, M_ℓ) / K  <  Ḣ_ℓ / K̇

L2 is an intermediate cache: by Appendix A.2's theorem its memory is that of its children,
``M_L2 = N_SM · M_SM`` (:meth:`napkin_cat.cost.hierarchy.Hierarchy.effective`).  Per level this gives the
*absolute minimum* ``M`` (as ``b → ∞``) and ``b`` (as ``M → ∞``), and the minimum ``b`` at the level's memory.

>>> t = matmul_intensity("h100-sxm5")
>>> [(lv.name, round(float(lv.values_per_s) / 1e12, 1)) for lv in t.levels]
[('GMEM→L2', 1.7), ('L2→SMEM', 6.0)]
>>> t.per_flop
1/(2*b) + 1/sqrt(M)
"""
from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

import sympy

from napkin_cat.cost.hierarchy import Hierarchy, Level
from napkin_cat.cost.iocost import cost
from napkin_cat.cost.optimum import optimal
from napkin_cat.cost.seeded import solve
from napkin_cat.hardware.errors import HardwareError
from napkin_cat.hardware.model import load
from napkin_cat.hardware.tables import decimal, dumps, exact, number, text_table
from napkin_cat.syntax.dtype import as_dtype
from napkin_cat.library.dense import matmul
from napkin_cat.rewriting.registry import rulebook


@dataclass(frozen=True)
class LevelIntensity:
    """One memory level's intensity: the values per second it supplies, its memory, the values per FLOP it can feed
    (Ḣ/K̇), and the least memory M (b → ∞) and tile b (M → ∞; and with the level's own memory) at which it keeps up."""

    name: str
    values_per_s: Fraction
    memory: object          # values (sympy)
    ratio: object           # Ḣ/K̇, values per FLOP the level can supply
    min_M: object           # absolute minimum M (b → ∞)
    min_b: object           # absolute minimum b (M → ∞)
    min_b_at_memory: object  # minimum b with the level's memory; None when even b → ∞ is too little


@dataclass
class IntensityTable:
    """The intensity of each memory level of ``gpu`` for ``dtype`` operands, against the transfers per FLOP an algorithm
    needs (``per_flop``).
    """

    gpu: object
    dtype: str
    per_flop: sympy.Expr
    levels: list
    notes: list = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"hardware": self.gpu.name, "dtype": self.dtype, "transfers_per_flop": str(self.per_flop),
                "tensor_flops_per_s": number(self.gpu.peak("tensor", self.dtype)),
                "levels": [{"level": lv.name, "values_per_s": number(lv.values_per_s),
                            "memory_values": number(lv.memory),
                            "values_per_flop": float(lv.ratio), "min_M_values": float(lv.min_M),
                            "min_b": float(lv.min_b),
                            "min_b_at_memory": None if lv.min_b_at_memory is None else float(lv.min_b_at_memory)}
                           for lv in self.levels], "notes": list(self.notes)}

    def to_json(self) -> str:
        return dumps(self.to_dict())

    def to_text(self) -> str:
        rows = [[lv.name, f"{float(lv.values_per_s):.3g}", decimal(exact(lv.memory), 0), f"{float(lv.ratio):.4g}",
                 f"{float(lv.min_M):.4g}", f"{float(lv.min_b):.4g}",
                 "—" if lv.min_b_at_memory is None else f"{float(lv.min_b_at_memory):.4g}"] for lv in self.levels]
        head = text_table(["level", "values/s", "M (values)", "Ḣ/K̇", "min M (abs.)", "min b (abs.)", "min b at M"],
                          rows, title=f"Matmul arithmetic intensity on {self.gpu.name} ({self.dtype}): "
                                      f"H/K = {self.per_flop} < Ḣ/K̇, K̇ = "
                                      f"{float(self.gpu.peak('tensor', self.dtype)) / 1e12:.1f} TFLOP/s")
        return "\n".join([head] + [f"note: {n}" for n in self.notes])


def _tiled_matmul():
    return rulebook().derivations["tiled_matmul"](matmul()).diagram


def matmul_intensity(gpu, *, dtype: str = "fp16", derived=None) -> IntensityTable:
    """Appendix A.4 for ``gpu`` (module docstring); ``derived`` is the tiled matmul (default: the rule book's)."""
    gpu = load(gpu)
    if gpu.l2_to_smem is None:
        raise HardwareError(f"{gpu.name} ({gpu.path}) gives no bandwidth.l2_to_smem, which the L2 level needs")
    d = derived if derived is not None else _tiled_matmul()
    c = cost(d)
    if not c.streams:
        raise HardwareError("the matmul is not streamed along its inner dimension: derive it (tiled_matmul) first")
    inner = sympy.sympify(c.streams[0][2])
    M = sympy.Symbol("M", positive=True)
    opt = optimal(c, memory=M)
    per_flop = sympy.expand(opt.H / c.flops["tensor"])
    q = as_dtype(dtype).bytes
    m_sm = Fraction(gpu.smem_per_block, q)
    h = Hierarchy((Level("GMEM"),
                   Level("L2", capacity=sympy.Rational(gpu.l2, q), weight=sympy.Rational(q) / exact(gpu.hbm),
                         kind="cache"),
                   Level("SMEM", capacity=sympy.Rational(m_sm.numerator, m_sm.denominator),
                         weight=sympy.Rational(q) / exact(gpu.l2_to_smem), max_children=gpu.sm_count)),
                  name=f"{gpu.name} GMEM→L2→SMEM")
    names = {1: "GMEM→L2", 2: "L2→SMEM"}
    rate = sympy.Rational(exact(gpu.peak("tensor", dtype)))
    b = sympy.Symbol("b_", positive=True)
    f = per_flop.subs(inner, b)
    levels = []
    for index, weight, memory in h.effective():
        ratio = 1 / (weight * rate)
        min_M = solve(sympy.limit(f, b, sympy.oo) - ratio, M)[0]
        min_b = solve(sympy.limit(f, M, sympy.oo) - ratio, b)[0]
        at = solve(f.subs(M, memory) - ratio, b)
        at = at[0] if at and at[0].is_positive else None
        levels.append(LevelIntensity(names[index], exact(1 / weight), memory, ratio, min_M, min_b, at))
    notes = [f"M_L2 = N_SM · M_SM = {gpu.sm_count} · {m_sm} values (intermediate caching, Appendix A.2); "
             f"M_SM = smem_per_block / {q} B",
             "the 'min' values are lower bounds: larger stream sizes and imperfect caching need more"]
    return IntensityTable(gpu, dtype, per_flop, levels, notes)
