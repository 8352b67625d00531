"""Weaving: map a diagram over a new axis (paper Fig. weaved_function).

``weave(f, a, inputs=S, position=p)`` inserts the axis ``a`` at position ``p``
of every output and of the inputs in ``S``; un-weaved inputs are copied to
every index of ``a``.  A weaved box keeps its item-level core and appends to
its weave list.  Weaving is functorial::

    weave_S(f >> g) ≡ weave_S(f) >> weave_all(g)
    weave_{S ⊔ T}(f @ g) ≡ weave_S(f) @ weave_T(g)

(literally equal when every output of ``f`` already depends on a weaved input).

>>> import napkin_cat as nc
>>> f = nc.softmax("x", over="x")
>>> g = weave(f, "q", position=0)
>>> g.cod, g.boxes[0].data.weave_names
(Ty(Array(q×x)), ('q',))
"""
from __future__ import annotations

import math

from napkin_cat.syntax.array import Array
from napkin_cat.syntax.adapter import Box, Bubble, Diagram, Ty
from napkin_cat.syntax.flat import from_layers, layers
from napkin_cat.syntax.axis import Axis, canonical, resolve
from napkin_cat.errors import SignatureError, WeaveError
from napkin_cat.syntax.primitive import Core, Spec, Weave, kind_of
from napkin_cat.syntax.wiring import retype, traverse


# --------------------------------------------------------------------------- boxes from kinds
def core_of(spec: Spec, dom: Ty, cod: Ty, env=None) -> Core:
    """The item-level view (core axes per port) of a primitive box."""
    woven = set(spec.weave_names)
    ins = tuple(tuple(a for a in arr.axes if a.name not in woven) for arr in dom.inside)
    outs = tuple(tuple(a for a in arr.axes if a.name not in woven) for arr in cod.inside)
    carried = {a.name: a for arr in (*cod.inside, *dom.inside) for a in arr.axes}
    weaves = tuple(carried[w.name] for w in reversed(spec.weaves) if w.name in carried)
    offsets = getattr(env, "offsets", None) or {}
    return Core(ins, outs, dict(spec.params), env or {}, weaves, offsets, getattr(env, "maps", None) or {})


def build_box(kind: str, dom: list[Array], cod: list[Array], weaves: list[Weave], params=None,
              name: str | None = None) -> Box:
    """A primitive box with full arrays ``dom``/``cod`` and its weave list (innermost first).

    Checks that the box carries every parameter its kind requires (``Kind.requires``), that every weave
    axis sits in every output and exactly in the inputs it names, and the kind's item signature (an array
    names each axis once: :class:`Array` checks it).
    """
    k = kind_of(kind)
    missing = k.missing(params or {})
    if missing:
        raise SignatureError(f"a box of kind {kind!r} carries the parameter(s) {missing}, which were not given; "
                             f"pass params={{{', '.join(repr(p) + ': …' for p in missing)}}} (it requires "
                             f"{list(k.requires)})")
    # one NaN object for every NaN constant, so that a box equals itself rebuilt (NaN != NaN otherwise); an
    # expression's symbols the sizes' symbols of their names (a plain sympy.Symbol("d") is bound by sizes={"d": …})
    params = tuple(sorted((key, math.nan if isinstance(v, float) and v != v else canonical(v))
                          for key, v in (params or {}).items()))
    seen = set()
    for w in weaves:
        if w.name in seen:
            raise WeaveError(f"{kind}: axis {w.name!r} is weaved twice")
        seen.add(w.name)
        for j, arr in enumerate(cod):
            if w.name not in arr.names:
                raise WeaveError(f"{kind}: weave axis {w.name!r} missing from output {j} {arr}")
        for i, arr in enumerate(dom):
            if (w.name in arr.names) != (i in w.inputs):
                raise WeaveError(f"{kind}: weave axis {w.name!r} and input {i} {arr} disagree "
                                 f"(weave inputs {list(w.inputs)})")
    spec = Spec(kind, params, tuple(weaves))
    dom_t, cod_t = Ty(*dom), Ty(*cod)
    if k.check is not None:
        k.check(core_of(spec, dom_t, cod_t))
    return Box(name or k.label, dom_t, cod_t, data=spec)


