"""The thread blocks a kernel launches: one definition, read by the search, the time model and the reports.

A kernel (a ``Kernel`` bubble) runs once per index of the Grids around it, each run one thread block; a split
stream that is the whole of its kernel (:mod:`.splits`) runs its ``P`` parts as blocks too, and a second launch
over the same groups combines their partial states.  So, per kernel::

    blocks(K)  = groups(K) · P                  P = the parts of its split stream, 1 without one
    groups(K)  = Π over the axes its Grids cut  N(a, (g₁, g₂, …))
    N(n, (g,)) = ⌈n/g⌉                                                   one Grid along the axis
    N(n, (g, h, …)) = ⌊n/g⌋ · N(g, (h, …)) + ⌈(n mod g)/g⌉ · N(n mod g, (h, …))
                                     Grids nested along one axis: the inner one cuts each outer tile, the last
                                     one shorter (so on divisible sizes N = n/h, the innermost tile's trips)
    combine(K) = rows(K) = Π over the axes its Grids cut that every reducer's state has  n(a)
                                     the launch that merges the parts (a split kernel only): one block per row
                                     of the groups (the Grid law at tile 1: every row's partial states merge
                                     alone), so one wide group does not leave the machine idle; an axis some
                                     state lacks (d of attention's μ, z) is no row: a block per d row would
                                     load that state once per row (:func:`napkin_cat.plan.partials.split_stream`)

and an algorithm launches ``blocks(f) = min_K blocks(K)`` in its narrowest kernel.  Grids inside a kernel (the
groups of a kernel one level down) are not blocks: they run inside the block, over its threads; nor are the
parts of a split stream that shares its kernel with other work (inside another stream, beside another
computation, or in a kernel one level down): they run one after another in the kernel's block.

The plan agrees: its grid loops outside every kernel run ``blocks(K)`` distinct indices around each kernel's
statements (a split kernel's two launches: :func:`napkin_cat.plan.partials.fission`), counted by the test
``tests/algorithms/test_launches.py``, and so do the kernel printers (:func:`napkin_cat.codegen.launch.launches`,
Grids nested along one axis one block per innermost tile); ``nc.derive(..., min_blocks=B)`` requires
``blocks(K) ≥ B`` of every kernel it costs (:mod:`napkin_cat.search.parallelism`), ``nc.hardware.predict`` fills
its waves with them.

>>> import napkin_cat as nc
>>> d = nc.group(nc.stream(nc.library.attention(), "x", "s_x", parts="P"), "q", "g_q")
>>> (k,) = kernel_launches(d)
>>> k.blocks, k.launches
(P*ceiling(q/g_q), (P*ceiling(q/g_q), q))
>>> blocks(d, {"q": 5, "x": 64, "d": 8, "g_q": 2, "s_x": 4, "P": 8})      # ⌈5/2⌉ groups × 8 parts
24
"""
from __future__ import annotations

from dataclasses import dataclass

import sympy

from napkin_cat.algorithms.bubbles import Grid, Kernel, Region, Stream
from napkin_cat.errors import NapkinError
from napkin_cat.syntax.flat import layers, require_diagram
from napkin_cat.syntax.sizes import Sizes
from napkin_cat.syntax.wiring import computes


def tiles_of_axis(n, tiles) -> sympy.Expr:
    """``N(n, (g₁, g₂, …))``: the distinct indices of Grids nested along one axis of size ``n`` (outermost
    first), each cutting the tile of the one around it (the last tile shorter).

    >>> from napkin_cat import symbol
    >>> tiles_of_axis(symbol("a"), [symbol("g_a")])
    ceiling(a/g_a)
    >>> tiles_of_axis(10, [7, 3]), tiles_of_axis(12, [6, 3])     # 7 + 3 → (3 + 3 + 1) + 3; 12/3
    (4, 4)
    """
    n, (g, *rest) = sympy.sympify(n), [sympy.sympify(t) for t in tiles]
    if not rest:
        return sympy.ceiling(n / g)
    r = sympy.Mod(n, g)
    return sympy.floor(n / g) * tiles_of_axis(g, rest) + sympy.ceiling(r / g) * tiles_of_axis(r, rest)


def in_every_state(axis: str, reducers) -> bool:
    """Whether every state array of ``reducers`` (a stream's, :class:`~.schedule.Reducer`) has ``axis``: a row of a
    split stream's combine (``rows(K)`` above; the plan's combine, :func:`napkin_cat.plan.partials.split_stream`).

    >>> from napkin_cat.algorithms.streaming import analyse
    >>> import napkin_cat as nc
    >>> reducers = analyse(nc.library.attention(), "x").reducers        # μ, z over q; o over q d
    >>> in_every_state("q", reducers), in_every_state("d", reducers)
    (True, False)
    """
    return all(axis in s.array.names for r in reducers for s in r.state)


