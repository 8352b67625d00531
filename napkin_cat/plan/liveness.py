"""Liveness: where each value of the plan stops being needed (paper §5, "Identifying Variables").

The columns of a diagram are the variables simultaneously required; the plan makes this
explicit by freeing a value right after the statement that reads it last.  Values, not
buffers: a state variable whose old value is read by the step before its new value is written
is dead in between (its storage is what the new value reuses).  Backward dataflow on the
structured program, on the statements' :func:`~napkin_cat.plan.ir.access` (``uses``, ``defs``)::

    live_in(s) = (live_out(s) − defs(s)) ∪ uses(s)
    loop body:  live at the end of a trip = live after the loop ∪ live at the start of a trip

and ``Free(v)`` is inserted after the statement where ``v`` goes from live to dead (after the
loop for a value that a loop body keeps from trip to trip).  A pass solves each statement once per
``live_out`` set it meets (:class:`_Flow`'s memo), so its work grows with the statements, not with ``2^depth`` of
their loops (a loop's fixpoint and the Frees' pass each solved its body again).  Forward, :func:`columns` samples what
is live between statements once the Frees are in: every pass that counts memory reads it (the plan's
peak, the kernels' arenas, the predicted register use).

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

import sympy

from napkin_cat.plan.ir import (LOOPS, Alloc, Free, GridLoop, Kernel, StreamLoop, blocks, defs, trips_at,  # noqa: F401
                                uses, with_blocks)


class _Flow:
    """One liveness pass (a :func:`with_frees` or :func:`live_in` call): ``live_in`` of each statement for each
    ``live_out`` it was asked at, kept for the rest of the pass.  The equations are those of the module docstring;
    without the memo a statement nested ``k`` loops deep was solved again for every fixpoint round of every loop
    around it and again by each enclosing block's Frees (exponential in the nesting: 215,649 statement visits for the
    21 plans of two hardware test files, 2,310 of them at the top).  Keyed by the statement object (its identity,
    checked: the pass holds the program, so no key outlives its statement) and the ``live_out`` set."""

    def __init__(self):
        self.memo: dict = {}

    def block_in(self, stmts, live_out: frozenset) -> frozenset:
        live = live_out
        for s in reversed(stmts):
            live = self.stmt_in(s, live)
        return live

    def loop_body_in(self, body, live_out: frozenset) -> frozenset:
        """Live at the start of a trip: iterate ``end = live_out ∪ start`` to a fixpoint."""
        start = self.block_in(body, live_out)
        while True:
            nxt = self.block_in(body, live_out | start)
            if nxt == start:
                return start
            start = nxt

    def stream_in(self, s: StreamLoop, live_out: frozenset) -> tuple[frozenset, frozenset]:
        """``(tail_in, body_in)`` of a stream loop whose successor needs ``live_out``."""
        tail_in = self.block_in(s.tail, live_out)
        return tail_in, self.loop_body_in(s.body, tail_in)

    def stmt_in(self, s, live_out: frozenset) -> frozenset:
        key = (id(s), live_out)
        found = self.memo.get(key)
        if found is not None and found[0] is s:
            return found[1]
        if isinstance(s, Kernel):
            live = self.block_in(s.body, live_out)
        elif isinstance(s, GridLoop):
            live = self.loop_body_in(s.body, live_out) | live_out
        elif isinstance(s, StreamLoop):
            tail_in, body_in = self.stream_in(s, live_out)
            live = self.block_in(s.head, body_in | tail_in)
        elif isinstance(s, Free):
            live = live_out - {s.var}
        else:
            live = (live_out - defs(s)) | uses(s)
        self.memo[key] = (s, live)
        return live

    def block(self, stmts, live_out: frozenset) -> tuple:
        """``stmts`` with a Free after each statement where a value dies; ``live_out`` is live after the block."""
        out = []
        live = live_out
        for s in reversed(stmts):
            before = self.stmt_in(s, live)
            if isinstance(s, Kernel):
                s, dead = with_blocks(s, (self.block(s.body, live),)), set()
            elif isinstance(s, GridLoop):
                body_in = self.loop_body_in(s.body, live)
                s, dead = with_blocks(s, (self.block(s.body, live | body_in),)), body_in - live
            elif isinstance(s, StreamLoop):
                tail_in, body_in = self.stream_in(s, live)
                s = with_blocks(s, (self.block(s.head, body_in | tail_in), self.block(s.body, tail_in | body_in),
                                    tuple(_frees(body_in - tail_in)) + self.block(s.tail, live)))
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


def live_in(stmts, live_out) -> set:
    """The variables live before ``stmts`` when ``live_out`` are needed after them."""
    return set(_Flow().block_in(tuple(stmts), frozenset(live_out)))


def _frees(vs) -> list:
    return [Free(v) for v in sorted(vs)]


def with_frees(stmts, live_out: set) -> tuple:
    """The program with its Frees; ``live_out`` are the values it returns."""
    return _Flow().block(tuple(stmts), frozenset(live_out))


def _runs_none(loop, sizes) -> bool:
    """Whether ``loop`` runs no trip at ``sizes`` whatever the loops around it (a split in one part merges
    nothing); never when no sizes are given."""
    if sizes is None:
        return False
    t = trips_at(loop, sizes)    # (exact, without sympy, where the trips are a number)
    if t is not None:
        return t == 0
    t = sympy.sympify(loop.trips).subs(sizes)
    return bool(t.is_number and t == 0)


def columns(body, inputs=(), sizes=None) -> list[frozenset]:
    """The sets of variables live at once, sampled before each statement and at the end, in program order (one
    trip of each loop stands for all: every trip has the same live pattern).

    A value is live from the statement that writes it whole (or the ``Alloc`` that brings it to life: a
    partition's output held while its loop writes it slice by slice) to its ``Free``; ``inputs`` are live
    from the start; with ``sizes``, the body of a loop that runs no trip there is not sampled.  The instrumented
    run (:mod:`napkin_cat.plan.runner`) samples the same points.

    >>> import napkin_cat as nc
    >>> p = nc.plan(nc.stream(nc.library.matmul(), "b", "s_b"), {"a": 2, "b": 4, "c": 3, "s_b": 2})
    >>> sorted(max(columns(p.body, p.inputs), key=len))
    ['sum0', 'x0', 'x0_1', 'x1', 'x1_1']
    """
    live: dict = dict.fromkeys(inputs, True)
    out: list = []

    def block(stmts):
        for s in stmts:
            if isinstance(s, Free):
                live.pop(s.var, None)
                continue
            out.append(frozenset(live))
            empty = isinstance(s, LOOPS) and _runs_none(s, sizes)
            for k, b in enumerate(blocks(s)):
                if not (empty and k == (1 if isinstance(s, StreamLoop) else 0)):
                    block(b)
            for v in defs(s):
                live[v] = True
    block(body)
    out.append(frozenset(live))
    return out
