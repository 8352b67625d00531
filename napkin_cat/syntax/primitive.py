"""Primitives: item-level boxes with numpy semantics, FLOPs and accumulators.

A primitive *kind* is declared once with four ingredients (the architecture's
"same four ingredients" a user also has):

* an item-level **signature check** (which core axes each port may carry);
* a numpy **implementation** on arrays whose *leading* dimensions are batch
  dimensions (the weaves) and whose trailing dimensions are the core axes;
* **FLOPs** per item, by pipeline class (``tensor``, ``special``, ``general``);
* optionally an **accumulator** (what makes it streamable along a core axis).

A box built from a kind stores a :class:`Spec` in its ``data``: the kind's
name, hashable parameters, and the weave list (innermost first).  The box's
``dom``/``cod`` arrays carry the full axes, so the core axes of a port are its
axes minus the weaved ones.

>>> from napkin_cat.syntax import ops  # registers the built-in kinds
>>> sorted(k for k in KINDS if k in ("contract", "softmax", "exp"))
['contract', 'exp', 'softmax']
>>> declare("double", lambda xs, core: [2 * xs[0]], flops=lambda core: {"general": 1})
Kind('double')
>>> del KINDS["double"]
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from napkin_cat.errors import MissingPartError, NoVJPError, ShapeError, SignatureError, UnknownPrimitiveError
from napkin_cat.syntax.printed import Fold, as_form

PIPELINES = ("tensor", "special", "general")


@dataclass(frozen=True)
class Weave:
    """One weave of a box: the axis ``name`` and the input ports that carry it."""

    name: str
    inputs: tuple[int, ...]


@dataclass(frozen=True)
class Spec:
    """What a primitive box is: ``kind`` name, ``params`` (hashable), weaves (innermost first)."""

    kind: str
    params: tuple = ()
    weaves: tuple[Weave, ...] = ()

    @property
    def weave_names(self) -> tuple[str, ...]:
        return tuple(w.name for w in self.weaves)

    def param(self, key, default=None):
        for k, v in self.params:
            if k == key:
                return v
        return default


@dataclass(frozen=True)
class Core:
    """The item-level view of a box handed to a kind: core axes per port and params."""

    inputs: tuple  # tuple[tuple[Axis, ...], ...]
    outputs: tuple
    params: dict = field(default_factory=dict)
    env: dict = field(default_factory=dict)  # symbol -> int, at evaluation time
    # context, not the item: the weave axes (Axis, outermost first: the batch dimensions), and each partitioned
    # axis's global position of its first index
    weaves: tuple = field(default=(), compare=False)
    offsets: dict = field(default_factory=dict, compare=False)
    #: axis → the position of each of its indices where they are not consecutive (a device's pieces under a
    #: non-contiguous order): ``offsets`` are then indices into it
    maps: dict = field(default_factory=dict, compare=False)

    def offset(self, axis: str) -> int:
        """Where index 0 of ``axis`` sits on the whole axis: the start of the tile (a Grid's group, a Stream's
        slice) the box runs in, 0 outside any partition of ``axis``."""
        return int(self.offsets.get(axis, 0))

    def positions(self, axis: str, n: int):
        """The positions on the whole axis of the ``n`` indices of ``axis`` the box runs on: ``offset … offset +
        n − 1``, or read through the axis's map (a device's pieces).

        >>> Core((), (), maps={"q": [0, 1, 9, 10]}, offsets={"q": 1}).positions("q", 3).tolist()
        [1, 9, 10]
        """
        start, m = self.offset(axis), self.maps.get(axis)
        if m is None:
            return np.arange(start, start + n, dtype=np.int64)
        return np.asarray(m[start:start + n], dtype=np.int64)

    def local(self, axis: str, t, n: int):
        """The index along ``axis`` (of the ``n`` the box runs on) of each position ``t``, ``-1`` where ``t`` is
        none of them: the inverse of :meth:`positions`."""
        t = np.asarray(t, dtype=np.int64)
        m = self.maps.get(axis)
        if m is None:
            return t - self.offset(axis)
        seg = self.positions(axis, n)
        i = np.clip(np.searchsorted(seg, t), 0, max(n - 1, 0))
        return np.where(seg[i] == t, i, -1)

    def value(self, expr):
        """A parameter's numeric value, with axis sizes bound (``beta = d**-0.5``); refused
        (:class:`~napkin_cat.errors.SignatureError`) unless it is a real number there (a document may carry a
        list, a string or ``sqrt(-d)`` where a number belongs).

        >>> import sympy
        >>> Core((), (), env={sympy.Symbol("d"): 16}).value(sympy.Symbol("d") ** -0.5)
        0.25
        >>> Core((), ()).value([1, 2])
        Traceback (most recent call last):
        ...
        napkin_cat.errors.SignatureError: a numeric parameter is a real number or an expression in sizes ...
        """
        import sympy
        legal = "a numeric parameter is a real number or an expression in sizes that is one (such as 1/sqrt(d))"
        if isinstance(expr, sympy.Basic):
            v = expr.subs(self.env)
            if v.free_symbols:
                missing = sorted(str(x) for x in v.free_symbols)
                raise ShapeError(f"the parameter {expr} is not known: {missing} are bound by no input; pass "
                                 f"sizes={{{', '.join(repr(m) + ': …' for m in missing)}}} to evaluate")
            if not (isinstance(v, sympy.Expr) and v.is_extended_real):
                raise SignatureError(f"{legal}, got {expr} = {v} at the sizes given")
            return float(v)
        if isinstance(expr, (bool, np.bool_)) or not isinstance(expr, (int, float, np.integer, np.floating)):
            raise SignatureError(f"{legal}, got {expr!r}")
        return expr


@dataclass(frozen=True)
class Accumulator:
    """How a kind streams along a core axis it reduces (a monoid on its output).

    ``identity(shape)`` is the empty fold, ``combine(a, b)`` merges two partial
    results.  The law (checked in ``proofs/``)::

        F(x₁ ++ x₂) == combine(F(x₁), F(x₂))      combine(identity, y) == y

    ``merge`` names the elementwise kind of two items that computes ``combine`` in a diagram (``add`` for
    ``sum``): the merge of two parts' states where a stream is split across blocks (``nc.stream(…, parts=P)``).
    """

    name: str
    identity: Callable
    combine: Callable
    forms: dict = field(default_factory=dict, compare=False)  # backend (BACKENDS) -> its Fold (printed combine)
    merge: str | None = field(default=None, compare=False)    # the elementwise kind computing combine

    def __repr__(self):
        return f"Accumulator({self.name!r})"

    def __post_init__(self):
        if self.merge is not None and not (isinstance(self.merge, str) and self.merge.isidentifier()):
            raise SignatureError(f"accumulator {self.name!r}: merge names the elementwise kind that computes its "
                                 f"combine (such as 'add'), got {self.merge!r}")
        for backend, fold in self.forms.items():
            if backend not in BACKENDS or not isinstance(fold, Fold):
                raise SignatureError(f"accumulator {self.name!r}: forms map a backend of {BACKENDS} to a Fold, got "
                                     f"{backend!r}: {fold!r}")

    def fold(self, backend: str):
        """Its printed form in ``backend`` (a :class:`~napkin_cat.syntax.printed.Fold`; CUDA's falls back on C's), or
        :class:`MissingPartError` naming the accumulator, the backend and how to give one."""
        if backend not in BACKENDS:
            raise MissingPartError(f"{backend!r} is not a backend of a printed form; the backends are {BACKENDS}")
        value = self.forms.get(backend)
        if value is None and backend == "cuda":
            value = self.forms.get("c")
        if value is None:
            raise MissingPartError(f"accumulator {self.name!r} has no {backend} fold: give it forms={{{backend!r}: "
                                   f"Fold(combine=…)}} to print a kind that folds with it in {backend}")
        return value


@dataclass(frozen=True)
class Addend:
    """An operand a kind adds to the rest of its result: ``f(x₀, …, xₙ) = rest(x_operands) + x_position``.

    ``rest`` is a kind's name applied to the operands at ``operands`` in order (``"id"`` when it is one of
    them unchanged).  A value that only feeds this position may be accumulated into ``f``'s output after
    ``rest`` is written there (:mod:`napkin_cat.algorithms.reuse`), so it is never stored."""

    position: int
    rest: str
    operands: tuple[int, ...]


#: the backends a kind may carry a printed form for (``Kind.forms``): C/OpenMP, CUDA C++ (the C form when it has
#: no form of its own), Triton
BACKENDS = ("c", "cuda", "triton")
#: a kind's optional parts → (what it is, the keyword of :func:`declare` that supplies it, what it enables)
PARTS = {
    "vjp": ("vector-Jacobian product", "vjp", "differentiate it (nc.grad)"),
    "interval": ("interval image", "interval", "bound it on a tile (a mask built with it skips tiles)"),
    "constant": ("constant rule", "constant", "fold it when its inputs are constant (tile skipping)"),
    "c": ("C form", "forms={'c': …}", "print it in C/OpenMP and CUDA"),
    "cuda": ("CUDA form", "forms={'cuda': …} (or a C form)", "print it in CUDA"),
    "triton": ("Triton form", "forms={'triton': …}", "print it for Triton"),
}
#: the error a missing part is refused with where it is not :class:`MissingPartError` itself (its subclass)
REFUSALS = {"vjp": NoVJPError}
#: ``Kind.part``'s default: refuse a missing part
REFUSE = object()


@dataclass(frozen=True, eq=False)
class Kind:
    """A declared primitive kind: the one record every layer reads (see module docstring and :func:`declare`).

    A part a layer needs and the kind lacks is refused by :meth:`part`, naming it:

    >>> k = Kind("twice", lambda xs, core: [2 * xs[0]])
    >>> k.part("vjp")
    Traceback (most recent call last):
    ...
    napkin_cat.errors.NoVJPError: kind 'twice' has no vector-Jacobian product: declare it with vjp=… to \
