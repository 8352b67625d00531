"""``derive``: the IO-optimal algorithm of a function for each memory size, found by cost-guided rewriting.

The search space is the rule book's: a function is first optionally *prepared* (rules playing
``prepare``, e.g. the online-softmax form, a reassociation of a contraction chain, an n-ary contraction
split into pairwise ones in each order the rule offers), then its operations are split into kernels
(``kernel`` then ``fuse``; with ``share``, a kernel loads a value it reads in several places once; with
``join``, two independent parts that read one value may share a kernel), each
kernel streamed along an axis the streaming analysis accepts and grouped along every axis its outputs
carry (``stream``, ``group``).
For one prepared function, a kernel split is a chain of down-sets of its data-flow graph
(:mod:`.blocks`) and each kernel's transfers depend on its own tiles only, so

    H*(M) = min over chains ∅ ⊂ D₁ ⊂ … ⊂ all of  Σ_i min over partitions p of block D_i ∖ D_{i-1}  H*_p(M)

is a shortest path over the down-sets, one per memory size (:mod:`.space`).  Every block's
partitions are costed once per canonical form (:meth:`.blocks.OpGraph.key`; equal blocks anywhere,
in any call that reads the same kernel cache, share their costs: :mod:`.context`, the call's state), and a
block is skipped when its compulsory transfers cannot beat the best path known.  Past a budget of distinct
kernels (large diagrams), kernels are capped in size and each form's best split grown by cost-guided fusion
before the forms compare.  The winner is then *made by the rules* (:mod:`.construct`), so the result carries its
trace, which replays to the same algorithm; its cost is re-read off the made algorithm.

Numeric mode (``sizes`` and an int memory, or a list of them): per memory, the exact integer optimum
over divisor tiles; a kernel whose stream skips masked trips is ranked, tiling by tiling, by the transfers
counted at those tiles (:func:`~napkin_cat.cost.optimum.counted`), so ``r.H == nc.cost(r.diagram,
sizes=...).H[level]`` at the tiles it reports, whatever the mask (``ranking="estimate"``: ranked by the
symbolic estimate, and only each winner counted, :func:`derive`).  Symbolic mode (a memory symbol): the lower
envelope of the winners' large-M forms, a ``Piecewise`` in ``M`` (:mod:`.envelope`).

>>> import napkin_cat as nc
>>> r = derive(nc.library.matmul(), memory=2 ** 12, sizes={"a": 256, "b": 256, "c": 256})
>>> r.H, r.variant.kind, str(r.variant)
(851968, 'fully fused', '[·] group c,a · stream b')
>>> r.H == nc.optimal(nc.cost(r.diagram), memory=2 ** 12, sizes={"a": 256, "b": 256, "c": 256}).H
True
>>> nc.isomorphic(r.trace.replay(nc.library.matmul()), r.diagram)
True
"""
from __future__ import annotations

import sympy

from napkin_cat.algorithms.bubbles import Region, Stream
from napkin_cat.algorithms.launches import blocks
from napkin_cat.algorithms.schedule import schedule_of
from napkin_cat.cost.at_sizes import counts_kept
from napkin_cat.cost.collector import collector_paused
from napkin_cat.cost.numeric import bind, densities, folded
from napkin_cat.cost.optimum import Optimum, memory_limit
from napkin_cat.cost.record import Density
from napkin_cat.errors import (ArgumentError, ConstructionError, LevelError, MemoryLimitError, NapkinError,
                               RewriteError)
from napkin_cat.rewriting.registry import rulebook
from napkin_cat.search.alternatives import Alternatives
from napkin_cat.search.bounds import Bound, lower_bound
from napkin_cat.search.parallelism import Requirement
from napkin_cat.search.results import Derivation, Later, Regime, held, replaced
from napkin_cat.search.forms import Preparation
from napkin_cat.search.context import search_of
from napkin_cat.search.space import Makers, extremes, check_sizes, select, smallest_memory
from napkin_cat.syntax.array import MAX_LEVEL
from napkin_cat.syntax.adapter import Diagram
from napkin_cat.syntax.flat import layers
from napkin_cat.syntax.sizes import Sizes, as_sizes
from napkin_cat.syntax.axis import symbol
from napkin_cat.search.envelope import symbolic

__all__ = ["derive", "Derivation", "Regime"]


# ---------------------------------------------------------------------- derive
#: the most memories one derivation sweeps: every power of two a level can hold (2^0 … 2^64) is 65, and each
#: memory costs its own search (256 memories of matmul took 14 s here), so a sweep of a million is refused
MAX_MEMORIES = 256
#: how ``derive(..., ranking=)`` ranks the tilings of a kernel whose transfers are an estimate (a masked stream)
RANKINGS = ("counted", "estimate")


