"""The op of one trace of FlexAttention's mods: masked attention as one registered ``torch.library`` custom op, with
FlexAttention's convention for an empty row, its index checks and its block tables inside it.

For the diagram ``f`` a trace of the mods translated to (:func:`~napkin_cat.torch.flex.trace`), compiled as
``nc.torch.compile(f)`` (its forward and backward :class:`~napkin_cat.torch.kernels.Derived`), the op is::

    napkin::flex_attention_<n>(query, key, value, live) -> (O, L)
        O[b,h,q] = 0, L[b,h,q] = −∞                  where the mask allows no key of row q
        O, L     = f(query, key, value, live, fixed)  elsewhere
    napkin::flex_attention_<n>_backward(query, key, value, live, O, L, Ō, L̄?) -> (x̄ for each real input of f)
        = grad(f)(…, O, L₀, Ō₀, L̄₀)   with L₀, Ō₀, L̄₀ zero on the empty rows (so exp(L − L₀) = 0 there: no NaN)

``live`` are the tensors read afresh at each call (the tensors the mods capture, the parameters and buffers of the
modules they read: their gradients are given back), ``fixed`` the program's other constants (tensors the mods make),
held by the op.  Everything that reads the data runs inside the ops' implementations: the range of each index into
a captured table (:func:`~napkin_cat.torch.exported.check_indices`), the conversion of integer tensors to int32,
the kernels' block tables of a mask from data, the empty rows.  So ``torch.compile(fullgraph=True)`` sees one node
forward and one backward, through their fake implementations (shapes only), as FlexAttention's own higher-order op.

>>> import torch, napkin_cat as nc
>>> torch.set_num_threads(1)
>>> q, k, v = (torch.randn(1, 1, 4, 2, dtype=torch.float64) for _ in range(3))
>>> O, L = nc.torch.flex_attention(q, k, v, mask_mod=lambda b, h, qi, xi: xi < qi, memory=64, return_lse=True)
>>> bool(torch.isneginf(L[0, 0, 0])), O[0, 0, 0].tolist()       # query 0: no key before it
(True, [0.0, 0.0])
"""
from __future__ import annotations

import hashlib
import itertools
import threading

import torch

from napkin_cat.errors import TensorError
from napkin_cat.torch.exported import check_indices
from napkin_cat.torch.ops import NAMESPACE

#: the three tensors every call gives, by the diagram's name for each
GIVEN = ("query", "key", "value")
#: a process-wide count of the flex ops registered (each trace its own op: its fixed constants and program differ)
COUNT = itertools.count()
#: the flex ops this process registered (:func:`flex_op`), by what each depends on
REGISTERED: dict = {}
LOCK = threading.Lock()


