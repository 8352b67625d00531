"""The block mask a plan's skip test reads, derived from the data by the plan's own statements.

A full trip makes no mask: the kernel reads its condition as true on every pair of the block
(:class:`~napkin_cat.plan.skips.BlockSkip`).  That is right only where the block mask is the block mask of *that*
condition, the whole of it (document ids ∧ causal, not the document part alone: a block full for the documents
would drop the causal part too).  So the library does not take a block mask on trust; it derives it:

* the **condition's program**: the statements of the plan that make the condition variable, traced back
  through what they read to the plan's inputs (the loads of the ids, the positions, the comparisons and logic:
  exactly the statements a partial trip runs for it, and no others; where the condition is loaded from a global
  array that an earlier kernel makes, that kernel whole, run as the plan runs it);
* **run once over whole axes**: every enclosing loop's tile bound to its axis and its index to 0, so the same
  statements give the condition on every pair at once (numpy, :meth:`~napkin_cat.plan.runner.Machine.values_at`);
* its **block mask** (:class:`~napkin_cat.algorithms.blockmask.BlockMask`), stamped with a digest of the program
  and of the inputs it read (:func:`stamp`)::

      derived(plan, xs).truth(box)  =  (any, all) of the plan's condition on xs over box

A block mask given to a run is used as it is only when its stamp is this plan's and these data's (a digest of
the ids, O(n), against the O(n²) evaluation); any other (``nc.block_mask`` of a mask diagram, a stale one) is
checked against the derived one at the kernel's tiles, which costs what deriving costs, and refused with
:class:`~napkin_cat.errors.BlockMaskError` naming the first block where they differ.  Checking is never cheaper
than deriving (a *full* or *none* block is known only by reading every pair of it), so the cheap and right use
is the derived mask itself, made once per batch of data and reused (FlexAttention's ``create_block_mask``).

>>> import numpy as np, napkin_cat as nc
>>> seg = np.array([0, 0, 0, 1, 1, 2, 2, 2], dtype=np.int32)
>>> flash = nc.group(nc.stream(nc.kernel(nc.library.document_attention(causal=True)), "x", "s_x"), "q", "g_q")
>>> p = nc.plan(flash, {"q": 8, "x": 8, "d": 2, "g_q": 2, "s_x": 2})
>>> xs = [np.zeros((8, 2))] * 3 + [seg, seg]
>>> bm = derived(p, xs)
>>> allowed = (seg[:, None] == seg[None, :]) & (np.arange(8)[None, :] <= np.arange(8)[:, None])
>>> bool((bm.counts[1:, 1:] == allowed.cumsum(0).cumsum(1)).all()), bm.source == stamp(p, block_tables(p)[0], xs)
(True, True)
"""
from __future__ import annotations

import hashlib

import numpy as np

from napkin_cat.algorithms.blockmask import FULL, NONE, PARTIAL, BlockMask
from napkin_cat.errors import BlockMaskError
from napkin_cat.plan.blocks import block_tables
from napkin_cat.plan.ir import Alloc, Fill, Free, LOOPS, PlanError, blocks, defs, reads, uses, walk, walk_scoped, writes
from napkin_cat.plan.expressions import number
from napkin_cat.plan.runner import Machine
from napkin_cat.plan.recent import Recent

_STATE = {NONE: "none", PARTIAL: "partial", FULL: "full"}
#: the tables a plan keeps derived (:class:`StatesCache`)
STATES_CACHED = 16


def _scope_of(plan, loop) -> tuple:
    for s, scope in walk_scoped(plan.body):
        if s is loop:
            return scope
    raise PlanError(f"the stream loop over {loop.axis!r} is not in the plan")


