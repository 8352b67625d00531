"""Liveness: where each value of the plan stops being needed (paper §5, "Identifying Variables").

The columns of a diagram are the variables simultaneously required; the plan makes this
explicit by freeing a value right after the statement that reads it last.  Values, not
buffers: a state variable whose old value is read by the step before its new value is written
is dead in between (its storage is what the new value reuses).  Backward dataflow on the
structured program::

    live_in(s) = (live_out(s) − full_writes(s)) ∪ reads(s) ∪ partial_writes(s)
    loop body:  live at the end of a trip = live after the loop ∪ live at the start of a trip

and ``Free(v)`` is inserted after the statement where ``v`` goes from live to dead (after the
loop for a value that a loop body keeps from trip to trip).

>>> import napkin_cat as nc
>>> from napkin_cat.plan.expand import Expander
>>> from napkin_cat.plan.ir import Free, walk
>>> e = Expander({})
>>> stmts, outs = e.top(nc.stream(nc.library.matmul(), "b", "s_b"))
>>> stmts = with_frees(stmts, {o.var for o in outs})
>>> [s.var for s in walk(stmts) if isinstance(s, Free)]
['x0_1', 'x1_1', 'x0', 'x1', 'sum0']
"""
from __future__ import annotations

from napkin_cat.plan.ir import (Compute, Copy, Fill, Free, GridLoop, Kernel, Load, Store, StreamLoop, Alloc)


def uses(stmt) -> set:
    """Variables whose current value a simple statement needs (reads, accumulations, partial writes)."""
    out = set()
    if isinstance(stmt, (Load, Store, Copy)):
        out.add(stmt.src.var)
        if not stmt.dst.whole:
            out.add(stmt.dst.var)
    elif isinstance(stmt, Compute):
        out |= {r.var for r in stmt.refs}
        out |= {r.var for r in stmt.outs if stmt.accumulate or not r.whole}
    return out


def defs(stmt) -> set:
    """Variables a simple statement gives a whole new value."""
    if isinstance(stmt, (Load, Store, Copy)):
        return {stmt.dst.var} if stmt.dst.whole else set()
    if isinstance(stmt, Compute):
        return {r.var for r in stmt.outs if r.whole and not stmt.accumulate}
    if isinstance(stmt, (Fill, Alloc)):
        return {stmt.var}
    return set()


def _block_in(stmts, live_out: set) -> set:
    live = set(live_out)
    for s in reversed(stmts):
        live = _stmt_in(s, live)
    return live


def _loop_body_in(body, live_out: set) -> set:
    """Live at the start of a trip: iterate ``end = live_out ∪ start`` to a fixpoint."""
    start = _block_in(body, live_out)
    while True:
        nxt = _block_in(body, live_out | start)
        if nxt == start:
            return start
        start = nxt


def _stmt_in(s, live_out: set) -> set:
    if isinstance(s, Kernel):
        return _block_in(s.body, live_out)
    if isinstance(s, GridLoop):
        return _loop_body_in(s.body, live_out) | live_out
    if isinstance(s, StreamLoop):
        tail_in = _block_in(s.tail, live_out)
        body_in = _loop_body_in(s.body, tail_in)
        return _block_in(s.head, body_in | tail_in)
    if isinstance(s, Free):
        return live_out - {s.var}
    return (live_out - defs(s)) | uses(s)


def _frees(vs) -> list:
    return [Free(v) for v in sorted(vs)]


def _block(stmts, live_out: set) -> tuple:
    """``stmts`` with a Free after each statement where a value dies; ``live_out`` is live after the block."""
    out = []
    live = set(live_out)
    for s in reversed(stmts):
        before = _stmt_in(s, live)
        if isinstance(s, Kernel):
            s = Kernel(s.level, _block(s.body, live), s.origin)
            dead = set()
        elif isinstance(s, GridLoop):
            body_in = _loop_body_in(s.body, live)
            s = GridLoop(s.axis, s.tile, s.full, s.index, _block(s.body, live | body_in), s.origin)
            dead = body_in - live
        elif isinstance(s, StreamLoop):
            tail_in = _block_in(s.tail, live)
            body_in = _loop_body_in(s.body, tail_in)
            tail = tuple(_frees(body_in - tail_in)) + _block(s.tail, live)
            body = _block(s.body, tail_in | body_in)
            head = _block(s.head, body_in | tail_in)
            s = StreamLoop(s.axis, s.tile, s.full, s.index, head, body, tail, s.origin)
            dead = set()
        elif isinstance(s, Alloc) and s.var not in live:
            continue   # written whole before it is read: the writer brings it to life
        else:
            dead = (uses(s) | defs(s)) - live
        out.append((s, dead))
        live = before
    result = []
    for s, dead in reversed(out):
        result.append(s)
        result += _frees(dead)
    return tuple(result)


def with_frees(stmts, live_out: set) -> tuple:
    """The program with its Frees; ``live_out`` are the values it returns."""
    return _block(tuple(stmts), set(live_out))