class FlexOp:
    """The registered forward and backward ops of one trace (see the module docstring).  ``op``: the compiled op of
    the trace's diagram (``nc.torch.compile``); ``axes``: the diagram's inputs in order, each input's dimensions'
    axes (None: a size-1 dimension it drops); ``live``: the names of the inputs given per call besides query, key
    and value; ``fixed``: name → tensor for the others; ``program``, ``sources``: the exported program and the
    mods' names of its captured tensors (for the index checks)."""

    def __init__(self, op, axes: dict, live: list, fixed: dict, program, sources: dict):
        self.made, self.axes, self.live, self.fixed = op.napkin, dict(axes), list(live), dict(fixed)
        self.program, self.sources = program, sources
        names = list(self.axes)
        for name in names:
            if name not in GIVEN and name not in self.live and name not in self.fixed:
                raise TensorError(f"flex_attention: the diagram's input {name!r} has no tensor")
        self.wrt = [names[k] for k in self.made.wrt]     # the inputs differentiated, by name
        self.name = f"{NAMESPACE}::flex_attention_{next(COUNT)}_{self.made.name.split('::')[-1]}"
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

    def __call__(self, query, key, value, live):
        return self.forward(query, key, value, list(live))

    # ------------------------------------------------------------------ the diagram's inputs from a call's tensors
    def by_name(self, query, key, value, live) -> dict:
        return {"query": query, "key": key, "value": value, **dict(zip(self.live, live)), **self.fixed}

    def arrays(self, tensors: dict) -> list:
        """The diagram's inputs in order: size-1 dimensions dropped, integers as int32 (checked to fit)."""
        out = []
        for name, axes in self.axes.items():
            x = int32(name, tensors[name])
            out.append(x.reshape([s for s, a in zip(x.shape, axes) if a is not None]))
        return out

    def check(self, query, key, tensors: dict):
        """Every index into a captured table in its range, on these tensors (the positions made here)."""
        index = positions(query.shape[0], query.shape[1], query.shape[2], key.shape[2])
        constants = {**self.program.constants, **{n: t for n, t in tensors.items() if n not in GIVEN}}
        check_indices(self.program, (*[tensors[n] for n in GIVEN], *index), constants, self.sources,
                      at=f"at these sizes (query {tuple(query.shape)}, key {tuple(key.shape)})")

    # ------------------------------------------------------------------ the forward op
    def run(self, query, key, value, live):
        tensors = self.by_name(query, key, value, live)
        self.check(query, key, tensors)
        xs = self.arrays(tensors)
        O, L = self.made.forward(xs, self.made.forward.tables(xs))      # the tables at the tiles the kernel runs at
        B, H, N = query.shape[:3]
        O, L = O.reshape(B, H, N, value.shape[-1]), L.reshape(B, H, N)
        empty = torch.isneginf(L)
        return torch.where(empty[..., None], torch.zeros((), dtype=O.dtype), O), L

    def fake(self, query, key, value, live):
        B, H, N = query.shape[:3]
        return query.new_empty(B, H, N, value.shape[-1]), query.new_empty(B, H, N)

    def setup_context(self, ctx, inputs, output):
        query, key, value, live = inputs
        ctx.save_for_backward(query, key, value, *live, *output)
        if self.made.aux:
            ctx.mark_non_differentiable(output[1])

    def gradients(self, ctx, Obar, Lbar):
        query, key, value, *rest = ctx.saved_tensors
        live, O, L = rest[:-2], rest[-2], rest[-1]
        found = self.backward(query, key, value, list(live), O, L, Obar, None if self.made.aux else Lbar)
        by = dict(zip(self.wrt, found))
        grads = [by.get(n) for n in (*GIVEN, *self.live)]
        return (*grads[:3], grads[3:])

    # ------------------------------------------------------------------ the backward op
    def run_backward(self, query, key, value, live, O, L, Obar, Lbar):
        xs = self.arrays(self.by_name(query, key, value, live))
        signature = self.made.forward.signature
        shape_O, shape_L = signature.shapes(signature.sizes(xs))
        empty = torch.isneginf(L)
        zero = torch.zeros((), dtype=L.dtype)
        ys = [O.reshape(shape_O), torch.where(empty, zero, L).reshape(shape_L),
              torch.where(empty[..., None], zero, Obar).reshape(shape_O)]
        if Lbar is not None:
            ys.append(torch.where(empty, zero, Lbar).reshape(shape_L))
        found = self.made.backward(xs + ys, self.made.backward.tables(xs + ys))
        tensors = self.by_name(query, key, value, live)
        return [g.reshape(tensors[n].shape) for n, g in zip(self.wrt, found)]

    def fake_backward(self, query, key, value, live, O, L, Obar, Lbar):
        tensors = self.by_name(query, key, value, live)
        return [torch.empty_like(tensors[n]) for n in self.wrt]


def flex_op(op, axes: dict, live: list, fixed: dict, program, sources: dict) -> FlexOp:
    """The :class:`FlexOp` of a trace, registered once per process for everything it depends on (the compiled op, the
    inputs, the fixed tensors' values, the program's graph): a mod traced again on each call (a tensor it makes)
    registers no new op."""
    key = (op.napkin.name, tuple((n, tuple(a)) for n, a in axes.items()), tuple(live),
           tuple((n, tuple(t.shape), str(t.dtype), hashlib.sha1(t.detach().cpu().contiguous().reshape(-1).view(
               torch.uint8).numpy().tobytes()).hexdigest()) for n, t in fixed.items()),
           program.graph_module.code, tuple(sorted(sources.items())))
    with LOCK:
        if key not in REGISTERED:
            REGISTERED[key] = FlexOp(op, axes, live, fixed, program, sources)
        return REGISTERED[key]


def positions(B: int, H: int, N: int, X: int) -> tuple:
    """FlexAttention's index tensors ``b, h, q_idx, kv_idx``: the positions along batch, heads, queries and keys, each
    along its own dimension of four (broadcast to ``(B, H, N, X)``)."""
    return (torch.arange(B).view(B, 1, 1, 1), torch.arange(H).view(1, H, 1, 1), torch.arange(N).view(1, 1, N, 1),
            torch.arange(X).view(1, 1, 1, X))


def int32(name: str, x: torch.Tensor) -> torch.Tensor:
    """An integer tensor (a captured document id) in the diagram's integer format, int32; others as they are."""
    if x.dtype in (torch.int64, torch.int16, torch.int8, torch.uint8):
        if x.numel() and (x.min() < -2 ** 31 or x.max() >= 2 ** 31):
            raise TensorError(f"the captured tensor {name!r} holds integers outside int32, the diagram's format")
        return x.to(torch.int32)
    return x


__all__ = ["FlexOp", "GIVEN", "flex_op", "positions", "int32", "REGISTERED"]
