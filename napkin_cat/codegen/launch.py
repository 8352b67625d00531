"""A plan's kernel launches: its top level cut into launches, one per maximal chain of Grid loops around a kernel.

One thread block / program / OpenMP iteration runs per distinct index of the chain: the count of
:mod:`napkin_cat.algorithms.launches`, ``blocks = Π_a N(a, tiles along a)`` (Grids nested along one axis counted by
their innermost tiles); a Grid loop is launched with the Grids around it where its trips are constant, or where it
cuts the tile of the innermost of them along its axis.  Every kernel printer reads its launches here
(:class:`~napkin_cat.codegen.printer.CodePrinter` decodes a block's index into the Grids' indices).

>>> import napkin_cat as nc
>>> p = nc.plan(nc.group(nc.stream(nc.library.matmul(), "b", "s_b"), "a", "g_a"),
...             {"a": 5, "b": 6, "c": 4, "s_b": 3, "g_a": 2})
>>> [(len(l.grids), l.blocks) for l in launches(p)]
[(1, 3)]
>>> nested = nc.group(nc.group(nc.stream(nc.library.matmul(), "b", "s_b"), "a", "g_a"), "a", "h_a")
>>> [(len(l.chains), l.blocks) for l in launches(nc.plan(nested, {"a": 10, "b": 4, "c": 3, "g_a": 7, "h_a": 3,
...                                                              "s_b": 2}))]
[(1, 4)]
"""
from __future__ import annotations

from dataclasses import dataclass

import sympy

from napkin_cat.algorithms.launches import tiles_of_axis
from napkin_cat.plan.ir import Alloc, Free, GridLoop, Kernel, Range


@dataclass(frozen=True)
class Launch:
    """One kernel launch: the Grid loops around it (outermost first), the statements each block runs and its
    ``blocks``, the distinct indices of its Grids (``Π_a N(a, tiles along a)``, Grids nested along one axis
    counted by their innermost tiles)."""

    grids: tuple
    body: tuple
    blocks: int
    index: int = 0

    @property
    def name(self) -> str:
        return f"nc_kernel{self.index}"

    @property
    def chains(self) -> tuple:
        """Its Grids by axis (:func:`chains`)."""
        return chains(self.grids)


def chains(grids) -> tuple:
    """Grid loops by axis, in order of first appearance, each chain outermost first (more than one Grid: Grids
    nested along one axis)."""
    out: dict = {}
    for g in grids:
        out.setdefault(g.axis, []).append(g)
    return tuple(tuple(c) for c in out.values())


def only_statement(stmts):
    """The single non-Free statement of a block, or None."""
    rest = [s for s in stmts if not isinstance(s, Free)]
    return rest[0] if len(rest) == 1 else None


def tile_extent(loop) -> sympy.Expr:
    """The extent of ``loop``'s tile in the trip ``loop.index``: ``min(tile, full − index·tile)``."""
    return Range(loop.index * loop.tile, loop.tile, loop.full).extent


def launched(loop, outer, sizes) -> bool:
    """Whether the Grid loop ``loop``, directly inside the Grids ``outer``, is launched with them: its trips are
    constant, or it cuts the tile of the innermost of them along its axis (Grids nested along one axis)."""
    along = [g for g in outer if g.axis == loop.axis]
    if along:
        return sympy.expand(sympy.sympify(loop.full) - tile_extent(along[-1])) == 0
    return sympy.ceiling(sympy.sympify(loop.full).subs(sizes) / sympy.sympify(loop.tile).subs(sizes)).is_Integer


def chain_count(chain, sizes=None) -> sympy.Expr:
    """``N(n, (g₁, g₂, …))``: the innermost tiles of Grids nested along one axis (one Grid: its trips), at
    ``sizes`` (a mapping, or None to keep the symbols)."""
    at = (lambda e: sympy.sympify(e).subs(sizes)) if sizes is not None else sympy.sympify
    return tiles_of_axis(at(chain[0].full), [at(g.tile) for g in chain])


def launches(p) -> list[Launch]:
    """The plan's top level as launches; top-level Allocs and Frees are the host's (workspace)."""
    out, loose = [], []

    def flush():
        if loose:
            out.append(Launch((), tuple(loose), 1, len(out)))
            loose.clear()
    for s in p.body:
        if isinstance(s, (Alloc, Free)):
            continue
        if isinstance(s, GridLoop):
            flush()
            grids, inner = [], s
            while isinstance(inner, GridLoop) and launched(inner, grids, p.sizes):
                grids.append(inner)
                inner = only_statement(inner.body)
            if not grids:
                out.append(Launch((), (s,), 1, len(out)))
                continue
            blocks = sympy.Mul(*[chain_count(c, p.sizes) for c in chains(grids)])
            out.append(Launch(tuple(grids), tuple(grids[-1].body), int(blocks), len(out)))
        elif isinstance(s, Kernel):
            flush()
            out.append(Launch((), (s,), 1, len(out)))
        else:
            loose.append(s)
    flush()
    return out


__all__ = ["Launch", "launches", "chains", "chain_count", "launched", "tile_extent", "only_statement"]
