"""The one module that knows discopy's names.

napkin-cat's syntax is a discopy ``markov`` category (swap, copy, discard
come free).  This module subclasses the discopy classes it needs and
registers them as factories; every other module imports from here, so a
discopy upgrade that renames ``ty_factory`` & co. touches this file only.

Laws inherited from discopy (checked in ``tests/test_laws.py``)::

    (f >> g) >> h == f >> (g >> h)      f >> Id(f.cod) == f == Id(f.dom) >> f
    (f @ g) @ h == f @ (g @ h)          f @ Id() == f == Id() @ f

Its objects, the arrays, are :mod:`napkin_cat.syntax.array`'s; the flat view of a diagram (its layers read
and built, checked) is :mod:`napkin_cat.syntax.flat`.

>>> from napkin_cat.syntax.axis import axes
>>> q, d = axes("q d")
>>> f = Box("f", Ty(Array((q, d))), Ty(Array((q,))))
>>> (f >> Diagram.id(f.cod)) == f, f @ f
(True, Diagram(q×d @ q×d → q @ q; 2 boxes: f, f))
"""
from __future__ import annotations

from discopy import cat, markov, monoidal
from discopy.cat import factory
from discopy.config import DRAWING_ATTRIBUTES
from discopy.utils import assert_isatomic

from napkin_cat.syntax.array import Array, difference
from napkin_cat.errors import CompositionError


@factory
class Ty(markov.Ty):
    """A tuple of arrays; ``@`` concatenates (the paper's dashed line).

    Built in time linear in its length: discopy's ``Ty.__init__`` formats a name string and
    re-validates every object at each concatenation, which made ``@`` in a loop cubic; here the
    objects are checked to be arrays and the name is formatted only when asked for.
    """

    ob_factory = Array

    def __init__(self, *inside):
        for obj in inside:
            if not isinstance(obj, Array):
                raise CompositionError(f"a type holds arrays, got {type(obj).__name__} {obj!r}")
        self.inside = inside

    @property
    def name(self) -> str:
        return str(self)

    @name.setter
    def name(self, value):  # discopy assigns it; the name is always derived from the arrays
        pass

    @property
    def arrays(self) -> tuple[Array, ...]:
        return tuple(self.inside)

    def tensor(self, *others):
        """Concatenation (``@``), in one pass: discopy re-checks both factories per operand by name."""
        if all(isinstance(other, Ty) for other in others):
            return Ty(*self.inside, *(x for other in others for x in other.inside))
        return super().tensor(*others)

    def __pow__(self, n_times):
        return Ty(*(self.inside * n_times))

    def __repr__(self):  # discopy prefixes the module path for classes outside discopy
        return f"Ty({', '.join(map(repr, self.inside))})"


def _describe_mismatch(left: Ty, right: Ty) -> str:
    a, b = left.inside, right.inside
    if len(a) != len(b):
        return (f"the first diagram outputs {len(a)} array(s) {list(map(str, a))} but the second "
                f"takes {len(b)} array(s) {list(map(str, b))}")
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return f"array {i}: the first diagram outputs {x} but the second takes {y} ({difference(x, y)})"
    return "types differ"


class Layer(monoidal.Layer):
    """One layer ``left @ box @ right`` of a diagram.

    :meth:`trusted` builds a layer from parts that are already well typed without discopy's
    re-tensoring and naming (the operators and every functor build layers this way).
    """

    @classmethod
    def cast(cls, box) -> "Layer":
        """The layer of a box alone (empty wires either side); discopy re-tensors and names it, at every box
        made (a box's own layer is built in its ``__init__``)."""
        return cls.trusted(Ty(), box, Ty())

    @classmethod
    def trusted(cls, left: Ty, box, right: Ty) -> "Layer":
        layer = cls.__new__(cls)
        layer.boxes_or_types = (left, box, right)
        layer.data, layer.is_dagger = None, False
        layer.inside = (layer,)
        return layer

    # dom and cod are derived from the parts when first asked for (most layers never are)
    @property
    def dom(self) -> Ty:
        d = self.__dict__.get("_dom")
        if d is None:
            left, box, right = self.boxes_or_types[:3]
            d = self.__dict__["_dom"] = Ty(*left.inside, *box.dom.inside, *right.inside)
        return d

    @dom.setter
    def dom(self, value):
        self.__dict__["_dom"] = value

    @property
    def cod(self) -> Ty:
        c = self.__dict__.get("_cod")
        if c is None:
            left, box, right = self.boxes_or_types[:3]
            c = self.__dict__["_cod"] = Ty(*left.inside, *box.cod.inside, *right.inside)
        return c

    @cod.setter
    def cod(self, value):
        self.__dict__["_cod"] = value

    @property
    def name(self) -> str:
        return " @ ".join(str(x) for x in self.boxes_or_types if not isinstance(x, Ty) or len(x))

    @name.setter
    def name(self, value):  # discopy assigns it; the name is always derived from the parts
        pass


