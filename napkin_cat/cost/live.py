"""The data live on a diagram's wires, per level, as the cost functor walks it layer by layer (paper §2.3, columns).

A column of a diagram is the data on its wires between two layers; ``M[ℓ]`` is the largest column at
level ℓ.  :class:`Live` keeps the current column up to date as layers consume and make values, so
that reading it costs the number of distinct monomials of the sizes, not the number of wires.

>>> import napkin_cat as nc
>>> q, d = nc.symbol("q"), nc.symbol("d")
>>> (a, b) = nc.types("q d, q").inside
>>> live = Live()
>>> live.put([(0, a), (1, b), (0, a)])      # value 0 on two wires (a copy): counted once
>>> live.column()
{0: d*q + q}
>>> live.take([(0, a)]); live.column(without=[(0, a)])
{0: q}
"""
from __future__ import annotations

import threading
from functools import lru_cache

import sympy

from napkin_cat.cost.by_value import ByValue
from napkin_cat.cost.ordered_sum import OrderedSum
from napkin_cat.syntax.array import Array
from napkin_cat.cost.expanded import expand


def numel(arr: Array):
    """The number of values of ``arr``: the product of its axes' sizes."""
    n = sympy.Integer(1)
    for a in arr.axes:
        n = n * a.size
    return n


#: the most arrays whose expanded size :func:`_expanded` keeps (a process that costs many diagrams does not grow)
EXPANDED_LIMIT = 2 ** 16


@lru_cache(maxsize=EXPANDED_LIMIT)
def _expanded(arr: Array) -> tuple:
    """``numel(arr)`` expanded, as ``(monomial, coefficient)`` pairs (computed once per equal arrays, the least
    recently used forgotten past :data:`EXPANDED_LIMIT`; an array also keeps its own, :func:`array_terms`)."""
    return tuple((m, int(c) if c.is_Integer else c) for m, c in expand(numel(arr)).as_coefficients_dict().items())


def array_terms(arr: Array) -> tuple:
    """:func:`_expanded`, memoised on the array itself (immutable): a wire's array is met at every layer it
    crosses, and looking it up by equality hashes its axes each time."""
    found = arr.__dict__.get("_numel_terms")
    if found is None:
        found = arr.__dict__["_numel_terms"] = _expanded(arr)
    return found


def polynomial_total(terms: dict):
    """The polynomial ``Σ c·m`` (a coefficient 1 leaves its monomial as it is)."""
    return sympy.Add(*(m if c == 1 else c * m for m, c in terms.items() if c))


#: monomial → a small int naming it (and back): :class:`Live` keys its terms by these, as a monomial's hash is a
#: tuple of sympy symbols' (a Python method per symbol, per lookup) where an int's is itself.  Only ever grows by
#: the distinct monomials of the sizes met (products of the size symbols: a few hundred in a model's derive).
_NUMBERS: dict = {}
_MONOMIALS: list = []
_NAMING = threading.Lock()


def _numbered(terms: tuple) -> tuple:
    """``terms`` (``(monomial, coefficient)`` pairs) with each monomial replaced by its number (``_NUMBERS``)."""
    out = []
    for m, c in terms:
        k = _NUMBERS.get(m)
        if k is None:
            with _NAMING:
                k = _NUMBERS.get(m)
                if k is None:     # (named before it is published: a reader never finds a number unnamed)
                    k = len(_MONOMIALS)
                    _MONOMIALS.append(m)
                    _NUMBERS[m] = k
        out.append((k, c))
    return tuple(out)


def summed_afresh(total, items) -> object:
    """``total`` of the numbered ``(monomial, coefficient)`` items: the sum itself."""
    return total({_MONOMIALS[m]: c for m, c in items})


#: a level's total by its numbered terms and arithmetic (:class:`Live` columns, by value: the same arrays live in
#: every candidate that fuses them); each entry a pure function of its key, bounded (:mod:`.by_value`)
TOTALS = ByValue()


