"""One printer over the plan IR: a ``_print_<Node>`` per node, dialects as subclasses that differ in tables.

The pseudocode printer of :mod:`napkin_cat.plan.printer` is the root; :class:`CodePrinter` adds what
every kernel printer needs, whatever the language:

* **launches** (:mod:`napkin_cat.codegen.launch`): the plan's top level cut into kernel launches, one thread
  block / program / OpenMP iteration per distinct index of a chain of Grids.  The linear block index
  ``b`` is decoded in two steps (:meth:`CodePrinter.decode`): a mixed radix over the axes, the last
  fastest (``b_n = b mod N_n``, ``b_{n-1} = (b div N_n) mod N_{n-1}`` …), then each axis's ``b_a`` into the
  indices of its Grids (:meth:`CodePrinter.unflatten`): one Grid's index is ``b_a``; Grids nested along
  one axis (an inner Grid cuts each tile of the outer, the last tile shorter) number their innermost
  tiles in a radix of constant places, a whole tile of ``g`` holding ``C = N(g, inner tiles)`` of them:
  ``i = ⌊b_a/C⌋``, and the inner Grids decode ``b_a mod C`` the same way (a last, shorter tile holds fewer);
* **extents**: a tile's extent in the current trip, ``e = min(tile, full − i·tile)`` (the mask of a
  ragged edge), bound to the tile's symbol inside its loop as the numpy runner binds it;
* **expressions**: sizes substituted, loop indices and extents kept, printed through the dialect's
  table (``min``, integer division, literals);
* **kinds**: a statement prints by its kind's printed form, read off the kind's record
  (``Kind.part(printer.dialect)``, :mod:`napkin_cat.syntax.printed`): a ``Template`` is an elementwise map, its
  helper calls (``{max}(a, b)``) filled from the dialect's ``helpers``; a ``Structured`` form names the
  method that prints it (``_print_<structure>``); an accumulated statement folds with its accumulator's
  ``Fold``.  A kind whose record has no form for the dialect raises
  :class:`~napkin_cat.codegen.errors.UnknownKindError` (a :class:`~napkin_cat.errors.MissingPartError`)
  naming the kind, the backend and the ``forms=`` keyword that supplies it.

>>> import napkin_cat as nc
>>> p = nc.plan(nc.group(nc.stream(nc.library.matmul(), "b", "s_b"), "a", "g_a"),
...             {"a": 5, "b": 6, "c": 4, "s_b": 3, "g_a": 2})
>>> (grid,) = launches(p)[0].grids
>>> printer = CodePrinter(p)
>>> printer.code(printer.extent_of(grid)), printer.decode(launches(p)[0], "b")
('min(2, 5 - 2*i_a)', [('i_a', 'b')])

Grids nested along one axis (``a = 10`` cut in 7s, each tile cut in 3s: ``(3 + 3 + 1) + 3``) launch their
innermost tiles:

>>> nested = nc.group(nc.group(nc.stream(nc.library.matmul(), "b", "s_b"), "a", "g_a"), "a", "h_a")
>>> p = nc.plan(nested, {"a": 10, "b": 4, "c": 3, "g_a": 7, "h_a": 3, "s_b": 2})
>>> CodePrinter(p).decode(launches(p)[0], "b")
[('nc_b_a', 'b'), ('i_a', 'nc_b_a / 3'), ('i_ap', 'nc_b_a % 3')]
"""
from __future__ import annotations

import numbers

import sympy

from napkin_cat.algorithms.launches import tiles_of_axis
from napkin_cat.codegen.errors import CodegenError
from napkin_cat.codegen.kinds import RecordForms
from napkin_cat.codegen.launch import Launch, chain_count, launches  # noqa: F401  (launches: c/openmp.py reads it here)
from napkin_cat.codegen.layout import layouts
from napkin_cat.plan.ir import Alloc, Free, StreamLoop, writes
from napkin_cat.plan.accumulate import separated
from napkin_cat.plan.blocks import block_tables
from napkin_cat.plan.printer import Printer
from napkin_cat.plan.program import LARGEST_INDEX, Plan
from napkin_cat.syntax.adapter import Diagram

_GREEK = {"μ": "mu", "δ": "delta", "σ": "sigma", "β": "beta", "·": "dot", "'": "p", "′": "p"}


def ident(name: str) -> str:
    """A name as an identifier of every target language (ASCII letters, digits, underscores)."""
    out = "".join(_GREEK.get(c, c) for c in str(name))
    out = "".join(c if c.isascii() and (c.isalnum() or c == "_") else "_" for c in out)
    return out if out and not out[0].isdigit() else f"v{out}"


