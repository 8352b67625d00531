"""Straight-line code to string diagrams: wires by name, copies/swaps/discards inserted.

Write an algorithm as a sequence of box applications on named wires; the
builder inserts the copy (a wire used twice), swap (wires out of order) and
discard (a wire never used) that a string diagram needs.

>>> import napkin_cat as nc
>>> b = Builder(nc.types("q d, x d"))
>>> Q, K = b.inputs
>>> S = b(nc.einsum("q d, x d -> q x"), Q, K)
>>> d = b.build(S)
>>> [box.name for box in d.boxes]
['·']
"""
from __future__ import annotations

from napkin_cat.syntax.adapter import Diagram, Ty, single
from napkin_cat.syntax.flat import from_layers
from napkin_cat.errors import ArgumentError, CompositionError
from napkin_cat.syntax.construct import cast
from napkin_cat.syntax.dtype import as_dtype


class Wire:
    """A value in a :class:`Builder`: its id and the array it carries."""

    __slots__ = ("id", "array")

    def __init__(self, id_, array):
        self.id, self.array = id_, array

    def __repr__(self):
        return f"Wire({self.id}: {self.array})"


class Builder:
    """Build a diagram from box applications on wires (see module docstring)."""

    def __init__(self, dom: Ty):
        if not isinstance(dom, Ty):
            raise ArgumentError(f"a Builder starts from a type (nc.types('q d, x d') or Ty()), got "
                                f"{type(dom).__name__} {dom!r}")
        self.dom = dom
        self.inputs = [Wire(i, a) for i, a in enumerate(dom.inside)]
        self._next = len(self.inputs)
        self._ops = []  # (diagram, [input ids], [output wires])

    def __call__(self, diagram: Diagram, *wires: Wire):
        if len(wires) != len(diagram.dom):
            raise CompositionError(f"{diagram} takes {len(diagram.dom)} wires, got {len(wires)}")
        for k, (w, a) in enumerate(zip(wires, diagram.dom.inside)):
            if w.array != a:
                raise CompositionError(f"input {k} of {diagram}: wire carries {w.array}, box takes {a}")
        outs = []
        for a in diagram.cod.inside:
            outs.append(Wire(self._next, a))
            self._next += 1
        self._ops.append((diagram, [w.id for w in wires], outs))
        return outs[0] if len(outs) == 1 else tuple(outs)

    def apply(self, diagram: Diagram, values: dict, ins, outs) -> None:
        """``diagram`` applied to the wires ``values[v]`` named by ``ins``, its output wires entered in ``values``
        under the names ``outs``: one line of straight-line code on named values (:func:`build_values`)."""
        got = self(diagram, *(values[v] for v in ins))
        values.update(zip(outs, got if isinstance(got, tuple) else (got,)))

    def convert(self, wire: Wire, dtype) -> Wire:
        """``wire`` in the number format ``dtype``: the wire itself, or a Cast box when the formats differ.

        >>> import napkin_cat as nc
        >>> b = Builder(nc.types("q x", dtype="fp32"))
        >>> (x,) = b.inputs
        >>> b.convert(x, "fp32") is x, b.convert(x, "fp16").array
        (True, Array(q×x:fp16))
        """
        target = as_dtype(dtype)
        arr = wire.array
        if arr.dtype == target:
            return wire
        return self(cast(" ".join(arr.names), to=target, level=arr.level, dtype=arr.dtype,
                         sizes={a.name: a.size for a in arr.axes}), wire)

    def build(self, *outputs: Wire) -> Diagram:
        uses = {}
        for _, ids, _ in self._ops:
            for i in ids:
                uses[i] = uses.get(i, 0) + 1
        for w in outputs:
            uses[w.id] = uses.get(w.id, 0) + 1
        state = [(w.id, w.array) for w in self.inputs]
        parts = []

        def layer(k, diagram):
            left = Ty(*(a for _, a in state[:k]))
            right = Ty(*(a for _, a in state[k + len(diagram.dom):]))
            for inner in diagram.inside:  # splice layers directly: no rescans, no tensoring
                l, box, r = inner.boxes_or_types[:3]
                parts.append((Ty(*left.inside, *l.inside), box, Ty(*r.inside, *right.inside)))

        def move(src, dst):
            # adjacent swaps moving state[src] to index dst
            while src < dst:
                a, b = state[src], state[src + 1]
                layer(src, Diagram.swap(Ty(a[1]), Ty(b[1])))
                state[src], state[src + 1] = b, a
                src += 1
            while src > dst:
                a, b = state[src - 1], state[src]
                layer(src - 1, Diagram.swap(Ty(a[1]), Ty(b[1])))
                state[src - 1], state[src] = b, a
                src -= 1

        def gather(ids):
            """Copy wires still needed later, then make ``ids`` adjacent in order; return offset."""
            taken = []
            for i in ids:
                pos = min(k for k, (j, _) in enumerate(state) if j == i and k not in taken)
                uses[i] -= 1
                if uses[i] > 0:
                    layer(pos, Diagram.copy(Ty(state[pos][1])))
                    state.insert(pos + 1, state[pos])
                    taken = [t + 1 if t > pos else t for t in taken]
                    pos += 1
                taken.append(pos)
            if not taken:
                return len(state)
            anchor = taken[0]
            for j in range(1, len(taken)):
                src = taken[j]
                if src < anchor:
                    # it goes right after the block, which shifts left by one
                    dst = anchor + j - 1
                    move(src, dst)
                    taken = [t - 1 if src < t <= dst else t for t in taken]
                    anchor -= 1
                    taken[j] = dst
                    continue
                move(src, anchor + j)
                taken = [t + 1 if anchor + j <= t < src else t for t in taken]
                taken[j] = anchor + j
            return anchor

        def drop_unused():
            k = 0
            while k < len(state):
                i, a = state[k]
                if uses.get(i, 0) == 0:
                    layer(k, Diagram.copy(Ty(a), 0))
                    del state[k]
                else:
                    k += 1

        drop_unused()
        for diagram, ids, outs in self._ops:
            k = gather(ids)
            layer(k, diagram)
            state[k:k + len(ids)] = [(w.id, w.array) for w in outs]
            drop_unused()
        k = gather([w.id for w in outputs])
        for j in range(len(state) - 1, -1, -1):
            if not k <= j < k + len(outputs):
                layer(j, Diagram.copy(Ty(state[j][1]), 0))
                del state[j]
        cod = Ty(*(a for _, a in state))
        return from_layers(self.dom, cod, parts)


