"""The merge of a reducing collective: ``⊕ : state ⊗ state → state`` (issue 37).

An all-reduce or a reduce-scatter combines the devices' partial states by the merge its ``merge`` parameter names:
an elementwise kind of two operands (``add``, ``max``) applied to each array, or a stream reducer's merge
(:data:`~napkin_cat.algorithms.splits.MERGES`: online softmax's ``(μ, z, o)``), the same law a split stream's
combine uses (FlashDecoding's), so that::

    all_reduce(s_0, …, s_{P−1}) = s_0 ⊕ s_1 ⊕ … ⊕ s_{P−1}          (⊕ associative and commutative)

>>> import napkin_cat as nc
>>> from napkin_cat.syntax.collectives import all_reduce
>>> [b.name for b in merge_diagram(all_reduce("q d", devices=2, merge="add").boxes[0]).boxes]
['add']
"""
from __future__ import annotations

from napkin_cat.algorithms.accumulators import StateArray, build_state_diagrams
from napkin_cat.algorithms.splits import MERGES
from napkin_cat.errors import DeviceError
from napkin_cat.syntax.adapter import Diagram
from napkin_cat.syntax.builder import Builder
from napkin_cat.syntax.construct import elementwise
from napkin_cat.syntax.primitive import KINDS


def _sig(arr) -> str:
    return " ".join(arr.names) or "()"


def merge_diagram(box) -> Diagram:
    """The merge ``⊕`` of a reducing collective (``state ⊗ state → state``) from its ``merge`` parameter: an
    elementwise kind of two operands applied to each array, or a stream reducer's merge
    (:data:`~napkin_cat.algorithms.splits.MERGES`: online softmax's ``(μ, z, o)``), kept on the box.

    >>> import napkin_cat as nc
    >>> from napkin_cat.syntax.collectives import all_reduce
    >>> [b.name for b in merge_diagram(all_reduce("q d", devices=2, merge="max").boxes[0]).boxes]
    ['max']
    """
    found = box.__dict__.get("_merge_diagram")
    if found is not None:
        return found
    merge, arrays = box.data.param("merge"), list(box.dom.inside)
    if merge in MERGES:
        state = [StateArray(f"s{i}", a, 0.0) for i, a in enumerate(arrays)]
        d, _ = build_state_diagrams(f"{merge} merge", state, arrays,
                                    lambda b, st, *other: MERGES[merge](b, list(st), list(other)),
                                    lambda b, st: st[:1], arrays[:1])
    elif merge in KINDS and KINDS[merge].arity == 2:
        b = Builder(box.dom @ box.dom)
        k = len(arrays)
        outs = [b(elementwise(merge, f"{_sig(a)}, {_sig(a)} -> {_sig(a)}", level=a.level, dtype=a.dtype,
                              sizes={x.name: x.size for x in a.axes}), b.inputs[i], b.inputs[k + i])
                for i, a in enumerate(arrays)]
        d = b.build(*outs)
    else:
        raise DeviceError(f"{box.name}: its merge {merge!r} is neither an elementwise kind of two operands (such as "
                          f"'add', 'max') nor a reducer's merge ({sorted(MERGES)})")
    box.__dict__["_merge_diagram"] = d
    return d


__all__ = ["merge_diagram"]
