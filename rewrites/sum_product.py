"""Contractions as data: the sum of products, how an order splits it, what its loop nest costs.

A contraction ``C(X₁, …, Xₙ) → Y`` computes ``Y[o] = Σ_{u ∉ o} Π_i X_i`` over every axis
that is not in the output (paper §2.1: a weaved dot product; any number of operands).
Products distribute over sums and sums commute (Fubini), so for operands ``S ⊔ R``::

    Σ_{u} Π_S X · Π_R X  =  Σ_{u₂} (Σ_{u₁} Π_S X) · Π_R X

where ``u₁`` are the axes of ``S`` named by neither the output nor ``R`` (summed first) and the
intermediate ``T = Σ_{u₁} Π_S X`` keeps every other axis of ``S``: an axis survives the first
contraction iff the output or a remaining operand names it (:meth:`Term.split`).  A summed axis
is a bound index: renaming it everywhere in one contraction changes nothing (α-conversion).

Cost (what ``nc.cost(d).flops`` counts, :func:`loop_nest_flops`): one contraction is one loop nest
over the union of its axes with ``n`` FLOPs per innermost iteration for ``n ≥ 2`` operands (``n − 1``
multiplies and one add: the paper's ``2k`` for a dot product, §2.2), so ``n · Π(all axes)`` on the
tensor pipeline when an axis is summed; an outer product (nothing summed) is ``(n − 1) · Π(output)``
general FLOPs; one operand summed is ``Π(all axes)`` general FLOPs; a transposition is free.  A
merged contraction is therefore *not* costed as the sum of its parts: ``(A B) C`` at 2abc + 2acd
becomes 3abcd, the price of evaluating the product without the intermediate.

>>> import napkin_cat as nc
>>> t = Term.of(nc.engine.to_netlist(nc.einsum("a b, b c, c d -> a d")).nodes[0])
>>> t.summed, loop_nest_flops(t)
(('b', 'c'), {'tensor': 3*a*b*c*d})
>>> [(" ".join(" ".join(a.names) for a in p.operands), " ".join(p.output.names)) for p in t.split((1, 2))]
[('b c c d', 'b d'), ('a b b d', 'a d')]
"""
from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations, product

import numpy as np
import sympy

import napkin_cat as nc
from napkin_cat.syntax.primitive import Weave
from napkin_cat.syntax.weave import build_box
from rewrites.contraction_instances import random_einsum


def axis_names(arrays) -> tuple:
    """Axis names in order of first appearance."""
    return tuple(dict.fromkeys(n for a in arrays for n in a.names))


@dataclass(frozen=True)
class Term:
    """A contraction ``C(operands) → output`` as data (arrays with their axes, level and dtype)."""

    operands: tuple
    output: object

    @classmethod
    def of(cls, node) -> "Term":
        """The contraction of a netlist node."""
        return cls(tuple(node.dom), node.cod[0])

    @property
    def summed(self) -> tuple:
        """The axes summed over: named by an operand, not by the output."""
        return tuple(n for n in axis_names(self.operands) if n not in self.output.names)

    @property
    def axes(self) -> dict:
        return {a.name: a for arr in (*self.operands, self.output) for a in arr.axes}

    def box(self):
        """The contraction box (weaves as ``nc.einsum`` makes them: the output axes)."""
        ws = [Weave(n, tuple(i for i, a in enumerate(self.operands) if n in a.names))
              for n in reversed(self.output.names)]
        return build_box("contract", list(self.operands), [self.output], ws)

    def split(self, first: tuple) -> tuple:
        """``(C₁, C₂)``: ``C₁`` contracts the operands ``first`` (sorted ports); ``C₂`` takes its
        result in place of the lowest of them.  An axis of ``first`` survives ``C₁`` iff the
        output or a remaining operand names it."""
        rest = [j for j in range(len(self.operands)) if j not in first]
        needed = set(self.output.names) | set(axis_names(self.operands[j] for j in rest))
        kept = [self.axes[n] for n in axis_names(self.operands[i] for i in first) if n in needed]
        t = self.output.replace(axes=tuple(kept))
        at = first[0]
        second = [self.operands[j] for j in rest if j < at] + [t] + [self.operands[j] for j in rest if j > at]
        return Term(tuple(self.operands[i] for i in first), t), Term(tuple(second), self.output)

    def merge(self, port: int, inner: "Term") -> "Term":
        """This contraction with operand ``port`` replaced by the operands of ``inner``."""
        ops = self.operands
        return Term(ops[:port] + inner.operands + ops[port + 1:], self.output)

    def renamed(self, axis: str, to: str) -> "Term":
        """The summed ``axis`` called ``to`` in every operand (same size)."""
        new = nc.Axis(to, self.axes[axis].size)
        return Term(tuple(x.replace(axes=tuple(new if y.name == axis else y for y in x.axes))
                          for x in self.operands), self.output)

    def carried(self) -> bool | str:
        """True when every output axis is named by an operand (no broadcast weave), else why not."""
        missing = [n for n in self.output.names if n not in axis_names(self.operands)]
        return True if not missing else \
            f"output axis {missing[0]!r} of {self.output} is in none of the operands {list(map(str, self.operands))}"


