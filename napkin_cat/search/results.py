"""What ``nc.derive`` returns: a :class:`Derivation` (the winner, made by the rules) and its :class:`Regime` s.

A regime is one piece of the answer: one memory size (numeric mode) or one interval of ``M`` (symbolic
mode), with its variant, transfers, algorithm, trace, cost, optimum and the gap to the lower bound.

A result's ``cost`` (the winner's full symbolic cost record, ``nc.cost(r.diagram)``) may be given as a
:class:`Later`: it is made on first read and kept, so a derive whose caller never reads it does not pay for it
(for 32 transformer blocks, about a tenth of the call).  Read or not, ``r.cost`` is the same value::

    Regime(..., cost=Later(lambda: c), ...).cost == c       # made once, on first read
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields

from napkin_cat.cost.optimum import Optimum
from napkin_cat.errors import NapkinError
import napkin_cat.rewriting.trace as rewriting_trace
from napkin_cat.rewriting.trace import Trace
from napkin_cat.search.bounds import Bound
from napkin_cat.search.schedule import Schedule
from napkin_cat.syntax.adapter import Diagram


class Later:
    """A value made on first read: ``Later(make)`` given where a :class:`Regime` or :class:`Derivation` field
    takes one that is costly (``cost``); the field calls ``make()`` once and keeps what it returns.

    ``facts``: what is known of the value before it is made (a symbolic derive's regime diagram: ``masked``,
    whether a stream of it skips trips by a mask from data), so a reader that needs only that makes nothing.

    >>> made = []
    >>> later = Later(lambda: made.append(1) or 42)
    >>> r = Regime(None, 7, None, None, later, None)
    >>> len(made), r.cost, r.cost, len(made)
    (0, 42, 42, 1)
    >>> Later(lambda: 1 / 0, masked=False).facts
    {'masked': False}
    """

    __slots__ = ("_make", "_value", "facts")

    def __init__(self, make, **facts):
        self._make, self._value, self.facts = make, None, facts

    def make(self):
        """The value, made on the first call (a Later shared by several results is made once)."""
        if self._make is not None:
            self._value, self._make = self._make(), None
        return self._value

    def __repr__(self):
        return "Later(…)"


class _Deferred:
    """A dataclass field's descriptor that holds a value or a :class:`Later` (made and kept on first read).

    ``default``: the field's default (none: the field is required)."""

    def __init__(self, *default):
        self.default = default

    def __set_name__(self, owner, name):
        self.slot = "_deferred_" + name

    def __get__(self, obj, owner=None):
        if obj is None:
            if not self.default:
                raise AttributeError(self.slot)     # (a dataclass reads this as: no default)
            return self.default[0]
        held = obj.__dict__[self.slot]
        if isinstance(held, Later):
            held = obj.__dict__[self.slot] = held.make()
        return held

    def __set__(self, obj, value):
        if value is self:       # (``field(default=_Deferred(x))``: the dataclass passes the descriptor as the default)
            value = self.default[0]
        obj.__dict__[self.slot] = value

    def held(self, obj):
        """What ``obj`` holds, not made: a value or a :class:`Later`."""
        return obj.__dict__[self.slot]


def held(result, name: str):
    """What field ``name`` of ``result`` holds, not made: a value or a :class:`Later`."""
    found = type(result).__dict__.get(name)
    return found.held(result) if isinstance(found, _Deferred) else getattr(result, name)


def replaced(result, **changes):
    """``dataclasses.replace(result, **changes)`` without making a field given as a :class:`Later`: it is carried
    over as it is (``replace`` reads every field).

    >>> r = Regime(None, 7, None, None, Later(lambda: 1 / 0), None)
    >>> replaced(r, H=8).H
    8
    """
    kept = {f.name: held(result, f.name) for f in fields(result) if f.init and f.name not in changes}
    return type(result)(**kept, **changes)


