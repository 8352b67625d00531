"""The engine: what napkin-cat's layers are built from, for a user who extends them.

``import napkin_cat as nc`` is the user's vocabulary: build diagrams, rewrite them, cost, plan, run, draw
(``nc.__all__``).  ``nc.engine`` holds the parts a new primitive, functor, rule or backend is written with,
each documented in the module it lives in:

======================  =====================================================  ===================================
name                    what                                                   where (and its how-to page)
======================  =====================================================  ===================================
``KINDS``               the registry of primitive kinds (``nc.declare`` adds)   :mod:`napkin_cat.syntax.primitive`
``Box``, ``parse``      a generator box; an einops signature read into axes    :mod:`napkin_cat.syntax.adapter`,
                                                                               :mod:`napkin_cat.syntax.construct`
``traverse``            the one fold of values through a diagram              :mod:`napkin_cat.syntax.wiring`
                                                                               (``docs/writing-a-functor.md``)
``symbols_of``,         the size symbols a diagram's functors read; the names  :mod:`napkin_cat.syntax.sizes`
``names_of``            a ``Sizes`` may give for it
``schedule_of``,        a region as one schedule value, and its fold           :mod:`napkin_cat.algorithms.schedule`
``fold_region``
``Netlist``,            the rewriting engine's graph of a diagram, and back    :mod:`napkin_cat.rewriting.netlist`,
``to_netlist``,                                                                :mod:`napkin_cat.rewriting.readback`
``to_diagram``
``Obligation``          a rule's proof obligation (``docs/adding-a-rule.md``)  :mod:`napkin_cat.rewriting.obligation`
``power_terms``         ``Σ α_t M^-β_t`` read off an optimum                   :mod:`napkin_cat.cost.optimum`
======================  =====================================================  ===================================

>>> import napkin_cat as nc
>>> "exp" in nc.engine.KINDS, nc.engine.to_diagram(nc.engine.to_netlist(nc.library.matmul())) == nc.library.matmul()
(True, True)
>>> sorted(nc.engine.names_of(nc.stream(nc.library.matmul(), "b", "s_b")))
['a', 'b', 'c', 's_b']
"""
from napkin_cat.algorithms.schedule import fold_region, schedule_of
from napkin_cat.cost.optimum import power_terms
from napkin_cat.rewriting.netlist import Netlist, to_netlist
from napkin_cat.rewriting.obligation import Obligation
from napkin_cat.rewriting.readback import to_diagram
from napkin_cat.syntax.adapter import Box
from napkin_cat.syntax.construct import parse
from napkin_cat.syntax.primitive import KINDS
from napkin_cat.syntax.sizes import names_of, symbols_of
from napkin_cat.syntax.wiring import traverse

__all__ = ["KINDS", "Box", "parse", "traverse", "symbols_of", "names_of", "schedule_of", "fold_region", "Netlist",
           "to_netlist", "to_diagram", "Obligation", "power_terms"]