def build_values(ops, ins, outs, arrays: dict) -> Diagram:
    """The diagram of ``ops`` (``(box, input names, output names)`` in order) from the values named ``ins`` to those
    named ``outs``, ``arrays[v]`` the array of value ``v``: straight-line code on named values, the copies, swaps and
    discards inserted.  The inverse of :func:`~napkin_cat.syntax.wiring.trace_values`: for ``ops, dom, cod =
    trace_values(d)``, ``build_values(ops, dom, cod, arrays)`` computes what ``d`` computes.

    >>> import napkin_cat as nc
    >>> from napkin_cat.syntax.wiring import trace_values
    >>> d = nc.elementwise("exp", "q") >> nc.elementwise("neg", "q")
    >>> ops, dom, cod = trace_values(d)
    >>> arrays = dict(zip(dom, d.dom.inside))
    >>> arrays.update((v, a) for box, _, outs in ops for v, a in zip(outs, box.cod.inside))
    >>> bool(nc.equivalent(build_values(ops, dom, cod, arrays), d))
    True
    >>> [box.name for box in build_values(ops[1:], ops[1][1], cod, arrays).boxes]
    ['neg']
    """
    b = Builder(Ty(*(arrays[v] for v in ins)))
    values = dict(zip(ins, b.inputs))
    for box, box_ins, box_outs in ops:
        b.apply(single(box), values, box_ins, box_outs)
    return b.build(*(values[v] for v in outs))
