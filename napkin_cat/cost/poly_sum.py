"""A polynomial's terms kept as they change, with its hash: a column's :class:`~napkin_cat.cost.polynomial.Poly`
total without summing or hashing every live term again (issue 35, item 4, the search's arithmetic).

The search costs its candidates in :class:`~napkin_cat.cost.polynomial.Poly` (:data:`~napkin_cat.cost.polynomial.
POLYNOMIAL`).  A column's total was built afresh from all its live terms whenever a layer changed it (a dict of
``k`` terms in Python, a frozenset of them as its memo key, and the new polynomial hashed term by term when the
record pooled it), so a diagram whose columns each hold most of its wires (a balanced tree of products, a deep MLP
whose every layer has its own width) cost the square of its length.  :class:`PolySum` keeps the terms and the hash
of their frozenset as terms come and go (a changed term costs one hash, :attr:`PolySum.placed` counts them); its
:meth:`~PolySum.total` copies the terms (in C) and hands the polynomial its hash, the one ``Poly`` would compute::

    hash(s.total()) == hash(Poly(dict(s.of)))          (the hash of the frozenset of its terms)

The frozenset's hash is CPython's (``frozenset_hash``: the xor of each element's hash shuffled, then mixed with the
size), which depends on its elements' hashes alone; :data:`SAME_AS_FROZENSET` checks the copy against the interpreter
once, and where they differ the total is handed no hash (the polynomial hashes itself: correct, not incremental).

>>> s = PolySum(lambda terms, h: terms)
>>> s.set("ab", 2); s.set("c", 1); s.set("ab", 0)
>>> s.total(), s.placed
({'c': 1}, 3)
>>> h = PolySum(lambda terms, h: terms); h.set("x", 3); h.set("y", 4)
>>> not SAME_AS_FROZENSET or h.hash() == hash(frozenset({("x", 3), ("y", 4)}))
True
"""
from __future__ import annotations

import sys

#: Py_uhash_t: the hash width's unsigned arithmetic
_BITS = sys.hash_info.width
_MASK = (1 << _BITS) - 1


def _shuffled(h: int) -> int:
    """CPython's ``_shuffle_bits`` of an element's hash (setobject.c), in unsigned arithmetic."""
    h &= _MASK
    return (((h ^ 89869747) ^ (h << 16)) * 3644798167) & _MASK


def frozen_hash(mixed: int, size: int) -> int:
    """``hash(frozenset(items))`` from the xor of the items' :func:`_shuffled` hashes and their number (CPython's
    ``frozenset_hash`` after its loop)."""
    h = mixed ^ (((size + 1) * 1927868237) & _MASK)
    h ^= (h >> 11) ^ (h >> 25)
    h = (h * 69069 + 907133923) & _MASK
    if h == _MASK:
        h = 590923713
    return h - (1 << _BITS) if h >> (_BITS - 1) else h


def _checked() -> bool:
    samples = [set(), {1}, {(("a", 1),), 2}, {("x", 3), ("y", -4), (("z", 2), 5)}, set(range(-40, 40, 3))]
    for s in samples:
        mixed = 0
        for item in s:
            mixed ^= _shuffled(hash(item))
        if frozen_hash(mixed, len(s)) != hash(frozenset(s)):
            return False
    return True


#: whether :func:`frozen_hash` is this interpreter's frozenset hash (checked once on import)
SAME_AS_FROZENSET = _checked()


class PolySum:
    """The terms of a polynomial (monomial → coefficient, no zero kept) and the hash of their items' frozenset, kept
    as terms change.  ``make(terms, hash)`` builds the total (:meth:`~napkin_cat.cost.polynomial.Poly.hashed` of the
    terms and their hash, or None); :attr:`placed` counts the terms taken out or put in (the work of :meth:`set`)."""

    __slots__ = ("of", "mixed", "placed", "make")

    def __init__(self, make):
        self.of, self.mixed, self.placed, self.make = {}, 0, 0, make

    def set(self, monomial, coefficient) -> None:
        """The term of ``monomial`` now has ``coefficient`` (0: the term is gone)."""
        of = self.of
        old = of.get(monomial)
        if old is not None:
            self.placed += 1
            self.mixed ^= _shuffled(hash((monomial, old)))
        if coefficient:
            of[monomial] = coefficient
            self.placed += 1
            self.mixed ^= _shuffled(hash((monomial, coefficient)))
        elif old is not None:
            del of[monomial]

    def copy(self) -> "PolySum":
        """Another running sum of the same terms (their dict copied, in C), to change apart."""
        out = PolySum(self.make)
        out.of, out.mixed = dict(self.of), self.mixed
        return out

    def hash(self) -> int | None:
        """The hash of the frozenset of the terms' items, or None where this interpreter's is not known."""
        return frozen_hash(self.mixed, len(self.of)) if SAME_AS_FROZENSET else None

    def total(self):
        """``make`` of the terms (copied) and their hash, or None where no term is left."""
        if not self.of:
            return None
        return self.make(dict(self.of), self.hash())


__all__ = ["PolySum", "SAME_AS_FROZENSET", "frozen_hash"]
