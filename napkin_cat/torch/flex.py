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
softmax gives NaN there, mapped to 0 inside the op) and a finite zero backward (:class:`~.flexop.FlexOp`, the op of
a trace).  The traced mods are cached per process (:class:`TraceCache`): a call with the same mods, captured values
and shapes exports nothing.  Under ``torch.compile(fullgraph=True)`` the call is one op of the graph
(:mod:`~napkin_cat.torch.flexgraph`); on zero-size tensors it derives nothing (:func:`empty`).

>>> import torch, napkin_cat as nc
>>> torch.set_num_threads(1)
>>> q, k, v = (torch.randn(1, 2, 8, 4, dtype=torch.float64) for _ in range(3))
>>> O = nc.torch.flex_attention(q, k, v, mask_mod=lambda b, h, qi, xi: xi <= qi, memory=64)
>>> causal = torch.full((8, 8), float("-inf"), dtype=torch.float64).triu(1)
>>> bool(torch.allclose(O, torch.softmax(q @ k.transpose(-1, -2) / 2 + causal, -1) @ v))
True
"""
from __future__ import annotations

import concurrent.futures
import math
from dataclasses import dataclass

import torch

from napkin_cat.errors import ArgumentError, ShapeError, TensorError
from napkin_cat.plan.recent import Recent
from napkin_cat.torch.blockmask import is_block_mask, mask_of
from napkin_cat.torch.captures import captured, fingerprint, follow, modules, reached
from napkin_cat.torch.exported import mark_wraps, translate
from napkin_cat.torch.flexgraph import prepared
from napkin_cat.torch.flexop import GIVEN, flex_op, positions
from napkin_cat.torch.ops import compiled

#: the index tensors' names and the (input, dimension) each is the positions along
POSITIONS = {"b": ("query", 0), "h": ("query", 1), "q_idx": ("query", 2), "kv_idx": ("key", 2)}
NAMES = {"query": "b h q d", "key": "b h x d", "value": "b h x e"}
#: the mods traced per process (:class:`TraceCache`): a bounded number of entries, least recently used evicted
TRACED = 64
#: the name of a tensor scale among the op's inputs (and the role of its path under ``torch.compile``)
TENSOR_SCALE = "scale"


class Scores(torch.nn.Module):
    """Masked attention with the mods, as torch computes it: what is exported and translated."""

    def __init__(self, score_mod, mask_mod, scale):
        super().__init__()
        self.score_mod, self.mask_mod, self.scale = score_mod, mask_mod, scale    # a float, or a 0-d tensor

    def forward(self, query, key, value, b, h, q_idx, kv_idx):
        s = query @ key.transpose(-1, -2) * self.scale
        if self.score_mod is not None:
            s = self.score_mod(s, b, h, q_idx, kv_idx)
        if self.mask_mod is not None:
            s = s.masked_fill(~self.mask_mod(b, h, q_idx, kv_idx), float("-inf"))
        if isinstance(s, torch.Tensor) and s.is_floating_point():   # a table of another real dtype: the query's
            s = s.to(query.dtype)
        return torch.softmax(s, -1) @ value, torch.logsumexp(s, -1)


@dataclass
class Traced:
    """The mods traced at one key: the exported program, its translation, the compiled op (a
    :class:`~napkin_cat.torch.ops.CompiledOp`, registered as no op of its own), where each captured
    constant of the program is read from (``sources``: constant name → the mods' name for it) and the index
    reads to check at each call."""
    program: object
    translated: object
    op: object
    sources: dict
    held: tuple       # the objects whose identity is in the key (kept alive, so that no id is reused)
    module: object = None     # the traced Scores: its parameters and buffers are read from it at each call
    flex: object = None       # its op (:class:`~napkin_cat.torch.flexop.FlexOp`)

    def lifted(self) -> dict:
        """The parameters and buffers of the modules the mods read, by the exported program's name for each, as
        they are now (the originals: their gradients are given back)."""
        specs = self.program.graph_signature.input_specs
        return {s.target: (self.module.get_parameter if s.kind.name == "PARAMETER" else self.module.get_buffer)(
            s.target) for s in specs if s.kind.name in ("PARAMETER", "BUFFER")}

    def live(self, reads: dict) -> list:
        """The tensors the op reads per call (``flex.live``), as they are now: read by the mods (``reads``:
        :func:`live_reads`, a tensor scale's among them), or the parameters and buffers of the modules they read."""
        lifted = self.lifted()
        return [reads[self.sources[n]] if n in self.sources else lifted[n] for n in self.flex.live]


class TraceCache(Recent):
    """The traced mods by key, for the life of the process: at most ``size`` entries, least recently used evicted,
    one lock.  The key holds everything a trace depends on: the mod function objects, the scale, the query's, key's
    and value's shapes and dtypes, the options of the op, and the fingerprint of every value the mods capture
    (:func:`fingerprint`), so that a captured number changed or a captured table of a new shape traces again."""

    def __init__(self, size: int = TRACED):
        super().__init__(size)


TRACES = TraceCache()


def flex_attention(query, key, value, score_mod=None, mask_mod=None, *, scale=None, enable_gqa=False,
                   return_lse=False, memory=None, hardware=None, depth: int = 2, block_mask=None, return_aux=None):
    """``torch.nn.attention.flex_attention``'s outputs (see the module docstring) by napkin-cat's derived kernels,
    differentiable (the derived backward).  ``mask_mod`` is the function FlexAttention's ``create_block_mask``
    takes; FlexAttention's ``BlockMask`` is taken in its place (as ``mask_mod``, FlexAttention's fifth positional
    argument, or ``block_mask=``): its ``mask_mod``, once its blocks are checked to say the same
    (:func:`~napkin_cat.torch.blockmask.mask_of`; under ``torch.compile`` its lengths and tables' shapes only).
    ``return_aux=AuxRequest(lse=True)`` (FlexAttention's newer spelling of ``return_lse``) returns ``(O,
    AuxOutput(lse=L))``; ``max_scores`` is refused.
    ``memory``, ``hardware`` and ``depth`` go to :func:`~napkin_cat.torch.ops.compile`.  Returns ``O`` (and the
    log-sum-exp ``L``, natural logarithm, with ``return_lse``: differentiable, as FlexAttention's is, by an op whose
    backward is derived with L's cotangent; without it, the op's L is auxiliary, its backward FlashAttention's).

    The mods are traced once per key of :class:`TraceCache` (in :data:`TRACES`); each call reads the captured
    tensors afresh (a table updated in place, or rebound to a tensor of the same shape, is read as it is now) and
    checks every index into a captured table against its size (inside the op: :class:`~.flexop.FlexOp`).

    Under ``torch.compile`` (``fullgraph=True`` included) the graph holds one op for these mods and options, which
    finds the trace at each call's sizes when it runs (:mod:`~napkin_cat.torch.flexgraph`: symbolic sizes too); the
    captured tensors are read by their paths from the mods (closure cells, globals, module attributes: inputs of the
    graph, so that their gradients flow).  A Python number the mods read is read at each call too (the op looks the
    trace up by the mods' captured values when it runs): a changed one traces again, as in eager calls.

    Zero-size tensors (no batch, head, query or key; a value dimension of 0) compute nothing: the outputs are
    masked attention by torch's own operations on the empty tensors (:func:`empty`), of FlexAttention's shapes, a
    row with no key ``O = 0`` and ``L = −∞``, their gradients zeros of the inputs' shapes."""
    if return_aux is not None:
        if return_lse:
            raise ArgumentError("flex_attention takes return_lse or return_aux, not both (as FlexAttention)")
        if getattr(return_aux, "max_scores", False):
            raise ArgumentError("flex_attention's return_aux asks for max_scores, which napkin-cat's attention does "
                                "not compute; AuxRequest(lse=True) gives the log-sum-exp")
        from torch.nn.attention.flex_attention import AuxOutput     # FlexAttention's, where return_aux exists
        out = flex_attention(query, key, value, score_mod, mask_mod, scale=scale, enable_gqa=enable_gqa,
                             return_lse=bool(getattr(return_aux, "lse", False)), memory=memory, hardware=hardware,
                             depth=depth, block_mask=block_mask)
        return (out[0], AuxOutput(lse=out[1])) if isinstance(out, tuple) else (out, AuxOutput())
    query, key, value = heads(query, key, value, enable_gqa)
    if block_mask is not None and mask_mod is not None:
        raise ArgumentError("flex_attention takes a mask_mod or a block_mask, not both")
    mask_mod = mask_mod if block_mask is None else block_mask
    if is_block_mask(mask_mod):
        mask_mod = mask_of(mask_mod, (*query.shape[:3], key.shape[2]), blocks=not torch.compiler.is_compiling())
    d = query.shape[-1]
    if d == 0:
        raise ShapeError(f"flex_attention's head dimension is 0 (query {tuple(query.shape)}): the scores have no "
                         "term and the default scale 1/sqrt(d) is infinite; d ≥ 1")
    given = as_scale(scale, query) if scale is not None else None
    scale = 1 / math.sqrt(d) if scale is None else given if not isinstance(given, torch.Tensor) else (
        TENSOR_SCALE, given.dtype)       # a tensor: an input of the op, the trace keyed by its dtype
    if 0 in (*query.shape[:3], key.shape[2], value.shape[-1]):
        O, L = empty(score_mod, mask_mod, given if isinstance(given, torch.Tensor) else scale, query, key, value)
        return (O, L) if return_lse else O
    if torch.compiler.is_compiling():     # the graph's one op, which finds the trace at each call's sizes
        name, paths = prepared(at_sizes, score_mod, mask_mod, (scale, memory, hardware, depth, bool(return_lse)))
        live = [given if path[0] == TENSOR_SCALE else follow(score_mod, mask_mod, path) for path in paths]
        O, L = getattr(torch.ops.napkin, name.split("::")[-1])(query, key, value, live)
    else:
        traced = at_sizes(score_mod, mask_mod, scale, memory, hardware, depth, bool(return_lse), (query, key, value))
        O, L = traced.flex(query, key, value, traced.live(live_reads(score_mod, mask_mod, given)))
    return (O, L) if return_lse else O


def live_reads(score_mod, mask_mod, scale=None) -> dict:
    """Every tensor the mods read, by name (:func:`~napkin_cat.torch.captures.reached`: closure cells, globals, and
    inside the objects, dicts and lists they capture), and a tensor ``scale`` as ``"scale"``."""
    out = {name: v for name, _, v in reached(score_mod, mask_mod) if isinstance(v, torch.Tensor)}
    if isinstance(scale, torch.Tensor):
        out[TENSOR_SCALE] = scale
    return out


def at_sizes(score_mod, mask_mod, scale, memory, hardware, depth, return_lse, qkv) -> "Traced":
    """The trace of the mods at the shapes of ``qkv`` (query, key, value) and these options: kept in :data:`TRACES`
    (where every constant of its program is a tensor the mods capture by name), made where there is none."""
    reads = captured(score_mod, mask_mod)
    shapes = tuple((tuple(x.shape), x.dtype, x.device.type) for x in qkv)
    if isinstance(scale, tuple):      # a tensor scale (its dtype): a placeholder of it is traced, read per call
        scale = torch.ones((), dtype=scale[1], device=qkv[0].device)
    cache_key = None if reads is None else (
        score_mod, mask_mod, fingerprint(scale), shapes, memory, getattr(hardware, "name", hardware), depth, return_lse,
        tuple(sorted((k, fingerprint(v)) for k, v in reads.items())))
    traced = None if cache_key is None else TRACES.get(cache_key)
    if traced is None:
        with concurrent.futures.ThreadPoolExecutor(1) as pool:     # a thread of its own: outside the torch modes
            traced = pool.submit(trace, score_mod, mask_mod, scale, qkv, reads, memory, hardware, depth,   # the op
                                 0 if return_lse else 1).result()     # runs under in a compiled graph (AOTAutograd's)
        if cache_key is not None and len(traced.sources) == len(traced.program.constants):
            TRACES.put(cache_key, traced)
    return traced


def trace(score_mod, mask_mod, scale, qkv, reads, memory, hardware, depth: int = 2, aux: int = 1) -> Traced:
    """Export masked attention with the mods, translate it and compile it (the slow part of a call: once per key).
    ``aux=1``: the log-sum-exp is not differentiated (not returned); ``aux=0``: it is (returned, as FlexAttention's
    is: ``∂L/∂S = P``, so a loss that reads L gets its gradient)."""
    module = Scores(score_mod, mask_mod, scale)
    inputs = {name: v for name, _, v in reached(score_mod, mask_mod, reads) if isinstance(v, torch.Tensor)}
    if isinstance(scale, torch.Tensor):
        inputs[TENSOR_SCALE] = scale
    module.held = torch.nn.ModuleList(modules(score_mod, mask_mod, reads))
    B, H, N, X = qkv[0].shape[0], qkv[0].shape[1], qkv[0].shape[2], qkv[1].shape[2]
    index = positions(B, H, N, X)
    example = (*(x.detach() for x in qkv), *index)
    try:
        program = torch.export.export(module, example)
    except Exception as e:     # the user's mods: raised, or returned what masked attention cannot take
        raise TensorError(f"flex_attention could not trace the mods on {qkv[0].dtype} scores of shape {(B, H, N, X)}: "
                          f"{type(e).__name__}: {str(e).strip().splitlines()[0][:300] if str(e).strip() else ''} "
                          f"(a mask_mod(b, h, q_idx, kv_idx) returns a bool tensor broadcastable to {(B, H, N, X)}; "
                          f"a score_mod(score, b, h, q_idx, kv_idx) returns a tensor of the score's shape and dtype)"
                          ) from e
    mark_wraps(program, example, {**program.state_dict, **program.constants})    # table[q − x]: from the end
    r = translate(program, module, example, None, NAMES, positions=POSITIONS)
    op = compiled(r.diagram, aux=aux, memory=memory, hardware=hardware, depth=depth, name="flex_attention")
    by_id = {id(v): k for k, v in reversed(inputs.items())}      # a tensor reached twice: its first name
    sources = {name: by_id[id(t)] for name, t in program.constants.items() if id(t) in by_id}
    traced = Traced(program, r, op, sources, tuple(v for v in (reads or {}).values()
                                                   if fingerprint(v)[0] == "object"), module)
    lifted = traced.lifted()
    live = [n for n in r.axes if n in sources or n in lifted]
    fixed = {n: program.constants[n] if n in program.constants else torch.as_tensor(r.inputs[n])
             for n in r.axes if n not in GIVEN and n not in live}
    traced.flex = flex_op(op, r.axes, live, fixed, program, sources)
    return traced


def empty(score_mod, mask_mod, scale: float, query, key, value) -> tuple:
    """Masked attention on zero-size tensors by torch's own operations (:class:`Scores` on the positions, which are
    empty too): nothing to derive or run.  ``O`` of shape ``(B, H, N, e)``, ``L`` of ``(B, H, N)``; with no key
    every row is empty: ``O = 0`` (``softmax`` over no key, times no value) and
    ``L = −∞`` (``logsumexp`` of nothing); gradients flow by torch's autograd (zeros of the inputs' shapes, and of a
    captured learnable table's where the mods read one).

    >>> q, k, v = torch.ones(1, 2, 3, 4), torch.ones(1, 2, 0, 4), torch.ones(1, 2, 0, 5)
    >>> O, L = empty(None, None, 0.5, q, k, v)
    >>> tuple(O.shape), float(O.abs().max()), tuple(L.shape), bool(torch.isneginf(L).all())
    ((1, 2, 3, 5), 0.0, (1, 2, 3), True)
    """
    B, H, N, X = query.shape[0], query.shape[1], query.shape[2], key.shape[2]
    index = positions(B, H, N, X)
    return Scores(score_mod, mask_mod, scale)(query, key, value, *index)


def as_scale(scale, query=None):
    """The score scale: a finite real number, or a tensor of one element as a 0-d tensor (an input of the op: read
    at each call, never by ``.item()``, so that ``torch.compile(fullgraph=True)`` keeps it in the graph and a
    learnable scale gets its gradient; an integer one in the query's dtype); a TensorError naming what was given
    otherwise (a string, a bool, NaN or an infinity: its scores are NaN, or its kernel's constant has no spelling;
    a tensor of more than one element, or not on the query's device).

    >>> as_scale(0.5), as_scale(torch.tensor([2.0])).shape
    (0.5, torch.Size([]))
    >>> as_scale(float("nan"))
    Traceback (most recent call last):
    ...
    napkin_cat.errors.TensorError: flex_attention's scale is a finite real number or a tensor of one element \
(default 1/sqrt(d)), got nan
    """
    if isinstance(scale, torch.Tensor):
        device = scale.device if query is None else query.device
        if scale.numel() != 1 or scale.device != device or scale.dtype == torch.bool or scale.is_complex():
            raise TensorError(f"flex_attention's scale is a finite real number or a real tensor of one element on "
                              f"{device}; got a {scale.dtype} tensor of shape {tuple(scale.shape)} on {scale.device}")
        scale = scale.reshape(())
        return scale if scale.is_floating_point() else scale.to(torch.float32 if query is None else query.dtype)
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not math.isfinite(scale):
        raise TensorError(f"flex_attention's scale is a finite real number or a tensor of one element (default "
                          f"1/sqrt(d)), got {scale!r}")
    return float(scale)


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
