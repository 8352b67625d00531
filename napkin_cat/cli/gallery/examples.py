"""What the gallery shows: every algorithm of ``nc.library``, then the examples registered here.

The library's algorithms are found by iterating it (:data:`napkin_cat.cli.inputs.LIBRARY`: every public
function that needs no argument); :data:`EXAMPLES` adds what is not a library name by itself: an algorithm
built with an argument, a gradient, a prepared variant.  **To add an example, append one** :class:`Example`
**to** :data:`EXAMPLES` (a name, a function building the diagram, one line on what it shows, the code a user
would type); ``napkin gallery --out docs/gallery`` then regenerates ``docs/gallery.md``.

Sizes are the same for every entry (:data:`DEFAULT_SIZE` for an axis, :data:`AXIS_SIZES` for the axes that
are small in practice, such as a head's width), unless an example gives its own.

>>> names = [e.name for e in examples()]
>>> names[:2], "grad_attention" in names, "grad_attention_saved" in names, len(names) == len(set(names))
(['matmul', 'attention'], True, True, True)
>>> example("grad_attention").build().dom[-1]    # the output's cotangent is the last input
Ty(Array(q×d))
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from napkin_cat import library
from napkin_cat.autodiff import grad
from napkin_cat.cli.inputs import LIBRARY
from napkin_cat.errors import CLIError
from napkin_cat.syntax.construct import softmax

#: the size of every axis an example does not size itself
DEFAULT_SIZE = 512
#: axes that are small in practice (a head's width, the number of heads, query heads per key head)
AXIS_SIZES = {"d": 64, "h": 4, "g": 2}


@dataclass(frozen=True)
class Example:
    """One gallery entry: ``name`` (its anchor and folder), ``build()`` → the diagram as written, ``about``
    (one line: what it shows), ``code`` (what a user types to build it), ``sizes`` (axis sizes overriding
    the defaults), ``see`` (a path in the repository where it is tested or explained, or None) and ``options``
    (keyword arguments of :func:`napkin_cat.search.derive` beyond memory and sizes, e.g. ``min_blocks``)."""

    name: str
    build: Callable
    about: str
    code: str
    sizes: dict = field(default_factory=dict)
    see: str | None = None
    options: dict = field(default_factory=dict)


# Append new examples at the end of this list (one Example each).
EXAMPLES = [
    Example("sliding_window_attention", lambda: library.sliding_window_attention(64),
            "attention to the keys within 64 positions of the query (a mask from positions): the stream skips "
            "every tile outside the band", "nc.library.sliding_window_attention(64)",
            see="tests/algorithms/test_skipping.py"),
    Example("grad_attention", lambda: grad(library.attention()),
            "the backward pass of attention from its inputs alone, (Q, K, V, dO) → (dQ, dK, dV), derived by the same "
            "search as the forward: it recomputes the softmax's statistics (FlashAttention-2's backward reads what "
            "the forward saved: grad_attention_saved)", "nc.grad(nc.library.attention())",
            see="docs/gradients-and-time.md"),
    Example("grad_cross_entropy", lambda: grad(library.cross_entropy(), wrt=(0,)),
            "the gradient of the cross-entropy loss with respect to the logits, (logits, targets, d loss) → "
            "d logits", "nc.grad(nc.library.cross_entropy(), wrt=(0,))", see="tests/autodiff"),
    Example("flash_decoding", lambda: library.attention(),
            "attention at decode (one query, 65,536 keys) derived under a parallelism requirement of 132 thread "
            "blocks: the key axis split in parts run by parallel blocks, their running max, sum and output merged "
            "(FlashDecoding)", "nc.derive(nc.library.attention(), memory=M, sizes=..., min_blocks=132)",
            sizes={"q": 1, "x": 65536, "d": 128}, see="tests/search/test_min_blocks.py",
            options={"min_blocks": 132}),
    Example("long_row_softmax", lambda: softmax("n v", over="v"),
            "SoftMax over rows of 65,536 values: below the memory that holds a row, a statistics pass (the "
            "row's log-sum-exp, streamed) and a normalising pass that re-reads the row",
            'nc.softmax("n v", over="v")', sizes={"n": 64, "v": 65536}, see="tests/search/test_two_pass.py"),
    Example("grad_attention_saved", lambda: grad(library.attention(lse=True), saved=True, aux=1),
            "attention's backward from what its forward saved, (Q, K, V, O, L, dO) → (dQ, dK, dV) with L = "
            "logsumexp_x(QKᵀ/√d) auxiliary (no cotangent): the probabilities recomputed from L, D = rowsum(dO∘O); "
            "where a key block's K, V, dK and dV fit, FlashAttention-2's backward: dQ with D, dK with dV",
            "nc.grad(nc.library.attention(lse=True), saved=True, aux=1)",
            see="tests/search/test_derive_backward_saved.py"),
    Example("prefix_lm_attention", lambda: library.prefix_lm_attention(128),
            "prefix-LM attention: every query sees the first 128 keys (the prefix, read both ways) and the keys at or "
            "before it (a mask from positions, x ≤ q ∨ x < 128): the stream skips every key tile after the prefix "
            "and after its queries", "nc.library.prefix_lm_attention(128)",
            see="tests/library/test_prefix_lm_and_softcap.py"),
]


def _about(fn) -> str:
    """The first paragraph of a library function's docstring, on one line, in Markdown."""
    text = (fn.__doc__ or "").strip().split("\n\n")[0]
    return " ".join(text.split()).replace("``", "`")


def examples() -> list:
    """Every gallery entry: the library's algorithms in its order, then :data:`EXAMPLES`."""
    lib = [Example(name, getattr(library, name), _about(getattr(library, name)), f"nc.library.{name}()",
                   see=None) for name in LIBRARY]
    return lib + list(EXAMPLES)


def example(name: str) -> Example:
    """The entry called ``name``; a :class:`~napkin_cat.errors.CLIError` listing the entries otherwise."""
    for e in examples():
        if e.name == name:
            return e
    raise CLIError(f"no gallery entry {name!r}: the entries are {', '.join(e.name for e in examples())}")


def sizes_of(e: Example, diagram, overrides: dict | None = None) -> dict:
    """The axis sizes of entry ``e``: its own, else ``overrides`` (the command's ``--sizes``), else the defaults,
    for every axis of ``diagram``'s inputs and outputs (in order of first appearance)."""
    import sympy
    names = []
    for arr in (*diagram.dom.inside, *diagram.cod.inside):
        for a in arr.axes:
            for s in sorted(sympy.sympify(a.size).free_symbols, key=str):
                if str(s) not in names:
                    names.append(str(s))
    given = {**(overrides or {}), **e.sizes}
    return {n: given.get(n, AXIS_SIZES.get(n, DEFAULT_SIZE)) for n in names}
