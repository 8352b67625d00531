"""The one module that knows discopy's names.

napkin-cat's syntax is a discopy ``markov`` category (swap, copy, discard
come free).  This module subclasses the discopy classes it needs and
registers them as factories; every other module imports from here, so a
discopy upgrade that renames ``ty_factory`` & co. touches this file only.

Laws inherited from discopy (checked in ``tests/test_laws.py``)::

    (f >> g) >> h == f >> (g >> h)      f >> Id(f.cod) == f == Id(f.dom) >> f
    (f @ g) @ h == f @ (g @ h)          f @ Id() == f == Id() @ f

>>> from napkin_cat.syntax.axis import axes
>>> q, d = axes("q d")
>>> A = Array((q, d)); A
Array(q×d)
>>> A == Array((q, d)) and A != Array((q, d), level=1)
True
"""
from __future__ import annotations

from discopy import cat, markov, monoidal
from discopy.cat import factory
from discopy.config import DRAWING_ATTRIBUTES
from discopy.utils import assert_isatomic

from napkin_cat.syntax.axis import MAX_AXES, Axis, symbol
from napkin_cat.syntax.dtype import DType, FP32, as_dtype
from napkin_cat.errors import ArgumentError, AxisError, CompositionError, LevelError


#: the deepest memory level an array or a kernel may name.  The deepest hierarchy napkin-cat models has four
#: levels (GMEM, SMEM, registers, tensor-core fragments: ``hardware/hierarchies/hopper.toml``); a kernel at level
#: ``ℓ`` loads its inputs through every level above it, one box per level, so a level of ``10**30`` would build
#: boxes forever.
MAX_LEVEL = 16

def as_level(level, *, least: int = 0, what: str = "level") -> int:
    """``level`` as an int, refused (:class:`~napkin_cat.errors.LevelError`) unless it is a whole number
    ``least … MAX_LEVEL`` (0: global memory, 1: the first level below it, …).

    >>> as_level(2)
    2
    >>> as_level(1.5)
    Traceback (most recent call last):
    ...
    napkin_cat.errors.LevelError: level must be a whole number 0 … 16 (0: global memory, 1: the first level ...
    """
    if isinstance(level, bool) or not hasattr(level, "__index__") or not least <= int(level) <= MAX_LEVEL:
        raise LevelError(f"{what} must be a whole number {least} … {MAX_LEVEL} (0: global memory, 1: the first "
                         f"level below it; no hierarchy is deeper than {MAX_LEVEL}), got {level!r}")
    return int(level)


class Array(cat.Ob):
    """An array type: ordered ``axes``, a memory ``level`` and a ``dtype``.

    The item R is the array with no axes.  Equality and hash include axes
    (names and sizes), level and dtype.
    """

    def __init__(self, axes: tuple = (), level: int = 0, dtype: DType | str = FP32):
        self.axes = tuple(axes)
        for a in self.axes:
            if not isinstance(a, Axis):
                raise ArgumentError(f"Array axes must be Axis objects (nc.Axis('q'), nc.axes('q d')), got {a!r}")
        if len(self.axes) > MAX_AXES:
            raise AxisError(f"an array carries at most {MAX_AXES} axes (the most dimensions numpy holds before "
                            f"numpy 2), got {len(self.axes)}: {', '.join(a.name for a in self.axes[:8])}, …")
        names = [a.name for a in self.axes]
        if len(set(names)) != len(names):
            twice = sorted({n for n in names if names.count(n) > 1})
            raise AxisError(f"an array carries each axis once, but {twice[0]!r} appears twice in "
                            f"{'×'.join(names)}")
        self.level = as_level(level, what="an array's level")
        self.dtype = as_dtype(dtype)

    @property
    def name(self) -> str:
        """The label ``q×d`` (an axis whose size is not its own symbol shows it: ``q[4]``), formatted when
        first asked for: most arrays the search builds are never printed."""
        label = self.__dict__.get("_label")
        if label is None:
            label = self.__dict__["_label"] = "×".join(_axis_label(a) for a in self.axes) or "R"
        return label

    @name.setter
    def name(self, value):  # discopy's Ob assigns it; the label is always derived from the axes
        pass

    @property
    def names(self) -> tuple[str, ...]:
        names = self.__dict__.get("_names")
        if names is None:
            names = self.__dict__["_names"] = tuple(a.name for a in self.axes)
        return names

    @property
    def shape(self) -> tuple:
        return tuple(a.size for a in self.axes)

    @property
    def numel(self):
        n = 1
        for a in self.axes:
            n = n * a.size
        return n

    def axis(self, name: str) -> Axis:
        for a in self.axes:
            if a.name == name:
                return a
        raise KeyError(name)

    def replace(self, axes=None, level=None, dtype=None) -> "Array":
        return Array(self.axes if axes is None else axes,
                     self.level if level is None else level,
                     self.dtype if dtype is None else dtype)

    def _key(self):
        return (self.axes, self.level, self.dtype.name)

    def __eq__(self, other):
        return self is other or (isinstance(other, Array) and hash(self) == hash(other) and self._key() == other._key())

    def __hash__(self):
        """The hash of ``(axes, level, dtype)``, computed once: an array is immutable, and a wire's array is hashed
        at every layer of a diagram it crosses (a read-back of a 32-block transformer hashed 3 million, each
        hashing its axes and their sympy sizes again)."""
        found = self.__dict__.get("_hash")
        if found is None:
            found = self.__dict__["_hash"] = hash(self._key())
        return found

    def __getstate__(self):
        """The array's state without its hash (a string's hash differs from process to process)."""
        return {k: v for k, v in self.__dict__.items() if k != "_hash"}

    def __repr__(self):
        extra = ""
        if self.level:
            extra += f"@{self.level}"
        if self.dtype is not FP32 and self.dtype.name != "fp32":
            extra += f":{self.dtype.name}"
        return f"Array({self.name}{extra})"

    def __str__(self):
        return repr(self)[6:-1]


def _axis_label(a: Axis) -> str:
    return a.name if a.size == symbol(a.name) else f"{a.name}[{a.size}]"


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
            return f"array {i}: the first diagram outputs {x} but the second takes {y} ({_difference(x, y)})"
    return "types differ"


def _difference(x: Array, y: Array) -> str:
    """What tells two arrays apart: their axes (names, sizes, order), level or dtype."""
    why = []
    if x.axes != y.axes:
        why.append(f"axes {[str(t) for t in x.axes]} vs {[str(t) for t in y.axes]}")
    if x.level != y.level:
        why.append(f"level {x.level} vs {y.level}")
    if x.dtype != y.dtype:
        why.append(f"dtype {x.dtype.name} vs {y.dtype.name}")
    return "; ".join(why) or "they differ"


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
    def __reduce__(self):
        return type(self), (self.cod, len(self.dom))


class Discard(markov.Discard, Copy):
    pass


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
    return Diagram.id(dom)


def swap(left: Ty, right: Ty) -> Diagram:
    return Diagram.swap(left, right)


def copy(x: Ty, n: int = 2) -> Diagram:
    return Diagram.copy(x, n)


def discard(x: Ty) -> Diagram:
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
                               + "".join(f": array {j}: {x} vs {y} ({_difference(x, y)})"
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
           f"({_difference(wires[j], takes[j])})"