class _HeldCeiling(sympy.Function):
    """``⌈x⌉`` held through a substitution, evaluated only on a number (see :func:`substituted`)."""

    @classmethod
    def eval(cls, x):
        return sympy.ceiling(x) if x.is_Number else None


def substituted(e, *mappings) -> sympy.Expr:
    """``e`` with ``mappings`` substituted in turn, each ceiling kept as one until its argument is a number.

    sympy (1.14) drops a ceiling whose argument it infers, wrongly, to be an integer: an even numerator over
    ``2·odd`` (``⌈Min(8, 12 − 8·i)/6⌉`` → ``Min(8, 12 − 8·i)/6``), and a kernel printing that would run
    no trip of an inner group (nested groups along one axis at ragged tiles).

    >>> i = sympy.Symbol("i", integer=True, nonnegative=True)
    >>> t, u = sympy.symbols("t u", integer=True, positive=True)
    >>> substituted(sympy.ceiling(sympy.Min(t, 12 - t * i) / u), {t: 8, u: 6})
    ceiling(Min(8, 12 - 8*i)/6)
    >>> substituted(sympy.ceiling(sympy.Min(t, 12 - t * i) / u), {t: 8, u: 6}, {i: 1})
    1
    """
    e = sympy.sympify(e)
    if not e.has(sympy.ceiling):
        for m in mappings:
            e = e.subs(m)
        return e
    e = e.replace(sympy.ceiling, _HeldCeiling)
    for m in mappings:
        e = e.subs(m)
    return e.replace(_HeldCeiling, lambda x: sympy.ceiling(x, evaluate=False))


def _check_index_range(plan):
    """Refuse a plan whose arrays have more elements than a 32-bit index reaches (the loops would wrap): the plan's
    :attr:`~napkin_cat.plan.program.Plan.widest` against :data:`~napkin_cat.plan.program.LARGEST_INDEX` (the
    hardware search offers no such plan, :mod:`napkin_cat.hardware.timed`)."""
    name, n = plan.widest
    if n > LARGEST_INDEX:
        raise CodegenError(f"variable {name!r} has {n} elements at sizes {dict(plan.sizes)}, more than "
                           f"a kernel's 32-bit indices reach ({LARGEST_INDEX}); choose smaller sizes")


