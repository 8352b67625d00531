"""Layer 5, search: cost-guided derivation (``nc.derive``), the IO-optimal algorithm per memory size.

``derive(diagram, memory, level, sizes)`` searches the rule book's derivations (prepared forms, kernel splits,
streamed and grouped axes), costs each candidate with ``nc.cost`` and ``nc.optimal``, and returns the winner made by
the rules, with its trace, cost, optimum, variant and the gap to a known lower bound.  Modules: ``blocks`` (kernel
splits as down-sets; ``downsets``: the data-flow order), ``variants`` (a kernel's partitions), ``curves`` (a
kernel's ``H*(M)``), ``forms`` (prepared forms), ``paths`` (kernel splits as shortest paths over down-sets;
``growth``: cost-guided fusion past the cap), ``segments`` (the search at model scale: cut at seams, alike segments
solved once), ``space`` (the selection over forms, the winner), ``construct`` (the trace by the rules), ``results``
(``Derivation``, ``Regime``), ``envelope`` (symbolic mode), ``bounds`` (lower bounds), ``schedule`` (the variant
described), ``derivation``.

May import: every layer up to rewriting; it finds rule sets through a registry, never by
importing ``rewrites``.
"""
from napkin_cat.search.bounds import Bound, lower_bound
from napkin_cat.search.derivation import derive
from napkin_cat.search.results import Derivation, Regime
from napkin_cat.search.schedule import KernelChoice, Schedule

__all__ = ["derive", "Derivation", "Regime", "Schedule", "KernelChoice", "Bound", "lower_bound"]