@dataclass(frozen=True)
class Regime:
    """One piece of the answer: where it holds (``memory`` for a number; ``lower`` ≤ M < ``upper`` and
    ``condition`` in symbolic mode), its ``variant``, ``H``, algorithm ``diagram``, ``trace``, ``cost``,
    ``optimum`` (tiles), and the lower ``bound`` with the ``gap`` H / bound (None where no bound is known)."""

    variant: Schedule
    H: object
    diagram: Diagram = _Deferred()   # (a Later is made on first read: a symbolic derive makes each piece's when read)
    trace: Trace = _Deferred()
    cost: object = _Deferred()       # (a Later is made on first read)
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
class Derivation(rewriting_trace.Derivation):
    """A derived algorithm (``start`` → ``diagram`` by ``trace``) with its optimum transfers ``H`` at
    ``level`` for ``memory``: an int (one memory), ``{M: H}`` (a list of memories) or a ``Piecewise``
    in M (symbolic).  ``regimes`` are the pieces; ``diagram``, ``trace``, ``variant``, ``cost``,
    ``optimum``, ``gap`` are those of the last regime (the largest memory).  ``bound`` is the known
    lower bound (:mod:`.bounds`).  With ``hardware=``, ``prediction`` and ``timings`` (the time model's
    choice of tiles and variant, :mod:`napkin_cat.hardware.timed`).  ``blocks`` (numeric mode): the thread
    blocks the narrowest kernel launches at the chosen tiles (``nc.derive(..., min_blocks=B)`` makes it ≥ B).

    ``diagram`` and ``trace`` may be given as :class:`Later` s (a symbolic derive's: its last piece's algorithm, made
    by the rules where read), as ``cost``: read or not, the same values."""

    diagram: Diagram = _Deferred()   # (a Later is made on first read)
    trace: Trace = _Deferred()
    H: object = None
    cost: object = _Deferred(None)   # (a Later is made on first read)
    optimum: Optimum | None = None
    variant: Schedule | None = None
    regimes: tuple = ()
    memory: object = None
    level: int = 1
    sizes: dict | None = None
    bound: Bound | None = None
    gap: object = None
    #: (label, {M: H or None}) numeric; (variant, H) symbolic (may be given as a :class:`Later`: a symbolic derive's
    #: closed forms made where read)
    candidates: tuple = field(default=_Deferred(()), repr=False)
    prediction: object = None       # with hardware=: the model's time at the chosen tiles (nc.hardware.predict)
    timings: tuple = field(default=(), repr=False)      # with hardware=: (variant, tiles, seconds, H), fastest first
    blocks: int | None = None   # numeric mode: the thread blocks the narrowest kernel launches (at the tiles chosen)
    #: the densities of masks from data its costs assume (:class:`~napkin_cat.cost.record.Density`, bound to
    #: ``nc.derive(..., density=)``; empty where the algorithm has none)
    assumptions: tuple = ()
    #: what the answer as a whole does not guarantee (a symbolic derive: the kernels whose large-M optimum has no
    #: closed form, so the envelope can lie above the optimum wherever their algorithms would win); empty otherwise
    notes: tuple = ()

    def at(self, memory) -> "Derivation":
        """The single-memory derivation for one of the memories of a numeric range."""
        for r in self.regimes:
            if r.memory == memory:
                return _single(self, r)
        raise NapkinError(f"no regime for memory {memory}; this derivation has "
                          f"{[r.memory for r in self.regimes]}")

    @property
    def tiles(self) -> dict:
        """The tiles of the last regime (the largest memory), as :attr:`Regime.tiles`."""
        if not self.regimes:
            raise NapkinError("this derivation holds no regime, so no tiles")
        return self.regimes[-1].tiles

    def planned(self, sizes=None, memory=None) -> tuple:
        """``(diagram, sizes)`` for :func:`napkin_cat.plan.plan`: the algorithm derived for ``memory`` (needed where
        this derivation holds several memories) with its axes' sizes and its chosen tiles; ``sizes`` may add names
        or choose other tiles, never other axis sizes (the algorithm was derived for these).  ``nc.plan(r)`` calls it.

        >>> import napkin_cat as nc
        >>> r = nc.derive(nc.library.attention(), memory=256, sizes={"q": 64, "x": 64, "d": 16})
        >>> d, s = r.planned()
        >>> d is r.diagram, s["q"], s["g_q"] == r.tiles["g_q"]
        (True, 64, True)
        """
        if self.sizes is None or any(r.memory is None for r in self.regimes):
            raise NapkinError("nc.plan of a symbolic derivation: its tiles are formulas in the memory, not numbers; "
                              "plan a derivation at numbers, nc.derive(f, memory=<an int>, sizes={...})")
        if memory is None and len(self.regimes) > 1:
            raise NapkinError(f"this derivation holds {len(self.regimes)} memories "
                              f"{[r.memory for r in self.regimes]}: give nc.plan(r, memory=) one of them")
        chosen = self.regimes[-1] if memory is None else self.at(memory).regimes[0]
        axes = {str(k): v for k, v in self.sizes.items()}
        given = {str(k): v for k, v in (sizes or {}).items()}
        changed = sorted(k for k in given if k in axes and given[k] != axes[k])
        if changed:
            raise NapkinError(f"sizes {', '.join(f'{k}={given[k]} (derived at {axes[k]})' for k in changed)} differ "
                              f"from the derivation's: derive again at those sizes; sizes= may only add names or "
                              f"choose other tiles {sorted(chosen.tiles)}")
        return chosen.diagram, {**axes, **chosen.tiles, **given}

    def table(self) -> list:
        """Rows ``(M, variant, H*, tiles, bound ratio)``, one per regime."""
        return [(r.memory if r.memory is not None else (r.lower, r.upper), str(r.variant), r.H, r.tiles, r.gap)
                for r in self.regimes]


def _single(parent, r: Regime) -> Derivation:
    return Derivation(parent.start, r.diagram, r.trace, H=r.H, cost=held(r, "cost"), optimum=r.optimum,
                      variant=r.variant,
                      regimes=(r,), memory=r.memory, level=parent.level, sizes=parent.sizes, bound=parent.bound,
                      gap=r.gap, assumptions=parent.assumptions)


