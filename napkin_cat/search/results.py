"""What ``nc.derive`` returns: a :class:`Derivation` (the winner, made by the rules) and its :class:`Regime` s.

A regime is one piece of the answer: one memory size (numeric mode) or one interval of ``M`` (symbolic
mode), with its variant, transfers, algorithm, trace, cost, optimum and the gap to the lower bound.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from napkin_cat.cost.optimum import Optimum
from napkin_cat.errors import NapkinError
from napkin_cat.rewriting.trace import Derivation as _Derivation, Trace
from napkin_cat.search.bounds import Bound
from napkin_cat.search.schedule import Schedule
from napkin_cat.syntax.adapter import Diagram


@dataclass(frozen=True)
class Regime:
    """One piece of the answer: where it holds (``memory`` for a number; ``lower`` ≤ M < ``upper`` and
    ``condition`` in symbolic mode), its ``variant``, ``H``, algorithm ``diagram``, ``trace``, ``cost``,
    ``optimum`` (tiles), and the lower ``bound`` with the ``gap`` H / bound (None where no bound is known)."""

    variant: Schedule
    H: object
    diagram: Diagram
    trace: Trace
    cost: object
    optimum: Optimum
    bound: object = None
    gap: object = None
    memory: object = None
    lower: object = None
    upper: object = None
    condition: object = None
    #: the other partitions of each kernel, and the algorithm made with them (numeric mode:
    #: :class:`~napkin_cat.search.alternatives.Alternatives`), for a search by another objective
    alternatives: object = field(default=None, compare=False, repr=False)

    @property
    def tiles(self) -> dict:
        """The tile and stream sizes chosen (names → sizes; ``optimum.sizes`` holds the axes' too)."""
        chosen = self.optimum.exact_sizes if self.optimum.exact_sizes is not None else self.optimum.sizes
        return {str(k): v for k, v in chosen.items()}


@dataclass(frozen=True)
class Derivation(_Derivation):
    """A derived algorithm (``start`` → ``diagram`` by ``trace``) with its optimum transfers ``H`` at
    ``level`` for ``memory``: an int (one memory), ``{M: H}`` (a list of memories) or a ``Piecewise``
    in M (symbolic).  ``regimes`` are the pieces; ``diagram``, ``trace``, ``variant``, ``cost``,
    ``optimum``, ``gap`` are those of the last regime (the largest memory).  ``bound`` is the known
    lower bound (:mod:`.bounds`).  With ``hardware=``, ``prediction`` and ``timings`` (the time model's
    choice of tiles and variant, :mod:`napkin_cat.hardware.timed`).  ``blocks`` (numeric mode): the thread
    blocks the narrowest kernel launches at the chosen tiles (``nc.derive(..., min_blocks=B)`` makes it ≥ B)."""

    H: object = None
    cost: object = None
    optimum: Optimum | None = None
    variant: Schedule | None = None
    regimes: tuple = ()
    memory: object = None
    level: int = 1
    sizes: dict | None = None
    bound: Bound | None = None
    gap: object = None
    candidates: tuple = field(default=(), repr=False)   # (label, {M: H or None}) numeric; variants, symbolic
    prediction: object = None       # with hardware=: the model's time at the chosen tiles (nc.hardware.predict)
    timings: tuple = field(default=(), repr=False)      # with hardware=: (variant, tiles, seconds, H), fastest first
    blocks: int | None = None   # numeric mode: the thread blocks the narrowest kernel launches (at the tiles chosen)
    #: the densities of masks from data its costs assume (:class:`~napkin_cat.cost.record.Density`, bound to
    #: ``nc.derive(..., density=)``; empty where the algorithm has none)
    assumptions: tuple = ()

    def at(self, memory) -> "Derivation":
        """The single-memory derivation for one of the memories of a numeric range."""
        for r in self.regimes:
            if r.memory == memory:
                return _single(self, r)
        raise NapkinError(f"no regime for memory {memory}; this derivation has "
                          f"{[r.memory for r in self.regimes]}")

    def table(self) -> list:
        """Rows ``(M, variant, H*, tiles, bound ratio)``, one per regime."""
        return [(r.memory if r.memory is not None else (r.lower, r.upper), str(r.variant), r.H, r.tiles, r.gap)
                for r in self.regimes]


def _single(parent, r: Regime) -> Derivation:
    return Derivation(parent.start, r.diagram, r.trace, H=r.H, cost=r.cost, optimum=r.optimum, variant=r.variant,
                      regimes=(r,), memory=r.memory, level=parent.level, sizes=parent.sizes, bound=parent.bound,
                      gap=r.gap, assumptions=parent.assumptions)


