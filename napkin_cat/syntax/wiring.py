"""The one traversal of values through a diagram: every functor is a fold over its layers.

A diagram's generators are of two sorts.  The *wiring* (the markov category's structure) only
moves, aliases or drops the values on its wires::

    swap(a, b) ↦ (b, a)      copyₙ(a) ↦ (a, …, a)      discard(a) ↦ ()

The other boxes (primitives, regions) compute: they take the values on their input wires and put
new values on their output wires.  :func:`traverse` walks the layers once, moves the values through
the wiring itself (:func:`route`) and asks the caller only what a computing box makes of its
inputs.  The numpy functor, the cost functor, weaving, the netlist and the values view below are
all instances of it, so the meaning of swap, copy and discard is written here and nowhere else::

    traverse(f >> g, xs, on_box) == traverse(g, traverse(f, xs, on_box), on_box)
    traverse(f @ g, xs + ys, on_box) == traverse(f, xs, on_box) + traverse(g, ys, on_box)

(for an ``on_box`` without side effects on the order of its calls).  A merge (the sum of several
wires into one) is not part of the structure: it is handed to ``merge`` when the caller gives one
and refused otherwise.

>>> import napkin_cat as nc
>>> ops, dom, cod = trace_values(nc.library.attention())
>>> [(box.name, ins, outs) for box, ins, outs in ops]
[('·', [0, 1], [3]), ('SoftMax', [3], [4]), ('·', [4, 2], [5])]
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from napkin_cat.errors import NapkinError
from napkin_cat.syntax.adapter import Diagram, Ty
from napkin_cat.syntax.flat import copy_box, is_structural, layers, swap_box


def computes(box) -> bool:
    """True for a box that computes (a primitive or a region): neither wiring nor a merge."""
    return is_structural(box) is None


def _refuse_merge(box):
    raise NapkinError(f"{box.name!r} is a merge: a merge has no meaning as a function of arrays "
                      "(use an elementwise add)")


def route(box, values: list) -> list:
    """What a wiring box does to the values on its inputs (the markov category's structure)::

        swap(a, b) ↦ (b, a)      copyₙ(a) ↦ (a, …, a)      discard(a) ↦ ()

    The values may be anything (arrays, value ids, weave flags): every functor moves them
    the same way.

    >>> import napkin_cat as nc
    >>> swap = nc.Diagram.swap(nc.types("a"), nc.types("b")).boxes[0]
    >>> route(swap, ["A", "B"]), route(nc.Diagram.copy(nc.types("a"), 3).boxes[0], ["A"])
    (['B', 'A'], ['A', 'A', 'A'])
    """
    kind = is_structural(box)
    if kind == "swap":
        n = len(box.left)
        return values[n:] + values[:n]
    if kind == "copy":
        return values * len(box.cod)
    if kind == "discard":
        return []
    if kind == "merge":
        _refuse_merge(box)
    raise NapkinError(f"{box.name!r} is not a swap, copy or discard")


def retype(box, arrays) -> object:
    """The same wiring box (or merge) on wires carrying ``arrays`` (its new inputs).

    What an array functor (rename, weave, recolor) makes of a structural box: the generator is
    kept, only the arrays on its wires change.

    >>> import napkin_cat as nc
    >>> swap = nc.Diagram.swap(nc.types("a"), nc.types("b")).boxes[0]
    >>> retype(swap, nc.types("c, b").inside).cod
    Ty(Array(b), Array(c))
    """
    kind, arrays = is_structural(box), list(arrays)
    if kind == "swap":
        return swap_box(*arrays)
    if kind == "copy":
        return copy_box(arrays[0], len(box.cod))
    if kind == "discard":
        return copy_box(arrays[0], 0)
    if kind == "merge":
        return Diagram.merge(Ty(arrays[0]), len(box.dom)).boxes[0]
    raise NapkinError(f"{box.name!r} is not structural: retype only rebuilds swaps, copies, discards and merges")


@dataclass
class Step:
    """One layer as the traversal meets it: ``box`` at ``offset``, reading ``ins`` off ``values``.

    ``values`` is the list of values on every wire just before the layer (do not keep it: the
    traversal replaces the box's inputs by its outputs in place after the call); ``left`` and
    ``right`` are the values on the wires beside the box.  ``index`` numbers the layers from 0.
    """

    index: int
    offset: int
    box: object
    ins: list
    values: list

    @property
    def left(self) -> list:
        return self.values[:self.offset]

    @property
    def right(self) -> list:
        return self.values[self.offset + len(self.ins):]


def traverse(diagram: Diagram, values, on_box: Callable, *, merge: Callable | None = None,
             on_wiring: Callable | None = None) -> list:
    """Fold ``diagram`` over the ``values`` on its input wires; the values on its output wires.

    ``on_box(step)`` returns the values a computing box (primitive or region) puts on its output
    wires (a :class:`Step` says which box, which input values, what lies beside it).  Swaps, copies
    and discards move the values themselves (:func:`route`); ``on_wiring(step, outs)``, if given, is
    told what each did (a value of ``step.ins`` missing from ``outs`` was discarded, one found twice
    was copied) and may return the outputs renamed (a list as long as ``outs``: e.g. a netlist gives
    each branch of a copy its own wire).  A merge goes to ``merge(step)`` (by default it is refused).

    >>> import napkin_cat as nc
    >>> d = nc.Diagram.swap(nc.types("a"), nc.types("b")) >> nc.elementwise("exp", "b") @ nc.Diagram.id(
    ...     nc.types("a"))
    >>> traverse(d, ["A", "B"], lambda s: [f"{s.box.name}({s.ins[0]})"])
    ['exp(B)', 'A']
    """
    values = list(values)
    for index, (offset, box, k, kind) in enumerate(plan(diagram)):
        step = Step(index, offset, box, values[offset:offset + k], values)
        if kind is None:
            outs = list(on_box(step))
        elif kind == "merge":
            outs = list(merge(step)) if merge is not None else _refuse_merge(box)
        else:
            outs = route(box, step.ins)
            if on_wiring is not None:
                renamed = on_wiring(step, outs)
                if renamed is not None:
                    if len(renamed) != len(outs):
                        raise NapkinError(f"on_wiring renamed the {len(outs)} output(s) of {box.name!r} "
                                          f"as {len(renamed)}")
                    outs = list(renamed)
        values[offset:offset + k] = outs
    return values


def plan(diagram: Diagram) -> tuple:
    """The layers as :func:`traverse` walks them: ``(offset, box, inputs, kind)`` per layer, ``kind`` the box's
    :func:`~napkin_cat.syntax.flat.is_structural` (None for a box that computes).  Read off the diagram alone, so
    kept on it (a diagram is immutable; the cost functor walks a kernel's inside once per partition of it, and a
    box's arity and kind would be asked again at every walk).

    >>> import napkin_cat as nc
    >>> d = nc.Diagram.swap(nc.types("a"), nc.types("b")) >> nc.elementwise("exp", "b") @ nc.Diagram.id(
    ...     nc.types("a"))
    >>> [(o, b.name, k, kind) for o, b, k, kind in plan(d)], plan(d) is plan(d)
    ([(0, 'Swap(a, b)', 2, 'swap'), (0, 'exp', 1, None)], True)
    """
    found = diagram.__dict__.get("_traversal_plan")
    if found is None:
        found = diagram.__dict__["_traversal_plan"] = tuple((offset, box, len(box.dom), is_structural(box))
                                                            for offset, box in layers(diagram))
    return found


def trace_values(diagram: Diagram):
    """``(ops, dom_ids, cod_ids)``: ops are ``(box, input ids, output ids)`` in layer order.

    The values view: every computing box (and merge) with the ids of the values it reads and
    writes; the wiring only moves ids, so a copied value keeps its id.  It is :func:`traverse` with an ``on_box``
    (and ``merge``) that numbers each box's outputs afresh, run over :func:`plan` directly: the one fold every cost
    of a fresh candidate diagram starts with (its dead values, its streaming analysis), so no :class:`Step` is
    built per layer::

        trace_values(d) == the ops, dom and cod that traverse(d, range(len(d.dom)), numbering, merge=numbering) sees

    >>> import napkin_cat as nc
    >>> trace_values(nc.Diagram.copy(nc.types("a"), 2) >> nc.elementwise("add", "a, a -> a"))[0][0][1:]
    ([0, 0], [1])
    """
    n = len(diagram.dom)
    values, ops, fresh = list(range(n)), [], n
    for offset, box, k, kind in plan(diagram):
        ins = values[offset:offset + k]
        if kind is None or kind == "merge":
            outs = list(range(fresh, fresh + len(box.cod)))
            fresh += len(outs)
            ops.append((box, ins, outs))
        else:
            outs = route(box, ins)
        values[offset:offset + k] = outs
    return ops, list(range(n)), values


def consumers(ops, cod_ids) -> dict:
    """value id -> list of (op index, port); the diagram's outputs appear as op index -1."""
    out = {}
    for i, (_, ins, _) in enumerate(ops):
        for p, v in enumerate(ins):
            out.setdefault(v, []).append((i, p))
    for p, v in enumerate(cod_ids):
        out.setdefault(v, []).append((-1, p))
    return out