class CodePrinter(RecordForms, Printer):
    """The base of the kernel printers (see the module docstring); a dialect overrides the tables below."""

    backend = "code"
    #: dtype name → the dialect's type of a stored value
    dtypes: dict = {"fp32": "float"}
    min_template = "min({0}, {1})"
    max_template = "max({0}, {1})"
    div_template = "{0} / {1}"
    mod_template = "{0} % {1}"
    #: a skipped trip's test (``StreamLoop.when``): conjunction, disjunction, negation of conditions
    and_template = "({0} && {1})"
    or_template = "({0} || {1})"
    not_template = "!({0})"
    #: a choice between two integers on a scalar condition (a loop's bounds, :mod:`napkin_cat.codegen.ranges`)
    where_template = "(({0}) ? ({1}) : ({2}))"
    comment = "//"
    indent = "    "
    #: lay out on-chip values so that no output takes bytes its statement reads (see ``layout(unstaged=)``)
    unstaged_layout = False
    #: bytes per value by format name, where the dialect holds a format wider than its own (``layout(width=)``)
    width: dict = {}

    def __init__(self, plan, **options):
        if not isinstance(plan, Plan):
            hint = " (plan the diagram first: nc.plan(diagram, sizes))" if isinstance(plan, Diagram) else ""
            raise CodegenError(f"nc.codegen.{self.backend} takes a plan (p = nc.plan(diagram, sizes)), got a "
                               f"{type(plan).__name__}{hint}")
        _check_index_range(plan)
        #: the plan as written, a sum accumulated in place run as the rest then the sum folded in (an mma with C):
        #: what the data's block masks are derived from (:mod:`napkin_cat.plan.condition`)
        self.written = separated(plan)
        plan = self.prepared(self.written)
        super().__init__(plan.variable_map, plan.masked)
        self.plan, self.sizes, self.options = plan, dict(plan.sizes), options
        self.layout = layouts(plan, unstaged=self.unstaged_layout, width=self.width)   # byte offsets per level
        self.extents: dict = {}    # tile symbol -> symbol of its extent in the current trip
        #: the :class:`~napkin_cat.plan.skips.BlockSkip` of the full trip being printed (its mask left out), or None
        self.full_trip = None
        #: the block table of each stream loop whose skip test reads one, by its loop index (:mod:`..plan.blocks`)
        self.block_tables = {t.loop.index: t for t in block_tables(self.written)}
        self._nominal: dict = {}   # e -> e at the plan's sizes (a kernel asks for the same extents many times)
        self._current: dict = {}   # (e, the extents bound) -> e in that trip

    def prepared(self, plan):
        """The plan as this dialect prints it (its layouts and arenas are this plan's): here, as given; the C
        printer fuses elementwise maps into their reader (:mod:`napkin_cat.codegen.fusion`)."""
        return plan

    # ------------------------------------------------------------------ expressions
    def nominal(self, e) -> sympy.Expr:
        """``e`` at the plan's sizes (tiles at their full size)."""
        e = sympy.sympify(e)
        found = self._nominal.get(e)
        if found is None:
            found = self._nominal[e] = substituted(e, self.sizes)
        return found

    def current(self, e) -> sympy.Expr:
        """``e`` in the current trip: tile symbols bound by enclosing loops become their extents."""
        key = (e, tuple(self.extents.items()))
        found = self._current.get(key)
        if found is None:
            found = self._current[key] = substituted(e, self.extents, self.sizes)
        return found

    def code(self, e, names: dict | None = None) -> str:
        """An integer expression in the dialect; ``names`` maps symbols to printed text."""
        return self._expr(self.nominal(e), names or {})

    def _nested(self, template: str, args, names) -> str:
        """A binary ``template`` (``"min({0}, {1})"``) folded from the left over ``args``: ``f(f(a, b), c)``."""
        out, *rest = [self._expr(a, names) for a in args]
        for a in rest:
            out = template.format(out, a)
        return out

    def _expr(self, e, names) -> str:
        if isinstance(e, (sympy.logic.boolalg.BooleanTrue, sympy.logic.boolalg.BooleanFalse)):
            return self.boolean(bool(e))
        if isinstance(e, sympy.core.relational.Relational):
            return f"({self._expr(e.lhs, names)} {e.rel_op} {self._expr(e.rhs, names)})"
        if isinstance(e, (sympy.And, sympy.Or)):
            return self._nested(self.and_template if isinstance(e, sympy.And) else self.or_template, e.args, names)
        if isinstance(e, sympy.Not):
            return self.not_template.format(self._expr(e.args[0], names))
        if e.is_Integer:
            return str(int(e))
        if e.is_Symbol:
            return names.get(e, ident(e.name))
        if isinstance(e, (sympy.Min, sympy.Max)):
            return self._nested(self.min_template if isinstance(e, sympy.Min) else self.max_template, e.args, names)
        if e.is_Add:
            terms = sorted(e.args, key=lambda t: (bool(t.as_coeff_Mul()[0] < 0), t.is_number,
                                                  sympy.default_sort_key(t)))
            out = self._expr(terms[0], names)
            for t in terms[1:]:
                c, rest = t.as_coeff_Mul()
                if c.is_number and c < 0:
                    out += " - " + self._expr(-t, names)
                else:
                    out += " + " + self._expr(t, names)
            return out
        if e.is_Mul:
            c, rest = e.as_coeff_Mul()
            if not c.is_Integer:    # an index is an integer: a fraction here would be truncated, never printed
                raise CodegenError(f"the {self.backend} backend cannot print the index expression {e}: its "
                                   f"coefficient {c} is not an integer (only a ceiling divides)")
            if c == -1:
                return "-" + self._atom(rest, names)
            factors = ([str(int(c))] if c != 1 else []) + [self._atom(f, names) for f in sympy.Mul.make_args(rest)]
            return "*".join(factors)
        if e.is_Pow and e.exp.is_Integer and e.exp > 0:
            return "*".join([self._atom(e.base, names)] * int(e.exp))
        if isinstance(e, sympy.floor):
            num, den = sympy.fraction(sympy.together(e.args[0]))
            if den.is_Integer or den.is_positive:
                n, d = self._atom(num, names), self._atom(den, names)
                if num.is_nonnegative:      # truncation is the floor
                    return self.div_template.format(n, d)
                # ⌊n/d⌋ = (n − (n mod d))/d, an exact division, with n mod d = ((n % d) + d) % d: right whether the
                # dialect's / and % truncate (C, compiled Triton) or floor (Python, Triton's interpreter)
                return self.div_template.format(f"({n} - {self._residue(n, d)})", d)
        if isinstance(e, sympy.Mod):
            n, d = self._atom(e.args[0], names), self._atom(e.args[1], names)
            if e.args[0].is_nonnegative and e.args[1].is_positive:
                return self.mod_template.format(n, d)
            if e.args[1].is_positive:
                return self._residue(n, d)
        if isinstance(e, sympy.ceiling):
            num, den = sympy.fraction(sympy.together(e.args[0]))
            if den.is_Integer:
                return self.div_template.format(f"({self._expr(num, names)} + {int(den) - 1})", int(den))
            if den.is_positive:       # a size (a split's parts): (num + den − 1) / den
                d = self._atom(den, names)
                return self.div_template.format(f"({self._expr(num, names)} + {d} - 1)", f"{d}")
        raise CodegenError(f"the {self.backend} backend cannot print the index expression {e} (from the plan's "
                           "sizes and loop indices); integer sums, products, min and max print")

    def _residue(self, n: str, d: str) -> str:
        """``n mod d`` in ``[0, d)`` for a positive ``d`` and an ``n`` of either sign (C's ``%`` keeps ``n``'s sign)."""
        return "(" + self.mod_template.format(f"({self.mod_template.format(n, d)} + {d})", d) + ")"

    def boolean(self, value: bool) -> str:
        """A literal truth value of the dialect."""
        return ("True" if value else "False") if self.comment == "#" else ("1" if value else "0")

    def _atom(self, e, names) -> str:
        s = self._expr(e, names)
        wrap = e.is_Add or (e.is_Number and e < 0) or isinstance(e, (sympy.ceiling, sympy.floor, sympy.Mod))
        return f"({s})" if wrap else s

    def number(self, value) -> str:
        """A floating-point literal (a value that is no real number refused, typed: a document's parameter may be a
        string or a list)."""
        if isinstance(value, (bool, str)) or not isinstance(value, (numbers.Real, sympy.Expr)):
            raise CodegenError(f"a numeric parameter is a real number (or an expression in sizes that is one), got "
                               f"{value!r}")
        v = float(value)
        if v != v:
            return "NAN"
        if v == float("inf"):
            return "INFINITY"
        if v == float("-inf"):
            return "-INFINITY"
        return repr(v)

    def param(self, stmt, key, default=None):
        """A parameter of the statement's primitive at the plan's sizes (``β = d^-1/2`` → a number)."""
        v = stmt.box.data.param(key, default)
        if isinstance(v, sympy.Basic):
            v = self.nominal(v)
            if not v.is_number:
                raise CodegenError(f"{stmt.box.name}: parameter {key!r} = {v} is not a number at the plan's sizes")
            if v.is_extended_real is False:
                raise CodegenError(f"{stmt.box.name}: parameter {key!r} = {v} is not a real number at the plan's sizes")
        elif v is not None and (isinstance(v, bool) or not isinstance(v, (numbers.Real, str))):
            raise CodegenError(f"{stmt.box.name}: parameter {key!r} is a real number (or an expression in sizes that "
                               f"is one), got {v!r}")
        return v

    # ------------------------------------------------------------------ loops and extents
    def trips(self, loop) -> sympy.Expr:
        return self.nominal(sympy.ceiling(sympy.sympify(loop.full) / loop.tile, evaluate=False))

    def extent_of(self, loop) -> sympy.Expr:
        """The tile's extent in the current trip: ``min(tile, full − i·tile)`` (the tile itself if it divides)."""
        full, tile = self.nominal(loop.full), self.nominal(loop.tile)
        e = sympy.Min(tile, full - loop.index * tile)
        return tile if (full.is_Integer and tile.is_Integer and int(full) % int(tile) == 0) else e

    def enter(self, loop) -> tuple:
        """Bind the loop's tile to its extent symbol; returns ``(symbol, extent)`` (None if the tile is fixed)."""
        if not isinstance(loop.tile, sympy.Symbol):
            return None
        sym = sympy.Symbol(f"e_{ident(loop.index.name)}", integer=True, positive=True)
        self.extents[loop.tile] = sym
        return sym, self.extent_of(loop)

    def leave(self, loop, saved):
        if saved is None:
            self.extents.pop(loop.tile, None)
        else:
            self.extents[loop.tile] = saved

    def decode(self, launch, block: str) -> list[tuple[str, str]]:
        """``(name, expression)`` of each Grid index of ``launch`` (and of each nested chain's flat index) from
        the linear block index ``block``, in the order they are defined: the mixed radix over the launch's
        axes (:meth:`radix`), then each axis's Grids (:meth:`unflatten`)."""
        chains = self.chain_order(launch)
        out = []
        for chain, flat in zip(chains, self.radix([self.count(c) for c in chains], block)):
            out += self.unflatten(chain, flat)
        return out

    def chain_order(self, launch) -> list:
        """The launch's chains of Grids (one per axis), the fastest-varying last."""
        return list(launch.chains)

    def count(self, chain) -> sympy.Expr:
        """The blocks of one axis: ``N(n, tiles)`` at the plan's sizes."""
        return chain_count(chain, self.sizes)

    def radix(self, counts: list, block: str) -> list[str]:
        """Each axis's index from ``block`` in the mixed radix of ``counts``, the last fastest:
        ``b_n = b mod N_n``, ``b_{n-1} = (b div N_n) mod N_{n-1}``, …; the first is ``b div Π_{k>1} N_k``."""
        out, div = [], 1
        for k, n in enumerate(reversed(counts)):
            t = int(n)
            q = block if div == 1 else self.div_template.format(block, div)
            outermost = k == len(counts) - 1
            out.append(q if outermost else self.mod_template.format(q if div == 1 else f"({q})", t))
            div *= t
        return list(reversed(out))

    def unflatten(self, chain, flat: str) -> list[tuple[str, str]]:
        """``(name, expression)`` of the indices of Grids nested along one axis (outermost first, tiles
        ``g₁, g₂, …``) from ``flat``, the index of their innermost tile (one Grid: its index is ``flat``).

        A whole tile of ``g_j`` holds ``C_j = N(g_j, (g_{j+1}, …))`` innermost tiles (``C_k = 1``) and every tile
        before the last one is whole, so the innermost tiles are numbered in a radix of constant places::

            r_1 = r        i_j = ⌊r_j / C_j⌋        r_{j+1} = r_j mod C_j

        the last tile of each level, shorter, just holds fewer (``N(n mod g, …) ≤ C``, so no index overflows).
        The remainders nest: ``r_3 = (r mod C_1) mod C_2``, not ``r mod C_2`` (``C_2`` need not divide ``C_1``:
        ``N(4, (3, 1)) = 4``, ``N(3, (1,)) = 3``).
        """
        if len(chain) == 1:
            return [(ident(chain[0].index.name), flat)]
        name = f"nc_b_{ident(chain[0].axis)}"
        r = sympy.Symbol(name, integer=True, nonnegative=True)
        tiles = [self.nominal(g.tile) for g in chain]
        places = [tiles_of_axis(tiles[j], tiles[j + 1:]) for j in range(len(chain) - 1)] + [sympy.Integer(1)]
        out = [(name, flat)]
        for g, place in zip(chain, places):
            out.append((ident(g.index.name), self.code(sympy.floor(r / place))))
            r = sympy.Mod(r, place)
        return out

    # ------------------------------------------------------------------ refs
    def strides(self, var: str) -> dict:
        """Row-major strides of a variable at its full (nominal) shape: axis → int."""
        v = self.variables[var]
        out, step = {}, 1
        for a, e in reversed(v.shape):
            out[a] = step
            step *= int(self.nominal(e))
        return out

    def ext(self, ref, axis: str) -> sympy.Expr:
        """The extent of ``ref`` along ``axis`` in the current trip (its slice's, or its variable's)."""
        rng = ref.range(axis)
        if rng is not None:
            return self.nominal(rng.extent)
        return self.current(dict(self.variables[ref.var].shape)[axis])

    def offset(self, ref, index: dict) -> sympy.Expr:
        """The element ``index`` (axis → symbol) of ``ref`` as an offset from its variable's first value."""
        st = self.strides(ref.var)
        off = sympy.Integer(0)
        for a in self.variables[ref.var].axes:
            rng = ref.range(a)
            if a not in index and rng is not None and rng.tile == 1:     # one part of a split's partials
                off += self.nominal(rng.start) * st[a]
                continue
            if a not in index:
                raise CodegenError(f"{ref.var}: axis {a!r} has no index in this statement (indices for "
                                   f"{sorted(index)})")
            rng = ref.range(a)
            start = self.nominal(rng.start) if rng is not None else 0
            off += (start + index[a]) * st[a]
        return sympy.expand(off)

    def ctype(self, var: str) -> str:
        dt = self.variables[var].dtype
        if dt not in self.dtypes:
            raise CodegenError(f"the {self.backend} backend stores no {dt!r} values (variable {var!r}); it stores "
                               f"{sorted(self.dtypes)}")
        return self.dtypes[dt]

    # ------------------------------------------------------------------ nodes shared by every dialect
    def _lines(self, stmts, depth):
        out = []
        for s in stmts:
            if isinstance(s, Free):
                continue
            if self.full_trip is not None and self.full_trip.omits(s):
                continue         # a full trip makes no mask: its block allows every pair
            w = writes(s)
            if w and not isinstance(s, Alloc) and all(v in self.layout.dead for v in w):
                out.append(self.line(depth, f"{self.comment} {', '.join(w)}: never read"))
                continue
            out += self.timed(s, self.doprint(s, depth), depth)
        return out

    def timed(self, s, lines: list, depth: int) -> list:
        """The printed ``lines`` of the statement ``s``, timed where the dialect times its statements (the C
        kernel's ``profile=True``, :mod:`napkin_cat.codegen.c.profile`); here as printed."""
        return lines

    def trip_variants(self, s, depth, body_of) -> list[str]:
        """A stream loop's trip by its block's state, where its skip test reads the data's block mask: skipped
        where none, ``body_of(depth)`` without the mask where full, as written where partial (the dialect's
        :meth:`block_state`, :attr:`if_full`, :attr:`otherwise`, :attr:`end_if`, :meth:`skip_trip`); else just
        ``body_of(depth)``."""
        table = self.block_tables.get(s.index)
        if table is None:
            return self.full_variants(s, depth, body_of)
        state = f"nc_state_{ident(s.index.name)}"
        out = self.block_state(table, state, depth)
        if self.skip_trip is None:       # a dialect without ``continue``: the live trips nested under a test
            if s.data.condition is None:
                return out + [self.line(depth, self.if_live.format(state=state, comment=self.comment))] + \
                    body_of(depth + 1)
        else:
            out.append(self.line(depth, self.skip_trip.format(state=state)))
            if s.data.condition is None:
                return out + body_of(depth)
        self.full_trip = s.data
        try:
            full = body_of(depth + 1)
        finally:
            self.full_trip = None
        return (out + [self.line(depth, self.if_full.format(state=state, comment=self.comment))] + full +
                [self.line(depth, self.otherwise.format(state=state, comment=self.comment))] + body_of(depth + 1) +
                ([self.line(depth, self.end_if)] if self.end_if else []))

    #: a dialect's test of a trip on which a mask from positions is true on every pair (its ``{condition}``, on the
    #: loop indices), followed by the body without the mask, then :attr:`else_positions` (or :attr:`otherwise`) and
    #: the body as written; None: the dialect runs every trip as written (:meth:`full_variants`)
    if_positions = None
    else_positions = None

    def positions_test(self, when) -> str:
        """``when`` (a :class:`~napkin_cat.plan.skips.FullTrips`' condition) as the dialect prints a test."""
        return self.code(when)

    def full_variants(self, s, depth, body_of) -> list[str]:
        """A stream loop's trip where a mask from positions decides (its :class:`~napkin_cat.plan.skips.FullTrips`):
        ``body_of(depth)`` without the mask on the trips where it is true on every pair, as written on the others
        (FlashAttention's causal tiles below the diagonal apply no mask); just ``body_of(depth)`` where the loop has
        none, where a full trip is being printed already, or where the dialect has no :attr:`if_positions`."""
        full = getattr(s, "full_trips", None)
        if full is None or self.if_positions is None or self.full_trip is not None:
            return body_of(depth)
        test = self.if_positions.format(condition=self.positions_test(full.when), comment=self.comment)
        self.full_trip = full
        try:
            without = body_of(depth + 1)
        finally:
            self.full_trip = None
        other = (self.else_positions or self.otherwise).format(comment=self.comment)
        return ([self.line(depth, test)] + without + [self.line(depth, other)]
                + body_of(depth + 1) + ([self.line(depth, self.end_if)] if self.end_if else []))

    def line(self, depth, text) -> str:
        return self.indent * depth + text

    def _print_Free(self, s, depth):
        return []

    def _print_Alloc(self, s, depth):
        return [self.line(depth, f"{self.comment} {s.var}: allocated by the launcher")]

    def _print_Kernel(self, s, depth):
        return [self.line(depth, f"{self.comment} kernel @{s.level}")] + self._lines(s.body, depth)

    def loop_comment(self, s) -> str:
        return ("stream " if isinstance(s, StreamLoop) else "group ") + f"{s.axis} by {self.nominal(s.tile)}"