def _visible(plan, loop) -> list:
    """The statements run before the loop's condition is made, in order: those before the loop in each block that
    holds it (a kernel before it whole: it may make the condition, as a global array the loop loads), the loop's
    head, its body up to the statement that writes the condition."""
    scope = _scope_of(plan, loop)
    chain = [(plan.body, scope[0][0] if scope else loop)]
    for k, (compound, block) in enumerate(scope):
        inner = scope[k + 1][0] if k + 1 < len(scope) else loop
        chain.append((blocks(compound)[block], inner))
    out = []
    for stmts, until in chain:
        for s in stmts:
            if s is until:
                break
            out.append(s)
    out += list(loop.head)
    for s in loop.body:
        out.append(s)
        if loop.data.condition in _access(s)[0]:
            break
    return out


def _access(stmt) -> tuple:
    """``(writes, defines, needs)`` of a statement: a simple one's; a compound's, those of the simple statements it
    holds, where what it needs is what they use or read that none of them defines (a kernel's own tiles and
    states are made inside it)."""
    simple = [s for s in walk((stmt,)) if not blocks(s)]
    written = {v for s in simple for v in writes(s)}
    defined = {v for s in simple for v in defs(s)}
    made = defined | {v for s in simple if isinstance(s, (Alloc, Fill)) for v in writes(s)} if blocks(stmt) else set()
    needs = {v for s in simple for v in (*uses(s), *reads(s))} - made
    return written, defined, needs


def program(plan, table) -> tuple:
    """The statements that make the condition of ``table``'s stream (its :class:`~napkin_cat.plan.skips.BlockSkip`)
    from the plan's inputs, in order: the backward slice of the condition variable."""
    condition = table.loop.data.condition
    if condition is None:
        raise PlanError(f"the stream over {table.loop.axis!r} skips by a mask from data that is no variable of the "
                        "plan (made inline): its block table cannot be derived; run it without a block mask")
    needed, chosen = {condition}, []
    for s in reversed(_visible(plan, table.loop)):
        written, defined, needs = _access(s)
        if isinstance(s, Free) or not written & needed:
            continue
        chosen.append(s)
        needed = (needed - defined) | needs
    missing = needed - set(plan.inputs)
    if missing:
        raise PlanError(f"the mask {condition!r} of the stream over {table.loop.axis!r} reads {sorted(missing)}, "
                        "made outside the statements before it: its block table cannot be derived")
    return tuple(reversed(chosen))


def _key(stmts) -> str:
    """The statements as text with their boxes' kinds and parameters (a statement's repr leaves the box out)."""
    return "\n".join(f"{s!r} {getattr(s, 'box', None)!r} {getattr(getattr(s, 'box', None), 'data', None)!r}"
                     for s in stmts)


def _read(plan, stmts) -> list:
    """The plan's inputs ``stmts`` read, in the plan's order."""
    used = {v for s in stmts for v in _access(s)[2]}
    return [k for k, v in enumerate(plan.inputs) if v in used]


def stamp(plan, table, arrays) -> str:
    """The digest of ``table``'s condition (its program, at the plan's sizes) and of the inputs it reads in
    ``arrays`` (their dtypes, shapes and bytes): a block mask with this source is the derived one."""
    stmts = program(plan, table)
    h = hashlib.blake2b(digest_size=16)
    h.update(_key(stmts).encode())
    h.update(repr(sorted((str(k), str(v)) for k, v in plan.sizes.items())).encode())
    for k in _read(plan, stmts):
        x = np.ascontiguousarray(arrays[k])
        h.update(f"{k}:{x.dtype.str}:{x.shape}".encode())
        h.update(x.tobytes())
    return h.hexdigest()


def _whole(plan, loop) -> dict:
    """Each loop around (and of) the stream bound to one trip over its whole axis: index 0, tile = full."""
    at = dict(plan.sizes)
    for lp in [c for c, _ in _scope_of(plan, loop) if isinstance(c, LOOPS)] + [loop]:
        at[lp.index] = 0
        if getattr(lp.tile, "is_Symbol", False):
            at[lp.tile] = number(lp.full, at)
    return at


