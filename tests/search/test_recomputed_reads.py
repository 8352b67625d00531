"""``recomputed_forms`` reads each form's diagram as a netlist once per call (issue 35: 48 ``to_netlist`` calls of
``isomorphic`` in the saved backward's derive were two per comparison).

Counted, never timed: every comparison gets netlists, one object per form and per candidate, whatever the number of
comparisons; the forms kept are those the comparison of diagrams keeps (second route: ``isomorphic`` asked of the
diagrams, as before, reads them itself).  Mutation caught: the diagrams passed again (``isomorphic(new.diagram,
g.diagram)``): the first assertion fails.
"""
import napkin_cat as nc
from napkin_cat.rewriting.isomorphism import isomorphic
from napkin_cat.rewriting.netlist import Netlist
from napkin_cat.rewriting.registry import rulebook
from napkin_cat.search import recomputation
from napkin_cat.search.forms import prepared_forms


def test_each_form_read_once(monkeypatch):
    book = rulebook()
    forms = prepared_forms(nc.grad(nc.library.attention(lse=True), wrt=[0, 1, 2], saved=True, aux=1), book)
    seen = []

    def counted(a, b):
        seen.append((a, b))
        return isomorphic(a, b)
    monkeypatch.setattr(recomputation, "isomorphic", counted)
    got = recomputation.recomputed_forms(forms, book)
    assert seen and all(isinstance(a, Netlist) and isinstance(b, Netlist) for a, b in seen)
    read = {id(b) for _, b in seen} | {id(a) for a, _ in seen}
    assert len(seen) > len(read) - len(got) > 0            # compared more often than read
    assert len(read) <= len(forms) + len(got) + sum(1 for a, _ in seen if id(a) not in {id(b) for _, b in seen})
    # the second route: the same forms when each comparison reads the diagrams itself
    monkeypatch.setattr(recomputation, "isomorphic", lambda a, b: isomorphic(a.diagram, b.diagram))
    again = recomputation.recomputed_forms(forms, book)
    assert [f.prepared for f in again] == [f.prepared for f in got]
    assert all(isomorphic(f.diagram, g.diagram) for f, g in zip(got, again))
