"""A pre-norm transformer block, assembled from the other named algorithms.

>>> len(transformer_block().dom)
13
"""
from __future__ import annotations

from napkin_cat.errors import ArgumentError
from napkin_cat.library.attention import multi_head_attention
from napkin_cat.library.dense import mlp
from napkin_cat.library.norms import layer_norm
from napkin_cat.library.sizing import Sized, given_sizes
from napkin_cat.syntax.adapter import Diagram, Ty
from napkin_cat.syntax.axis import Axis
from napkin_cat.syntax.builder import Builder
from napkin_cat.syntax.construct import elementwise
from napkin_cat.syntax.relabel import rename_axis


def transformer_block(n=None, e=None, h=None, d=None, f=None, *, activation: str = "gelu",
                      eps: float = 1e-5) -> Diagram:
    """A pre-norm transformer block (self-attention over ``n`` tokens, ``h`` heads of size ``d``).

    ``y = x + MHA(LN₁(x)) W_o``, ``out = y + MLP(LN₂(y))``.  Inputs, in order:
    X: n×e, γ₁, β₁: e, W_q, W_k, W_v: e×h×d, W_o: h×d×e, γ₂, β₂: e, W₁: e×f, b₁: f, W₂: f×e, b₂: e.
    """
    s = given_sizes(n=n, e=e, h=h, d=d, f=f)
    k = Sized(s)
    b = Builder(k.types("n e, e, e, e h d, e h d, e h d, h d e, e, e, e f, f, f e, e"))
    X, g1, be1, Wq, Wk, Wv, Wo, g2, be2, W1, b1, W2, b2 = b.inputs
    ln = rename_axis(layer_norm(**given_sizes(n=n, d=e), eps=eps), "d", "e", Axis("e", e).size)
    x1 = b(ln, X, g1, be1)
    Q = b(k.einsum("n e, e h d -> h n d"), x1, Wq)
    K = b(k.einsum("n e, e h d -> h n d"), x1, Wk)
    V = b(k.einsum("n e, e h d -> h n d"), x1, Wv)
    # self-attention: keys live on a second token axis ``m`` of the same size as ``n``
    K = b(k.rename("h n d -> h m d"), K)
    V = b(k.rename("h n d -> h m d"), V)
    att = multi_head_attention(**given_sizes(d=d, h=h))
    att = rename_axis(rename_axis(att, "q", "n", Axis("n", n).size), "x", "m", Axis("n", n).size)
    A = b(att, Q, K, V)
    Y = b(k.elementwise("add", "n e"), X, b(k.einsum("h n d, h d e -> n e"), A, Wo))
    x2 = b(ln, Y, g2, be2)
    m = mlp(**given_sizes(n=n, i=e, f=f, o=e), activation=activation)
    m = rename_axis(rename_axis(m, "i", "e", Axis("e", e).size), "o", "e", Axis("e", e).size)
    return b.build(b(k.elementwise("add", "n e"), Y, b(m, x2, W1, b1, W2, b2)))


def transformer_stack(blocks: int, n=None, e=None, h=None, d=None, f=None, *, activation: str = "gelu",
                      eps: float = 1e-5) -> Diagram:
    """``blocks`` pre-norm transformer blocks in a row (:func:`transformer_block`), each with its own weights.

    ``x_{i+1} = block(x_i, θ_i)``.  Inputs, in order: X: n×e, then block 0's twelve weights, block 1's, … (as
    :func:`transformer_block` orders them).

    >>> len(transformer_stack(3).dom) == 1 + 3 * (len(transformer_block().dom) - 1)
    True
    """
    if not isinstance(blocks, int) or isinstance(blocks, bool) or blocks < 1:
        raise ArgumentError(f"transformer_stack: blocks must be a positive int (a count of blocks), got {blocks!r}")
    tb = transformer_block(n, e, h, d, f, activation=activation, eps=eps)
    return in_a_row([tb] * blocks)


def in_a_row(blocks, *, residual: bool = False) -> Diagram:
    """Blocks in a row, each with its own weights: ``x_{i+1} = block_i(x_i, θ_i)``, or with ``residual``
    ``x_{i+1} = x_i + block_i(x_i, θ_i)``.  Each block's first input is the running ``x`` and its output is one
    array of that type; inputs of the row, in order: ``x_0``, then block 0's weights, block 1's, …

    >>> from napkin_cat.library.dense import mlp
    >>> block = rename_axis(rename_axis(mlp(), "i", "e"), "o", "e")
    >>> row = in_a_row([block, block], residual=True)
    >>> len(row.dom) == 1 + 2 * (len(block.dom) - 1), len(row.cod)
    (True, 1)
    >>> in_a_row([])
    Traceback (most recent call last):
    ...
    napkin_cat.errors.ArgumentError: in_a_row: give at least one block, got none
    """
    blocks = list(blocks)
    if not blocks:
        raise ArgumentError("in_a_row: give at least one block, got none")
    x_type = blocks[0].dom.inside[0]
    for i, block in enumerate(blocks):
        if len(block.cod) != 1 or block.dom.inside[0] != x_type or block.cod.inside[0] != x_type:
            raise ArgumentError(f"in_a_row: block {i} maps {block.dom} → {block.cod}; each block takes the running "
                                f"x ({x_type}) first and returns one array of that type")
    b = Builder(Ty(x_type, *(w for block in blocks for w in block.dom.inside[1:])))
    x, w = b.inputs[0], list(b.inputs[1:])
    names = " ".join(a.name for a in x_type.axes)
    for block in blocks:
        per = len(block.dom.inside) - 1
        y = b(block, x, *w[:per])
        x = b(elementwise("add", f"{names}, {names} -> {names}"), x, y) if residual else y
        w = w[per:]
    return b.build(x)
