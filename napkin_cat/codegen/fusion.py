"""Elementwise maps fused into the statement that reads them: one loop over a tile where the plan writes a chain.

The plan writes one statement per box, so the scores of masked attention pass over the tile once per map
(``s ← c·(QKᵀ)``, ``m ← q ≥ x``, ``s′ ← where(m, s)``, then the SoftMax's maxima and exponentials).  A kernel
engineer writes the chain as one loop: each map's value is computed where it is read, never stored.  The law is
that of substitution: a map ``v ← f(u₁, …, uₙ)`` read by one statement ``g(…, v, …)`` and by nothing else is
that statement with ``f(u₁, …, uₙ)`` in ``v``'s place, as long as no ``uᵢ`` changes in between::

    v ← f(u);  … (no write to u or v) …;  y ← g(v)      ≡      … ;  y ← g(f(u))        (v never stored)

:func:`fused` makes the substitution in the plan IR: the reader's operand becomes the map's ``Compute`` (an
*inlined operand*, :class:`~napkin_cat.plan.ir.Compute`; it keeps its output ref so that a printer knows the
shape of its values), the map's statement is dropped and the Frees are placed again, so that the liveness, the
layouts and the arenas see the inputs of a fused map live until its reader runs.  It is a printer's pass: the plan
the runner counts (and the cost functor predicts) is the one as written, each map's FLOPs its own; a fused
map read in two passes of its reader (a SoftMax's maxima and exponentials) is computed twice.  A plan with nothing
to fuse is returned as it is.

What fuses (the maps a kernel may recompute): a ``Compute`` of an elementwise kind (its record's printed form is a
template) with one whole output, on chip, written by it alone and read by exactly one statement, which comes later in
the same statement list and is a ``Compute`` whose printed form reads its operands element by element (``into``:
the printer's structures that do; an elementwise template always), reading that output whole; and no statement in
between writes the map's output or what the map reads.

>>> import napkin_cat as nc
>>> from napkin_cat.plan.accumulate import separated
>>> from napkin_cat.plan.ir import Compute, walk
>>> p = separated(nc.plan(nc.stream(nc.library.causal_attention(q=8, x=8, d=4), "x", "s_x"), {"s_x": 4}))
>>> f = fused(p, into=("online_softmax",))
>>> def kinds(q):
...     return [s.kind for s in walk(q.body) if isinstance(s, Compute)]
>>> "where" in kinds(p), "where" in kinds(f)                  # the where is no statement of its own any more
(True, False)
>>> [(s.kind, structure(s, "c"), [t.kind for t in inlined(s)]) for s in walk(f.body) if inlined(s)]  # read there
[('softmax_unscaled', 'online_softmax', ['where', 'le'])]
"""
from __future__ import annotations

from collections import Counter

from napkin_cat.plan.ir import COMPOUND, Compute, Free, Ref, blocks, reads, rebuild, walk, with_blocks, writes
from napkin_cat.plan.liveness import with_frees
from napkin_cat.syntax.printed import Template
from napkin_cat.syntax.primitive import kind_of


def elementwise(stmt, dialect: str = "c") -> bool:
    """Whether ``stmt`` is a ``Compute`` of a kind printed in ``dialect`` by a template (an elementwise map)."""
    if not isinstance(stmt, Compute):
        return False
    return isinstance(kind_of(stmt.kind).part(dialect, default=None), Template)


def structure(stmt, dialect: str = "c") -> str | None:
    """The name a ``Compute`` prints by in ``dialect``: ``"elementwise"`` for a template, the structure's name, or
    None (not a Compute, or no form)."""
    if not isinstance(stmt, Compute):
        return None
    form = kind_of(stmt.kind).part(dialect, default=None)
    if isinstance(form, Template):
        return "elementwise"
    return getattr(form, "structure", None)


def fused(plan, *, into=("softmax", "online_softmax", "reduce"), dialect: str = "c"):
    """The plan with its elementwise maps fused into their one reader (see the module docstring); ``into``: the
    structures a map may be fused into besides elementwise maps (those the printer prints element by element)."""
    stmts = list(walk(plan.body))
    read_by = Counter(v for s in stmts for v in set(reads(s)))
    written_by = Counter(v for s in stmts for v in set(writes(s)))
    variables = plan.variable_map
    targets = {"elementwise", *into}

    def producer(s) -> bool:
        if not elementwise(s, dialect) or s.accumulate or len(s.outs) != 1 or not s.outs[0].whole:
            return False
        v = variables[s.outs[0].var]
        return v.level > 0 and v.role not in ("input", "output") and written_by[v.name] == 1 and \
            read_by[v.name] == 1

    def block(body) -> tuple:
        body = [with_blocks(s, tuple(block(b) for b in blocks(s))) if isinstance(s, COMPOUND) else s for s in body]
        k = 0
        while k < len(body):
            p = body[k]
            at = _reader(body, k) if producer(p) else None
            if at is None:
                k += 1
                continue
            body[at] = _substituted(body[at], p)
            del body[k]
            k = 0                  # a reader that fused a map may now fuse into its own reader, earlier or later
        return tuple(body)

    def _reader(body, k):
        p = body[k]
        v = p.outs[0].var
        touched = {v, *(r.var for r in p.refs)}
        for j in range(k + 1, len(body)):
            s = body[j]
            inner = list(walk([s]))
            if any(v in reads(t) for t in inner):
                ok = structure(s, dialect) in targets and not s.accumulate and not touched & set(writes(s)) and \
                    all(r.whole for r in s.refs if r.var == v)
                return j if ok else None
            if any(touched & set(writes(t)) for t in inner if not isinstance(t, Free)):
                return None
        return None

    body = block(plan.body)
    if body == plan.body:
        return plan                # nothing fused: the plan as it is, its Frees where the planner put them
    body = with_frees(rebuild(body, lambda s: () if isinstance(s, Free) else s), set(plan.outputs))
    return type(plan)(plan.diagram, plan.sizes, body, plan.variable_map, plan.inputs, plan.outputs)


def _substituted(reader: Compute, p: Compute) -> Compute:
    """``reader`` with every operand that reads ``p``'s output (a ref, or inside an inlined operand) made ``p``."""
    v = p.outs[0].var

    def swap(r):
        if isinstance(r, Compute):
            return _with_ins(r, tuple(swap(x) for x in r.ins))
        return p if isinstance(r, Ref) and r.var == v else r
    return _with_ins(reader, tuple(swap(r) for r in reader.ins))


def _with_ins(s: Compute, ins: tuple) -> Compute:
    return Compute(s.box, s.outs, ins, s.accumulate, s.origin, s.at)


def inlined(stmt) -> list:
    """Every operand computed into ``stmt`` (nested ones too), outermost first."""
    out = []
    for _, t in getattr(stmt, "inlined", ()):
        out += [t] + inlined(t)
    return out


def value_of(operand) -> str:
    """The variable whose values an operand is: a ref's, or an inlined operand's output's."""
    return operand.outs[0].var if isinstance(operand, Compute) else operand.var


__all__ = ["fused", "elementwise", "structure", "inlined", "value_of"]