def derived(plan, arrays, table=None) -> BlockMask:
    """The block mask of ``table``'s condition (default: the plan's one table, or the one all its tables share)
    on ``arrays`` (the plan's inputs), stamped with its :func:`stamp`."""
    table = table if table is not None else _the_table(plan, arrays)
    stmts = program(plan, table)
    condition = table.loop.data.condition
    values = Machine(plan).values_at(stmts, list(arrays), _whole(plan, table.loop))
    var = plan.variable_map[condition]
    return BlockMask.of(np.asarray(values[condition], dtype=bool), var.axes, stamp(plan, table, arrays))


class StatesCache(Recent):
    """The tables derived on a plan, by :func:`stamp` (the condition's program, the plan's sizes and the bytes of
    the inputs it reads: all a table depends on), the ``size`` most recent kept, one lock: a table derived for
    a batch of data and given back with it (a compiled op's ``blocks``) is checked at the cost of a digest of the
    ids, not of deriving it again.  Tables are small (one entry per trip), so a cache costs little memory."""

    def __init__(self, size: int = STATES_CACHED):
        super().__init__(size)


def derived_states(plan, arrays, table) -> np.ndarray:
    """``table.states(derived(plan, arrays, table))``: the trips' states by the data, read once per batch of data
    (:class:`StatesCache` on the plan, keyed by :func:`stamp`)."""
    cache = plan.__dict__.setdefault("_derived_states", StatesCache())
    key = (table.number, stamp(plan, table, arrays))
    found = cache.get(key)
    if found is None:
        found = table.states(derived(plan, arrays, table))
        found.setflags(write=False)
        cache.put(key, found)
    return found


def _the_table(plan, arrays):
    tables = block_tables(plan)
    if not tables:
        raise BlockMaskError("no stream of this plan has a mask read from data (a mask from positions alone is "
                             "decided by interval arithmetic): it has no block mask")
    if len({stamp(plan, t, arrays) for t in tables}) > 1:
        raise BlockMaskError(f"the plan's {len(tables)} streams that skip by a mask from data drop different masks "
                             f"({[t.loop.data.condition for t in tables]}): no one block mask is theirs; give none, "
                             "and each table is derived from the data")
    return tables[0]


def tables(plan, arrays, block_mask) -> tuple:
    """The states of each block table (:func:`~napkin_cat.plan.blocks.block_tables`, what a kernel and the runner
    read) on the data ``arrays``: ``block_mask`` read at the tables' tiles where it is the derived one (its stamp),
    or where it equals the derived one there; else :class:`~napkin_cat.errors.BlockMaskError`.  ``block_mask``
    ``"data"``: derived from the data."""
    out = []
    for t in block_tables(plan):
        if isinstance(block_mask, str):
            if block_mask != "data":
                raise BlockMaskError(f"block_mask must be a BlockMask, 'data' (derived from the data) or None, "
                                     f"got {block_mask!r}")
            out.append(derived_states(plan, arrays, t))
            continue
        mine = stamp(plan, t, arrays)
        given = t.states(block_mask)
        if block_mask.source != mine:
            check(t, given, derived_states(plan, arrays, t))
        out.append(given)
    return tuple(out)


def check(table, given: np.ndarray, right: np.ndarray):
    """BlockMaskError unless the states ``given`` are the derived ones ``right`` at every block of ``table``."""
    wrong = np.argwhere(given != right)
    if not len(wrong):
        return
    at = tuple(int(i) for i in wrong[0])
    where = ", ".join(f"{index} = {i}" for (index, _), i in zip(table.indices, at))
    raise BlockMaskError(
        f"the block mask is not the data's block mask of the mask the stream over {table.loop.axis!r} drops on a "
        f"full trip ({table.loop.data.condition}, positions included): at block {where} it says "
        f"{_STATE[int(given[at])]}, the mask on the data is {_STATE[int(right[at])]} ({len(wrong)} block(s) differ); "
        "derive it with plan.block_mask(*arrays) (or kernel.block_mask), or pass block_mask='data'")


__all__ = ["program", "stamp", "derived", "derived_states", "StatesCache", "tables", "check"]
