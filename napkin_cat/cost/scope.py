"""The context of the cost functor's walk: what encloses the diagram being costed (paper §2.2, §5).

A box inside partitions is costed where it sits: seen through the relabellings of the partition records around it
(a Grid's axis read as its tile ``g``, a Stream's as its slice ``s``), in one arithmetic (sympy expressions or
polynomials in Python numbers, :mod:`napkin_cat.cost.polynomial`), inside tiles a masked stream counts its running
trips on.  :class:`Sink` holds that context and collects the costs of what runs in it; :func:`trips` is how often a
partition's inside runs::

    trips(g, a) = a / g                  (a Grid over a of size a, in tiles of g; a Stream's b / s alike)

The views a sink hands to what runs inside are kept by value (:data:`VIEWS`): equal relabellings are one object,
so an array seen through them in another candidate's kernel costs one lookup, not one functor per partition.

>>> import napkin_cat as nc
>>> g = nc.group(nc.kernel(nc.library.matmul()), "a", "g_a", relabelled=False).boxes[0]
>>> inner = Sink().inside(g)
>>> inner.view.array(g.arg.dom.inside[0]), trips(nc.symbol("g_a"), nc.symbol("a"))
(Array(a[g_a]×b), a/g_a)
>>> inner.view is Sink().inside(g).view      # equal relabellings: one object
True
"""
from __future__ import annotations

import sympy

from napkin_cat.algorithms.bubbles import Partition
from napkin_cat.cost.by_value import ByValue
from napkin_cat.cost.polynomial import SYMPY
from napkin_cat.syntax.relabel import PLAIN, Relabelling

__all__ = ["Sink", "trips", "interned", "inside_view", "VIEWS", "INSIDE", "TRIPS"]

#: relabellings by value (their ``key``): each holds the images of the arrays seen through it, so a bound that keeps
#: a long process's memory flat
VIEW_LIMIT = 2 ** 12
VIEWS = ByValue(limit=VIEW_LIMIT)
#: a partition record's inside view by ``(view, axis, size, full)`` (what :meth:`Partition.inside_view` reads)
INSIDE = ByValue(limit=VIEW_LIMIT)
#: ``trips(size, full)`` per arithmetic, by value (a pure function of its key)
TRIPS = ByValue()


def interned(view: Relabelling) -> Relabelling:
    """The one relabelling kept for ``view``'s key (``view`` itself the first time): equal keys are equal
    relabellings (:class:`~napkin_cat.syntax.relabel.Relabelling`), so the kept one's remembered images serve.

    >>> import napkin_cat as nc
    >>> a = PLAIN.then("q", nc.symbol("g_q")); b = PLAIN.then("q", nc.symbol("g_q"))
    >>> interned(a) is interned(b), interned(PLAIN) is PLAIN
    (True, True)
    """
    if not view.steps:
        return view
    found = VIEWS.get(view.key)
    return found if found is not None else VIEWS.put(view.key, view)


def inside_view(region, view: Relabelling) -> Relabelling:
    """``region.inside_view(view)``, :func:`interned`.  A partition record's view is ``view`` then its axis read as
    its size (:meth:`~napkin_cat.algorithms.bubbles.Partition.inside_view`): a function of ``view``, the axis, and
    the ``(size, full)`` it is seen with, so it is kept by those (:data:`INSIDE`) and built once for all the
    candidates that partition an axis alike, not once per fresh region.

    >>> import napkin_cat as nc
    >>> g = nc.group(nc.kernel(nc.library.matmul()), "a", "g_a", relabelled=False).boxes[0]
    >>> g2 = nc.group(nc.kernel(nc.library.matmul()), "a", "g_a", relabelled=False).boxes[0]
    >>> inside_view(g, PLAIN) is inside_view(g2, PLAIN), inside_view(g, PLAIN).key == g.inside_view(PLAIN).key
    (True, True)
    """
    if type(region).inside_view is not Partition.inside_view or region.relabelled:
        return interned(region.inside_view(view))
    size, full = region.seen(view)
    full = full if region.carrier == "cod" else None
    key = (view.key, region.axis, type(size), size, type(full), full)
    found = INSIDE.get(key)
    return found if found is not None else INSIDE.put(key, interned(region.inside_view(view)))