@factory
class Diagram(markov.Diagram):
    """A neural circuit diagram: ``>>`` is the paper's ``;``, ``@`` its ``⊗``.

    Both operators check the boundary (naming the array that differs) and then build the result
    from the operands' layers without re-validating them, so composing n boxes one at a time is
    linear in n per step (discopy re-scans every layer at each ``>>`` and re-types every layer at
    each ``@``).
    """

    ty_factory = Ty
    layer_factory = Layer

    def __init__(self, inside, dom, cod, _scan=True):
        if _scan:
            super().__init__(inside, dom, cod, _scan=True)
        else:  # trusted: the layers are already well typed and compose
            self.inside, self.dom, self.cod = tuple(inside), dom, cod

    def then(self, *others):
        cod, inside = self.cod, self.inside
        for k, other in enumerate(others):
            if not isinstance(other, Diagram):
                raise CompositionError(
                    f"cannot compose a napkin_cat Diagram with {type(other).__name__}")
            if other.dom != cod:
                raise CompositionError(
                    f"cannot compose: boundary types differ at composite {k + 1}: "
                    + _describe_mismatch(cod, other.dom))
            cod, inside = other.cod, inside + other.inside
        return Diagram(inside, self.dom, cod, _scan=False)

    def tensor(self, other=None, *others):
        for o in (other, *others):
            if o is not None and not isinstance(o, Diagram):
                raise CompositionError(
                    f"cannot tensor a napkin_cat Diagram with {type(o).__name__}")
        if other is None:
            return self
        if others:
            return self.tensor(other).tensor(*others)
        right, left = other.dom.inside, self.cod.inside
        inside = tuple(Layer.trusted(layer.boxes_or_types[0], layer.boxes_or_types[1],
                                     Ty(*layer.boxes_or_types[2].inside, *right)) for layer in self.inside)
        inside += tuple(Layer.trusted(Ty(*left, *layer.boxes_or_types[0].inside), layer.boxes_or_types[1],
                                      layer.boxes_or_types[2]) for layer in other.inside)
        return Diagram(inside, Ty(*self.dom.inside, *right), Ty(*left, *other.cod.inside), _scan=False)

    def __hash__(self):
        """``d == e ⇒ hash(d) == hash(e)``: the diagram of a box alone, equal to the box, hashes as the box.

        >>> from napkin_cat.syntax.adapter import Box, Ty, Array
        >>> f = Box("f", Ty(Array(())), Ty(Array(())))
        >>> one = Diagram.id(f.dom) >> f
        >>> one == f, hash(one) == hash(f), len({one, f})
        (True, True, 1)
        """
        if len(self.inside) == 1:
            left, box, right = self.inside[0].boxes_or_types[:3]
            if not left.inside and not right.inside:
                return hash(box)
        return hash(repr(self))

    def __repr__(self):
        boxes = [b.name for b in self.boxes]
        if len(boxes) > 8:
            boxes = boxes[:4] + ["…"] + boxes[-3:]
        return f"Diagram({self.dom} → {self.cod}; {len(self.boxes)} boxes: {', '.join(boxes)})"

    def __str__(self):
        return repr(self)


def single(box) -> Diagram:
    """A box as a one-box diagram (equal to the box, but a :class:`Diagram` whose one layer holds it).

    >>> f = Box("f", Ty(Array(())), Ty(Array(())))
    >>> type(single(f)).__name__, single(f) == f, single(f).boxes == [f]
    ('Diagram', True, True)
    """
    return Diagram.id(box.dom).then(box)


class Box(markov.Box, Diagram):
    """A box; napkin-cat keeps its primitive spec in ``data`` (hashable).

    Built trusted: a box is the diagram of one layer, itself, so discopy's scan of that layer (a dozen
    ``isinstance`` checks through its factories, at every box made) is skipped; the attributes are discopy's.
    """

    __ambiguous_inheritance__ = (markov.Box,)

    def __init__(self, name: str, dom: Ty, cod: Ty, **params):
        for attr in DRAWING_ATTRIBUTES:
            if attr in params:
                setattr(self, attr, params.pop(attr))
        cat.Box.__init__(self, name, dom, cod, **params)
        self.inside = (self.layer_factory.cast(self),)

    def __repr__(self):
        return f"Box({self.name!r}: {self.dom} → {self.cod})"


