"""Rule books: where the rule sets and named derivations come from, without importing them.

``rewrites/`` (the paper's theorem library) sits above the package: it imports
``napkin_cat``, never the reverse.  It declares itself under the packaging entry-point
group ``napkin_cat.rules``; the CLI, trace loading and the derivation search find rule
books here.  A user's own rule package plugs in the same way, or by :func:`register`.

>>> import napkin_cat as nc
>>> book = Rulebook("mine", nc.RuleSet(()), {})
>>> register(book) is book and rulebook("mine") is book
True
>>> del BOOKS["mine"]
>>> rulebook("nonesuch")
Traceback (most recent call last):
...
napkin_cat.errors.RewriteError: no rule book named 'nonesuch'; registered: ...
"""
from __future__ import annotations

from dataclasses import dataclass, field
from importlib.metadata import entry_points

from napkin_cat.errors import RewriteError
from napkin_cat.rewriting.rules import RuleSet

GROUP = "napkin_cat.rules"
BOOKS: dict = {}
_loaded = False


#: The parts a rule book may play in the derivation search (:mod:`napkin_cat.search`), by role:
#: ``kernel`` (a primitive becomes its own kernel; takes ``level=``), ``fuse`` (two kernels become one),
#: ``stream`` and ``group`` (partition a kernel; take ``axis=`` and ``size=``), ``sweep`` (a sliced stream: a
#: kernel streamed along an axis its outputs carry, each trip writing its slice; takes ``axis=`` and ``size=``;
#: optional: a book without it gives the search no sliced variants), ``share`` (a kernel that reads one value
#: in several ports loads it once; optional: without it, each port is loaded), ``join`` (two kernels with no path
#: between them that read one value become one kernel, which ``share`` then makes load it once; optional: without
#: it, a kernel's operations are connected by data flow), ``compute_once`` (a kernel that computes one value
#: twice, the copies its readers brought in when fusion or a join put them in one kernel, computes it once;
#: optional: without it, each copy is computed), ``nest`` (a stream inside a
#: stream's trip along another axis the trip reduces: the 2-D loop; takes ``axis=`` and ``size=``; optional:
#: a book without it gives the search no 2-D variants), ``split`` (a stream's slices in parts run by parallel
#: blocks, their states merged; takes ``axis=`` and ``parts=``; optional), ``recompute`` (a consumer
#: recomputes a value from the function's inputs and small statistics instead of reading it; takes
#: ``consumer=``; optional: a book without it gives the search no recomputed forms), ``prepare`` (a tuple of
#: function-level rules the search tries before partitioning: online forms, reassociations) and
#: ``simplify`` (a tuple of terminating clean-up rules applied to a fixpoint first: dead code, identities) and
#: ``normalise`` (a tuple of rules that each shrink the netlist, applied to a fixpoint with ``simplify``: an
#: operation written by hand becomes the primitive the other rules know, a SoftMax written as max, exp, sum and
#: divide the SoftMax; optional), ``apart`` (a rule applied once to the normal form, on the whole function, making one
#: more form: axes that share a name but are two axes, one block's after another's, renamed apart, so that a kernel
#: may partition each alone;
#: takes ``seams=``, the node ids the search cuts a large function at; :mod:`napkin_cat.rewriting.apart`; optional:
#: without it, names are kept).  The device search (:mod:`napkin_cat.search.devices`, ``nc.derive`` on a cluster)
#: reads nine more, each optional (a book without them offers no device forms of that kind): ``shard`` (a box woven
#: over an axis run on each device's shard of it; takes ``axis=`` and ``devices=``), ``shard_reduce`` (a box that
#: reduces the axis: each device's partial merged by an all-reduce; same parameters), ``shard_fuse`` (two device
#: regions, or a region and a box it feeds, become one, a value read whole all-gathered), ``shard_gather`` (a
#: replicated input arrives sharded along ``axis=`` and is all-gathered), ``shard_generate`` (a box with no input
#: feeding a region alone, positions, computed on every device: the search's rings take it, so a mask from positions
#: is each device's own), ``ring`` (such an input passed round the devices instead, the inside streamed along
#: ``axis=``; takes ``order=``, one of :data:`napkin_cat.algorithms.orders.ORDERS`), ``ring_gathered`` (the
#: all-gather of a value computed on the shards made a ring, read by a part that streams its axis), ``reshard``
#: (a part woven over ``heads=`` run on a head shard between two all-to-alls; takes ``devices=``) and ``scatter``
#: (a tuple of rules applied to a fixpoint after a gather, each taking ``axis=``, the gathered one: boxes before a
#: region that reads them sharded moved inside on shards, an all-reduce split into a reduce-scatter and an
#: all-gather, all-gathers moved past the boxes local to their axis and left out at the outputs: sequence
#: parallelism).
ROLES = ("kernel", "fuse", "stream", "sweep", "split", "nest", "group", "share", "join", "compute_once", "recompute",
         "prepare", "apart",
         "simplify", "normalise", "shard", "shard_reduce", "shard_fuse", "shard_gather", "shard_generate", "ring",
         "ring_gathered", "reshard", "scatter")


