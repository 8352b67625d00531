"""A rule whose ``matches`` offers a match must rewrite it (issue 25, family 4): every rule of the rule book, on
random programs (the project's generator as a hypothesis strategy), as functions, as one kernel and unfused,
and with partition rules along every axis; each rewrite keeps the function."""
from __future__ import annotations

from hypothesis import given, settings

import napkin_cat as nc
from napkin_cat.rewriting.registry import rulebook
from napkin_cat.testing import programs

BOOK = rulebook()
PARTITIONS = {BOOK.roles.get("stream"), BOOK.roles.get("group"), BOOK.roles.get("sweep")}


def _axes(d):
    return sorted({n for arr in (*d.dom.inside, *d.cod.inside) for n in arr.names})


@settings(max_examples=25, deadline=None)
@given(programs(n_ops=4))
def test_every_offered_match_rewrites_to_the_same_function(p):
    certifiable = bool(nc.equivalent(p.diagram, p.diagram, sizes=p.sizes))
    offered = 0
    for d in (p.diagram, nc.kernel(p.diagram), nc.unfused(p.diagram)):
        for rule in BOOK.rules.rules:
            variants = [rule] + ([rule.using(axis=a, size="t") for a in _axes(d)] if rule.name in PARTITIONS else [])
            for r in variants:
                for m in r.matches(d):
                    after = r.apply(d, m)       # raises if an offered match does not rewrite
                    offered += 1
                    if certifiable and offered % 4 == 0:   # equivalence on a share (the CI fuzz walks further)
                        assert nc.equivalent(d, after, sizes=p.sizes), (r.name, m.describe(), p.source)
    assert offered >= 1 or "identity" in p.shapes    # kernel formation is offered wherever an operation is
