"""``nc.cost``: the IO cost of an algorithm, symbolic, or at concrete sizes where it is what a run counts.

``cost(d)`` is the symbolic functor (:mod:`.iocost`): sympy expressions in the axis and tile sizes,
with ``a/g`` trips.  ``cost(d, sizes=...)`` is the same functor at those sizes (:mod:`.numeric`), ceil-aware:
a tile that does not divide its axis leaves a shorter last tile, counted as what it holds.  It equals the
instrumented plan runner's counts at any tiles, and the symbolic cost substituted where the tiles divide::

    cost(d, sizes=s).H == nc.plan(d, s).run(*xs)[1].transfers
    cost(d, sizes=s).H[ℓ] == cost(d).H[ℓ].subs(s)                  (every tile divides its axis)

>>> import napkin_cat as nc
>>> mm = nc.group(nc.stream(nc.library.matmul(), "b", "s_b"), "a", "g_a")
>>> cost(mm, sizes={"a": 13, "b": 7, "c": 5, "g_a": 3, "s_b": 3}).H      # 5 groups: 4 of 3, one of 1
{1: 331}
>>> cost(mm).H[1].subs({nc.symbol(k): v for k, v in {"a": 13, "b": 7, "c": 5, "g_a": 3, "s_b": 3}.items()})
923/3
"""
from __future__ import annotations

from napkin_cat.cost.collector import collector_paused
from napkin_cat.cost.hierarchy import Hierarchy
from napkin_cat.cost.iocost import cost as symbolic
from napkin_cat.cost.numeric import at
from napkin_cat.cost.record import Cost
from napkin_cat.errors import ArgumentError
from napkin_cat.syntax.adapter import Diagram
from napkin_cat.syntax.flat import require_diagram


@collector_paused
def cost(diagram: Diagram, hierarchy=None, *, sizes: dict | None = None, block_mask=None, density=None) -> Cost:
    """The IO cost of ``diagram``: symbolic, or with ``sizes`` (every axis and tile name → a positive int) the
    integers a run at those sizes counts (a name the diagram lacks, or a tile larger than its axis, is refused
    with :class:`~napkin_cat.errors.AxisError` naming it).  ``block_mask``
    (:class:`~napkin_cat.algorithms.blockmask.BlockMask`, with ``sizes``): what a run given that block mask
    counts, the trips where a mask read from data allows no pair skipped.  Without one, a mask read from data runs
    a fraction ``ρ`` of the trips its positions allow, a symbol ``rho[…]`` named after its condition
    (:func:`~napkin_cat.algorithms.skipping.density_symbol`); ``density`` binds it (a number 0 … 1 for every such
    mask, or ``{symbol or its name: number}``); at ``sizes`` it defaults to 1, dense.  ``Cost.assumptions`` lists
    each density and its value (None: free).

    The cyclic garbage collector is paused while it runs (:data:`~napkin_cat.cost.collector.collector_paused`): the
    functor makes many short-lived records and sympy terms, and a full collection would walk the whole heap (after
    ``nc.derive``, the millions of objects its kernel cache keeps)."""
    require_diagram(diagram, "nc.cost")
    if hierarchy is not None and not isinstance(hierarchy, Hierarchy):
        raise ArgumentError(f"nc.cost's hierarchy is a napkin_cat.cost.hierarchy.Hierarchy (its levels, each a "
                            f"capacity and a weight, checked against the levels the algorithm uses), got the "
                            f"{type(hierarchy).__name__} {str(hierarchy)[:80]!r} (a hardware file is read by "
                            f"nc.hardware.predict or nc.derive(hardware=...))")
    if sizes is None:
        if block_mask is not None:
            raise ArgumentError("a block mask is a fact of data at concrete sizes: give sizes= with it (a symbolic "
                                "cost states a mask read from data by its density: give density= to bind it)")
        c = symbolic(diagram, hierarchy)
        return c if density is None else c.at_density(density)
    c = at(diagram, sizes, strict=True, block_mask=block_mask, density=density)
    if hierarchy is not None:
        hierarchy.check_levels(c.levels)
    return c