def _memories(memory):
    if isinstance(memory, (list, tuple, range)):
        if len(memory) > MAX_MEMORIES:
            raise MemoryLimitError(f"{len(memory)} memories: a derivation sweeps at most {MAX_MEMORIES} (each is a "
                                   f"search of its own); sample the range, e.g. its powers of two")
        ms = [memory_limit(m) for m in memory]
        if not ms:
            raise MemoryLimitError("give at least one memory size")
        if not all(m.is_Integer for m in ms):
            raise MemoryLimitError(f"a list of memories must be integers, got {list(memory)}")
        return [int(m) for m in ms], True
    M = memory_limit(memory)
    if M.is_number:
        if not M.is_Integer:
            raise MemoryLimitError(f"memory {memory} is not a whole number of values")
        return [int(M)], False
    return M, False


@collector_paused
@counts_kept()
def derive(diagram: Diagram, memory="M", level: int = 1, sizes: dict | None = None, *, book=None,
           depth: int = 2, reference: dict | None = None, tiles: str = "divisors",
           min_blocks: int | None = None, bound=None, cache=None, density=1, prepared=None,
           ranking: str = "counted") -> Derivation:
    """The cheapest algorithm for ``diagram`` at ``level`` with ``memory`` values there (see module docstring).

    ``memory``: a symbol name (symbolic mode: ``.H`` is a ``Piecewise`` in it), an int, or a list of ints
    (numeric mode: ``sizes`` must give every axis; ``.H`` an int, or ``{M: H}``).  ``book``: the rule
    book's name (default: the registered one).  ``depth``: how many ``prepare`` rewrites to chain.
    ``reference``: sizes at which symbolic mode orders its candidates (default: ``sizes``, else 1024,
    1088, 1152, … for the axes in order of appearance): pass the regime of interest (e.g. ``d`` much
    smaller than ``x``) when the order of the candidates depends on the sizes.  ``tiles`` (numeric mode):
    ``"divisors"`` (each tile divides its axis, the default) or ``"any"`` (a tile may leave a shorter last
    tile; trips are ``⌈n/g⌉``).  Raises :class:`~napkin_cat.errors.MemoryLimitError` naming the smallest
    memory that works when no algorithm fits.

    Transfers are this search's objective; ``nc.derive(..., hardware=)`` minimises the predicted time instead
    (:func:`napkin_cat.hardware.objective.derive`, the layer that knows the time models, over derivations made here).

    ``cache`` (a :class:`~napkin_cat.search.context.KernelCache`): the costed kernels the search reads and fills;
    by default the process's shared one (:data:`~napkin_cat.search.context.KERNELS`: bounded, locked, keyed by
    each kernel's canonical form and the level), ``KernelCache()`` to search cold.  Everything else the search
    remembers is this call's alone (:class:`~napkin_cat.search.context.Search`), so calls in several threads, or
    with different rule books, answer as they would alone.

    ``bound`` (numeric mode): a lower bound (:class:`~napkin_cat.search.bounds.Bound`, in the memory ``M``) to
    report the gap against in place of the one read off the diagram (:func:`~napkin_cat.search.bounds.lower_bound`,
    which knows attention's forward and the gradients ``nc.grad`` makes of it): one the structure does not show.

    ``density``: the fraction of a stream's trips (those its positions allow) that a mask read from data lets run
    (document ids: no block mask is known before the data): a number 0 … 1, default 1 (dense, the worst case).
    Every candidate is costed with it bound (:meth:`~napkin_cat.cost.record.Cost.at_density`), so the search is
    the dense one at 1; the result's ``assumptions`` name each density symbol of its algorithm and the value.

    ``min_blocks`` (numeric mode): a parallelism requirement.  The objective stays ``H``; the requirement
    narrows the set it is minimised over to the algorithms whose every kernel launches at least ``min_blocks``
    thread blocks (:mod:`napkin_cat.algorithms.launches`: its groups ``Π ⌈a/g⌉`` times the parts of a split
    stream that is the whole kernel): a constraint on each kernel's tiles
    beside its memory columns, and split streams (the rule playing ``split``: FlashDecoding, split-K) join the
    partitions the search costs (:mod:`napkin_cat.search.parallelism`).  ``.blocks`` reports what the result
    launches.  With a hardware model it defaults to the model's SM count.

    ``prepared`` (a :class:`~napkin_cat.search.forms.Preparation`): the prepared forms, shared with the other
    searches of one call (the GPU derive's, with and without a requirement); by default this call's own.

    ``ranking`` (numeric mode): where a kernel's symbolic transfers are an estimate (a stream a mask from
    positions skips), ``"counted"`` ranks each of its tilings by the transfers counted at it (one fold each), and
    ``"estimate"`` by the estimate: what a caller that counts its own candidates asks (the hardware derives time
    every tiling of the structures found, counted).  Each regime's ``H`` is counted either way (at its tiles,
    ``nc.cost(r.diagram, sizes=...).H[level]``); with ``"estimate"`` the ``candidates`` curves are the estimates.
    """
    if not isinstance(diagram, Diagram):
        raise NapkinError(f"derive takes a function diagram, got {type(diagram).__name__}")
    if sizes is not None:
        sizes = dict(as_sizes(sizes).of(diagram))
    if min_blocks is not None and (sizes is None or not isinstance(_memories(memory)[0], list)):
        raise NapkinError("min_blocks counts thread blocks at concrete sizes: give sizes= for every axis and a "
                          "number (or a list of numbers) for memory")
    if not isinstance(level, int) or isinstance(level, bool) or not 1 <= level <= MAX_LEVEL:
        raise LevelError(f"level must be a positive int 1 … {MAX_LEVEL} (1: the first level below global memory), "
                         f"got {level!r}")
    if ranking not in RANKINGS:
        raise ArgumentError(f"ranking={ranking!r}: one of {RANKINGS} (a masked stream's tilings ranked by the "
                            f"transfers counted at each, or by the symbolic estimate)")
    search = search_of(level, cache, density)
    book = rulebook(book) if not hasattr(book, "roles") else book
    memories, many = _memories(memory)
    if prepared is not None and not isinstance(prepared, Preparation):
        raise ArgumentError(f"prepared= takes a Preparation (napkin_cat.search.forms), got {type(prepared).__name__}")
    forms = (prepared or Preparation()).forms(diagram, book, depth, sizes if sizes is not None else reference)
    if not any(len(f.graph) for f in forms):
        raise RewriteError("the diagram has no operation to derive an algorithm for")
    if isinstance(memories, list):
        if sizes is None:
            raise NapkinError("a number for memory needs sizes= for every axis (numeric mode); or give a memory "
                              "symbol such as 'M' for the symbolic envelope")
        return _assuming(_numeric(diagram, forms, book, search, memories, many, dict(sizes), tiles, min_blocks,
                                  bound, ranking == "counted"), search.density)
    if bound is not None:
        raise NapkinError("bound= is a numeric-mode option: give a number (or a list of numbers) for memory")
    if ranking != "counted":
        raise NapkinError("ranking='estimate' is a numeric-mode option (the symbolic large-M forms count nothing)")
    if tiles != "divisors":
        raise NapkinError("tiles='any' is a numeric-mode option (the symbolic large-M forms have no tile grid)")
    return _assuming(symbolic(diagram, forms, book, search, memories, sizes, reference), search.density)


