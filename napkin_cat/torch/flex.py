"""FlexAttention's interface: ``nc.torch.flex_attention(query, key, value, score_mod, mask_mod)``, the mods traced
into the diagram of masked attention and run as a derived, compiled op (:func:`~napkin_cat.torch.ops.compile`).

On ``(B, H, N, d)`` tensors, with FlexAttention's conventions (``score_mod(score, b, h, q_idx, kv_idx)``,
``mask_mod(b, h, q_idx, kv_idx)``, written with torch operations on index tensors and on tensors they capture)::

    S[b,h,q,x] = score_mod(scale · Q[b,h,q]·K[b,h,x], b, h, q, x)     where mask_mod(b, h, q, x), else −∞
    O[b,h,q]   = softmax_x(S[b,h,q]) · V[b,h]                         L[b,h,q] = logsumexp_x S[b,h,q]

The function is exported by ``torch.export`` with the index tensors as inputs and translated by
:mod:`~napkin_cat.torch.exported`: ``b, h, q_idx, kv_idx`` become ``nc.position`` boxes along the batch, heads,
queries and keys (no input), a captured tensor (document ids, a bias table, a per-head slope) an input read by a gather
(``aten.index``: the table read at the index inside the fused kernel, never a q×x array), each index checked at
call time to lie in the table (:func:`~napkin_cat.torch.exported.check_indices`).
A mask that reads a captured tensor is a mask from data: before each call the op's kernel (and, differentiated,
each backward kernel) is given the block tables of the mask on these data at the tiles it runs at
(:meth:`~napkin_cat.torch.kernels.Derived.tables`, the op's ``blocks`` argument), so that it skips the blocks no pair
of which the mask allows and runs the blocks it allows whole without it, as FlexAttention does with its
``BlockMask``.  A row no key may attend has ``O = 0`` and ``L = −∞`` (FlexAttention's convention; the diagram's
softmax gives NaN there, mapped to 0 after the op) and a finite zero backward (:class:`EmptyRows`).  The traced
mods are cached per process (:class:`TraceCache`): a call with the same mods, captured values and shapes exports
nothing.

>>> import torch, napkin_cat as nc
>>> torch.set_num_threads(1)
>>> q, k, v = (torch.randn(1, 2, 8, 4, dtype=torch.float64) for _ in range(3))
>>> O = nc.torch.flex_attention(q, k, v, mask_mod=lambda b, h, qi, xi: xi <= qi, memory=64)
>>> causal = torch.full((8, 8), float("-inf"), dtype=torch.float64).triu(1)
>>> bool(torch.allclose(O, torch.softmax(q @ k.transpose(-1, -2) / 2 + causal, -1) @ v))
True
"""
from __future__ import annotations

import inspect
import math
import types
from dataclasses import dataclass

import torch

from napkin_cat.errors import ShapeError, TensorError
from napkin_cat.plan.recent import Recent
from napkin_cat.torch.exported import check_indices, translate
from napkin_cat.torch.ops import compile

#: the index tensors' names and the (input, dimension) each is the positions along
POSITIONS = {"b": ("query", 0), "h": ("query", 1), "q_idx": ("query", 2), "kv_idx": ("key", 2)}
NAMES = {"query": "b h q d", "key": "b h x d", "value": "b h x e"}
#: the mods traced per process (:class:`TraceCache`): a bounded number of entries, least recently used evicted
TRACED = 64


class Scores(torch.nn.Module):
    """Masked attention with the mods, as torch computes it: what is exported and translated."""

    def __init__(self, score_mod, mask_mod, scale: float):
        super().__init__()
        self.score_mod, self.mask_mod, self.scale = score_mod, mask_mod, scale

    def forward(self, query, key, value, b, h, q_idx, kv_idx):
        s = query @ key.transpose(-1, -2) * self.scale
        if self.score_mod is not None:
            s = self.score_mod(s, b, h, q_idx, kv_idx)
        if self.mask_mod is not None:
            s = s.masked_fill(~self.mask_mod(b, h, q_idx, kv_idx), float("-inf"))
        return torch.softmax(s, -1) @ value, torch.logsumexp(s, -1)


def captured(score_mod, mask_mod) -> dict:
    """The values the mods read by name (closure cells and globals, modules left out; a bound method's object, or a
    mod that is a ``torch.nn.Module``, as ``"score_mod.__self__"``): ``"score_mod.TABLE"`` → the tensor.  None where a
    mod is neither a Python function, a method nor a module (a callable object: what it reads is not visible)."""
    out = {}
    for role, fn in (("score_mod", score_mod), ("mask_mod", mask_mod)):
        if fn is None:
            continue
        if isinstance(fn, torch.nn.Module):     # what its forward reads: its attributes (in its fingerprint)
            out[f"{role}.__self__"] = fn
            fn = type(fn).forward
        if inspect.ismethod(fn):
            out[f"{role}.__self__"] = fn.__self__
            fn = fn.__func__
        if not inspect.isfunction(fn):
            return None
        seen = inspect.getclosurevars(fn)
        out.update({f"{role}.{k}": v for k, v in {**seen.globals, **seen.nonlocals}.items()
                    if not isinstance(v, types.ModuleType)})
    return out