class Swap(markov.Swap, Box):
    """The swap of two arrays, built as discopy builds it (name, left, right, drawn as wires) without its
    second construction of the same box (discopy's braid builds it once, its symmetric swap again)."""

    __ambiguous_inheritance__ = (markov.Swap,)

    def __init__(self, left: Ty, right: Ty):
        assert_isatomic(left, monoidal.Ty)
        assert_isatomic(right, monoidal.Ty)
        self.left, self.right = left, right
        Box.__init__(self, f"{type(self).__name__}({left}, {right})", left @ right, right @ left,
                     draw_as_wires=True, draw_as_braid=False)


class Copy(markov.Copy, Box):
    """The copy of one array ``n`` times (``n = 0``: its discard), built as discopy builds it, trusted."""

    def __init__(self, x: Ty, n: int = 2):
        assert_isatomic(x, monoidal.Ty)
        Box.__init__(self, f"Copy({x}" + ("" if n == 2 else f", {n}") + ")", x, x ** n,
                     draw_as_spider=True, color="black", drawing_name="")

    def __reduce__(self):
        """Rebuilt from its array and copies (discopy's ``__new__`` needs them): a pickled diagram (another
        process's, ``nc.distributed``) keeps its copies and discards."""
        return type(self), (self.dom, len(self.cod))


class Merge(markov.Merge, Box):
    """The merge of ``n`` wires of one type into one (discopy's, pickled by its type and arity)."""

    def __reduce__(self):
        return type(self), (self.cod, len(self.dom))


class Discard(markov.Discard, Copy):
    """A wire dropped: a copy to no wires."""


class Bubble(monoidal.Bubble, Box):
    """A region with control structure (Kernel, Grid, Stream) around a diagram.

    The syntax layer declares what every region must say about itself; the regions
    (``napkin_cat.algorithms.bubbles``) define it: how it is weaved over a new axis and how
    an array functor (rename, substitute, recolor) maps it.
    """

    __ambiguous_inheritance__ = (monoidal.Bubble,)

    def __init__(self, *args, dom: Ty = None, cod: Ty = None, name: str = "", method: str = "bubble",
                 drawing_name: str = None, draw_as_frame: bool = None, draw_as_square: bool = None,
                 draw_vertically: bool = False, **params):
        """discopy's bubble, built trusted where it is one diagram between two types (a region): the attributes
        discopy's constructor sets, without its second construction of the box and the scan of its one layer
        (the search builds a region per partition it tries)."""
        if len(args) != 1 or params or not isinstance(dom, Ty) or not isinstance(cod, Ty) \
                or not isinstance(name, str):
            monoidal.Bubble.__init__(self, *args, dom=dom, cod=cod, name=name, method=method,
                                     drawing_name=drawing_name, draw_as_frame=draw_as_frame,
                                     draw_as_square=draw_as_square, draw_vertically=draw_vertically, **params)
            return
        (arg,) = args
        self.args, self.method = args, method
        self.name, self.data, self.is_dagger = name, None, False
        self.dom, self.cod = dom, cod
        self.inside = (self.layer_factory.cast(self),)
        self.drawing_name = "" if drawing_name is None else drawing_name
        self.draw_vertically = draw_vertically
        as_bubble = (len(dom), len(cod)) == (len(arg.dom), len(arg.cod))
        self.draw_as_square = draw_as_square or not as_bubble
        self.draw_as_frame = draw_as_frame or (not as_bubble and not self.draw_as_square)

    def woven(self, axis, inputs: dict, position: int) -> "Bubble":
        """This region mapped over ``axis`` (inserted at ``inputs[i]`` of input i, ``position`` of outputs)."""
        raise NotImplementedError(f"{type(self).__name__} does not say how it is weaved")

    def map_arrays(self, fa, fname, *, fparam=None, key=None) -> "Bubble":
        """This region with the array functor ``fa`` (and weave-name map ``fname``) applied inside (``key``: a
        hashable name of the functor under which the boxes inside remember their images, or None)."""
        raise NotImplementedError(f"{type(self).__name__} does not say how an array functor maps it")

    def size_parts(self) -> tuple:
        """``(sizes, diagrams)``: the sizes the region introduces (a tile) and the diagrams it holds, whose
        sizes are the region's too (read by :func:`napkin_cat.syntax.sizes.symbols_of`)."""
        return (), (self.arg,)


Diagram.braid_factory = Swap
Diagram.copy_factory, Diagram.merge_factory = Copy, Merge
Diagram.discard_factory = Discard
Diagram.bubble_factory = Bubble
