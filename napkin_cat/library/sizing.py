"""The public constructors with the sizes an algorithm was given (each keeps the sizes it names).

>>> Sized({"q": 4, "d": 8}).einsum("q d, x d -> q x").dom
Ty(Array(q[4]×d[8]), Array(x×d[8]))
"""
from __future__ import annotations

from napkin_cat.syntax.construct import einsum, elementwise, reduce, renaming, softmax, types


def given_sizes(**kw):
    """The sizes given, those left at None dropped: ``given_sizes(q=4, d=None) == {"q": 4}``."""
    return {k: v for k, v in kw.items() if v is not None}


def sizes_named_by(signature: str, sizes: dict) -> dict:
    """The sizes that ``signature`` names (constructors reject sizes for axes they lack)."""
    names = set(signature.replace(",", " ").replace("->", " ").split())
    return {k: v for k, v in sizes.items() if k in names}


class Sized:
    """The public constructors with the sizes an algorithm was given, each keeping those it names."""

    def __init__(self, sizes: dict):
        self.sizes = sizes

    def einsum(self, sig, **kw):
        return einsum(sig, **kw, **sizes_named_by(sig, self.sizes))

    def elementwise(self, name, sig, **kw):
        return elementwise(name, sig, **kw, **sizes_named_by(sig, self.sizes))

    def reduce(self, name, sig, **kw):
        return reduce(name, sig, **kw, **sizes_named_by(sig, self.sizes))

    def softmax(self, sig, **kw):
        return softmax(sig, **kw, **sizes_named_by(sig, self.sizes))

    def rename(self, sig):
        return renaming(sig, **sizes_named_by(sig, self.sizes))

    def types(self, sig, **kw):
        return types(sig, **kw, **sizes_named_by(sig, self.sizes))