differentiate it (nc.grad)
    """

    name: str
    impl: Callable
    flops: Callable = None
    check: Callable = None
    accumulator: Accumulator | None = None
    labelled: Callable | None = None  # optional impl on full labelled arrays (einsum)
    label: str | None = None
    shape: str = "box"  # drawing pictogram: box, triangle, circle, transfer
    doc: str = ""
    addends: tuple = ()  # tuple[Addend, ...]: operands the kind adds to the rest of its result
    vjp: Callable | None = None  # its vector-Jacobian product (napkin_cat.syntax.vjp: the rule protocol)
    interval: Callable | None = None  # (ins, box, tile_of) -> Interval | Truth | None (napkin_cat.syntax.interval)
    constant: Callable | None = None  # (box, constants of the inputs: None unknown) -> its constant or None
    forms: dict = field(default_factory=dict)  # backend (BACKENDS) -> its printed form: a Template or Structured
    #: its output element e reads element e of a same-shaped input and nothing else of it (a map, a cast), or each
    #: row is read and written by one thread (the SoftMax family): a kernel may write the output over that input
    in_place: bool = False
    #: it keeps every axis's position and renames some (``rename``): written in place although the names differ
    renames: bool = False
    #: the text drawn in its box (``+``, ``Σ``): a string, or ``symbol(box)`` where it depends on the box (a cast's
    #: target format); None: the box's name
    symbol: str | Callable | None = None
    #: the parameters every box of it carries (``scale``'s ``c``): a box built without one is refused by name
    requires: tuple = ()
    #: an elementwise map's number of operands (``nc.elementwise`` builds a map of it, broadcasting through its
    #: signature); None: not a map ``nc.elementwise`` builds
    arity: int | None = None
    #: it changes only its operand's number format (a cast): the time model lists it among the conversions, run in
    #: the pipeline stage of the computation before it, and the online-softmax rule lets one sit between the
    #: scores and their contraction
    conversion: bool = False
    #: ``locates(box)``: the axis whose absolute index its values depend on (a position numbers it, a gather reads
    #: along it): a plan passes it where the enclosing tile starts; None: its values do not depend on where a tile is
    locates: Callable | None = None
    #: its meaning depends on the exact extent of the axes it cuts or glues (split, join): a plan cannot mask a
    #: ragged last tile of them
    sized: bool = False
    #: ``prepared(box)``: a faster implementation of this one box, built once and run on many tiles (a function of
    #: the operand list), or None where it has none for the box (a contraction of two operands with no shared batch
    #: axis: one BLAS call); the runners use it, ``nc.evaluate`` keeps ``impl``
    prepared: Callable | None = None
    #: its two operands may be swapped, exactly in floating point too (``a + b = b + a``): two boxes reading one pair
    #: of values in either order compute one value (the normal form's ``common_value``)
    commutative: bool = False
    #: how it runs across the devices of a device region (a :class:`~napkin_cat.syntax.collectives.Collective`: its
    #: numpy meaning on every device's values at once and the values each device sends and receives); None: it
    #: runs on one device's values (every kind but the collectives)
    collective: object = None
    #: the parameters that name an axis (a collective's ``axis``): an axis renamed is renamed there too, as in the
    #: weave names (:func:`~napkin_cat.syntax.relabel.rename_axis`)
    axis_params: tuple = ()

    def __repr__(self):
        return f"Kind({self.name!r})"

    def drawn(self, box) -> str:
        """The text drawn inside ``box`` (a box of this kind): its symbol, else the box's name.

        >>> import napkin_cat as nc
        >>> [kind_of(k).drawn(nc.elementwise(k, "n").boxes[0]) for k in ("add", "exp")]
        ['+', 'exp']
        """
        if self.symbol is None:
            return box.name
        return self.symbol if isinstance(self.symbol, str) else self.symbol(box)

    def missing(self, params) -> list:
        """The required parameters (:attr:`requires`) that ``params`` (names, or a mapping) does not give.

        >>> kind_of("scale").missing({}), kind_of("scale").missing({"c": 2})
        (['c'], [])
        """
        return [p for p in self.requires if p not in params]

    def part(self, name: str, *, default=REFUSE):
        """The part ``name`` (a key of :data:`PARTS`: ``vjp``, ``interval``, ``constant`` or a backend's form),
        or :class:`MissingPartError` naming the kind, the part and how to declare it (:class:`NoVJPError` for the
        VJP).  A CUDA form falls back on the C form (CUDA C++ prints C's expressions).  A layer for which the part
        is optional passes a ``default`` (what the kind lacks is then not an error: tile skipping reads an
        interval image or a constant rule with ``default=None``, and a kind without one decides nothing).

        >>> Kind("twice", lambda xs, core: [2 * xs[0]]).part("interval", default=None) is None
        True
        """
        if name not in PARTS:
            raise MissingPartError(f"{name!r} is not a part of a primitive kind; the parts are {sorted(PARTS)}")
        if name in BACKENDS:
            value = self.forms.get(name)
            if value is None and name == "cuda":
                value = self.forms.get("c")
        else:
            value = getattr(self, name)
        if value is None and default is not REFUSE:
            return default
        if value is None:
            what, keyword, purpose = PARTS[name]
            refusal = REFUSALS.get(name, MissingPartError)
            raise refusal(f"kind {self.name!r} has no {what}: declare it with {keyword}=… to {purpose}"
                          if "=" not in keyword else
                          f"kind {self.name!r} has no {what}: declare it with {keyword} to {purpose}")
        return value

    def item_flops(self, core: Core) -> dict:
        if self.flops is None:
            return {}
        out = self.flops(core)
        for k in out:
            if k not in PIPELINES:
                raise SignatureError(f"kind {self.name!r} reports FLOPs for unknown pipeline {k!r}; "
                                     f"legal pipelines are {PIPELINES}")
        return out


KINDS: dict[str, Kind] = {}


def declare(name: str, impl: Callable, *, flops: Callable = None, check: Callable = None,
            accumulator: Accumulator | None = None, labelled: Callable | None = None,
            label: str | None = None, shape: str = "box", doc: str = "", replace: bool = False,
            addends: tuple = (), vjp: Callable | None = None, interval: Callable | None = None,
            constant: Callable | None = None, forms: dict | None = None, in_place: bool = False,
            renames: bool = False, symbol: str | Callable | None = None, requires: tuple = (),
            arity: int | None = None, conversion: bool = False, locates: Callable | None = None,
            sized: bool = False, prepared: Callable | None = None, commutative: bool = False,
            collective: object = None, axis_params: tuple = ()) -> Kind:
    """Declare (register) a primitive kind; returns it.  Every part is a keyword argument:

    ``impl(xs, core)`` takes numpy arrays with leading batch dims and returns a
    list of outputs; ``flops(core)`` returns ``{pipeline: per-item count}``;
    ``check(core)`` raises :class:`SignatureError` for an illegal core signature; ``addends`` the
    :class:`Addend` positions (``f(…, t) = rest(…) + t``: ``fma`` adds its third operand to the product of
    its first two); ``vjp(ctx, box, ins, outs, ybar)`` its vector-Jacobian product for ``nc.grad`` (a rule as
    in :mod:`napkin_cat.syntax.vjp`); ``interval(ins, box, tile_of)`` its image of the inputs' intervals on a
    tile (:mod:`napkin_cat.syntax.interval`: a mask built with it lets a stream skip tiles);
    ``constant(box, consts)`` the one value of its output when its inputs are the constants ``consts`` (None
    where one is not constant; None when the output is not constant either: what makes a masked trip neutral);
    ``forms`` its printed form per backend (``{"c": …, "cuda": …, "triton": …}``; CUDA prints the C form unless
    given its own): a :class:`~napkin_cat.syntax.printed.Template` (or its text, such as
    ``"log1pf(expf({0}))"``) for an elementwise map, a :class:`~napkin_cat.syntax.printed.Structured` form naming
    the structure a kind that is not a map is printed by (:mod:`napkin_cat.syntax.printed`).  A part left out is
    refused by name by the layer that needs it (:meth:`Kind.part`).

    ``in_place=True`` lets a kernel write its output over a same-shaped input it reads element by element (a
    map; ``renames=True`` where it only renames axes); ``symbol`` the text drawn in its box (a string, or a
    function of the box); ``requires`` the names of the parameters every box of it must be given
    (``requires=("alpha",)``: ``nc.apply(name, …, params={"alpha": …})``; a box without one is refused by name);
    ``arity`` an elementwise map's number of operands (``nc.elementwise(name, "q x")`` then builds it);
    ``conversion=True`` for a kind that only changes its operand's number format (a cast: the time model counts it
    among the conversions); ``locates(box)`` the axis whose absolute index its values depend on (a position, a
    gather: a plan gives it the start of the tile it runs in); ``sized=True`` where its meaning depends on the
    exact extent of the axes it cuts or glues (split, join: a plan cannot mask a ragged last tile);
    ``prepared(box)`` a faster implementation of one box (a function of the operand list) or None, built once by the
    plan's runner and run on every tile; ``commutative=True`` where its two operands may be swapped exactly;
    ``collective`` (:class:`~napkin_cat.syntax.collectives.Collective`) for a kind that runs across the devices of a
    device region (all-gather, all-reduce, …); ``axis_params`` names the parameters whose values are axis names
    (renamed with the axis).
    """
    if not isinstance(name, str) or not name.isidentifier():
        raise SignatureError(f"a primitive kind is named by an identifier (such as 'gelu2'), got {name!r}")
    for role, fn in (("impl", impl), ("flops", flops), ("check", check), ("labelled", labelled), ("vjp", vjp),
                     ("interval", interval), ("constant", constant), ("locates", locates),
                     ("prepared", prepared)):
        if (fn is not None or role == "impl") and not callable(fn):
            raise SignatureError(f"kind {name!r}: {role} must be a function, got {type(fn).__name__} {fn!r}")
    forms = dict(forms or {})
    for backend in forms:
        if backend not in BACKENDS:
            raise SignatureError(f"kind {name!r}: forms are given per backend {BACKENDS}, got {backend!r}")
        forms[backend] = as_form(forms[backend])
    for a in addends:
        if not isinstance(a, Addend) or a.position in a.operands:
            raise SignatureError(f"kind {name!r}: addends must be Addend(position, rest, operands) with the "
                                 f"position not among the rest's operands, got {a!r}")
    for flag, value in (("in_place", in_place), ("renames", renames), ("conversion", conversion),
                        ("sized", sized), ("commutative", commutative)):
        if not isinstance(value, bool):
            raise SignatureError(f"kind {name!r}: {flag} is True or False, got {value!r}")
    if renames and not in_place:
        raise SignatureError(f"kind {name!r}: a kind that renames axes is written in place: declare it with "
                             f"in_place=True, renames=True")
    if symbol is not None and not (isinstance(symbol, str) or callable(symbol)):
        raise SignatureError(f"kind {name!r}: symbol is the text drawn in its box (a string, or a function of the "
                             f"box), got {type(symbol).__name__} {symbol!r}")
    if not isinstance(axis_params, (tuple, list)) or not all(isinstance(p, str) and p.isidentifier()
                                                              for p in axis_params):
        raise SignatureError(f"kind {name!r}: axis_params names the parameters whose values are axis names, a tuple "
                             f"of identifiers such as ('axis',), got {axis_params!r}")
    if not isinstance(requires, (tuple, list)) or not all(isinstance(p, str) and p.isidentifier() for p in requires):
        raise SignatureError(f"kind {name!r}: requires names its required parameters, a tuple of identifiers "
                             f"such as ('alpha',), got {requires!r}")
    if arity is not None and (isinstance(arity, bool) or not isinstance(arity, int) or arity < 1):
        raise SignatureError(f"kind {name!r}: arity is an elementwise map's number of operands, a positive int, "
                             f"got {arity!r}")
    if name in KINDS and not replace:
        raise SignatureError(f"a primitive kind called {name!r} is already declared; "
                             "pass replace=True to redefine it")
    kind = Kind(name, impl, flops, check, accumulator, labelled, label or name, shape, doc, tuple(addends), vjp,
                interval, constant, forms, in_place=in_place, renames=renames, symbol=symbol,
                requires=tuple(requires), arity=arity, conversion=conversion,
                locates=locates, sized=sized, prepared=prepared, commutative=commutative, collective=collective,
                axis_params=tuple(axis_params))
    KINDS[name] = kind
    return kind


def kind_of(name: str) -> Kind:
    """The declared :class:`Kind` called ``name``, else an UnknownPrimitiveError listing the declared ones."""
    try:
        return KINDS[name]
    except KeyError:
        raise UnknownPrimitiveError(
            f"unknown primitive kind {name!r}; declared kinds are {sorted(KINDS)}") from None


def is_view(box) -> bool:
    """Whether ``box`` is a primitive whose kind only renames axes (its record's ``renames``): a *view*, its output
    the values of its input under new axis names, nothing computed and nothing moved.  A view in global memory needs
    no kernel: the search leaves it between the kernels that make and read its value
    (:class:`~napkin_cat.search.blocks.OpGraph`), each partitioned along its own name for the axis.

    >>> import napkin_cat as nc
    >>> is_view(nc.renaming("h n -> h m").boxes[0]), is_view(nc.elementwise("exp", "n").boxes[0])
    (True, False)
    """
    spec = getattr(box, "data", None)
    return getattr(spec, "kind", None) in KINDS and KINDS[spec.kind].renames


def converts(name: str) -> bool:
    """Whether ``name`` is a declared kind that only changes its operand's number format (its record's
    ``conversion``).  A name no kind declares (a label in a breakdown made by hand) does not convert.

    >>> converts("cast"), converts("exp"), converts("mm")
    (True, False, False)
    """
    return name in KINDS and KINDS[name].conversion


def accumulator_named(name: str) -> Accumulator:
    """The accumulator called ``name`` among the declared kinds' (a plan names the monoid a statement folds with)."""
    for kind in KINDS.values():
        if kind.accumulator is not None and kind.accumulator.name == name:
            return kind.accumulator
    raise UnknownPrimitiveError(f"no declared kind folds with an accumulator called {name!r}; the accumulators are "
                                f"{sorted({k.accumulator.name for k in KINDS.values() if k.accumulator})}")
