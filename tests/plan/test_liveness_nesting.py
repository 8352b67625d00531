"""Liveness solves each statement once per set of values live after it, however deep its loops nest.

The pass (napkin_cat/plan/liveness.py) iterates each loop body to a fixpoint and then inserts the Frees of each
block; solved afresh at every level, a statement ``k`` loops deep was visited about ``2^k`` times (a matmul streamed
along ``b`` and grouped along ``a`` and ``c``: 131 visits of its 10 statements; a fourth loop: 165).  Counted here
by the visits of ``uses`` (what a simple statement reads: called once each time the pass solves one), never timed.
The Frees themselves are checked against the maths elsewhere (tests/plan/test_toolkit.py, the plans' runs); here
each nesting's program also keeps the values it returns and frees every other value it makes."""
from __future__ import annotations

import pytest

import napkin_cat as nc
from napkin_cat.plan import liveness
from napkin_cat.plan.expand import Expander
from napkin_cat.plan.ir import Free, defs, walk


def nested(k: int):
    """A matmul streamed along ``b``, then grouped along ``a``, ``c`` and (k = 4) streamed along ``b`` again."""
    mm = nc.library.matmul()
    d = nc.stream(mm, "b", "s_b")
    for axis, tile, make in (("a", "g_a", nc.group), ("c", "g_c", nc.group), ("b", "t_b", nc.stream))[:k - 1]:
        d = make(d, axis, tile)
    return d


@pytest.mark.parametrize("k", [1, 2, 3, 4])
def test_each_statement_is_solved_a_bounded_number_of_times_at_every_nesting(k, monkeypatch):
    stmts, outs = Expander({}).top(nested(k))
    returned = {o.var for o in outs}
    statements = list(walk(stmts))
    visits = []
    real = liveness.uses
    monkeypatch.setattr(liveness, "uses", lambda s: visits.append(s) or real(s))
    body = liveness.with_frees(stmts, returned)
    # a statement is solved once per live-out set it meets (after its block; at a loop's second round, with what
    # the next trip needs), whatever the nesting: 14, 16, 16, 18 visits of 8 … 11 statements; the pass without its
    # memo doubled per loop (34, 67, 131, 165)
    assert len(visits) <= 2 * len(statements), (k, len(visits), len(statements))
    made = set().union(*(defs(s) for s in walk(body)))
    freed = {s.var for s in walk(body) if isinstance(s, Free)}
    assert returned <= made and not returned & freed
    assert made - returned <= freed, sorted(made - returned - freed)