class Wires:
    """Values on wires, counted: a value enters the live data with its first wire (:meth:`put`) and leaves with its
    last (:meth:`take`); :meth:`hold` and :meth:`drop` count values held once, without wires.  What entering and
    leaving does to the totals is the subclass's :meth:`shift_all` (:class:`Live`: monomials;
    :class:`~napkin_cat.cost.live_at.LiveAt`: numbers at the sizes).

    >>> class Count(Wires):
    ...     def __init__(self): self.wires, self.n = {}, 0
    ...     def shift_all(self, arrays, sign): self.n += sign * len(arrays)
    >>> c = Count(); c.put([(0, "a"), (0, "a"), (1, "b")]); c.n
    2
    >>> c.take([(0, "a")]); c.n, c.wires
    (2, {0: 1, 1: 1})
    """
    wires: dict     # value id -> number of wires carrying it

    def shift_all(self, arrays, sign: int) -> None:
        """Count ``arrays`` in (``sign`` 1) or out (-1) of the totals."""
        raise NotImplementedError

    def put(self, values) -> None:
        """Count ``values`` (value id, array) on one more wire each; a value on its first wire enters the totals."""
        wires, born = self.wires, []
        for vid, arr in values:
            n = wires.get(vid, 0)
            wires[vid] = n + 1
            if n == 0:
                born.append(arr)
        if born:
            self.shift_all(born, 1)

    def take(self, values) -> None:
        """A wire of each of ``values`` consumed; a value on no wire left leaves the totals."""
        wires, dead = self.wires, []
        for vid, arr in values:
            n = wires[vid] - 1
            if n == 0:
                del wires[vid]
                dead.append(arr)
            else:
                wires[vid] = n
        if dead:
            self.shift_all(dead, -1)

    def hold(self, arrays) -> None:
        """Count ``arrays``, each a value on one wire (a liveness walk holds each value once: no wires to count)."""
        self.shift_all(arrays, 1)

    def drop(self, arrays) -> None:
        """Stop counting ``arrays``, each held once by :meth:`hold`."""
        self.shift_all(arrays, -1)


