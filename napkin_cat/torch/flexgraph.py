"""``nc.torch.flex_attention`` inside ``torch.compile``: one registered op per mods and options, which finds the trace
of the mods at the sizes of each call when it runs, so that the graph dynamo captures holds one node, forward and
backward, at any sizes (symbolic ones included).

Dynamo does not trace the Python that traces the mods (``torch.export``, locks, ``inspect``); it calls
:func:`prepared` while it captures the graph and takes its result as a constant (``assume_constant_result``): the
name of the op and the path from the mods to each tensor a trace of them may read per call
(:func:`~napkin_cat.torch.captures.tensors`).  Dynamo follows each path (closure cells, globals, module attributes:
:func:`~napkin_cat.torch.captures.follow`), so that each tensor is an input of the graph, read as it is at each call
and given its gradient.  The op::

    napkin::flex_graph_<n>(query, key, value, live) -> (O, L)
        = trace(mods, options, the sizes of query, key, value).flex.run(query, key, value, live[keys of the trace])
    napkin::flex_graph_<n>_backward(query, key, value, live, O, L, Ō, L̄?) -> (q̄, k̄, v̄, the live floats' gradients)

its fake implementations give shapes only: ``O`` of ``(B, H, N, e)``, ``L`` of ``(B, H, N)``, each gradient of its
input's shape (zero for a tensor the trace at these sizes does not differentiate).  A Python number the mods read is
read when the op runs (the trace's key holds the captured values, as for an eager call): a changed one traces again.

>>> import torch, napkin_cat as nc
>>> torch.set_num_threads(1)
>>> f = torch.compile(lambda q, k, v: nc.torch.flex_attention(q, k, v, mask_mod=lambda b, h, i, x: x <= i, memory=64),
...                   fullgraph=True, backend="eager")
>>> q, k, v = (torch.randn(1, 1, 4, 2, dtype=torch.float64) for _ in range(3))
>>> bool(torch.allclose(f(q, k, v), nc.torch.flex_attention(q, k, v, mask_mod=lambda b, h, i, x: x <= i, memory=64)))
True
"""
from __future__ import annotations

import itertools
import threading

import torch

from napkin_cat.torch.captures import key_of, tensors
from napkin_cat.torch.flexop import GIVEN
from napkin_cat.torch.ops import NAMESPACE

#: a process-wide count of the graph ops registered
COUNT = itertools.count()
#: the graph ops this process registered, by the mods' objects and the options (the mods are held: no id reused)
REGISTERED: dict = {}
LOCK = threading.Lock()


class GraphOp:
    """The op of one pair of mods and options under ``torch.compile`` (see the module docstring).  ``lookup(qkv)``
    gives the trace of the mods at the sizes of ``qkv``; ``keys``: what each tensor of ``live`` is
    (:func:`~napkin_cat.torch.captures.tensors`)."""

    def __init__(self, score_mod, mask_mod, lookup, keys: list, floats: list, aux: bool):
        self.score_mod, self.mask_mod, self.lookup, self.keys, self.aux = score_mod, mask_mod, lookup, keys, aux
        self.floats = floats                 # whether each live tensor is floating (it has a gradient)
        self.name = f"{NAMESPACE}::flex_graph_{next(COUNT)}"
        self.forward = torch.library.custom_op(
            self.name, self.run, mutates_args=(),
            schema="(Tensor query, Tensor key, Tensor value, Tensor[] live) -> (Tensor, Tensor)")
        self.forward.register_fake(self.fake)
        self.backward = torch.library.custom_op(
            self.name + "_backward", self.run_backward, mutates_args=(),
            schema="(Tensor query, Tensor key, Tensor value, Tensor[] live, Tensor O, Tensor L, Tensor Obar, "
                   "Tensor? Lbar) -> Tensor[]")
        self.backward.register_fake(self.fake_backward)
        self.forward.register_autograd(self.gradients, setup_context=self.setup_context)

    def traced(self, query, key, value, live) -> tuple:
        """The trace at these sizes and the tensors its op reads, in its order."""
        traced = self.lookup((query, key, value))
        held = list(traced.module.held)
        by_key = dict(zip(self.keys, live))
        return traced, [by_key[key_of(self.score_mod, self.mask_mod, held, traced.sources.get(n), n)]
                        for n in traced.flex.live]

    def run(self, query, key, value, live):
        traced, found = self.traced(query, key, value, live)
        return traced.flex.run(query, key, value, found)

    def fake(self, query, key, value, live):
        B, H, N = query.shape[:3]
        return query.new_empty(B, H, N, value.shape[-1]), query.new_empty(B, H, N)

    def setup_context(self, ctx, inputs, output):
        query, key, value, live = inputs
        ctx.save_for_backward(query, key, value, *live, *output)
        if self.aux:
            ctx.mark_non_differentiable(output[1])

    def gradients(self, ctx, Obar, Lbar):
        query, key, value, *rest = ctx.saved_tensors
        live, O, L = rest[:-2], rest[-2], rest[-1]
        found = iter(self.backward(query, key, value, list(live), O, L, Obar, None if self.aux else Lbar))
        grads = [next(found) for _ in GIVEN] + [next(found) if f else None for f in self.floats]
        return (*grads[:3], grads[3:])

    def run_backward(self, query, key, value, live, O, L, Obar, Lbar):
        traced, found = self.traced(query, key, value, live)
        grads = dict(zip(traced.flex.wrt, traced.flex.run_backward(query, key, value, found, O, L, Obar, Lbar)))
        held = list(traced.module.held)
        by_key = {key_of(self.score_mod, self.mask_mod, held, traced.sources.get(n), n): grads[n]
                  for n in traced.flex.live if n in grads}
        out = [grads[n] if n in grads else torch.zeros_like(x) for n, x in zip(GIVEN, (query, key, value))]
        return out + [by_key[k] if k in by_key else torch.zeros_like(x)
                      for k, x, f in zip(self.keys, live, self.floats) if f]

    def fake_backward(self, query, key, value, live, O, L, Obar, Lbar):
        return [torch.empty_like(x) for x in (query, key, value)] + [
            torch.empty_like(x) for x, f in zip(live, self.floats) if f]


@torch._dynamo.assume_constant_result
def prepared(lookup, score_mod, mask_mod, options: tuple) -> tuple:
    """The name of the graph op of these mods and options (``options``: what ``lookup(score_mod, mask_mod, *options,
    qkv)`` takes besides, the last ``return_lse``), registered on first use, and the path to each tensor it reads
    (:func:`~napkin_cat.torch.captures.tensors`; a tensor scale's path is ``("scale", ())``: the caller reads it).
    Called by dynamo while it captures the graph, its result a constant of the graph."""
    found = tensors(score_mod, mask_mod)
    if isinstance(options[0], tuple):       # a tensor scale, ``("scale", dtype)``: read as the op's last input
        found.append((("read", options[0][0]), (options[0][0], ()), torch.ones((), dtype=options[0][1])))
    key = (score_mod, mask_mod, tuple(getattr(o, "name", o) for o in options))
    with LOCK:
        if key not in REGISTERED:
            REGISTERED[key] = GraphOp(score_mod, mask_mod, lambda qkv: lookup(score_mod, mask_mod, *options, qkv),
                                      [k for k, _, _ in found], [t.is_floating_point() for _, _, t in found],
                                      aux=not options[-1])
        op = REGISTERED[key]
    return op.name, tuple(path for _, path, _ in found)


__all__ = ["GraphOp", "prepared", "REGISTERED"]