def insert_at(axes: tuple, axis: Axis, position: int, where: str) -> tuple:
    """``axes`` with ``axis`` inserted at ``position`` (negative: from the end, −1 last); a WeaveError naming ``where``
    and the legal positions.

    >>> [a.name for a in insert_at((Axis("x", 2),), Axis("q", 3), -1, "x")]
    ['x', 'q']
    """
    n = len(axes)
    p = position if position >= 0 else n + 1 + position
    if not 0 <= p <= n:
        raise WeaveError(f"cannot weave {axis.name!r} at position {position} of {where} (rank {n}); "
                         f"legal positions are {-n - 1}..{n}")
    return axes[:p] + (axis,) + axes[p:]


def weave_box(box: Box, axis: Axis, inputs: dict[int, int], position: int) -> Box:
    """Weave one primitive box: ``axis`` at ``inputs[i]`` of input i, at ``position`` of outputs."""
    spec: Spec = box.data
    for arr in (*box.dom.inside, *box.cod.inside):
        if axis.name in arr.names:
            raise WeaveError(f"cannot weave over {axis.name!r}: box {box.name!r} already has it in {arr}; "
                             "weave over a new axis name")
    dom = list(box.dom.inside)
    for i, p in inputs.items():
        if not 0 <= i < len(dom):
            raise WeaveError(f"box {box.name!r} has inputs 0..{len(dom) - 1}, not {i}")
        dom[i] = dom[i].replace(axes=insert_at(dom[i].axes, axis, p, f"input {i} of {box.name!r}"))
    cod = [arr.replace(axes=insert_at(arr.axes, axis, position, f"output {j} of {box.name!r}"))
           for j, arr in enumerate(box.cod.inside)]
    weaves = spec.weaves + (Weave(axis.name, tuple(sorted(inputs))),)
    return build_box(spec.kind, dom, cod, list(weaves), dict(spec.params), name=box.name)


def broadcast_box(array: Array, axis: Axis, position: int) -> Box:
    """Copy an array along a new axis: the weave of the identity with no input weaved."""
    ident = build_box("id", [array.replace(axes=())], [array.replace(axes=())], [])
    for k, a in enumerate(reversed(array.axes)):
        ident = weave_box(ident, a, {0: 0}, 0)
    return weave_box(ident, axis, {}, position)


# --------------------------------------------------------------------------- diagrams
def all_arrays(diagram: Diagram):
    """Every array of ``diagram``: its inputs and each box's outputs, inside regions too."""
    yield from diagram.dom.inside
    for _, box in layers(diagram):
        yield from box.cod.inside
        if isinstance(box, Bubble):
            yield from all_arrays(box.arg)


def _whole(value, what: str) -> int:
    """``value`` as an int (a position or an input index), refused unless it is a whole number (not a bool)."""
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise WeaveError(f"{what} must be a whole number, got {value!r}")
    return int(value)


def weave(diagram: Diagram, axis, inputs=None, position: int = 0, sizes: dict | None = None, **more) -> Diagram:
    """Map ``diagram`` over a new ``axis`` (name or :class:`Axis`).

    ``inputs``: indices of the weaved inputs (default: all), or a dict
    ``{index: position}``; ``position``: where the axis goes in the outputs
    (and in the listed inputs), Python-insert style (``-1`` is last); the axis size
    as a keyword (``h=8``) or in ``sizes=`` (any name, ``sizes={"position": 8}``).
    An output that depends on no weaved input is copied along the axis at the end.
    """
    sizes = {**more, **(sizes or {})}
    axis = resolve([axis], sizes)[0]
    woven, flags = weave_inside(diagram, axis, inputs, position)
    wires, items = list(woven.cod.inside), []
    for j, f in enumerate(flags):
        if f is None:
            b = broadcast_box(wires[j], axis, position)
            items.append((Ty(*wires[:j]), b, Ty(*wires[j + 1:])))
            wires[j] = b.cod.inside[0]
    return woven >> from_layers(woven.cod, Ty(*wires), items) if items else woven