def _assuming(d: Derivation, density) -> Derivation:
    """``d`` stating the density its costs assume for each mask from data of its algorithm (none: nothing).

    A cost assumes a density only where a stream of its algorithm skips trips by a mask from data, so the costs
    (made on first read, :class:`~napkin_cat.search.results.Later`) are read only where a regime's algorithm has
    one (:func:`masked_by_data`); elsewhere they assume nothing and stay unmade."""
    found = {a.symbol: None for r in (d.regimes or (d,)) if _masked(r)
             for a in (r.cost.assumptions if r.cost is not None else ())}
    later = held(d, "diagram")    # (a symbolic derive's algorithm, not made: its facts say whether it has one)
    if not (isinstance(later, Later) and later.facts.get("masked") is False):
        found.update((s, None) for s in densities(d.diagram))
    return replaced(d, assumptions=tuple(Density(s, density) for s in found))


def _masked(r) -> bool:
    """:func:`masked_by_data` of a result's diagram, read off what its :class:`~.results.Later` knows where the
    diagram is not made yet (a symbolic derive's pieces: from their kernels' costs), else off the diagram."""
    later = held(r, "diagram") if isinstance(r, Regime) else None
    if isinstance(later, Later) and "masked" in later.facts:
        return later.facts["masked"]
    return masked_by_data(r.diagram)


