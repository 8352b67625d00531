"""The op of one trace of FlexAttention's mods: masked attention as one registered ``torch.library`` custom op, with
FlexAttention's convention for an empty row, its index checks and its block tables inside it.

For the diagram ``f`` a trace ``t`` of the mods translated to (:func:`~napkin_cat.torch.flex.trace`), compiled as
``nc.torch.compile(f)`` (its forward and backward :class:`~napkin_cat.torch.kernels.Derived`), the op is::

    napkin::flex_attention(query, key, value, live, t) -> (O, L)
        O[b,h,q] = 0, L[b,h,q] = −∞                  where the mask allows no key of row q
        O, L     = f(query, key, value, live, fixed)  elsewhere
    napkin::flex_attention_backward(query, key, value, live, O, L, Ō, L̄?, t) -> (x̄ for each real input of f)
        = grad(f)(…, O, L₀, Ō₀, L̄₀)   with L₀, Ō₀, L̄₀ zero on the empty rows (so exp(L − L₀) = 0 there: no NaN)

One pair of ops is registered per process, for every trace: ``t`` is the trace's handle (:class:`FlexOp`'s
``handle``, an ``int`` argument), so that tracing mods again with new captured values (a number, a tensor the mods
make) registers nothing (``torch.library`` cannot unregister: an op per trace grew for the process's life).
``live`` are the tensors read afresh at each call (the tensors the mods capture, a tensor scale, the parameters and
buffers of the modules they read: their gradients are given back, in their own dtypes; a real one of another dtype
than the query's is read in the query's, the dtype of torch's result), ``fixed`` the program's other constants
(tensors the mods make), held by the trace.  Everything that reads the data runs inside the ops' implementations:
the range of each index into a captured table (:func:`~napkin_cat.torch.exported.check_indices`), the conversion of
integer tensors to int32, the kernels' block tables of a mask from data, the empty rows.  So
``torch.compile(fullgraph=True)`` sees one node forward and one backward, through their fake implementations (shapes
only), as FlexAttention's own higher-order op.

>>> import torch, napkin_cat as nc
>>> torch.set_num_threads(1)
>>> q, k, v = (torch.randn(1, 1, 4, 2, dtype=torch.float64) for _ in range(3))
>>> O, L = nc.torch.flex_attention(q, k, v, mask_mod=lambda b, h, qi, xi: xi < qi, memory=64, return_lse=True)
>>> bool(torch.isneginf(L[0, 0, 0])), O[0, 0, 0].tolist()       # query 0: no key before it
(True, [0.0, 0.0])
"""
from __future__ import annotations

import itertools
import threading
import weakref

import torch

from napkin_cat.errors import TensorError
from napkin_cat.torch.exported import check_indices
from napkin_cat.torch.ops import NAMESPACE

#: the three tensors every call gives, by the diagram's name for each
GIVEN = ("query", "key", "value")
#: the handles of traces (a process-wide count)
COUNT = itertools.count()
#: each live trace's :class:`FlexOp` by its handle (weak: held by its :class:`~napkin_cat.torch.flex.Traced`, and by
#: the autograd graph of a call whose backward is pending)
HANDLES: "weakref.WeakValueDictionary[int, FlexOp]" = weakref.WeakValueDictionary()
#: the registered ops: ``"forward"`` and ``"backward"``, made on first use (:func:`registered`)
REGISTERED: dict = {}
LOCK = threading.Lock()
#: their names
NAME = f"{NAMESPACE}::flex_attention"