def split_of(kernel: Kernel):
    """The split stream that is the whole of ``kernel`` (up to wiring), else None: only such a stream's parts
    run as blocks (the plan cuts its kernel in a launch of the parts and one of the combine)."""
    work = [b for _, b in layers(kernel.arg) if computes(b)]
    if len(work) == 1 and isinstance(work[0], Stream) and work[0].params.get("parts") is not None:
        return work[0]
    return None


@dataclass(frozen=True)
class KernelLaunch:
    """One kernel of an algorithm: the ``Kernel`` bubble, the Grids around it (outermost first) and the split
    stream whose parts run as blocks (None: no such stream)."""

    kernel: Kernel
    grids: tuple
    split: Stream | None = None

    def blocks_at(self, sizes: Sizes):
        """:attr:`blocks` at ``sizes`` (``sizes.subs(launch.blocks)``), the sizes put into the Grids' sizes and the
        parts first: sympy then counts ``⌈n/g⌉`` of numbers, not of symbols (whose ceiling it would try to
        simplify).  An int where the sizes give every name the counts read."""
        chains: dict = {}
        for g in self.grids:
            chains.setdefault(g.axis, (sizes.subs(g.full_size()), []))[1].append(sizes.subs(g.size))
        groups = sympy.Mul(*[tiles_of_axis(n, tiles) for n, tiles in chains.values()])
        return sizes.subs(groups * (self.parts if self.parts is not None else 1))

    @property
    def parts(self) -> sympy.Expr | None:
        """The parts ``P`` of its split stream, None without one."""
        return None if self.split is None else sympy.sympify(self.split.params["parts"])

    @property
    def groups(self) -> sympy.Expr:
        """``Π_a N(a, tiles along a)``: the distinct indices of the Grids around the kernel."""
        chains: dict = {}
        for g in self.grids:
            chains.setdefault(g.axis, (g.full_size(), []))[1].append(g.size)
        return sympy.Mul(*[tiles_of_axis(n, tiles) for n, tiles in chains.values()])

    @property
    def blocks(self) -> sympy.Expr:
        """The thread blocks the kernel launches: its groups times its parts."""
        return self.groups * (self.parts if self.parts is not None else 1)

    @property
    def rows(self) -> sympy.Expr:
        """``Π_a n(a)`` over the axes its Grids cut that every reducer's state has: the blocks of a split kernel's
        combine, one per row of the groups (:func:`napkin_cat.plan.partials.fission`); 1 without a split."""
        reducers = self.split.plan.reducers if self.split is not None else ()
        return sympy.Mul(*{g.axis: sympy.sympify(g.full_size()) for g in reversed(self.grids)
                           if in_every_state(g.axis, reducers)}.values())

    @property
    def launches(self) -> tuple:
        """The blocks of each launch that runs the kernel: ``(groups·P, rows)`` for a split stream's parts
        and its combine, else ``(groups,)``."""
        return (self.blocks, self.rows) if self.parts is not None else (self.blocks,)


def kernel_launches(algorithm) -> list:
    """The kernels of ``algorithm`` (a diagram, or one of its regions: a box is the diagram of itself, its one
    layer) in order, each with the Grids around it; ArgumentError for anything else."""
    out = []

    def walk(d, grids):
        for _, box in layers(d):
            if isinstance(box, Kernel):
                out.append(KernelLaunch(box, grids, split_of(box)))
            elif isinstance(box, Region):
                walk(box.arg, grids + (box,) if isinstance(box, Grid) else grids)
    walk(require_diagram(algorithm, "kernel_launches"), ())
    return out


def narrowest(algorithm) -> sympy.Expr:
    """``min_K blocks(K)`` over the kernels of ``algorithm`` (an expression); NapkinError if it has none."""
    found = [k.blocks for k in kernel_launches(algorithm)]
    if not found:
        raise NapkinError("blocks: the algorithm has no kernel (partition it with nc.kernel / nc.unfused, or "
                          "derive it)")
    return sympy.Min(*found)


def blocks(algorithm, sizes) -> int:
    """The thread blocks the narrowest kernel of ``algorithm`` launches at ``sizes`` (axes, tiles and parts).

    >>> import napkin_cat as nc
    >>> mm = nc.group(nc.group(nc.stream(nc.library.matmul(), "b", "s_b"), "a", "g_a"), "c", "g_c")
    >>> blocks(mm, {"a": 10, "b": 6, "c": 7, "g_a": 3, "g_c": 2, "s_b": 2})      # ⌈10/3⌉ · ⌈7/2⌉
    16
    """
    given = Sizes(sizes)
    launches = kernel_launches(algorithm)
    counts = [k.blocks_at(given) for k in launches]     # narrowest's value at the sizes, its terms counted apart
    if counts and all(isinstance(c, int) for c in counts):
        return min(counts)
    n = sympy.sympify(given.subs(narrowest(algorithm)))
    if not n.is_Integer:
        raise NapkinError(f"blocks: give sizes for {sorted(map(str, n.free_symbols))} (the axes, tiles and parts "
                          f"the kernels' Grids and split streams use)")
    return int(n)


__all__ = ["KernelLaunch", "kernel_launches", "in_every_state", "split_of", "tiles_of_axis", "narrowest", "blocks"]
