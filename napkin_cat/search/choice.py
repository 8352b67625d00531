"""A block's kernel as the search weighs it: its partitions and cost curves (:class:`Choice`), and its compulsory
transfers read before the kernel is built (:class:`Block`).

A Choice is a function of the kernel's diagram, the level and the density alone (the search's kernel cache,
:mod:`.context`, shares one between equal kernels); a Block is a block of a graph whose bound the search reads off the
graph (:meth:`~napkin_cat.search.blocks.OpGraph.moved`) and whose Choice it asks for only where it costs the block:

    Block(search, graph, b).compulsory_at(sizes) == search.choice(graph, b).compulsory_at(sizes)

>>> import napkin_cat as nc
>>> ch = Choice(nc.library.attention(), 1)
>>> [v.describe() for v, _ in ch.options]
['group q · stream x', 'sweep q']
"""
from __future__ import annotations

import math
from functools import cached_property

import sympy

from napkin_cat.cost.exact_arithmetic import value
from napkin_cat.cost.iocost import numel
from napkin_cat.errors import NapkinError
from napkin_cat.search.bounds import moved_whole
from napkin_cat.search.curves import Curve
from napkin_cat.search.variants import split_variants, variants


class Choice:
    """A block's partitions and cost curves (built on first use), and its compulsory transfers: the arrays every
    partition of it moves whole, read or written once (:func:`~napkin_cat.search.bounds.moved_whole` at the
    search's ``density``: its inputs and outputs, or only its outputs where a mask may skip trips).  So
    :attr:`compulsory` is at most the H of every partition of the block, at every memory: the search's prune
    (:func:`~napkin_cat.search.paths.shortest_splits`, :func:`~napkin_cat.search.growth.best_join`) may skip on it.

    A value of its kernel and level: what it builds on first use is built whole and then kept (a thread that
    finds a part either finds it complete or builds its own), so a Choice may be shared between threads."""

    def __init__(self, function, level, density=1):
        self.function, self.level, self.density = function, level, density
        self._certain = moved_whole(function, density)
        self._options = None
        self._split = None
        self._at = {}

    @cached_property
    def compulsory(self):
        """The compulsory transfers, symbolic: the numbers of values of the arrays read and written once."""
        return sum((numel(a) for a in self._certain), sympy.Integer(0))

    def compulsory_at(self, sizes):
        """The compulsory transfers at ``sizes`` (a :class:`~napkin_cat.syntax.sizes.Sizes`), exact; kept per
        sizes (the search asks once per edge into the block).  Summed array by array in exact arithmetic, each
        the product of its axes' sizes (:attr:`compulsory` at ``sizes``, without building it; a size missing:
        :attr:`compulsory`'s error, naming every one).

        >>> import napkin_cat as nc
        >>> ch = Choice(nc.library.attention(), 1)
        >>> sizes = nc.Sizes({"q": 64, "x": 32, "d": 16})
        >>> ch.compulsory_at(sizes), value(ch.compulsory, sizes.env)
        (3072, 3072)
        """
        found = self._at.get(sizes)
        if found is None:
            found = self._at[sizes] = counted(self._certain, sizes)
        return found

    @property
    def split_options(self) -> list:
        """The partitions with a split stream (built on first use): costed only under a requirement."""
        if self._split is None:
            self._split = [(v, Curve(v, self.level, role="split", density=self.density))
                           for v in split_variants(self.function, self.level)]
        return self._split

    @property
    def options(self) -> list:
        """The partitions (:func:`~napkin_cat.search.variants.variants`) and their curves, each curve with the
        role of the rule that builds it (built on first use)."""
        if self._options is None:
            self._options = [(v, Curve(v, self.level, role="nest" if v.inner else "sweep" if v.sliced
                                       else "stream", sliced=v.sliced, density=self.density))
                             for v in variants(self.function, self.level)]
        return self._options


def counted(arrays, sizes):
    """The values of ``arrays`` at ``sizes`` (a :class:`~napkin_cat.syntax.sizes.Sizes`), exact: array by array, each
    the product of its axes' sizes (a size missing: the error of the symbolic count at ``sizes``, naming every one).

    >>> import napkin_cat as nc
    >>> counted(nc.library.attention().dom.inside, nc.Sizes({"q": 64, "x": 32, "d": 16}))
    2048
    """
    env = sizes.env
    try:
        return sum(math.prod(value(ax.size, env) for ax in a.axes) for a in arrays)
    except NapkinError:
        return value(sum((numel(a) for a in arrays), sympy.Integer(0)), env)


class Block:
    """A block of a graph as the search bounds it before costing it: its compulsory transfers read off the graph
    (:meth:`~napkin_cat.search.blocks.OpGraph.moved`: the kernel's inputs and outputs, without building it), and
    its :class:`Choice` (``search.choice(graph, block)``) only once something else is asked of it.  So a block whose
    every edge the bound prunes is never built as a kernel, nor are its partitions drawn.

    The law: ``Block(search, graph, b).compulsory_at(sizes) == search.choice(graph, b).compulsory_at(sizes)``; where
    the graph cannot tell (a box reads or makes a mask, or ``graph`` is no :class:`~napkin_cat.search.blocks.OpGraph`)
    the Choice answers.  Every other attribute is the Choice's.

    >>> import napkin_cat as nc
    >>> from napkin_cat.search.blocks import OpGraph
    >>> from napkin_cat.search.context import Search, KernelCache
    >>> g, search = OpGraph(nc.engine.to_netlist(nc.library.attention())), Search(1, KernelCache())
    >>> sizes = nc.Sizes({"q": 64, "x": 32, "d": 16})
    >>> b = Block(search, g, 0b111)
    >>> b.compulsory_at(sizes), len(search.cache)               # bounded: no kernel built
    (3072, 0)
    >>> b.compulsory_at(sizes) == search.choice(g, 0b111).compulsory_at(sizes), b.choice is search.choice(g, 0b111)
    (True, True)
    """

    __slots__ = ("search", "graph", "mask", "_choice")

    def __init__(self, search, graph, mask: int):
        self.search, self.graph, self.mask, self._choice = search, graph, mask, None

    @property
    def choice(self) -> Choice:
        """The block's Choice (asked of the search on first use)."""
        if self._choice is None:
            self._choice = self.search.choice(self.graph, self.mask)
        return self._choice

    def compulsory_at(self, sizes):
        """:meth:`Choice.compulsory_at`, from the graph where it can tell (kept per graph, block and sizes)."""
        moved = getattr(self.graph, "moved", None)
        arrays = None if moved is None else moved(self.mask)
        if arrays is None:
            return self.choice.compulsory_at(sizes)
        kept = self.graph.compulsory
        found = kept.get((self.mask, sizes))
        if found is None:   # (array by array: a graph's blocks share few arrays, each counted once per sizes)
            found = 0
            for a in arrays:
                n = kept.get((a, sizes))
                if n is None:
                    n = kept[(a, sizes)] = counted((a,), sizes)
                found += n
            kept[(self.mask, sizes)] = found
        return found

    def __getattr__(self, name):
        return getattr(self.choice, name)


__all__ = ["Block", "Choice", "counted"]