def modules(score_mod, mask_mod, reads) -> list:
    """The ``torch.nn.Module`` objects the mods read (a bound method's object, a module in a closure cell or a
    global), registered under :class:`Scores` (as a mod that is a module is already) so that ``torch.export`` lifts
    their parameters and buffers as the originals (``PARAMETER`` inputs, read at each call, their gradients given
    back), not as copies of their values at the trace."""
    found = [fn.__self__ for fn in (score_mod, mask_mod) if inspect.ismethod(fn)
              and isinstance(fn.__self__, torch.nn.Module)]
    found += [v for v in (reads or {}).values() if isinstance(v, torch.nn.Module)]
    out = []
    for m in found:
        if all(m is not k for k in out):
            out.append(m)
    return out


def fingerprint(value, depth: int = 3):
    """What a traced diagram depends on in a captured value: a tensor's shape, dtype and device (not its values,
    which are the diagram's inputs), a number's or a string's value; an object's identity and the fingerprints of
    its attributes (a module's: its public attributes, its parameters' and buffers' shapes, its submodules'), so
    that ``cfg.width = 5`` or a table rebound to another shape traces again; ``depth`` levels of attributes deep."""
    if isinstance(value, torch.Tensor):
        return ("tensor", tuple(value.shape), value.dtype, value.device.type)
    if value is None or isinstance(value, (bool, int, float, complex, str)):
        return ("value", type(value).__name__, value)
    if isinstance(value, (tuple, list)):
        return (type(value).__name__, tuple(fingerprint(v, depth) for v in value))
    attributes = getattr(value, "__dict__", None) if depth and not isinstance(
        value, (type, types.FunctionType, types.MethodType, types.ModuleType)) else None
    if not isinstance(attributes, dict):
        return ("object", id(value))
    if isinstance(value, torch.nn.Module):
        attributes = {**{k: v for k, v in attributes.items() if not k.startswith("_")},
                      **dict(value.named_parameters()), **dict(value.named_buffers()),
                      **{f"{k}.": m for k, m in value.named_children()}}
    return ("object", id(value), tuple(sorted((str(k), fingerprint(v, depth - 1)) for k, v in attributes.items())))


@dataclass
class Traced:
    """The mods traced at one key: the exported program, its translation, the compiled op, where each captured
    constant of the program is read from (``sources``: constant name → the mods' name for it) and the index
    reads to check at each call."""
    program: object
    translated: object
    op: object
    sources: dict
    held: tuple       # the objects whose identity is in the key (kept alive, so that no id is reused)
    module: object = None     # the traced Scores: its parameters and buffers are read from it at each call

    def lifted(self) -> dict:
        """The parameters and buffers of the modules the mods read, by the exported program's name for each, as
        they are now (the originals: their gradients are given back)."""
        specs = self.program.graph_signature.input_specs
        return {s.target: (self.module.get_parameter if s.kind.name == "PARAMETER" else self.module.get_buffer)(
            s.target) for s in specs if s.kind.name in ("PARAMETER", "BUFFER")}


class TraceCache(Recent):
    """The traced mods by key, for the life of the process: at most ``size`` entries, least recently used evicted,
    one lock.  The key holds everything a trace depends on: the mod function objects, the scale, the query's, key's
    and value's shapes and dtypes, the options of the op, and the fingerprint of every value the mods capture
    (:func:`fingerprint`), so that a captured number changed or a captured table of a new shape traces again."""

    def __init__(self, size: int = TRACED):
        super().__init__(size)


TRACES = TraceCache()


