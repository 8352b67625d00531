"""A rank's side of the collectives on ``torch.distributed``, counting what it hands over (issue 37, item 4).

:class:`Exchange` moves numpy arrays between the ranks of one process group with torch.distributed's own calls:
``all_gather`` (every rank's block on every rank) and ``all_to_all_single`` (block ``q`` of rank ``p`` to rank
``q``); the collectives of the diagrams are built from these two (:mod:`napkin_cat.distributed.device`).  A ring's
step is point to point (:meth:`Exchange.pass_on`: ``isend`` to the next rank, ``irecv`` from the previous one, the
receiver knowing the shapes it gets: no metadata moves).  Gloo's
``all_gather`` takes blocks of one size: a ragged block is padded with zeros to the largest and cut back on arrival;
before each call the ranks all-gather the blocks' shapes (a few int64s per block).  Neither the padding nor the
shapes are counted: the counts are *logical*, what a runner sending each block point to point moves::

    sent     = Σ_{q ≠ p} |block p → q|        received = Σ_{q ≠ p} |block q → p|       messages: one per peer and call

read off the numpy arrays handed to and taken from torch.distributed (``|x|``: its values), to be set beside the
cost functor's :class:`~napkin_cat.cost.record.Link`.
"""
from __future__ import annotations

import numpy as np
import torch
import torch.distributed as dist


def _tensor(x: np.ndarray) -> torch.Tensor:
    x = np.ascontiguousarray(x)
    if not x.flags.writeable:          # torch keeps no read-only tensors: a copy, torch's own, is handed over
        x = x.copy()
    return torch.from_numpy(x.view(np.uint8) if x.dtype == np.bool_ else x).reshape(-1)


def _array(t: torch.Tensor, shape: tuple, dtype) -> np.ndarray:
    out = t.numpy()
    return (out.view(np.bool_) if dtype == np.bool_ else out).reshape(shape)


class Exchange:
    """The collectives of one rank among ``ranks`` (world ranks, in device order; ``group`` their process group, None
    for the whole world), with the values it ``sent``, ``received`` and its ``messages`` counted."""

    def __init__(self, ranks: list, me: int, group=None):
        self.ranks, self.me, self.group = list(ranks), me, group
        self.sent = self.received = self.messages = 0

    @property
    def size(self) -> int:
        return len(self.ranks)

    def _shapes(self, shapes: list) -> list:
        """``out[src][dst]``: the shape of the block rank ``src`` hands for ``dst`` (metadata, not counted)."""
        mine = torch.tensor(shapes, dtype=torch.int64).reshape(len(shapes), -1)
        out = [torch.empty_like(mine) for _ in self.ranks]
        dist.all_gather(out, mine, group=self.group)
        return [[tuple(int(v) for v in row) for row in o.tolist()] for o in out]

    def all_gather(self, x: np.ndarray) -> list:
        """Every rank's ``x``, in rank order (this rank's is ``x`` itself)."""
        x = np.asarray(x)
        if self.size == 1:
            return [x]
        shapes = [s[0] for s in self._shapes([x.shape])]
        sizes = [int(np.prod(s, dtype=np.int64)) for s in shapes]
        width = max(sizes)
        pad = torch.zeros(width, dtype=_tensor(x).dtype)
        pad[:x.size] = _tensor(x)
        outs = [torch.empty_like(pad) for _ in self.ranks]
        dist.all_gather(outs, pad, group=self.group)
        got = [x if q == self.me else _array(o[:n], s, x.dtype) for q, (o, n, s) in enumerate(zip(outs, sizes, shapes))]
        self.sent += (self.size - 1) * x.size
        self.received += sum(n for q, n in enumerate(sizes) if q != self.me)
        self.messages += self.size - 1
        return got

    def all_to_all(self, blocks: list) -> list:
        """``blocks[q]`` to rank ``q``; the blocks every rank handed this one, in rank order."""
        blocks = [np.asarray(b) for b in blocks]
        if self.size == 1:
            return blocks
        shapes = [row[self.me] for row in self._shapes([b.shape for b in blocks])]
        sizes = [int(np.prod(s, dtype=np.int64)) for s in shapes]
        dtype = blocks[0].dtype
        flat = torch.cat([_tensor(b) for b in blocks])
        out = torch.empty(sum(sizes), dtype=flat.dtype)
        dist.all_to_all_single(out, flat, output_split_sizes=sizes, input_split_sizes=[b.size for b in blocks],
                               group=self.group)
        parts = torch.split(out, sizes)
        got = [blocks[q] if q == self.me else _array(t, s, dtype) for q, (t, s) in enumerate(zip(parts, shapes))]
        self.sent += sum(b.size for q, b in enumerate(blocks) if q != self.me)
        self.received += sum(n for q, n in enumerate(sizes) if q != self.me)
        self.messages += self.size - 1
        return got

    def pass_on(self, xs: list, shapes: list) -> "Passing":
        """Each of ``xs`` sent to the next rank (``me + 1 mod P``) while arrays of ``shapes`` (and ``xs``' dtypes)
        are received from the previous one (``me − 1 mod P``), without waiting: :meth:`Passing.wait` gives them.
        One message per array each way; every rank of the ring calls it at the same step."""
        xs = [np.asarray(x) for x in xs]
        nxt, prev = self.ranks[(self.me + 1) % self.size], self.ranks[(self.me - 1) % self.size]
        outs = [_tensor(x) for x in xs]
        ins = [torch.empty(int(np.prod(s, dtype=np.int64)), dtype=t.dtype) for t, s in zip(outs, shapes)]
        reqs = []
        for tag, (out, buf) in enumerate(zip(outs, ins)):       # a tag per array: matched one to one
            reqs.append(dist.isend(out, dst=nxt, group=self.group, tag=tag))
            reqs.append(dist.irecv(buf, src=prev, group=self.group, tag=tag))
        self.sent += sum(x.size for x in xs)
        self.received += sum(int(b.numel()) for b in ins)
        self.messages += len(xs)
        return Passing(reqs, outs, [(b, tuple(s), x.dtype) for b, s, x in zip(ins, shapes, xs)])


class Passing:
    """A ring step in flight (:meth:`Exchange.pass_on`); :meth:`wait` gives the arrays received."""

    def __init__(self, reqs: list, outs: list, ins: list):
        self.reqs, self.outs, self.ins = reqs, outs, ins          # the sent tensors kept alive until done

    def wait(self) -> list:
        for r in self.reqs:
            r.wait()
        return [_array(b, s, dtype) for b, s, dtype in self.ins]


__all__ = ["Exchange", "Passing"]
