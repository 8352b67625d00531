"""What a translation is made of: a traced tensor (its dimensions as axis classes), what a step's box is made
from (its :class:`Signature`), and a :class:`Step` (the box an operation makes once its classes are named).

A tensor's ``dims`` are the classes of its dimensions (:mod:`~napkin_cat.torch.classes`; ``None``: a dimension of
size 1, which carries one index), ``carried`` whether its array holds each (an ``expand`` broadcast does not); a view
(transpose, permute, unsqueeze) is the same array, its ``base``, with its dimensions reordered, so that::

    rank(t) = len(t.dims)          array_wire(view of b) = array_wire(b)

>>> t = Tensor((0, None), (True, False), "fp32")
>>> v = Tensor((None, 0), (False, True), "fp32", base=t)
>>> t.wire = "w"
>>> v.rank, v.array_wire()
(2, 'w')
>>> Signature([["q", "d"], ["x", "d"]], [["q", "x"]], {"q": 2, "x": 3, "d": 4}, str).spell()
'q d, x d -> q x'
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable


@dataclass(eq=False)
class Tensor:
    """A traced tensor: the class of each dimension (``None``: size 1), whether the array carries it, its format;
    a view's ``base`` is the tensor whose array it is."""
    dims: tuple
    carried: tuple
    dtype: object
    base: "Tensor | None" = None
    wire: object = None
    known: object = None            # every element's number, known at translation (then no wire until used)

    def array_wire(self):
        return self.base.array_wire() if self.base is not None else self.wire

    @property
    def rank(self) -> int:
        return len(self.dims)


@dataclass
class Signature:
    """What a step's box is made from: its operands' axis names (each wire's order), its outputs', the sizes."""
    ins: list
    outs: list
    sizes: dict
    name: Callable

    def spell(self, arrow: bool = True) -> str:
        ins = ", ".join(" ".join(n) or "()" for n in self.ins)
        return ins + (" -> " + ", ".join(" ".join(n) or "()" for n in self.outs) if arrow else "")

    def sized(self) -> dict:
        return {n: self.sizes[n] for names in self.ins + self.outs for n in names}


@dataclass
class Step:
    """One traced op: its operands (with the classes of axes each is used with), its outputs, the function making its
    diagram, and where in the program it was traced.
    """

    uses: list                       # (operand Tensor, the classes it is used with: renamed where they differ)
    outs: list
    make: Callable                   # Signature -> Diagram
    at: str = ""


__all__ = ["Tensor", "Signature", "Step"]