def flex_attention(query, key, value, score_mod=None, mask_mod=None, *, scale=None, enable_gqa=False,
                   return_lse=False, memory=None, hardware=None, depth: int = 2):
    """``torch.nn.attention.flex_attention``'s outputs (see the module docstring) by napkin-cat's derived kernels,
    differentiable (the derived backward).  ``mask_mod`` is the function FlexAttention's ``create_block_mask``
    takes.  ``memory``, ``hardware`` and ``depth`` go to :func:`~napkin_cat.torch.ops.compile`.  Returns ``O`` (and the
    log-sum-exp ``L``, natural logarithm, with ``return_lse``: differentiable, as FlexAttention's is, by an op whose
    backward is derived with L's cotangent; without it, the op's L is auxiliary, its backward FlashAttention's).

    The mods are traced once per key of :class:`TraceCache` (in :data:`TRACES`); each call reads the captured
    tensors afresh (a table updated in place, or rebound to a tensor of the same shape, is read as it is now) and
    checks every index into a captured table against its size (:func:`check_indices`)."""
    query, key, value = heads(query, key, value, enable_gqa)
    d = query.shape[-1]
    scale = 1 / math.sqrt(d) if scale is None else as_scale(scale)
    B, H, N, X = query.shape[0], query.shape[1], query.shape[2], key.shape[2]
    index = (torch.arange(B).view(B, 1, 1, 1), torch.arange(H).view(1, H, 1, 1), torch.arange(N).view(1, 1, N, 1),
             torch.arange(X).view(1, 1, 1, X))
    reads = captured(score_mod, mask_mod)
    shapes = tuple((tuple(x.shape), x.dtype, x.device.type) for x in (query, key, value))
    cache_key = None if reads is None else (
        score_mod, mask_mod, scale, shapes, memory, getattr(hardware, "name", hardware), depth, bool(return_lse),
        tuple(sorted((k, fingerprint(v)) for k, v in reads.items())))
    traced = None if cache_key is None else TRACES.get(cache_key)
    if traced is None:
        traced = trace(score_mod, mask_mod, scale, (query, key, value), index, reads, memory, hardware, depth,
                       aux=0 if return_lse else 1)
        if cache_key is not None and len(traced.sources) == len(traced.program.constants):
            TRACES.put(cache_key, traced)
    program, r, op = traced.program, traced.translated, traced.op
    constants = {name: reads[source] if source in (reads or {}) else program.constants[name]
                 for name, source in traced.sources.items()}
    constants = {**program.constants, **traced.lifted(), **constants}
    check_indices(program, (query, key, value, *index), constants, traced.sources,
                  at=f"at these sizes (query {tuple(query.shape)}, key {tuple(key.shape)})")
    given = {"query": query, "key": key, "value": value}
    args = []
    for name, axes in r.axes.items():
        x = given.get(name, constants.get(name))
        x = torch.as_tensor(r.inputs[name]) if x is None else x
        args.append(int32(name, x).reshape([s for s, a in zip(x.shape, axes) if a is not None]))
    O, L = EmptyRows.apply(op, *args)
    O, L = (y.reshape(s) for y, s in zip((O, L), ((B, H, N, value.shape[-1]), (B, H, N))))
    return (O, L) if return_lse else O


def trace(score_mod, mask_mod, scale, qkv, index, reads, memory, hardware, depth: int = 2, aux: int = 1) -> Traced:
    """Export masked attention with the mods, translate it and compile it (the slow part of a call: once per key).
    ``aux=1``: the log-sum-exp is not differentiated (not returned); ``aux=0``: it is (returned, as FlexAttention's
    is: ``∂L/∂S = P``, so a loss that reads L gets its gradient)."""
    module = Scores(score_mod, mask_mod, scale)
    module.held = torch.nn.ModuleList(modules(score_mod, mask_mod, reads))
    example = (*(x.detach() for x in qkv), *index)
    try:
        program = torch.export.export(module, example)
    except Exception as e:     # the user's mods: raised, or returned what masked attention cannot take
        B, H, N, X = qkv[0].shape[0], qkv[0].shape[1], qkv[0].shape[2], qkv[1].shape[2]
        raise TensorError(f"flex_attention could not trace the mods on {qkv[0].dtype} scores of shape {(B, H, N, X)}: "
                          f"{type(e).__name__}: {str(e).strip().splitlines()[0][:300] if str(e).strip() else ''} "
                          f"(a mask_mod(b, h, q_idx, kv_idx) returns a bool tensor broadcastable to {(B, H, N, X)}; "
                          f"a score_mod(score, b, h, q_idx, kv_idx) returns a tensor of the score's shape and dtype)"
                          ) from e
    r = translate(program, module, example, None, NAMES, positions=POSITIONS)
    op = compile(r.diagram, aux=aux, memory=memory, hardware=hardware, depth=depth, name="flex_attention")
    by_id = {id(v): k for k, v in (reads or {}).items() if isinstance(v, torch.Tensor)}
    sources = {name: by_id[id(t)] for name, t in program.constants.items() if id(t) in by_id}
    return Traced(program, r, op, sources, tuple(v for v in (reads or {}).values()
                                                 if fingerprint(v)[0] == "object"), module)