class Live(Wires):
    """The data live on a diagram's wires, per level, kept up to date layer by layer.

    A value copied onto several wires is one variable: it is counted once, while any wire carries it.
    Each level's total is a polynomial held as monomial → coefficient, so a layer changes only the
    terms of the values it consumes and makes, and reading a column costs the number of distinct
    monomials, not the number of wires (the weights of later blocks riding beside a transformer
    block cost nothing per layer).  A level's total is summed again only where its terms changed since it was last
    read: a layer that takes a value and puts one of the same size (a map) touches a term and puts it back, so a
    chain of maps beside ``n`` wires of distinct sizes costs no ``n``-term sum per box (:class:`Resummed`, the
    specification, sums every read), and a column whose every total is the last column's is that very dict (a
    reader that pools columns by value may skip it by identity: ``live.column() is last``).  A sympy total summed again
    is built from the level's terms kept in sympy's order (:class:`~napkin_cat.cost.ordered_sum.OrderedSum`: the
    terms that changed placed, ``log k`` comparisons each, none sorted), so a column whose many live monomials a layer
    barely changed (a deep MLP's weights of distinct sizes, a tree's products) costs what changed, not what is live
    (issue 35, item 4, its second part); a :class:`~napkin_cat.cost.polynomial.Poly` total (the search's arithmetic)
    from the level's terms kept with the hash of their frozenset (:class:`~napkin_cat.cost.poly_sum.PolySum`: the
    terms that changed rehashed, the rest copied in C), so pooling it hashes nothing again.  The monomials are held by
    number (``_NUMBERS``: an array's numbered terms
    kept on it, per arithmetic), so a layer's update hashes ints, not tuples of sympy symbols.
    """

    def __init__(self, terms_of=None, total=None, running=None):
        self.wires = {}     # value id -> number of wires carrying it
        self.terms = {}     # level -> {monomial number: coefficient}
        self._sums = {}     # level -> its total when last read, while its terms are unchanged
        self._was = {}      # level -> {monomial number: its coefficient when the level's total was last read}
        # the arithmetic of the totals (:mod:`napkin_cat.cost.polynomial`): an array's terms, a total of terms
        self._terms_of, self._total = terms_of or array_terms, total or polynomial_total
        self._arithmetic = getattr(self._terms_of, "__func__", self._terms_of)   # (a bound method's function)
        self._last = None   # the column last read, handed out again while no level's total changed
        # level -> its total kept as its terms change: ``running()`` makes one (sympy's totals: their terms kept in
        # sympy's order, :class:`OrderedSum`; another arithmetic's its own, or None: summed afresh)
        self._running = running or (OrderedSum if self._total is polynomial_total else None)
        self._ordered = {} if self._running is not None else None

    def _numbered_terms(self, arr: Array) -> tuple:
        """``self._terms_of(arr)`` numbered (:func:`_numbered`), kept on the array per arithmetic (its ``terms_of``
        function: an array costed in two arithmetics keeps both)."""
        kept = arr.__dict__.get("_live_numbered")
        if kept is None:
            kept = arr.__dict__["_live_numbered"] = {}
        found = kept.get(self._arithmetic)
        if found is None:
            found = kept[self._arithmetic] = _numbered(self._terms_of(arr))
        return found

    def shift(self, arr: Array, sign: int, terms=None):
        level = (self.terms if terms is None else terms).setdefault(arr.level, {})
        was = self._was.setdefault(arr.level, {}) if terms is None else None
        for m, c in self._numbered_terms(arr):
            old = level.get(m, 0)
            if was is not None and m not in was:
                was[m] = old
            new = old + sign * c
            if new:
                level[m] = new
            else:       # (a level's terms hold no zero coefficient: its terms are its total's key, TOTALS)
                del level[m]

    def shift_all(self, arrays, sign: int):
        """:meth:`shift` of each of ``arrays`` into the live terms (the lookups it repeats made once)."""
        terms, touched, numbered, arithmetic = self.terms, self._was, self._numbered_terms, self._arithmetic
        for arr in arrays:
            kept = arr.__dict__.get("_live_numbered")
            found = kept.get(arithmetic) if kept is not None else None
            lvl = arr.level
            level = terms.get(lvl)
            if level is None:
                level = terms[lvl] = {}
            was = touched.get(lvl)
            if was is None:
                was = touched[lvl] = {}
            for m, c in (numbered(arr) if found is None else found):
                old = level.get(m, 0)
                if m not in was:
                    was[m] = old
                new = old + c if sign > 0 else old - c
                if new:
                    level[m] = new
                else:
                    del level[m]

    def _summed(self, t: dict):
        """The total of one level's terms (numbered monomials), or None where every coefficient is 0: built once
        per distinct terms and arithmetic (:data:`TOTALS`), so equal columns of any walk are one object (its hash
        kept on it: pooling it again costs an identity test)."""
        if not t:
            return None
        key = (self._total, frozenset(t.items()))    # (no zero coefficient is kept: shift_all)
        found = TOTALS.get(key)
        if found is None:
            found = TOTALS.put(key, summed_afresh(self._total, key[1]))
        return found

    def _pooled(self, v):
        """A sympy total (or None) as the one object kept for its value (:data:`TOTALS`)."""
        if v is None:
            return None
        key = (self._total, v)
        found = TOTALS.get(key)
        return found if found is not None else TOTALS.put(key, v)

    def _resummed(self, level, t: dict):
        """The total of a level whose terms changed: built from its running sum (sympy's from its ordered terms, no
        sort; a :class:`~napkin_cat.cost.polynomial.Poly` from its terms and their hash: linear in its terms, in C),
        pooled by value (:data:`TOTALS`); an arithmetic without a running sum (:class:`Resummed`) sums its terms."""
        if self._ordered is None:
            return self._summed(t)
        kept = self._ordered.get(level)
        return self._pooled(kept.total() if kept is not None else None)

    def _settle(self) -> None:
        """The terms changed since the last read moved in their levels' ordered sums (``log k`` each), and the totals
        of the levels whose terms are not back where they were forgotten."""
        terms, sums, ordered = self.terms, self._sums, self._ordered
        for l, was in self._was.items():   # a level whose touched terms are back where they were: its sum stands
            t = terms[l]
            changed = [m for m, c in was.items() if t.get(m, 0) != c]
            if not changed:
                continue
            sums.pop(l, None)
            if ordered is not None:
                kept = ordered.get(l)
                if kept is None:
                    kept = ordered[l] = self._running()
                for m in changed:
                    kept.set(_MONOMIALS[m], t.get(m, 0))
        self._was = {}

    def _without(self, gone) -> dict:
        """The column with the values ``gone`` (arrays, each held once) left out: a level they do not touch is its
        total as it stands; one they touch, its ordered sum copied and their terms taken out (or, in another
        arithmetic, its terms summed)."""
        levels = {arr.level for arr in gone}
        terms = {l: (dict(t) if l in levels else t) for l, t in self.terms.items()}
        for arr in gone:
            self.shift(arr, -1, terms)
        out = {}
        if self._ordered is None:
            for l, t in terms.items():
                v = self._summed(t)
                if v is not None:
                    out[l] = v
            return out
        self._settle()
        sums, touched = self._sums, {}
        for arr in gone:
            touched.setdefault(arr.level, set()).update(m for m, _ in self._numbered_terms(arr))
        for l, t in terms.items():
            if l not in touched:
                v = sums[l] if l in sums else sums.setdefault(l, self._resummed(l, t))
            else:
                kept = self._ordered.get(l).copy()
                for m in touched[l]:
                    kept.set(_MONOMIALS[m], t.get(m, 0))
                v = self._pooled(kept.total())
            if v is not None:
                out[l] = v
        return out

    def column(self, without=()) -> dict:
        """Level → live data (expanded); ``without``: values on wires about to be consumed, left out."""
        terms = self.terms
        if without:
            on_them = {}
            for vid, arr in without:
                on_them[vid] = on_them.get(vid, 0) + 1
            return self._without([arr for vid, arr in dict(without).items() if self.wires[vid] == on_them[vid]])
        self._settle()
        sums = self._sums
        out = {}
        for l, t in terms.items():   # a level no layer changed since the last column: its sum as it was
            if l in sums:
                v = sums[l]
            else:
                v = sums[l] = self._resummed(l, t)
            if v is not None:
                out[l] = v
        last = self._last
        if last is not None and len(last) == len(out) and all(last.get(l) is v for l, v in out.items()):
            return last
        self._last = out
        return out


class Resummed(Live):
    """The specification of :meth:`Live.column`: every level's total summed afresh from its terms at every read
    (the fold before issue 35's item 4 kept a level's sum only while no layer touched it).  :class:`Live` reads the
    same totals, re-summing a level only where its terms changed::

        Live().column() == Resummed().column()        after the same puts and takes

    >>> (a, b) = __import__("napkin_cat").types("q d, p").inside
    >>> spec = Resummed(); spec.put([(0, a), (1, b)]); spec.take([(1, b)]); spec.put([(2, b)]); spec.column()
    {0: d*q + p}
    """

    def __init__(self, terms_of=None, total=None):
        super().__init__(terms_of, total)
        self._ordered = None        # every total summed afresh from its terms (sympy sorts them)

    def column(self, without=()) -> dict:
        self._sums = {}
        return super().column(without)

    def _summed(self, t: dict):
        items = [item for item in t.items() if item[1]]
        return summed_afresh(self._total, items) if items else None