class Sink(list):
    """The context of the cost algebra (:class:`~napkin_cat.cost.iocost.Symbolic`): the costs appended; ``tiles``,
    the enclosing partitions ``[(axis, start, extent, index, trips)]`` (outermost first) a masked stream counts its
    trips on (written out on first use: only a masked stream reads them); ``view``, the relabelling the arrays are
    seen through (the composed relabellings of the partition records around, if any:
    :attr:`~napkin_cat.algorithms.bubbles.Partition.relabelled`; kept by value, :func:`interned`); ``arithmetic``,
    what the values are computed in (:mod:`napkin_cat.cost.polynomial`: sympy expressions, or polynomials in Python
    numbers)."""

    def __init__(self, tiles=(), view: Relabelling = PLAIN, arithmetic=SYMPY, ops: bool = True):
        super().__init__()
        self._tiles = tiles if isinstance(tiles, _Tiles) else _Tiles(value=tuple(tiles))
        self.view, self.arithmetic, self.ops = view, arithmetic, ops

    @property
    def tiles(self) -> tuple:
        return self._tiles.value()

    def within(self, region) -> "Sink":
        """A sink for what runs once inside ``region`` (a stream's head and tail), its arrays seen as inside."""
        return Sink(self._tiles, inside_view(region, self.view), self.arithmetic, self.ops)

    def again(self, view: Relabelling | None = None, tiles=None) -> "Sink":
        """An empty sink with this one's tiles, view and arithmetic (or those given), and its kernel's split."""
        out = Sink(self._tiles if tiles is None else tiles, self.view if view is None else view, self.arithmetic,
                   self.ops)
        out.split_rows = getattr(self, "split_rows", None)
        return out

    def inside(self, region) -> "Sink":
        """A sink for one tile of the partition ``region`` (its start ``base + i·tile``, its extent the tile)."""
        return Sink(_Tiles(self._tiles, (region.axis, *region.seen(self.view))),
                    inside_view(region, self.view), self.arithmetic, self.ops)


class _Tiles:
    """The enclosing partitions of a :class:`Sink`: those around it (``outer``) and one more ``(axis, size, full)``,
    written out as :attr:`Sink.tiles` says on first use."""

    __slots__ = ("outer", "partition", "_value")

    def __init__(self, outer: "_Tiles | None" = None, partition: tuple | None = None, value: tuple | None = None):
        self.outer, self.partition, self._value = outer, partition, value

    def value(self) -> tuple:
        if self._value is None:
            tiles = self.outer.value()
            axis, size, full = self.partition
            taken = {str(t[3]) for t in tiles}
            name = f"i_{axis}"
            while name in taken:
                name += "'"
            index = sympy.Symbol(name, integer=True, nonnegative=True)
            base = next((t[1] for t in reversed(tiles) if t[0] == axis), sympy.Integer(0))
            tile = sympy.sympify(size)
            self._value = tiles + ((axis, base + index * tile, tile, index, trips(size, full)),)
        return self._value


def trips(size, full, arithmetic=SYMPY):
    """``a/g`` (or ``b/s``): how many times a partition's inside runs
    (:attr:`~napkin_cat.algorithms.bubbles.Partition.trips`), in ``arithmetic``; kept by value (:data:`TRIPS`).

    >>> from napkin_cat.cost.polynomial import POLYNOMIAL
    >>> trips(sympy.Symbol("s_b"), sympy.Symbol("b"), POLYNOMIAL), trips(4, 12)
    (Poly(b/s_b), 3)
    """
    key = (size, full, arithmetic.name)
    found = TRIPS.get(key)
    if found is None:
        found = TRIPS.put(key, arithmetic.of(full) / arithmetic.of(size))
    return found
