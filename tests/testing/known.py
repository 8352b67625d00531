"""The known families of issue 25 that another change fixes (the stream-schedule walks): how a fuzz failure is
recognised as one of them.  A failure of a known family is counted and printed, not failed; everything else
fails the fuzz.  Each family also has its own ``xfail(strict=True)`` test (``test_families.py``)."""
from __future__ import annotations

import ast

from napkin_cat.syntax.adapter import is_structural, layers
from napkin_cat.syntax.wiring import computes


def _boxes(diagram):
    for _, box in layers(diagram):
        if hasattr(box, "arg"):
            yield from _boxes(box.arg)
        elif computes(box):
            yield box


def one_operand_contraction(diagram) -> bool:
    """A contraction summing an axis that only one of its operands carries (``a, b -> b``, ``k n, K k -> ()``)."""
    for box in _boxes(diagram):
        if box.data.kind != "contract":
            continue
        out = set(box.cod.inside[0].names)
        for arr in box.dom.inside:
            for name in arr.names:
                if name not in out and sum(name in a.names for a in box.dom.inside) == 1:
                    return True
    return False


def discards(program) -> bool:
    """A value the program computes or takes and never uses (dead values, unused inputs)."""
    return any(is_structural(box) == "discard" for _, box in layers(program.diagram))


def family(failure) -> str | None:
    """``"family 2"`` or ``"family 5"`` when ``failure`` is one of those known families, else None."""
    p, msg = failure.program, failure.message
    if failure.check == "plan" and msg.startswith("the plan's run counts peak"):
        ran = ast.literal_eval(msg.split("counts peak ")[1].split(", the cost")[0])
        costed = ast.literal_eval(msg.split("functor says ")[1])
        if all(costed.get(k, 0) > v for k, v in ran.items()) and discards(p):
            return "family 5"    # the cost charges the discarded values' memory
    if failure.check == "plan" and one_operand_contraction(p.diagram):
        return "family 2"
    return None
