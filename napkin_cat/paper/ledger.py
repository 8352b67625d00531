"""The ledger of the paper's checkable claims: what the paper prints beside what napkin-cat computes.

A :class:`Claim` holds the paper's printed value, the library's value (computed by the
functors: never typed in), and a status:

* ``reproduced``: the two agree (symbolically, or numerically within the stated tolerance);
* ``erratum``: they differ where ``napkin_cat/paper/errata.md`` documents a slip, and the library
  computes the intended (corrected) value;
* ``differs``: they differ and no erratum explains it (``napkin reproduce`` then exits non-zero).

>>> import sympy
>>> q, d = sympy.symbols("q d", positive=True)
>>> book = Ledger()
>>> book.expr("demo", "§0", "a formula", paper=2 * q * d, library=q * d + d * q).status
'reproduced'
>>> book.number("n", "§0", "a number", paper=295, library=295.35, rel=0.01).status
'reproduced'
>>> book.erratum("e", "§0", "a slip", paper=8192, library=16384, corrected=16384, erratum="D-01").status
'erratum'
>>> [c.status for c in book.claims]
['reproduced', 'reproduced', 'erratum']
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import sympy

STATUSES = ("reproduced", "erratum", "differs")


@dataclass(frozen=True)
class Claim:
    """One checkable claim of the paper (see module docstring)."""

    id: str
    section: str
    what: str
    paper: object
    library: object
    status: str
    erratum: str = ""
    corrected: object = None
    note: str = ""
    figure: str = ""

    def as_json(self) -> dict:
        out = {"id": self.id, "section": self.section, "what": self.what, "paper": _text(self.paper),
               "library": _text(self.library), "status": self.status}
        if self.erratum:
            out["erratum"] = self.erratum
            out["corrected"] = _text(self.corrected)
        if self.note:
            out["note"] = self.note
        if self.figure:
            out["figure"] = self.figure
        return out


def _text(value) -> str | float | int | bool | None:
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, sympy.Basic):
        return str(value)
    return str(value)


def same_expression(a, b) -> bool:
    """Symbolic equality (sympy), for expressions, numbers, and dicts/tuples of them."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_expression(a[k], b[k]) for k in a)
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(same_expression(x, y) for x, y in zip(a, b))
    try:
        diff = sympy.simplify(sympy.sympify(a) - sympy.sympify(b))
    except (sympy.SympifyError, TypeError):
        return a == b
    return diff == 0


def close(a, b, *, rel: float = 0.0, abs_: float = 0.0) -> bool:
    """Whether ``a`` and ``b`` agree within ``rel`` (of the larger) or ``abs_``.

    >>> close(100, 101, rel=0.02), close(100, 101), close(0, 1e-9, abs_=1e-6)
    (True, False, True)
    """
    a, b = float(a), float(b)
    return abs(a - b) <= max(abs_, rel * max(abs(a), abs(b)))


@dataclass
class Ledger:
    """Collects claims; each adder compares and returns the claim it recorded."""

    claims: list = field(default_factory=list)

    def add(self, claim: Claim) -> Claim:
        if any(c.id == claim.id for c in self.claims):
            raise ValueError(f"claim id {claim.id!r} recorded twice")
        if claim.status not in STATUSES:
            raise ValueError(f"claim {claim.id!r}: status {claim.status!r} is not one of {STATUSES}")
        self.claims.append(claim)
        return claim

    def expr(self, id, section, what, *, paper, library, note="", figure="") -> Claim:
        """A symbolic claim: reproduced when ``paper − library`` simplifies to 0."""
        status = "reproduced" if same_expression(paper, library) else "differs"
        return self.add(Claim(id, section, what, paper, library, status, note=note, figure=figure))

    def number(self, id, section, what, *, paper, library, rel=0.0, abs_=0.0, note="", figure="") -> Claim:
        """A numeric claim: reproduced within ``rel`` (relative) or ``abs_`` (absolute) tolerance."""
        status = "reproduced" if close(paper, library, rel=rel, abs_=abs_) else "differs"
        tol = f"tolerance {'rel ' + format(rel, 'g') if rel else 'abs ' + format(abs_, 'g')}"
        return self.add(Claim(id, section, what, paper, library, status,
                              note=(note + "; " if note else "") + tol, figure=figure))

    def fact(self, id, section, what, *, paper, library: bool, note="", figure="") -> Claim:
        """A qualitative claim: ``library`` is the outcome of a check the library ran."""
        return self.add(Claim(id, section, what, paper, bool(library),
                              "reproduced" if library else "differs", note=note, figure=figure))

    def erratum(self, id, section, what, *, paper, library, corrected, erratum, rel=0.0, abs_=0.0, note="",
                figure="") -> Claim:
        """A claim where the paper has a documented slip: the library must compute ``corrected``.

        ``erratum`` names the errata entry (e.g. ``"D-03"``).  The status is ``erratum`` when the
        library equals the corrected value and the printed one differs, ``reproduced`` when all
        agree, and ``differs`` when the library misses the corrected value.
        """
        equal = (lambda a, b: close(a, b, rel=rel, abs_=abs_)) if rel or abs_ else same_expression
        if not equal(library, corrected):
            status = "differs"
        elif equal(paper, library):
            status = "reproduced"
        else:
            status = "erratum"
        return self.add(Claim(id, section, what, paper, library, status, erratum=erratum,
                              corrected=corrected, note=note, figure=figure))

    def counts(self) -> dict:
        return {s: sum(c.status == s for c in self.claims) for s in STATUSES}

    @property
    def ok(self) -> bool:
        """True when no claim differs beyond the documented errata."""
        return all(c.status != "differs" for c in self.claims)