def masked_by_data(diagram) -> bool:
    """Whether a stream of ``diagram`` (in any region, a device's too) skips trips by a mask read from data: where
    one does, and only there, ``nc.cost(diagram).assumptions`` names a density.

    >>> import napkin_cat as nc
    >>> algorithm = lambda f: nc.group(nc.stream(nc.kernel(f), "x", "s_x"), "q", "g_q")
    >>> masked_by_data(algorithm(nc.library.document_attention())), masked_by_data(algorithm(nc.library.attention()))
    (True, False)
    """
    for _, box in layers(diagram):
        if isinstance(box, Stream) and (skip := schedule_of(box).skip) is not None and skip.density is not None:
            return True
        if isinstance(box, Region) and masked_by_data(box.arg):
            return True
    return False


def _numeric(diagram, forms, book, search, memories, many, sizes, tiles="divisors", min_blocks=None, given=None,
             count=True):
    level = search.level
    env = check_sizes(diagram, sizes)
    if tiles not in ("divisors", "any"):
        raise NapkinError(f"tiles must be 'divisors' or 'any', got {tiles!r}")
    need = None if min_blocks is None else Requirement(min_blocks, sizes, memories, tiles, count)
    best = select(forms, search, sizes, memories, tiles, tuple(book.roles), need, count)
    if need is not None and any(b is None for b in best):
        low = [m for m, b in zip(memories, best) if b is None]
        raise MemoryLimitError(f"no algorithm for this diagram launches {min_blocks} thread blocks in every kernel "
                               f"and fits level {level} with memory {low[0] if len(low) == 1 else low} (at sizes "
                               f"{sizes}); lower min_blocks, or give the rule book a rule playing 'split'"
                               + ("" if "split" in book.roles else " (this one has none)"))
    if any(b is None for b in best):
        small = min(smallest_memory(f, search, sizes) for f in forms)
        low = [m for m, b in zip(memories, best) if b is None]
        err = MemoryLimitError(f"no algorithm for this diagram fits level {level} with memory "
                               f"{low[0] if len(low) == 1 else low}: the smallest memory that works is {small} "
                               f"values (at sizes {sizes})")
        err.smallest = small
        raise err
    M = symbol("M")
    if given is not None and not isinstance(given, Bound):
        raise NapkinError(f"bound= takes a Bound (napkin_cat.search.bounds), got {type(given).__name__}")
    bound = lower_bound(diagram, M) if given is None else given
    made, regimes = Makers(), []
    for m, (form, path), b in zip(memories, best, bound.at_memories(env, M, memories)):
        w = made.get_made(diagram, form, path, book, level)
        H, chosen = w.numeric(sizes, m, memories, tiles, need, count)
        if H is None:
            raise ConstructionError(f"the algorithm made by the rules does not fit memory {m} as its search "
                                    f"estimate did: {w.variant}")
        if not count and w.cost.estimated:    # ranked by the estimate: the winner counted at its tiles
            rho = {s: search.density for s in densities(w.diagram)} if search.density != 1 else None
            H = int(folded(w.diagram, bind(w.diagram, Sizes(sizes) | chosen, strict=False), density=rho)
                    .H.get(level, 0))
        gap = sympy.Rational(H, int(b)) if bound.structural and b else None
        over = "divisor tiles" if tiles == "divisors" else "every tile size (a shorter last tile)"
        opt = Optimum(sympy.Integer(H), Sizes(sizes) | chosen, [(sympy.Integer(H), sympy.Integer(0))],
                      sympy.Integer(m), sympy.Integer(H), dict(chosen), None, None,
                      [f"sum of each kernel's exact integer optimum over {over} ({len(w.kernels)} kernels)"])
        regimes.append(Regime(w.variant, H, w.diagram, w.trace, Later(lambda w=w: w.cost), opt, b, gap, memory=m,
                              alternatives=None if need is not None else
                              Alternatives(diagram, form, path, book, level, search, made)))
    curves = {str(w.variant): [w.numeric(sizes, m, memories, tiles, need, count)[0] for m in memories]
              for w in made.values()}
    for kind, hs in extremes(forms, search, sizes, memories, tiles, tuple(book.roles), count).items():
        curves.setdefault(kind, hs)
    last = regimes[-1]
    return Derivation(diagram, last.diagram, last.trace, H={r.memory: r.H for r in regimes} if many else last.H,
                      blocks=blocks(last.diagram, last.optimum.sizes),
                      cost=held(last, "cost"), optimum=last.optimum, variant=last.variant, regimes=tuple(regimes),
                      memory=memories if many else memories[0], level=level, sizes=sizes, bound=bound, gap=last.gap,
                      candidates=tuple((label, dict(zip(memories, hs))) for label, hs in curves.items()))

