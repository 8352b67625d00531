"""Concrete sizes: one value, made in one place, read by every functor and entry point.

A :class:`Sizes` maps axis and tile names to positive ints.  A key is a name or the symbol
:func:`~napkin_cat.syntax.axis.symbol` makes of it (what a symbolic cost or optimum holds); either
reads the value back, and iteration gives names.  ``env`` is the substitution the functors use
(symbol → int).  Every entry point that takes sizes (``nc.plan``, ``nc.cost(d, sizes=)``,
``nc.optimal``, ``nc.derive``, ``nc.evaluate``, ``nc.equivalent``, ``nc.hardware.predict`` and
the CLI's ``--sizes``) applies the same rules, each an :class:`~napkin_cat.errors.AxisError`:

* a value that is not a positive int of at most :data:`~napkin_cat.syntax.axis.LARGEST_SIZE` is refused, naming
  the axis (``Sizes(...)``);
* a name the diagram does not have is refused, naming it and listing the legal ones (:meth:`Sizes.of`);
* where every size is needed, a missing one is named (:meth:`Sizes.require`).

Internal callers that pass one algorithm's sizes to each of its parts take :meth:`Sizes.restrict`.

>>> import napkin_cat as nc
>>> s = Sizes({"q": 64, nc.symbol("d"): 8})
>>> s["q"], s[nc.symbol("d")], s, sorted(s.env.items(), key=str)
(64, 8, Sizes({'q': 64, 'd': 8}), [(d, 8), (q, 64)])
>>> Sizes({"q": "64"})
Traceback (most recent call last):
...
napkin_cat.errors.AxisError: the size of 'q' must be a positive int, got '64' (a str)
>>> Sizes(q=4, dd=3).of(nc.einsum("q d -> q"))
Traceback (most recent call last):
...
napkin_cat.errors.AxisError: size given for 'dd', which the diagram does not have; its axes and tiles are ['d', 'q']
"""
from __future__ import annotations

import functools
import numbers
from collections.abc import Mapping

import sympy

from napkin_cat.errors import AxisError
from napkin_cat.syntax.adapter import Bubble, Diagram
from napkin_cat.syntax.flat import layers
from napkin_cat.syntax.axis import LARGEST_SIZE, Axis, check_name, symbol


def _name(key) -> str:
    if isinstance(key, str):
        return check_name(key)
    if isinstance(key, sympy.Symbol):
        return check_name(key.name)
    if isinstance(key, Axis):
        return key.name
    raise AxisError(f"a size is keyed by an axis or tile name (a str) or its symbol, got {key!r} "
                    f"(a {type(key).__name__})")


def _value(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, (numbers.Integral, sympy.Integer)) or int(value) < 1:
        kind = f" (a {type(value).__name__})" if not isinstance(value, (numbers.Integral, sympy.Integer)) else ""
        raise AxisError(f"the size of {name!r} must be a positive int, got {value!r}{kind}")
    if int(value) > LARGEST_SIZE:
        raise AxisError(f"the size of {name!r} must be at most 2^64 (a 64-bit address space), got {value!r}")
    return int(value)