@dataclass(frozen=True)
class Rulebook:
    """A named rule set, its named derivations (``name -> derive(diagram) -> Derivation``) and the
    ``roles`` its rules play in the derivation search (``{role: rule name}``, ``prepare``: names)."""

    name: str
    rules: RuleSet
    derivations: dict = field(default_factory=dict)
    roles: dict = field(default_factory=dict)

    def __post_init__(self):
        unknown = sorted(set(self.roles) - set(ROLES))
        if unknown:
            raise RewriteError(f"rule book {self.name!r}: unknown roles {unknown}; the roles are {list(ROLES)}")
        for role, names in self.roles.items():
            for n in (names,) if isinstance(names, str) else names:
                if n not in self.rules:
                    raise RewriteError(f"rule book {self.name!r}: role {role!r} names {n!r}, which is not one of "
                                       f"its rules {self.rules.names}")

    def role(self, name: str):
        """The rule playing ``name`` (for ``prepare``: a tuple of rules); RewriteError if none does."""
        if name not in self.roles:
            raise RewriteError(f"rule book {self.name!r} declares no rule for the role {name!r} (its roles: "
                               f"{sorted(self.roles)}); give Rulebook(..., roles={{{name!r}: <rule name>}})")
        names = self.roles[name]
        if isinstance(names, str):
            return self.rules[names]
        return tuple(self.rules[n] for n in names)


def register(book: Rulebook) -> Rulebook:
    """Make ``book`` findable by name (replacing a book of the same name)."""
    if not isinstance(book, Rulebook):
        raise RewriteError(f"register takes a Rulebook, got {type(book).__name__}")
    BOOKS[book.name] = book
    return book


def _load_entry_points():
    global _loaded
    if _loaded:
        return
    _loaded = True
    for ep in entry_points(group=GROUP):
        if ep.name in BOOKS:
            continue
        book = ep.load()
        if not isinstance(book, Rulebook):
            raise RewriteError(f"entry point {ep.name!r} of group {GROUP!r} ({ep.value}) is a "
                               f"{type(book).__name__}, not a Rulebook")
        BOOKS.setdefault(book.name, book)


def rulebooks() -> dict:
    """Every registered rule book, by name (entry points of ``napkin_cat.rules`` loaded once)."""
    _load_entry_points()
    return dict(BOOKS)


def rulebook(name: str | None = None) -> Rulebook:
    """The rule book called ``name``; without a name, the only one (or ``paper``, the default library)."""
    books = rulebooks()
    if name is None:
        if "paper" in books:
            return books["paper"]
        if len(books) == 1:
            return next(iter(books.values()))
        if not books:
            raise RewriteError(f"no rule book is registered: install napkin-cat (`pip install .`) so that the "
                               f"{GROUP!r} entry point of `rewrites` is found, or register one with "
                               "napkin_cat.rewriting.registry.register")
        raise RewriteError(f"several rule books are registered ({sorted(books)}); name one")
    try:
        return books[name]
    except KeyError:
        raise RewriteError(f"no rule book named {name!r}; registered: {sorted(books)}") from None