class FlexOp:
    """One trace, run by the registered forward and backward ops when a call names its ``handle`` (see the module
    docstring).  ``op``: the compiled op of the trace's diagram (:func:`~napkin_cat.torch.ops.compiled`); ``axes``:
    the diagram's inputs in order, each input's dimensions' axes (None: a size-1 dimension it drops); ``live``: the
    names of the inputs given per call besides query, key and value; ``fixed``: name → tensor for the others;
    ``program``, ``sources``: the exported program and the mods' names of its captured tensors (index checks)."""

    def __init__(self, op, axes: dict, live: list, fixed: dict, program, sources: dict):
        self.made, self.axes, self.live, self.fixed = op, dict(axes), list(live), dict(fixed)
        self.program, self.sources = program, sources
        names = list(self.axes)
        for name in names:
            if name not in GIVEN and name not in self.live and name not in self.fixed:
                raise TensorError(f"flex_attention: the diagram's input {name!r} has no tensor")
        self.wrt = [names[k] for k in self.made.wrt]     # the inputs differentiated, by name
        self.forward, self.backward = registered()
        with LOCK:
            self.handle = next(COUNT)
            HANDLES[self.handle] = self

    def __call__(self, query, key, value, live):
        return self.forward(query, key, value, list(live), self.handle)

    # ------------------------------------------------------------------ the diagram's inputs from a call's tensors
    def by_name(self, query, key, value, live) -> dict:
        return {"query": query, "key": key, "value": value, **dict(zip(self.live, live)), **self.fixed}

    def arrays(self, tensors: dict) -> list:
        """The diagram's inputs in order: size-1 dimensions dropped, integers as int32 (checked to fit), reals in the
        query's dtype (a float64 table beside float32 queries: torch's result is float32)."""
        out, real = [], tensors["query"].dtype
        for name, axes in self.axes.items():
            x = int32(name, tensors[name])
            x = x.to(real) if x.is_floating_point() else x
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
        query, key, value, live, _ = inputs
        ctx.flex = self               # held until the backward runs (the trace may leave the cache meanwhile)
        ctx.save_for_backward(query, key, value, *live, *output)
        if self.made.aux:
            ctx.mark_non_differentiable(output[1])

    def gradients(self, ctx, Obar, Lbar):
        query, key, value, *rest = ctx.saved_tensors
        live, O, L = rest[:-2], rest[-2], rest[-1]
        found = self.backward(query, key, value, list(live), O, L, Obar, None if self.made.aux else Lbar,
                              self.handle)
        by = dict(zip(self.wrt, found))
        grads = [by.get(n) for n in (*GIVEN, *self.live)]
        return (*grads[:3], grads[3:], None)

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
        return [g.reshape(tensors[n].shape).to(tensors[n].dtype) for n, g in zip(self.wrt, found)]

    def fake_backward(self, query, key, value, live, O, L, Obar, Lbar):
        tensors = self.by_name(query, key, value, live)
        return [torch.empty_like(tensors[n]) for n in self.wrt]


def flex_op(op, axes: dict, live: list, fixed: dict, program, sources: dict) -> FlexOp:
    """The :class:`FlexOp` of a trace: called through the process's one pair of registered ops (:func:`registered`),
    by its handle."""
    return FlexOp(op, axes, live, fixed, program, sources)


def of(handle: int) -> FlexOp:
    """The trace of a handle; a TensorError where none lives (a handle from an earlier process, or a freed trace)."""
    found = HANDLES.get(handle)
    if found is None:
        raise TensorError(f"{NAME}: no trace has handle {handle} in this process (handles name the live traces of "
                          f"nc.torch.flex_attention's mods; call nc.torch.flex_attention, which passes its own)")
    return found


def registered() -> tuple:
    """The registered forward and backward ops of every trace (see the module docstring), made on first use; the
    trace of a call is its handle's (:func:`of`), its autograd the trace's, held by the call's context."""
    with LOCK:
        if not REGISTERED:
            forward = torch.library.custom_op(
                NAME, lambda query, key, value, live, trace: of(trace).run(query, key, value, live), mutates_args=(),
                schema="(Tensor query, Tensor key, Tensor value, Tensor[] live, int trace) -> (Tensor, Tensor)")
            forward.register_fake(lambda query, key, value, live, trace: of(trace).fake(query, key, value, live))
            backward = torch.library.custom_op(
                NAME + "_backward", lambda query, key, value, live, O, L, Obar, Lbar, trace: of(trace).run_backward(
                    query, key, value, live, O, L, Obar, Lbar), mutates_args=(),
                schema="(Tensor query, Tensor key, Tensor value, Tensor[] live, Tensor O, Tensor L, Tensor Obar, "
                       "Tensor? Lbar, int trace) -> Tensor[]")
            backward.register_fake(lambda query, key, value, live, O, L, Obar, Lbar, trace: of(trace).fake_backward(
                query, key, value, live, O, L, Obar, Lbar))
            forward.register_autograd(
                lambda ctx, Obar, Lbar: ctx.flex.gradients(ctx, Obar, Lbar),
                setup_context=lambda ctx, inputs, output: of(inputs[-1]).setup_context(ctx, inputs, output))
            REGISTERED.update(forward=forward, backward=backward)
        return REGISTERED["forward"], REGISTERED["backward"]


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


__all__ = ["FlexOp", "GIVEN", "flex_op", "of", "registered", "positions", "int32", "REGISTERED", "HANDLES"]
