"""The block tables a plan's skip tests read: the data's block mask at the kernel's tiles, before a run.

A stream loop whose skip test reads a mask from data carries the test as one statement,
:class:`~napkin_cat.plan.skips.BlockSkip` (the trip's box on the mask's axes).  Before a run, the data's block mask
(:class:`~napkin_cat.algorithms.blockmask.BlockMask`, its summed-area table) is read at the boxes of every trip
into one table per such loop, as FlexAttention's ``BlockMask`` is made once per batch of data: the table's axes
are the indices of the loops the box depends on, outermost first (``i_q, i_x`` for a Grid over queries around a
stream over keys), each as long as the loop's most trips::

    table[i₁, …, i_k] = NONE (0)      no pair of the trip's box allowed: the trip is skipped
                        PARTIAL (1)   some pairs: the trip runs as written
                        FULL (2)      every pair: the trip runs without making its mask (read as true)

A kernel takes the tables as arguments and reads its trip's state at the flat offset
``Σ_j i_j · Π_{l > j} n_l`` (:meth:`BlockTable.offset`); the numpy runner reads the same tables.  The boxes are the
plan's own expressions (ragged last tiles, tiles nested in tiles), so a table is right at any tiling; where the
loops are a Grid of ``g`` and a stream of ``s`` it is the block mask's ``states({"q": g, "x": s})``:

>>> import numpy as np, napkin_cat as nc
>>> seg = np.array([0, 0, 0, 1, 1, 2, 2, 2], dtype=np.int32)
>>> bm = nc.block_mask(nc.library.document_mask(q=8, x=8), seg, seg)
>>> flash = nc.group(nc.stream(nc.kernel(nc.library.document_attention()), "x", "s_x"), "q", "g_q")
>>> p = nc.plan(flash, {"q": 8, "x": 8, "d": 2, "g_q": 2, "s_x": 2})
>>> (table,) = block_tables(p)
>>> [str(i) for i, _ in table.indices], table.states(bm).tolist() == bm.states({"q": 2, "x": 2}).tolist()
(['i_q', 'i_x'], True)
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import sympy

from napkin_cat.algorithms.blockmask import FULL, NONE, PARTIAL
from napkin_cat.errors import ShapeError
from napkin_cat.plan.ir import LOOPS, StreamLoop, walk_scoped


@dataclass(frozen=True)
class BlockTable:
    """The table of one stream loop's :class:`~napkin_cat.plan.skips.BlockSkip` (see the module docstring):
    ``loop`` the stream loop, ``indices`` ``((index symbol, trips), …)`` the loops its box depends on, outermost
    first, ``sizes`` the plan's, ``number`` its place among the plan's tables (a kernel's argument ``nc_blocks<k>``)."""

    loop: StreamLoop
    indices: tuple
    sizes: dict
    number: int

    @property
    def shape(self) -> tuple:
        return tuple(n for _, n in self.indices)

    @property
    def name(self) -> str:
        """The kernels' name for the table."""
        return f"nc_blocks{self.number}"

    def offset(self) -> sympy.Expr:
        """The trip's entry, ``Σ_j i_j · Π_{l > j} n_l`` (row-major over :attr:`indices`)."""
        out, stride = sympy.Integer(0), 1
        for index, n in reversed(self.indices):
            out += index * stride
            stride *= n
        return out

    def states(self, block_mask) -> np.ndarray:
        """The state of every trip (int8: :data:`NONE`, :data:`PARTIAL`, :data:`FULL`) by the block mask of the data
        (its axes those of the box, at the plan's sizes); an index past a loop's trips (a shorter nested tile's)
        reads a box clipped to the axis, and is never read."""
        skip = self.loop.data
        if set(block_mask.axes) != set(skip.axes):
            raise ShapeError(f"the block mask is over axes {list(block_mask.axes)}; the stream over {self.loop.axis!r} "
                             f"reads a mask from data over {list(skip.axes)}")
        grid = np.meshgrid(*(np.arange(n, dtype=np.int64) for n in self.shape), indexing="ij")
        env = {**self.sizes, **{index: g for (index, _), g in zip(self.indices, grid)}}
        box = {a: (_evaluated(start, env, self.shape), _evaluated(extent, env, self.shape))
               for a, start, extent in skip.box}
        t = block_mask.truth(lambda a, size: box[a])
        states = np.where(t.always, FULL, np.where(t.possibly, PARTIAL, NONE))
        return states.astype(np.int8).reshape(self.shape)


def _evaluated(e, env: dict, shape: tuple) -> np.ndarray:
    """An index expression on arrays of loop indices (broadcast to ``shape``)."""
    e = sympy.sympify(e).subs({k: v for k, v in env.items() if not isinstance(v, np.ndarray)})
    free = sorted(e.free_symbols, key=str)
    fn = sympy.lambdify(free, e, modules=[{"Min": np.minimum, "Max": np.maximum}, "numpy"])
    return np.broadcast_to(np.asarray(fn(*(env[s] for s in free)), dtype=np.int64), shape)


def block_tables(plan) -> tuple:
    """The plan's block tables, one per stream loop with a :class:`~napkin_cat.plan.skips.BlockSkip`, in program
    order (cached on the plan)."""
    found = plan.__dict__.get("_block_tables")
    if found is not None:
        return found
    sizes = dict(plan.sizes)
    out = []
    for s, scope in walk_scoped(plan.body):
        if not isinstance(s, StreamLoop) or s.data is None:
            continue
        loops = [c for c, _ in scope if isinstance(c, LOOPS)] + [s]
        free = set().union(*(sympy.sympify(e).free_symbols for _, start, extent in s.data.box for e in (start, extent)))
        outer = {lp.index: 0 for lp in loops}
        indices = tuple((lp.index, int(sympy.ceiling(sympy.sympify(lp.full).subs(sizes).subs(outer) /
                                                     sympy.sympify(lp.tile).subs(sizes))))
                        for lp in loops if lp.index in free)
        out.append(BlockTable(s, indices, sizes, len(out)))
    plan.__dict__["_block_tables"] = tuple(out)
    return tuple(out)


def tables_of(plan, block_mask) -> tuple:
    """Each block table's states by ``block_mask`` (None: no table, every trip runs as written)."""
    return tuple(t.states(block_mask) for t in block_tables(plan)) if block_mask is not None else None


__all__ = ["BlockTable", "block_tables", "tables_of"]