class Sizes(Mapping):
    """Axis and tile names → positive ints (see the module docstring); immutable, hashable, and equal to any
    mapping with the same names (or their symbols) and values.

    >>> Sizes(a=4) | {"g_a": 2}
    Sizes({'a': 4, 'g_a': 2})
    >>> Sizes(a=4) == {symbol("a"): 4}, Sizes(a=4) == {"a": 4}
    (True, True)
    """

    __slots__ = ("_values", "_env", "_hash")

    def __init__(self, sizes=None, /, **named):
        self._hash = None      # (made on first use: the search keys its tables by sizes)
        if isinstance(sizes, Sizes) and not named:
            self._values, self._env, self._hash = sizes._values, sizes._env, sizes._hash
            return
        values = {}
        items = list(sizes.items() if isinstance(sizes, Mapping) else (sizes or ())) + list(named.items())
        for key, value in items:
            name = _name(key)
            v = _value(name, value)
            if values.get(name, v) != v:
                raise AxisError(f"the size of {name!r} is given twice, as {values[name]} and {v}; give it once")
            values[name] = v
        self._values, self._env = values, None

    # ------------------------------------------------------------------ a mapping
    def __getitem__(self, key) -> int:
        return self._values[str(key) if isinstance(key, sympy.Symbol) else key]

    def __contains__(self, key) -> bool:
        return (str(key) if isinstance(key, sympy.Symbol) else key) in self._values

    def __iter__(self):
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __eq__(self, other):
        if isinstance(other, Sizes):
            return self._values == other._values
        if not isinstance(other, Mapping):
            return NotImplemented
        try:
            return self._values == Sizes(other)._values
        except AxisError:
            return False

    def __hash__(self):
        if self._hash is None:
            self._hash = hash(frozenset(self._values.items()))
        return self._hash

    def __or__(self, other) -> "Sizes":
        return Sizes({**self._values, **Sizes(other)._values})

    def __ror__(self, other) -> "Sizes":
        return Sizes({**Sizes(other)._values, **self._values})

    def __repr__(self):
        return f"Sizes({self._values!r})"

    @property
    def env(self) -> dict:
        """The substitution the functors read: ``{symbol(name): value}``."""
        if self._env is None:
            self._env = {symbol(k): v for k, v in self._values.items()}
        return dict(self._env)

    def subs(self, expr):
        """``expr`` at these sizes (an int where every symbol it reads is given)."""
        v = sympy.sympify(sympy.sympify(expr).xreplace(self.env))   # a bare symbol becomes a Python int
        return int(v) if v.is_Integer else v

    # ------------------------------------------------------------------ against a diagram
    def of(self, diagram: Diagram) -> "Sizes":
        """These sizes, checked to be ``diagram``'s (:func:`names_of`): a name it does not have is refused,
        listing the legal ones."""
        return self.within(names_of(diagram))

    def within(self, legal, what: str = "the diagram") -> "Sizes":
        """These sizes, each name one of ``legal`` (else an AxisError naming it and listing them)."""
        legal = set(legal)
        for name in self._values:
            if name not in legal:
                raise AxisError(f"size given for {name!r}, which {what} does not have; its axes and tiles are "
                                f"{sorted(legal)}")
        return self

    def restrict(self, diagram: Diagram) -> "Sizes":
        """The sizes ``diagram`` has, the others left out: for a caller that gives one algorithm's sizes to each
        of its parts (a kernel, one side of a rule)."""
        legal = names_of(diagram)
        return Sizes({k: v for k, v in self._values.items() if k in legal})

    def missing(self, diagram: Diagram) -> list:
        """The names of ``diagram``'s axes and tiles (:func:`symbols_of`) that have no size here, sorted."""
        return sorted({str(s) for s in symbols_of(diagram)} - set(self._values))

    def require(self, diagram: Diagram, what: str) -> "Sizes":
        """These sizes, checked to be ``diagram``'s and to give every axis and tile size ``what`` needs."""
        self.of(diagram)
        missing = self.missing(diagram)
        if missing:
            raise AxisError(f"{what} needs every axis and tile size; missing {missing} "
                            f"(pass sizes={{{', '.join(repr(m) + ': …' for m in missing)}}})")
        return self


def as_sizes(sizes) -> Sizes:
    """``sizes`` (a mapping, a :class:`Sizes`, or None for none) as a :class:`Sizes`, checked."""
    if isinstance(sizes, Sizes):
        return sizes
    if sizes is not None and not isinstance(sizes, Mapping):
        raise AxisError(f"sizes are a mapping of axis and tile names to positive ints (e.g. {{'q': 64}}), got "
                        f"{type(sizes).__name__}")
    return Sizes(sizes)


def _free(value) -> set:
    return set(value.free_symbols) if isinstance(value, sympy.Basic) else set()


def symbols_of(diagram: Diagram, *, params: bool = False) -> frozenset:
    """Every size symbol a functor of ``diagram`` reads: its arrays' sizes (inside its regions and their
    reducers too) and its regions' tile sizes; ``params``: also those of its boxes' parameters.

    >>> import napkin_cat as nc
    >>> sorted(map(str, symbols_of(nc.stream(nc.library.matmul(), "b", "s_b"))))
    ['a', 'b', 'c', 's_b']
    """
    memo = getattr(diagram, "__dict__", None)       # a diagram is immutable: remembered on it, as a box's are
    key = "_diagram_symbols_params" if params else "_diagram_symbols"
    got = memo.get(key) if memo is not None else None
    if got is None:
        found: set = set()
        _collect(diagram, found, params)
        got = frozenset(found)
        if memo is not None:
            memo[key] = got
    return got


