"""Pipes: a value made on one unit level and read on another goes through the block level (SMEM).

Step 3: tensor cores and threads exchange data through the block level.  A value that its level makes and
another level reads gets a *pipe*, a block-level variable (``name_1``) that the making kernel stores into
(a :class:`PipeOut` request at the end of its computations, or a kernel of its own for a value spread over
its level) and that the reading level loads from, or reads in place when it is an operand of a level whose
operand pool is the block's (wgmma reads SMEM)::

    S ← Q·Kᵀ (tensor cores);  P ← softmax(S) (threads)   ⟶   S ← Q·Kᵀ;  S_1 ← store S;  S_1_2 ← load S_1;  P ← …

>>> from types import SimpleNamespace as NS
>>> from napkin_cat.plan.ir import Variable
>>> from napkin_cat.plan.lowering.views import Scope, Variables
>>> smem = NS(index=1, name="SMEM")
>>> vs = Variables({"S": Variable("S", (("q", 4),), "fp16", 3, "temp", "·")}, {}, {}, set())
>>> pipes = Pipes(vs, smem)
>>> tc = NS(name="tensor-core")
>>> placement = NS(home={"S": tc}, reader_levels=lambda name: {"registers"})
>>> pipes.alloc(placement, "S", Scope(), "S"), pipes.records()
([Alloc(var='S_1')], (Pipe(value='S', var='S_1', source='tensor-core', targets=('registers',)),))
"""
from __future__ import annotations

from dataclasses import dataclass

from napkin_cat.plan.ir import Alloc
from napkin_cat.plan.lowering.state import Pipe
from napkin_cat.plan.lowering.views import shape_in


@dataclass(frozen=True)
class PipeOut:
    """In a unit kernel's statements: store the value ``name`` (spread over the level) to its pipe."""

    name: str


class Pipes:
    """The pipes made so far: ``of`` (value → pipe variable), ``info`` (pipe → (source level, target levels))."""

    def __init__(self, variables, block):
        self.variables, self.block = variables, block
        self.of: dict = {}
        self.info: dict = {}

    def alloc(self, placement, name, scope, label: str, shape=None) -> list:
        """The pipe of ``name`` allocated at ``scope`` (its shape cut by the loops open there)."""
        v = self.variables[name]
        home = placement.home[name]
        shape = shape_in(shape if shape is not None else v.shape, scope.loops)
        var = self.variables.new(f"{name}_{self.block.index}", shape, v.dtype, self.block.index, "temp",
                                 f"{v.origin} → {self.block.name}", scope.depth)
        self.of[name] = var
        targets = sorted(placement.reader_levels(name) - {home.name})
        self.info[var] = (home.name, tuple(targets))
        self.variables.what[var] = f"{label} piped from {home.name} to {', '.join(targets)}"
        if scope.in_tail:
            self.variables.tail.add(var)
        return [Alloc(var)]

    def records(self) -> tuple:
        return tuple(Pipe(value, var, *self.info[var]) for value, var in self.of.items())
