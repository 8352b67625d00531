"""What the sections of the reproduction share: the derivations, computed once, and where pictures go.

>>> ctx = Context(out=None)
>>> [s.rule for s in ctx.flash.trace][-1]
'group_partition'
"""
from __future__ import annotations

import os
from functools import cached_property

import sympy

from napkin_cat import library
from napkin_cat.cost.iocost import cost
from napkin_cat.cost.optimum import optimal
from napkin_cat.rewriting.registry import rulebook
from napkin_cat.syntax.axis import symbol

M = symbol("M")


def S(*names):
    """The positive-integer symbols of napkin-cat (axis and tile sizes), by name."""
    out = tuple(symbol(n) for n in names)
    return out[0] if len(out) == 1 else out


class Context:
    """Shared state of one reproduction run: ``out`` (folder for pictures, or None) and the derivations."""

    def __init__(self, out: str | None):
        self.out = out
        self.section = ""        # the title of the section running (set by the report)
        self.notes: dict = {}    # title -> what a section could not check on this machine, and why
        if out is not None:
            os.makedirs(os.path.join(out, "figures"), exist_ok=True)

    def figure(self, name: str) -> str | None:
        """The path for a picture (``figures/<name>``) or None when no pictures are written."""
        return None if self.out is None else os.path.join(self.out, "figures", name)

    def note(self, text: str):
        """Record, under the running section, something the report must say (e.g. a claim skipped: no compiler)."""
        self.notes.setdefault(self.section, []).append(text)

    @cached_property
    def book(self):
        return rulebook()

    def derive(self, name: str, diagram):
        return self.book.derivations[name](diagram)

    @cached_property
    def attention(self):
        return library.attention()

    @cached_property
    def flash(self):
        """FlashAttention derived from attention by the rule book's rules (§3.2)."""
        return self.derive("flash_attention", self.attention)

    @cached_property
    def matmul(self):
        return library.matmul()

    @cached_property
    def tiled_matmul(self):
        """Tiled matmul derived from matmul by rules (§3.1)."""
        return self.derive("tiled_matmul", self.matmul)

    @cached_property
    def mha(self):
        return self.derive("flash_attention", library.multi_head_attention())

    @cached_property
    def gqa(self):
        return self.derive("flash_attention", library.grouped_query_attention())

    def cost_of(self, derivation):
        return cost(derivation.diagram)

    def optimum_of(self, derivation):
        return optimal(cost(derivation.diagram), memory=M)


def simplified(expr):
    """``expr`` simplified by sympy (the report's formulas as printed)."""
    return sympy.simplify(expr)
