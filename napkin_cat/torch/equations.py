"""``torch.einsum``'s equation with every index written: each ``...`` spelled as letters the equation does not use
(the dimensions it stands for broadcast from the right, as torch's do: an operand with fewer takes the last letters),
and an equation without ``->`` given torch's implicit output (the ellipsis' letters, then the letters used once,
sorted).  :func:`~napkin_cat.torch.aten.einsum` then contracts the explicit terms.

>>> explicit(None, "b...d,b...d->b...", [4, 3])
(['bABd', 'bBd'], 'bAB')
"""
from __future__ import annotations

LETTERS = "abcdefghijklmnopqrstuvwxyz"


def explicit(t, eq: str, ranks) -> tuple:
    """The terms of ``eq`` with each ``...`` replaced by letters the equation does not use and its output explicit
    (``t``: the :class:`~napkin_cat.torch.translate.Translation` that refuses an equation its operands cannot take).

    >>> explicit(None, "...ij,...jk->...ik", [3, 4])
    (['Bij', 'ABjk'], 'ABik')
    >>> explicit(None, "ij,jk", [2, 2])
    (['ij', 'jk'], 'ik')
    """
    ins, arrow, out = eq.partition("->")
    terms = ins.split(",")
    if len(terms) != len(ranks):
        t.refuse(f"the equation {eq!r} has {len(terms)} operands, but {len(ranks)} are given")
    spare = [c for c in LETTERS.upper() + LETTERS if c not in eq]
    widths = [rank - len(term.replace("...", "")) if "..." in term else 0 for term, rank in zip(terms, ranks)]
    if min(widths, default=0) < 0:
        t.refuse(f"the equation {eq!r} has more indices than its operands' dimensions {list(ranks)}")
    n = max(widths, default=0)
    dots = "".join(spare[:n])
    terms = [term.replace("...", dots[n - w:]) for term, w in zip(terms, widths)]
    if not arrow:
        counts = "".join(terms)
        out = "..." + "".join(sorted(c for c in set(counts) if counts.count(c) == 1 and c not in dots))
    return terms, out.replace("...", dots)


__all__ = ["explicit"]