def one_format(*terms) -> bool | str:
    """True when every array of the terms has one level and dtype, else the first that differs."""
    arrays = [a for t in terms for a in (*t.operands, t.output)]
    ref = arrays[0]
    for a in arrays[1:]:
        if (a.level, a.dtype) != (ref.level, ref.dtype):
            return f"{a} is at level {a.level} in {a.dtype.name}, {ref} at level {ref.level} in {ref.dtype.name}"
    return True


def loop_nest_flops(term: Term) -> dict:
    """FLOPs by pipeline of one contraction from its axis sizes (the module docstring's model)."""
    every = sympy.Mul(*(term.axes[n].size for n in axis_names(term.operands)))
    out = sympy.Mul(*(a.size for a in term.output.axes))
    n = len(term.operands)
    if term.summed:
        return {"tensor": n * every} if n >= 2 else {"general": every}
    return {"general": (n - 1) * out} if n >= 2 else {}


# ---------------------------------------------------------------------- the law, symbolically
def _sym_contract(operands, output, values, n: int = 2) -> dict:
    """``Σ_{u ∉ output} Π values`` over index names (each of size ``n``): index tuple → sympy expr."""
    names = tuple(dict.fromkeys(x for ns in operands for x in ns))
    out = {}
    for idx in product(range(n), repeat=len(names)):
        env = dict(zip(names, idx))
        key = tuple(env[x] for x in output)
        out[key] = out.get(key, 0) + sympy.Mul(*(v[tuple(env[x] for x in ns)] for ns, v in zip(operands, values)))
    return out


def sum_product_associativity():
    """For random contractions and every choice S: C₂(C₁(X_S), X_R) = C(X) on symbolic arrays (sympy),
    the intermediate's axes derived by :meth:`Term.split`; renaming a summed index changes nothing."""
    rng = np.random.default_rng(11)
    for _ in range(4):
        term = Term.of(nc.engine.to_netlist(random_einsum(rng, int(rng.integers(3, 5)), max_names=4)).nodes[0])
        ops = [a.names for a in term.operands]
        vals = [{i: sympy.Symbol(f"x{j}_" + "".join(map(str, i))) for i in product(range(2), repeat=len(ns))}
                for j, ns in enumerate(ops)]
        whole = _sym_contract(ops, term.output.names, vals)
        for k in range(1, len(ops)):
            for first in combinations(range(len(ops)), k):
                inner, outer = term.split(first)
                t = _sym_contract([ops[i] for i in first], inner.output.names, [vals[i] for i in first])
                rest = [j for j in range(len(ops)) if j not in first]
                at = sum(1 for j in rest if j < first[0])
                o_vals = [vals[j] for j in rest[:at]] + [t] + [vals[j] for j in rest[at:]]
                two = _sym_contract([a.names for a in outer.operands], term.output.names, o_vals)
                assert all(sympy.expand(two[i] - whole[i]) == 0 for i in whole), \
                    f"C₂(C₁(X_{list(first)}), …) differs from C(X) for {ops} -> {term.output.names}"
        for a in term.summed:
            fresh = a + "'"
            while fresh in term.axes:
                fresh += "'"
            again = _sym_contract([a_.names for a_ in term.renamed(a, fresh).operands], term.output.names, vals)
            assert all(sympy.expand(again[i] - whole[i]) == 0 for i in whole), f"renaming {a!r} changed C"