def weave_inside(diagram: Diagram, axis: Axis, inputs=None, position: int = 0) -> tuple:
    """``(woven, flags)``: :func:`weave` without the final copies: an output that depends on no weaved input
    is left as it was (its flag None; the others' flag is ``position``).  A region is woven so (its inside's
    unweaved outputs are copied outside it, where the copy is a function of its own, not inside a kernel).

    >>> import napkin_cat as nc
    >>> d = nc.elementwise("exp", "q") @ nc.elementwise("tanh", "x")
    >>> w, flags = weave_inside(d, Axis("h", 2), inputs=[0], position=-1)
    >>> w.cod, flags
    (Ty(Array(q×h[2]), Array(x)), (-1, None))
    """
    for arr in all_arrays(diagram):
        if axis.name in arr.names:
            raise WeaveError(f"cannot weave over {axis.name!r}: the diagram already has it in {arr}; "
                             "weave over a new axis name")
    n = len(diagram.dom)
    position = _whole(position, "the position of the woven axis")
    if inputs is None:
        inputs = {i: position for i in range(n)}
    elif isinstance(inputs, dict):
        inputs = {_whole(i, "a woven input"): _whole(p, f"the position of the axis in input {i}")
                  for i, p in inputs.items()}
    elif isinstance(inputs, (str, bytes)) or not hasattr(inputs, "__iter__"):
        raise WeaveError(f"inputs= lists the woven inputs (e.g. [0, 1]) or maps them to positions ({{0: -1}}), "
                         f"got {inputs!r}")
    else:
        listed = [_whole(i, "a woven input") for i in inputs]
        if len(set(listed)) != len(listed):
            raise WeaveError(f"inputs={list(listed)} names an input twice; name each woven input once")
        inputs = {i: position for i in listed}
    for i in inputs:
        if not 0 <= i < n:
            raise WeaveError(f"cannot weave input {i}: the diagram has inputs 0..{n - 1}")
    wires = list(diagram.dom.inside)
    flags = [None] * n  # per wire: where the axis was inserted, None if not weaved
    for i, p in inputs.items():
        wires[i] = wires[i].replace(axes=insert_at(wires[i].axes, axis, p, f"input {i}"))
        flags[i] = p
    dom = Ty(*wires)
    items = []

    def put(step, new_box):
        items.append((Ty(*(a for a, _ in step.left)), new_box, Ty(*(a for a, _ in step.right))))

    def on_box(step):  # a value is (array, flag): where the axis was inserted, None if not weaved
        fl = [f for _, f in step.ins]
        box, woven = step.box, {j: f for j, f in enumerate(fl) if f is not None}
        if isinstance(box, Bubble):  # a region weaves its inside (the algorithms layer says how)
            new_box = box.woven(axis, woven, position)
            put(step, new_box)
            return [(a, position if axis.name in a.names else None) for a in new_box.cod.inside]
        elif woven:
            new_box, out_flag = weave_box(box, axis, woven, position), position
        else:
            new_box, out_flag = box, None
        put(step, new_box)
        return [(a, out_flag) for a in new_box.cod.inside]

    def on_wiring(step, outs):
        put(step, retype(step.box, [a for a, _ in step.ins]))

    def merge(step):
        if len({f is None for _, f in step.ins}) > 1:
            raise WeaveError("cannot weave a merge of weaved and un-weaved wires")
        new_box = retype(step.box, [a for a, _ in step.ins])
        put(step, new_box)
        return [(new_box.cod.inside[0], step.ins[0][1])]

    out = traverse(diagram, zip(wires, flags), on_box, merge=merge, on_wiring=on_wiring)
    return from_layers(dom, Ty(*(a for a, _ in out)), items), tuple(f for _, f in out)
