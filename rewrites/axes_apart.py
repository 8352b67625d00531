"""Axes named apart: α-conversion of the axes that blocks in a row name alike (``napkin_cat.rewriting.apart``).

==============  ===================================================================================================
rule            lhs → rhs
==============  ===================================================================================================
``axes_apart``  f(…, A[f], …, B[f], …) → f(…, A[f], …, B[f'2], …)   B ≫ A: every box of B computed from every box
                of A, B on no output; the boundary renamed back by views (``within=``: the classes one kernel alone
                sees, renamed apart within it)
==============  ===================================================================================================

An axis is a class of occurrences that boxes see together, not a name; two classes of one name are two axes
(each block of a stack built from one block names its hidden axis ``f``).  The search partitions kernels by name, so
a kernel holding two such blocks could not stream one block's ``f`` without the other's.  The rule renames apart every
class that comes wholly after another of its name (:func:`napkin_cat.rewriting.apart.apart_names`): once, over the
whole function (the role ``apart``: the search compares the normal form so renamed beside the others).  Renaming is
free: the values, the transfers and the FLOPs are those of the function (the inputs and outputs keep their names
through views, which move nothing).

>>> import napkin_cat as nc
>>> stack = nc.library.transformer_stack(2)
>>> (m,) = axes_apart.matches(stack)
>>> after = axes_apart.apply(stack, m)
>>> after.dom == stack.dom, sorted({a for x in after.boxes for y in x.cod.inside for a in y.names} - {"n", "e"})
(True, ['d', "d'2", 'f', "f'2", 'h', "h'2", 'm', "m'2"])
>>> axes_apart.matches(after), axes_apart.matches(nc.library.attention())       # named apart; nothing to do
([], [])
"""
from __future__ import annotations

import sympy

import napkin_cat as nc
from napkin_cat.errors import RewriteError
from napkin_cat.rewriting import Obligation, Rule, RuleSet
from napkin_cat.rewriting.apart import KINDS, apart_names, apart_within, renamed
from napkin_cat.rewriting.match import Pattern, where


def _first(net, node) -> bool:
    return node.id == next(iter(net.nodes))


def _everything(net, nodes) -> dict:
    """The rest of the netlist: the rule rewrites the whole function (the classes span it)."""
    if any(n.kind not in KINDS for n in net.nodes.values()):
        return None
    return {f"n{nid}": nid for nid in net.nodes if nid not in nodes.values()}


def _seams(m) -> tuple:
    """The parameter ``seams`` (node ids, written ``"12 40"``: a trace keeps it as text) as node ids."""
    text = m.params.get("seams", "")
    try:
        found = tuple(int(s) for s in str(text).split())
    except ValueError:
        return None
    return found if all(s in m.net.nodes for s in found) else None


def _within(m):
    """The parameter ``within`` (kernels' node ids, a kernel's ids apart by ``|``: ``"3 4 5|20 21"``) as sets of node
    ids; ``()`` where not given, None where it names a node the netlist has not."""
    text = str(m.params.get("within", "")).strip()
    if not text:
        return ()
    try:
        groups = tuple({int(s) for s in part.split()} for part in text.split("|"))
    except ValueError:
        return None
    return groups if all(g and g <= m.net.nodes.keys() for g in groups) else None


def _names(m):
    """The occurrences renamed apart (within the parts the ``seams`` cut, or within each kernel ``within`` names),
    bound as ``names``; None (no match) where none is."""
    seams, within = _seams(m), _within(m)
    if seams is None or within is None:
        return None
    try:
        if within:
            found = {}
            for nodes in within:      # (each kernel's renamed classes are its own: disjoint from the others')
                found.update(apart_within(m.net, nodes))
        else:
            found = apart_names(m.net, seams)
    except RewriteError:
        return None
    return {"names": found} if found else None


def _rhs(m):
    return renamed(m.net, m.vars["names"], m.input_wires, m.output_wires)


# ---------------------------------------------------------------------- the obligation
def _instance(rng):
    """``k`` blocks in a row, each a residual MLP or a residual SwiGLU on ``n e`` with hidden ``f`` (one name, its
    own weights per block), random ``k`` 2 … 4 and a random mix of the two kinds."""
    mlp = nc.rename_axis(nc.rename_axis(nc.library.mlp(activation=str(rng.choice(["gelu", "relu"]))), "i", "e"),
                         "o", "e")
    glu = nc.rename_axis(nc.library.swiglu_mlp(), "o", "e")
    kinds = [mlp if rng.random() < 0.5 else glu for _ in range(int(rng.integers(2, 5)))]
    return nc.library.in_a_row(kinds, residual=True)


def _cost_claim(lhs, rhs, m):
    """Nothing moves and nothing more is computed: H, M and FLOPs of both sides equal at every level."""
    before, after = nc.cost(lhs), nc.cost(rhs)
    for field in ("H", "M", "flops"):
        one, two = getattr(before, field), getattr(after, field)
        for k in set(one) | set(two):
            assert sympy.simplify(one.get(k, 0) - two.get(k, 0)) == 0, f"{field}[{k}]: {one.get(k)} → {two.get(k)}"


def _same_boundary(lhs, rhs) -> bool:
    """The function's type is kept, and every class renamed apart is a name no longer shared by dependent classes."""
    return lhs.dom == rhs.dom and lhs.cod == rhs.cod and not axes_apart.matches(rhs)


axes_apart = Rule(
    "axes_apart",
    Pattern({"f": where("the function's first node", _first)}, absorb=_everything, bind=_names),
    _rhs,
    obligation=Obligation(_instance, cost=_cost_claim, structural=_same_boundary, trials=6, rtol=0, atol=0),
    oriented=True,
    doc="""f(…, A[f], …, B[f], …) → f(…, A[f], …, B[f'2], …): an axis class B that comes wholly after another class A
    of its name (every box of B computed from every box of A) and reaches no output is renamed apart, over the whole
    function, the inputs and outputs keeping their names through views.  With ``seams=`` (node ids, ``"12 40"``)
    classes are renamed apart within the parts those cut only, numbered alike in each part (the search's segments).
    With ``within=`` (kernels' node ids, ``"3 4 5|20 21"``) the classes each kernel alone sees are renamed apart
    within it (:func:`~napkin_cat.rewriting.apart.apart_within`: a kernel the search joins across segments).

    α-conversion (an axis is the class of occurrences its boxes see together, not its name): each box computes
    what it did, its signature renamed throughout, sizes kept.  Exact in floating point.  Cost claim: H, M and
    FLOPs unchanged at every level (a view moves nothing).""")

RULES = RuleSet((axes_apart,))

__all__ = ["axes_apart", "RULES"]