class EmptyRows(torch.autograd.Function):
    """The op with FlexAttention's convention for a query no key may attend: ``O = 0`` and ``L = −∞`` forward (the
    softmax of an all −∞ row is 0/0); backward, the derived backward run with such a row's ``O = 0``, ``L = 0`` and
    ``Ō = 0``, so that its ``P = exp(−∞ − 0) = 0`` contributes nothing (a finite 0 to q, nothing to k, v or a
    captured table), instead of ``exp(−∞ + ∞)`` = NaN spreading into every key's gradient."""

    @staticmethod
    def forward(ctx, op, *args):
        O, L = op(*args, op.napkin.forward.tables(list(args)))       # the tables at the tiles the op picks
        empty = torch.isneginf(L)
        O = torch.where(empty[..., None], torch.zeros((), dtype=O.dtype), O)
        ctx.made, ctx.empty = op.napkin, empty
        ctx.save_for_backward(*args, O, L)
        if op.napkin.aux:
            ctx.mark_non_differentiable(L)
        return O, L

    @staticmethod
    def backward(ctx, Obar, Lbar):
        made, empty = ctx.made, ctx.empty
        *args, O, L = ctx.saved_tensors
        wanted = [k for k in made.wrt if ctx.needs_input_grad[1 + k]]
        if not wanted:
            return (None,) * (1 + len(args))
        L0 = torch.where(empty, torch.zeros((), dtype=L.dtype), L)
        Obar = torch.where(empty[..., None], torch.zeros((), dtype=Obar.dtype), Obar)
        Lbar = () if made.aux else (torch.where(empty, torch.zeros((), dtype=L.dtype), Lbar),)
        inputs = [*args, O, L0, Obar, *Lbar]
        found = made.backward_op(*inputs, made.backward.tables(inputs))
        found = found if isinstance(found, (tuple, list)) else (found,)
        out = [None] * len(args)
        for k, g in zip(made.wrt, found):
            out[k] = g if ctx.needs_input_grad[1 + k] else None
        return (None, *out)


def int32(name: str, x: torch.Tensor) -> torch.Tensor:
    """An integer tensor (a captured document id) in the diagram's integer format, int32; others as they are."""
    if x.dtype in (torch.int64, torch.int16, torch.int8, torch.uint8):
        if x.numel() and (x.min() < -2 ** 31 or x.max() >= 2 ** 31):
            raise TensorError(f"the captured tensor {name!r} holds integers outside int32, the diagram's format")
        return x.to(torch.int32)
    return x


def as_scale(scale) -> float:
    """The score scale as a finite real number; a TensorError naming what was given otherwise (a string, a bool,
    NaN or an infinity: its scores are NaN, or its kernel's constant has no spelling).

    >>> as_scale(0.5), as_scale(torch.tensor(2.0))
    (0.5, 2.0)
    >>> as_scale(float("nan"))
    Traceback (most recent call last):
    ...
    napkin_cat.errors.TensorError: flex_attention's scale is a finite real number (default 1/sqrt(d)), got nan
    """
    value = scale.item() if isinstance(scale, torch.Tensor) and scale.numel() == 1 else scale
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise TensorError(f"flex_attention's scale is a finite real number (default 1/sqrt(d)), got {scale!r}")
    return float(value)


def heads(query, key, value, enable_gqa: bool):
    """``key`` and ``value`` with as many heads as ``query`` (grouped-query attention repeats each ``H/Hkv`` times);
    a TensorError where they are not tensors of one floating dtype."""
    for name, x in (("query", query), ("key", key), ("value", value)):
        if not isinstance(x, torch.Tensor) or not x.is_floating_point():
            raise TensorError(f"flex_attention takes floating-point tensors; {name} is "
                              f"{getattr(x, 'dtype', type(x).__name__)}")
        if x.dtype != query.dtype:
            raise TensorError(f"flex_attention takes query, key and value of one dtype; query is {query.dtype}, "
                              f"{name} {x.dtype}")
    for name, x in (("query", query), ("key", key), ("value", value)):
        if x.dim() != 4:
            raise ShapeError(f"flex_attention takes (B, H, N, d) tensors; {name} has shape {tuple(x.shape)}")
    if key.shape[:3] != value.shape[:3] or query.shape[0] != key.shape[0] or query.shape[3] != key.shape[3]:
        raise ShapeError(f"query {tuple(query.shape)}, key {tuple(key.shape)} and value {tuple(value.shape)} must "
                         f"agree: one batch, key and value one length, query and key one head dimension")
    hq, hk = query.shape[1], key.shape[1]
    if hq != hk:
        if not enable_gqa or hq % hk:
            raise ShapeError(f"query has {hq} heads and key {hk}: equal, or with enable_gqa=True a divisor of {hq}")
        key, value = (x.repeat_interleave(hq // hk, dim=1) for x in (key, value))
    return query, key, value
