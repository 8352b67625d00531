"""The flat view of a diagram: its layers read in order and a diagram built from layers, checked.

Every functor interprets a diagram as the sequence of its layers ``left @ box @ right``
(:func:`layers`); every rewrite builds one from such triples (:func:`from_layers`), whose typing law is
that the wires before layer ``i`` are ``left @ box.dom @ right`` and after it ``left @ box.cod @ right``.
The structural boxes (swap, copy, merge, discard) are named by :func:`is_structural`.

>>> import napkin_cat as nc
>>> f = nc.einsum("a b, b c -> a c")
>>> [(offset, box.name) for offset, box in layers(f)]
[(0, '·')]
"""
from __future__ import annotations

from discopy import markov

from napkin_cat.syntax.array import Array, difference
from napkin_cat.syntax.adapter import Copy, Diagram, Layer, Swap, Ty
from napkin_cat.errors import ArgumentError, CompositionError


def require_diagram(value, who: str) -> Diagram:
    """``value`` when it is a diagram, else an :class:`~napkin_cat.errors.ArgumentError` saying that ``who`` takes
    one (a library algorithm's name is not one: call it).

    >>> require_diagram("attention", "nc.cost")
    Traceback (most recent call last):
    ...
    napkin_cat.errors.ArgumentError: nc.cost takes a napkin_cat Diagram, got the str 'attention' (a library ...
    """
    if isinstance(value, Diagram):
        return value
    hint = f" (a library algorithm is a call: nc.library.{value}())" if isinstance(value, str) and \
        value.isidentifier() else ""
    shown = f" {value!r}" if isinstance(value, (str, int, float)) else ""
    raise ArgumentError(f"{who} takes a napkin_cat Diagram, got the {type(value).__name__}{shown}{hint}")


def layers(diagram: Diagram):
    """Yield ``(offset, box)`` in order: the flat view every functor interprets."""
    for layer in diagram.inside:
        left, box, _right = layer.boxes_or_types[:3]
        yield len(left), box


def compose_all(dom: Ty, *diagrams: Diagram) -> Diagram:
    """Compose many diagrams once (never in a loop: discopy's ``>>`` rescans)."""
    return Diagram.id(dom).then(*diagrams) if diagrams else Diagram.id(dom)


def identity(dom: Ty) -> Diagram:
    """The identity diagram on ``dom`` (the wires, no box)."""
    return Diagram.id(dom)


def swap(left: Ty, right: Ty) -> Diagram:
    """The swap of ``left`` past ``right``: ``left @ right → right @ left``."""
    return Diagram.swap(left, right)


def copy(x: Ty, n: int = 2) -> Diagram:
    """``x`` copied ``n`` times: ``x → x @ … @ x`` (``n = 0``: discarded).

    >>> import napkin_cat as nc
    >>> x = nc.types("q")
    >>> len(copy(x).cod), discard(x).cod == copy(x, 0).cod
    (2, True)
    """
    return Diagram.copy(x, n)


def discard(x: Ty) -> Diagram:
    """``x`` dropped: the copy of ``x`` to no wires."""
    return Diagram.copy(x, 0)


def is_structural(box) -> str | None:
    """'swap', 'copy', 'merge', 'discard' for discopy's structural boxes, else None (remembered on the box:
    every functor asks it of every layer, and discopy's classes answer ``isinstance`` slowly)."""
    memo = getattr(box, "__dict__", {})
    kind = memo.get("_structural", False)
    if kind is False:
        kind = memo["_structural"] = _structural_kind(box)
    return kind


def _structural_kind(box) -> str | None:
    if isinstance(box, markov.Discard) or (isinstance(box, markov.Copy) and len(box.cod) == 0):
        return "discard"
    if isinstance(box, markov.Copy):
        return "copy"
    if isinstance(box, markov.Merge):
        return "merge"
    if isinstance(box, markov.Swap):
        return "swap"
    return None


def swap_box(left: Array, right: Array) -> "Swap":
    """The swap of two arrays (one generator; ``Diagram.swap`` builds any types through discopy's hexagon)."""
    return Swap(Ty(left), Ty(right))


def copy_box(x: Array, n: int = 2) -> "Copy":
    """The copy of one array ``n`` times (``n = 0``: its discard), one generator (``Diagram.copy`` builds any type
    through discopy's spiders)."""
    return Copy(Ty(x), n)


def make_layer(left: Ty, box, right: Ty):
    """The layer ``left @ box @ right``, trusted to be well typed (no check: the caller built its parts to fit)."""
    return Layer.trusted(left, box, right)


def from_layers(dom: Ty, cod: Ty, items) -> Diagram:
    """A diagram from ``(left, box, right)`` triples, each checked against the wires the layers before it leave.

    The typing law of a layer: the wires before layer ``i`` are ``left @ box.dom @ right`` (the same arrays in
    the same order: axes and their order, level, dtype), after it ``left @ box.cod @ right``; ``dom`` is the
    wires before the first layer and ``cod`` the wires after the last.  A rewrite that builds a layer of the
    wrong type is refused here, where the diagram is made, not when it is evaluated or loaded.  (The check
    compares arrays, first by identity: linear in the number of wires, with no rescan of the boxes.)

    >>> import napkin_cat as nc
    >>> f = nc.einsum("a b, b c -> a c")
    >>> (left, box, right), = (layer.boxes_or_types[:3] for layer in f.inside)
    >>> from_layers(f.dom, f.cod, [(left, box, right)]).boxes == f.boxes
    True
    >>> from_layers(f.cod, f.cod, [(left, box, right)])
    Traceback (most recent call last):
    ...
    napkin_cat.errors.CompositionError: layer 0 (box '·') is placed on wires ['a×c'] but takes
    ['a×b', 'b×c'] (left @ box.dom @ right): it takes 2 array(s) where there are 1
    """
    wires = tuple(dom.inside)
    inside = []
    for i, (left, box, right) in enumerate(items):
        takes = (*left.inside, *box.dom.inside, *right.inside)
        if takes != wires:
            raise CompositionError(_misplaced(i, box, wires, takes, len(left.inside)))
        wires = (*left.inside, *box.cod.inside, *right.inside)
        inside.append(Layer.trusted(left, box, right))
    if wires != tuple(cod.inside):
        raise CompositionError(f"the {len(inside)} layer(s) end on wires {list(map(str, wires))} but the diagram's "
                               f"codomain is {list(map(str, cod.inside))}"
                               + "".join(f": array {j}: {x} vs {y} ({difference(x, y)})"
                                         for j, (x, y) in enumerate(zip(wires, cod.inside)) if x != y)[:1000])
    return Diagram(tuple(inside), dom, cod, _scan=False)


def _misplaced(i: int, box, wires: tuple, takes: tuple, n_left: int) -> str:
    """Why layer ``i`` (``box`` with ``n_left`` wires on its left) does not fit ``wires``."""
    head = (f"layer {i} (box {box.name!r}) is placed on wires {list(map(str, wires))} but takes "
            f"{list(map(str, takes))} (left @ box.dom @ right)")
    if len(takes) != len(wires):
        return f"{head}: it takes {len(takes)} array(s) where there are {len(wires)}"
    j = next(j for j, (x, y) in enumerate(zip(wires, takes)) if x != y)
    k = len(box.dom.inside)
    where = (f"the box's input {j - n_left}" if n_left <= j < n_left + k
             else f"wire {j} on its {'left' if j < n_left else 'right'}")
    return f"{head}: at array {j} ({where}) the wire is {wires[j]} but the layer takes {takes[j]} " \
           f"({difference(wires[j], takes[j])})"
