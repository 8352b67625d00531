"""A small GPT whose attention, MLP, RMSNorm and loss are napkin-cat ops, beside the same model in plain PyTorch.

The model is ordinary PyTorch: token and position embeddings, ``layers`` pre-norm blocks (RMSNorm, causal
multi-head attention, RMSNorm, a GELU MLP, each with its residual), a final RMSNorm and a linear head read by the
cross-entropy.  It takes its four computations from an :class:`Ops`:

=============  ======================================================  =============================================
op             napkin-cat (``nc.torch.compile`` of the library's)      plain PyTorch (the reference)
=============  ======================================================  =============================================
``norm``       ``rms_norm(d=e)``: ``γ x / sqrt(mean(x²) + ε)``         ``F.rms_norm``
``attention``  ``masked_attention(causal_mask(), lse=True)`` woven     ``F.scaled_dot_product_attention(is_causal)``
               over heads and batch (FlashAttention, O and L saved)
``mlp``        ``mlp(i=e, f=f, o=e)``: ``gelu(X W₁ + b₁) W₂ + b₂``     the same formula, ``F.gelu(approximate="tanh")``
``loss``       ``linear_cross_entropy(e=e, v=vocab)`` per row, its     ``F.cross_entropy(H Wᵀ, t)``
               mean taken in torch (logits never written)
=============  ======================================================  =============================================

Each napkin-cat op is a registered ``torch.library`` custom op with the backward ``nc.grad`` derives (saved
outputs read, not recomputed), so ``loss.backward()`` and AdamW run through them unchanged.  What stays in torch,
because the library has no op for it: the embeddings (a gather of rows), the projections of Q, K, V and of the
attention's output (plain matmuls, ``nn.Linear``), splitting and merging the heads (view and transpose outside the
op: heads are a woven axis of the attention), the residual adds and the mean of the per-row losses.

The model lives here, not in the library: napkin-cat ships algorithms and ops, not models; this file is the
example that ``examples/gpt_train.py`` runs, ``tests/torch/test_gpt_train.py`` checks and notebook 08 shows.
"""
from __future__ import annotations

import dataclasses
import math

import torch
import torch.nn.functional as F
from torch import nn

import napkin_cat as nc

#: the RMSNorm's ε (the library's rms_norm default; the reference passes the same)
EPS = 1e-6


@dataclasses.dataclass(frozen=True)
class Config:
    """The model's sizes: vocabulary, context, width ``e = heads · d``, MLP width ``f``, blocks."""
    vocab: int
    context: int = 16
    width: int = 16
    heads: int = 2
    hidden: int = 32
    layers: int = 2

    @property
    def head(self) -> int:
        return self.width // self.heads


@dataclasses.dataclass(frozen=True)
class Ops:
    """The four computations the model takes from outside (shapes as the model calls them):

    ``norm(x: n×e, γ: e) -> n×e``; ``attention(q, k, v: B×H×N×d) -> B×H×N×d`` (causal);
    ``mlp(x: n×e, W₁: e×f, b₁: f, W₂: f×e, b₂: e) -> n×e``; ``loss(h: n×e, W: v×e, t: n int32) -> n``.
    ``compiled``: the napkin-cat ops behind them, by name (none for torch)."""
    name: str
    norm: object
    attention: object
    mlp: object
    loss: object
    compiled: dict = dataclasses.field(default_factory=dict)


def torch_ops() -> Ops:
    """The reference: each op written in plain PyTorch, differentiated by torch's autograd."""
    return Ops(
        "torch",
        norm=lambda x, g: F.rms_norm(x, (x.shape[-1],), g, eps=EPS),
        attention=lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
        mlp=lambda x, w1, b1, w2, b2: F.gelu(x @ w1 + b1, approximate="tanh") @ w2 + b2,
        loss=lambda h, w, t: F.cross_entropy(h @ w.T, t.long(), reduction="none"))


def napkin_diagrams(config: Config) -> dict:
    """The library's diagrams the napkin-cat ops compile (symbolic rows, batch and sequence: sizes come from each
    call; the model's widths fixed)."""
    attention = nc.library.masked_attention(nc.library.causal_mask(), None, d=config.head, lse=True)
    return {"norm": nc.library.rms_norm(d=config.width, eps=EPS),
            "attention": nc.weave(nc.weave(attention, "h", position=0), "b", position=0),
            "mlp": nc.library.mlp(i=config.width, f=config.hidden, o=config.width, activation="gelu"),
            "loss": nc.library.linear_cross_entropy(e=config.width, v=config.vocab, dtype="fp32")}


def napkin_ops(config: Config, *, memory: int = 64, depth: int = 0) -> Ops:
    """The napkin-cat ops: each diagram of :func:`napkin_diagrams` compiled once (``nc.torch.compile`` at
    ``memory`` values of level 1, the search chaining ``depth`` prepare rewrites), derived and compiled at the
    first call's sizes, then reused by every layer and every step.

    The attention's log-sum-exp is auxiliary (``aux=1``: saved for the backward, not differentiated); the loss is
    differentiated in the hidden states and the head's weight, not the integer targets (``wrt=[0, 1]``)."""
    d = napkin_diagrams(config)
    options = dict(memory=memory, depth=depth)
    compiled = {"norm": nc.torch.compile(d["norm"], name="gpt_norm", **options),
                "attention": nc.torch.compile(d["attention"], aux=1, name="gpt_attention", **options),
                "mlp": nc.torch.compile(d["mlp"], name="gpt_mlp", **options),
                "loss": nc.torch.compile(d["loss"], wrt=[0, 1], name="gpt_loss", **options)}
    attention = compiled["attention"]
    return Ops("napkin-cat", norm=compiled["norm"], attention=lambda q, k, v: attention(q, k, v)[0],
               mlp=compiled["mlp"], loss=compiled["loss"], compiled=compiled)


