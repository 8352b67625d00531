"""A zoo of small PyTorch models for ``nc.from_torch`` (each tiny: its test runs in a second)."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class MLP(nn.Module):
    def __init__(self, e=5, f=7, o=3, activation="gelu"):
        super().__init__()
        self.fc1, self.fc2, self.activation = nn.Linear(e, f), nn.Linear(f, o), activation

    def forward(self, x):
        h = self.fc1(x)
        h = F.gelu(h, approximate="tanh") if self.activation == "gelu" else F.silu(h)
        return self.fc2(h)


class SwiGLU(nn.Module):
    def __init__(self, e=6, f=8):
        super().__init__()
        self.gate, self.up = nn.Linear(e, f, bias=False), nn.Linear(e, f, bias=False)
        self.down = nn.Linear(f, e, bias=False)

    def forward(self, x):
        return self.down(F.silu(self.gate(x)) * self.up(x))


class Attention(nn.Module):
    """Softmax attention written with matmuls, batched: (B, N, d)."""

    def forward(self, q, k, v):
        s = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5
        return torch.softmax(s, dim=-1) @ v


class CausalSDPA(nn.Module):
    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)


class Loss(nn.Module):
    def __init__(self, e=6, v=9):
        super().__init__()
        self.head = nn.Linear(e, v, bias=False)

    def forward(self, h, targets):
        return F.cross_entropy(self.head(h), targets)


class Block(nn.Module):
    """A pre-norm GPT block: RMSNorm, causal multi-head attention (heads as a weight dimension, read by einsum),
    a residual, LayerNorm, a GELU MLP, a residual."""

    def __init__(self, e=8, h=2, d=4, f=12):
        super().__init__()
        self.norm1, self.norm2 = nn.RMSNorm(e, eps=1e-6), nn.LayerNorm(e)
        self.wq, self.wk, self.wv, self.wo = (nn.Parameter(torch.randn(h, d, e) / e ** 0.5) for _ in range(4))
        self.mlp = MLP(e, f, e)

    def forward(self, x):
        y = self.norm1(x)
        q, k, v = (torch.einsum("bne,hde->bhnd", y, w) for w in (self.wq, self.wk, self.wv))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + torch.einsum("bhnd,hde->bne", a, self.wo)
        return x + self.mlp(self.norm2(x))