def _collect(diagram: Diagram, found: set, params: bool):
    for arr in (*diagram.dom.inside, *diagram.cod.inside):
        found |= _array_symbols(arr)
    for _, box in layers(diagram):
        found |= _box_symbols(box, params)


def _array_symbols(arr) -> frozenset:
    """The symbols of an array's axis sizes (an array is immutable: remembered on it, as its hash is)."""
    memo = arr.__dict__
    got = memo.get("_symbols")
    if got is None:
        got = memo["_symbols"] = frozenset(s for a in arr.axes for s in _free(a.size))
    return got


def _box_symbols(box, params: bool) -> frozenset:
    """What :func:`symbols_of` reads of one layer's box (its arrays; a region's tiles and insides; with ``params``
    its parameters), remembered on the box: a box is immutable, and ``nc.equivalent`` asks it of every box of both
    diagrams several times per trial."""
    memo = getattr(box, "__dict__", None)
    key = "_symbols_params" if params else "_symbols"
    got = memo.get(key) if memo is not None else None
    if got is None:
        found: set = set()
        for arr in (*box.dom.inside, *box.cod.inside):
            found |= _array_symbols(arr)
        if isinstance(box, Bubble):
            tiles, insides = box.size_parts()
            for t in tiles:
                found |= _free(t)
            for d in insides:
                _collect(d, found, params)
        elif params and getattr(box, "data", None) is not None:
            for _, v in box.data.params:
                found |= _free(v)
        got = frozenset(found)
        if memo is not None:
            memo[key] = got
    return got


def names_of(diagram: Diagram) -> set:
    """The names a size may be given for: :func:`symbols_of`, box parameters included (a symbol that only a
    parameter reads is bound by the sizes too)."""
    return {str(s) for s in symbols_of(diagram, params=True)}


#: Where :func:`vanishes` evaluates an expression first: a prime, so that no size symbol's assumptions are met by
#: accident of its form (it is read only where every assumption of every symbol holds of it).
WITNESS = 10007


@functools.lru_cache(maxsize=4096)
def vanishes(expr) -> bool:
    """Whether ``expr`` (a number or an expression in the sizes) is zero whatever the sizes: ``sympy.simplify``'s
    answer (``simplify(expr) == 0``), where a value at one point does not settle it first.

    **Law.** An expression that is non-zero at one point of its symbols' domain is not identically zero there, so
    ``simplify`` (which rewrites to an equal expression) cannot make it 0.  The point puts :data:`WITNESS` for every
    symbol, read only where that value meets every assumption of every symbol (a size: a positive integer), and
    evaluated to 30 digits; a value that is not a finite number, or within 10⁻²⁰ of 0, is left to ``simplify``.
    So ``β = 1/√d`` against 1 is settled without a simplification (100 ms cold, ``sympy.physics`` imported with
    it), and ``√2/16 − 1/√128`` still by ``simplify``.

    >>> import napkin_cat as nc
    >>> d = nc.symbol("d")
    >>> vanishes(1 / sympy.sqrt(d) - 1), vanishes(sympy.sqrt(2) / 16 - 1 / sympy.sqrt(128)), vanishes(0)
    (False, True, True)
    >>> vanishes(sympy.sin(sympy.pi * d))     # zero at every integer d: no value of d is a witness of it
    True
    """
    expr = sympy.sympify(expr)
    if expr == 0:
        return True
    point = {s: sympy.Integer(WITNESS) for s in expr.free_symbols}
    if all(getattr(v, f"is_{fact}") == held for s, v in point.items() for fact, held in s.assumptions0.items()):
        value = expr.xreplace(point).evalf(30)
        if value.is_number and value.is_finite and abs(value) > sympy.Float("1e-20", 30):
            return False
    return sympy.simplify(expr) == 0