class Block(nn.Module):
    """``x + attention(norm(x))``, then ``x + mlp(norm(x))``; the heads split and merged outside the op."""

    def __init__(self, c: Config):
        super().__init__()
        self.c = c
        self.norm1, self.norm2 = nn.Parameter(torch.ones(c.width)), nn.Parameter(torch.ones(c.width))
        self.qkv = nn.Linear(c.width, 3 * c.width, bias=False)
        self.out = nn.Linear(c.width, c.width, bias=False)
        self.w1 = nn.Parameter(torch.randn(c.width, c.hidden) / math.sqrt(c.width))
        self.b1 = nn.Parameter(torch.zeros(c.hidden))
        self.w2 = nn.Parameter(torch.randn(c.hidden, c.width) / math.sqrt(c.hidden))
        self.b2 = nn.Parameter(torch.zeros(c.width))

    def forward(self, x, ops: Ops):
        B, N, e = x.shape
        rows = x.reshape(B * N, e)
        q, k, v = self.qkv(ops.norm(rows, self.norm1)).view(B, N, 3, self.c.heads, self.c.head).permute(2, 0, 3, 1, 4)
        o = ops.attention(q, k, v).transpose(1, 2).reshape(B * N, e)
        rows = rows + self.out(o)
        rows = rows + ops.mlp(ops.norm(rows, self.norm2), self.w1, self.b1, self.w2, self.b2)
        return rows.view(B, N, e)


class GPT(nn.Module):
    """Embeddings, ``layers`` blocks, a final RMSNorm and the head; ``model(tokens, targets, ops)`` is the mean
    cross-entropy of the next tokens."""

    def __init__(self, c: Config):
        super().__init__()
        self.c = c
        self.tokens = nn.Embedding(c.vocab, c.width)
        self.positions = nn.Embedding(c.context, c.width)
        self.blocks = nn.ModuleList(Block(c) for _ in range(c.layers))
        self.norm = nn.Parameter(torch.ones(c.width))
        self.head = nn.Linear(c.width, c.vocab, bias=False)

    def forward(self, tokens, targets, ops: Ops):
        B, N = tokens.shape
        x = self.tokens(tokens) + self.positions(torch.arange(N))
        for block in self.blocks:
            x = block(x, ops)
        h = ops.norm(x.reshape(B * N, -1), self.norm)
        return ops.loss(h, self.head.weight, targets.reshape(B * N).to(torch.int32)).mean()


SENTENCES = ("the cat sat on the mat. ", "a dog ran to the cat. ", "the mat is red. ", "a cat saw a dog. ")


def corpus(characters: int, *, seed: int = 0) -> str:
    """A character corpus: sentences of :data:`SENTENCES` drawn at random (seeded), ``characters`` long."""
    g = torch.Generator().manual_seed(seed)
    text = ""
    while len(text) < characters:
        text += SENTENCES[int(torch.randint(len(SENTENCES), (), generator=g))]
    return text[:characters]


def batches(text: str, steps: int, *, batch: int, context: int, seed: int = 0):
    """The vocabulary (sorted characters) and ``steps`` batches of (tokens, next tokens), windows drawn at
    random (seeded) from the text."""
    vocab = sorted(set(text))
    ids = torch.tensor([vocab.index(ch) for ch in text])
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(steps):
        start = torch.randint(len(ids) - context - 1, (batch,), generator=g)
        windows = torch.stack([ids[s:s + context + 1] for s in start.tolist()])
        out.append((windows[:, :-1], windows[:, 1:]))
    return vocab, out


def train(model: GPT, ops: Ops, data, *, lr: float = 1e-2) -> list[float]:
    """AdamW on ``data``: the loss before each step."""
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    losses = []
    for tokens, targets in data:
        opt.zero_grad()
        loss = model(tokens, targets, ops)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def side_by_side(config: Config, data, *, dtype=torch.float64, seed: int = 0, ops: Ops | None = None,
                 lr: float = 1e-2):
    """Train the reference and the napkin-cat model from the same initial weights on the same data: (reference
    losses, napkin-cat losses, the largest relative difference of a step's losses)."""
    torch.manual_seed(seed)
    reference = GPT(config).to(dtype)
    model = GPT(config).to(dtype)
    model.load_state_dict(reference.state_dict())
    expected = train(reference, torch_ops(), data, lr=lr)
    found = train(model, ops or napkin_ops(config), data, lr=lr)
    worst = max(abs(a - b) / abs(a) for a, b in zip(expected, found))
    return expected, found, worst


__all__ = ["Config", "Ops", "torch_ops", "napkin_diagrams", "napkin_ops", "Block", "GPT", "corpus", "batches",
           "train", "side_by_side"]
