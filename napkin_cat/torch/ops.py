"""``nc.torch.compile``: a derived algorithm as a PyTorch custom op, with its fake implementation and its backward.

For a function diagram ``f : X₁ ⊗ … ⊗ Xₙ → Y₁ ⊗ … ⊗ Yₘ`` (or a derivation of one), ``op = nc.torch.compile(f)``
registers with ``torch.library`` (PyTorch's conventions for a custom operator):

* ``napkin::<name>_<digest>``: ``(x₁, …, xₙ) ↦ (y₁, …, yₘ)``, each call run by the derived algorithm's kernel
  at the sizes read off its tensors (:mod:`.kernels`; C on the CPU, Triton on CUDA); a last, optional argument
  ``blocks`` (``Tensor[]?``) gives the kernel's block tables where a stream of its plan skips by a mask from data
  (int8, one per such stream: what ``op.napkin.forward.tables(xs)`` derives at the tiles of the call; checked
  against the data), derived inside the op where not given;
* its fake implementation (``register_fake``): the outputs' shapes and dtypes from the inputs'
  (:mod:`.binding`), so that ``torch.compile`` and ``torch.export`` trace through the op without running it;
* its autograd formula (``register_autograd``): the derived backward, ``napkin::<name>_<digest>_backward``, a
  custom op of its own (fake implementation included), running ``nc.grad(f, wrt, saved=, aux=)`` derived and
  compiled the same way::

      (x̄_w)_{w ∈ wrt} = grad(f)(x₁, …, xₙ, y₁, …, yₘ, ȳ₁, …, ȳ_{m−k})

  (its kernels' block tables derived from the data and passed as its ``blocks``), where the ``y`` are f's
  outputs as the forward computed them (``saved=True``: saved for the backward, read
  instead of recomputed: attention's O and log-sum-exp), and the last ``aux = k`` outputs are auxiliary:
  returned and saved, but not differentiable (``ctx.mark_non_differentiable``; FlashAttention's log-sum-exp).
  An input that needs no gradient in a call gets None; one outside ``wrt`` (an integer array always) gets
  none, and a call in which it needs one is refused (:class:`~napkin_cat.errors.GradError`), rather than
  given a silent zero.

The op's name holds a digest of everything it depends on (the diagram's JSON, a given derivation's algorithm,
memory and sizes, every option), so one diagram compiled with the same options is the same op in any process;
compiling it again in a process returns the op registered first.  ``op.napkin`` is the :class:`CompiledOp`
behind it (its forward and backward :class:`~napkin_cat.torch.kernels.Derived`, their derivations and kernels).
:func:`compiled` makes the :class:`CompiledOp` alone, registering nothing (``torch.library`` cannot unregister a
name): what a caller that registers its own op runs (``nc.torch.flex_attention``'s traces), kept in a bounded cache.

>>> import torch, napkin_cat as nc
>>> op = compile(nc.library.matmul(), memory=64, name="doc_matmul")
>>> A = torch.randn(8, 6, dtype=torch.float64, requires_grad=True)
>>> B = torch.randn(6, 4, dtype=torch.float64)
>>> C = op(A, B)
>>> bool(torch.allclose(C, A @ B)), op.napkin.name.startswith("napkin::doc_matmul_")
(True, True)
>>> C.sum().backward()
>>> bool(torch.allclose(A.grad, torch.ones(8, 4, dtype=torch.float64) @ B.T))
True
"""
from __future__ import annotations

import torch

from napkin_cat.codegen.kernel import digest
from napkin_cat.errors import ArgumentError, GradError, MemoryLimitError
from napkin_cat.autodiff.grad import grad
from napkin_cat.io.serial import dumps
from napkin_cat.plan.recent import Recent
from napkin_cat.search.derivation import Derivation
from napkin_cat.syntax.adapter import Diagram
from napkin_cat.syntax.sizes import as_sizes
from napkin_cat.torch.binding import REAL, Signature, describe
from napkin_cat.torch.kernels import Derived

#: the namespace of every op napkin-cat registers
NAMESPACE = "napkin"
#: the ops this process registered, by qualified name: compiling the same diagram with the same options again
#: returns the same op (the name's digest holds everything the op depends on; torch.library registers a name once)
REGISTERED: dict = {}
#: the :class:`CompiledOp` of each name :func:`compiled` made and no op registered, the least recently used evicted
MADE = Recent(64)


class CompiledOp:
    """What ``nc.torch.compile`` made (``op.napkin``): the forward and (made on first use) the backward as
    :class:`~napkin_cat.torch.kernels.Derived`, the options, and the registered ops' names."""

    def __init__(self, name: str, function: Diagram, given: Derivation | None, *, memory, hardware, sizes,
                 wrt: tuple, aux: int, saved: bool, backend, depth: int = 2):
        self.name, self.function, self.given = name, function, given
        self.wrt, self.aux, self.saved = wrt, aux, saved
        self.options = {"memory": memory, "hardware": hardware, "sizes": sizes, "backend": backend, "depth": depth}
        self.forward = Derived(function, derivation=given, what=name, **self.options)
        self.signature = self.forward.signature
        self._backward = None
        self.backward_op = None     # the registered backward op (None where wrt is empty)

    def __repr__(self):
        return (f"CompiledOp({self.name}, {self.signature}, wrt={list(self.wrt)}, aux={self.aux}, "
                f"saved={self.saved})")

    @property
    def backward(self) -> Derived:
        """The backward function, ``nc.grad(f, wrt, saved=, aux=)``, derived as the forward is (built on first
        use: an op that is never differentiated never derives it)."""
        if self._backward is None:
            g = grad(self.function, list(self.wrt), saved=self.saved, aux=self.aux)
            options = dict(self.options)
            if self.given is not None:    # the backward of a given derivation: at its memory and sizes
                options.update(memory=self.given.memory, hardware=None, sizes=self.given.sizes)
            self._backward = Derived(g, what=f"{self.name}_backward", **options)
        return self._backward

    # ------------------------------------------------------------------ the functions torch.library calls
    def run_forward(self, *args):
        tensors, blocks = _blocks(args, len(self.signature.inputs))
        ys = self.forward(tensors, blocks)
        return ys[0] if len(ys) == 1 else tuple(ys)

    def fake_forward(self, *args):
        return _fake(self.signature, _blocks(args, len(self.signature.inputs))[0])

    def run_backward(self, *args):
        tensors, blocks = _blocks(args, len(self.backward.signature.inputs))
        ys = self.backward(tensors, blocks)
        return ys[0] if len(ys) == 1 else tuple(ys)

    def fake_backward(self, *args):
        return _fake(self.backward.signature, _blocks(args, len(self.backward.signature.inputs))[0])

    def setup_context(self, ctx, inputs, output):
        """Save what the backward reads (f's inputs, and its outputs with ``saved``), mark the auxiliary outputs
        non-differentiable, and refuse a call where an input outside ``wrt`` needs a gradient."""
        outs = output if isinstance(output, tuple) else (output,)
        inputs, ctx.blocks = _blocks(inputs, len(self.signature.inputs))
        for k in range(len(inputs)):
            if ctx.needs_input_grad[k] and k not in self.wrt:
                a = self.signature.inputs[k]
                why = "an integer array has none" if a.dtype.name != REAL else f"the op was compiled with wrt=" \
                                                                              f"{list(self.wrt)}"
                raise GradError(f"input {k} ({describe(a)}) of {self.name} requires grad, but the op gives it no "
                                f"gradient ({why}); detach it, or compile with wrt= naming it")
        ctx.save_for_backward(*inputs, *(outs if self.saved else ()))
        if self.aux:
            ctx.mark_non_differentiable(*outs[len(outs) - self.aux:])

    def gradients(self, ctx, *cotangents):
        """The gradients of the op's inputs (None for one that needs none) from the backward op."""
        saved = ctx.saved_tensors
        n = len(self.signature.inputs)
        blocks = () if ctx.blocks is None else ([None] * len(ctx.blocks),)     # the tables: no gradient
        if not any(ctx.needs_input_grad[k] for k in self.wrt):
            return (None,) * n + blocks
        differentiated = cotangents[:len(cotangents) - self.aux]
        args = [*saved, *differentiated]
        found = self.backward_op(*args, self.backward.tables(args))
        found = found if isinstance(found, (tuple, list)) else (found,)
        out = [None] * n
        for k, g in zip(self.wrt, found):
            out[k] = g if ctx.needs_input_grad[k] else None
        return tuple(out) + blocks


def _blocks(args, n: int) -> tuple:
    """An op's arguments split into its ``n`` tensors and its block tables (None where not given: the op derives
    them from the data where its kernel reads any)."""
    blocks = args[n] if len(args) > n else None
    return list(args[:n]), None if blocks is None else list(blocks)


def _fake(signature: Signature, tensors):
    """The outputs' fake tensors: shapes and dtypes read off the inputs (symbolic sizes stay symbolic)."""
    sizes, real, device = signature.sizes(tensors), signature.real(tensors), signature.device(tensors)
    ys = [tensors[0].new_empty(shape, dtype=dtype, device=device)
          for shape, dtype in zip(signature.shapes(sizes), signature.dtypes(real))]
    return ys[0] if len(ys) == 1 else tuple(ys)


def _schema(inputs: int, outputs: int) -> str:
    args = ", ".join([*(f"Tensor x{k}" for k in range(inputs)), "Tensor[]? blocks=None"])
    return f"({args}) -> " + ("Tensor" if outputs == 1 else "(" + ", ".join(["Tensor"] * outputs) + ")")


def _positions(wrt, signature: Signature) -> tuple:
    n = len(signature.inputs)
    if wrt is None:
        return signature.real_inputs
    if isinstance(wrt, (str, bytes)) or not hasattr(wrt, "__iter__"):
        raise GradError(f"wrt={wrt!r}: give a list of input positions 0 … {n - 1} (None: every real input)")
    out = []
    for w in wrt:
        if isinstance(w, bool) or not isinstance(w, int) or not 0 <= w < n:
            raise GradError(f"wrt={list(wrt)}: {w!r} is not an input position; the op has inputs 0 … {n - 1}")
        if w not in signature.real_inputs:
            raise GradError(f"wrt={list(wrt)}: input {w} ({describe(signature.inputs[w])}) is "
                            f"{signature.inputs[w].dtype.name}, which has no gradient; real inputs are "
                            f"{list(signature.real_inputs)}")
        if w in out:
            raise GradError(f"wrt={list(wrt)} names input {w} twice")
        out.append(w)
    return tuple(out)


def compile(f, *, memory: int | None = None, hardware=None, sizes: dict | None = None, wrt=None, aux: int = 0,
            saved: bool = True, backend: str | None = None, depth: int = 2, name: str = "op"):
    """``f`` (a function diagram, or a :class:`~napkin_cat.search.Derivation` of one at one memory) as a registered
    ``torch.library`` custom op, with its fake implementation and its derived backward (see the module docstring;
    the options are :func:`compiled`'s).

    Returns the op (a ``torch.library`` ``CustomOpDef``: call it on tensors, or pass it to ``torch.library.opcheck``);
    ``op.napkin`` is its :class:`CompiledOp`.
    """
    made = compiled(f, memory=memory, hardware=hardware, sizes=sizes, wrt=wrt, aux=aux, saved=saved, backend=backend,
                    depth=depth, name=name)
    qualified, positions, m = made.name, made.wrt, len(made.function.cod)
    if qualified in REGISTERED:
        return REGISTERED[qualified]
    op = torch.library.custom_op(qualified, made.run_forward, mutates_args=(),
                                 schema=_schema(len(made.function.dom), m))
    op.register_fake(made.fake_forward)
    if positions:
        made.backward_op = torch.library.custom_op(qualified + "_backward", made.run_backward, mutates_args=(),
                                                   schema=_schema(len(made.function.dom) + (m if saved else 0) + m
                                                                  - aux, len(positions)))
        made.backward_op.register_fake(made.fake_backward)
    op.register_autograd(made.gradients, setup_context=made.setup_context)
    op.napkin = made
    REGISTERED[qualified] = op
    return op


def compiled(f, *, memory: int | None = None, hardware=None, sizes: dict | None = None, wrt=None, aux: int = 0,
             saved: bool = True, backend: str | None = None, depth: int = 2, name: str = "op") -> CompiledOp:
    """The :class:`CompiledOp` of ``f`` (a function diagram, or a :class:`~napkin_cat.search.Derivation` of one at
    one memory): its forward and backward derived and compiled on first use, no op registered (:func:`compile`
    registers it); the same object for the same name while it is cached (:data:`MADE`) or registered.

    ``memory``: the values level 1 holds, the memory ``nc.derive`` derives at (default: none on a CPU model with
    measured rates, whose predicted time derives each call; else its L2 per core in values of the call's dtype).
    ``hardware``: a CPU model (``"epyc-zen3-dev"``, ``"this-cpu"``, ``nc.hardware.load_cpu``), or a GPU model
    (``"h100-sxm5"``) that CUDA calls are derived for by predicted time; default: ``"this-cpu"`` (this machine's
    caches from sysfs, with the rates of the shipped model that has the same caches).  ``sizes``: reference sizes
    (every symbolic axis) the algorithm is derived at once, each call retiled at its own sizes; default: derived at
    each call's sizes (once per distinct sizes).  A derivation fixes all three (its memory and sizes; its backward
    is derived at them).

    ``wrt``: the input positions the backward differentiates (default: every real input); ``aux``: f's last
    ``aux`` outputs are auxiliary (not differentiable: ``attention(lse=True)`` with ``aux=1``); ``saved``: the
    backward reads f's outputs as the forward computed them (``nc.grad(f, saved=True)``), else recomputes them
    from the inputs.  ``backend``: ``"c"`` or ``"triton"`` (Triton's interpreter on CPU tensors), None: C on the
    CPU, Triton on CUDA.  ``depth``: the ``prepare`` rewrites each search chains (``nc.derive``'s; 0 searches the
    diagram as written, in a fraction of the time, and may miss an algorithm a rewrite of it allows).  ``name``:
    the op's name in the ``napkin`` namespace (a digest follows it).
    """
    given = None
    if isinstance(f, Derivation):
        if memory is not None or hardware is not None or sizes is not None:
            raise ArgumentError("a derivation fixes memory, hardware and sizes (its own); pass the function diagram "
                                "to choose them")
        if not isinstance(f.memory, int) or len(f.regimes) != 1:
            raise MemoryLimitError(f"nc.torch.compile takes a derivation at one memory (r.at(M) of a sweep), got "
                                   f"memory {f.memory!r}")
        given, f = f, f.start
    if not isinstance(f, Diagram):
        raise ArgumentError(f"nc.torch.compile takes a function diagram or a derivation, got {type(f).__name__}")
    if memory is not None and (isinstance(memory, bool) or not isinstance(memory, int) or memory < 1):
        raise MemoryLimitError(f"memory={memory!r}: the values level 1 holds, a positive int")
    if sizes is not None:
        sizes = {str(k): int(v) for k, v in as_sizes(sizes).require(f, "the reference sizes of nc.torch.compile")
                 .items()}
    if not isinstance(name, str) or not name.isidentifier():
        raise ArgumentError(f"name={name!r}: the op's name is an identifier (such as 'attention')")
    if isinstance(depth, bool) or not isinstance(depth, int) or depth < 0:
        raise ArgumentError(f"depth={depth!r}: the prepare rewrites the search chains, an int ≥ 0 (default 2)")
    if not isinstance(saved, bool):
        raise GradError(f"saved={saved!r}: True (the backward reads f's outputs as the forward saved them) or False")
    m = len(f.cod)
    if isinstance(aux, bool) or not isinstance(aux, int) or not 0 <= aux < m:
        raise GradError(f"aux={aux!r}: the number of f's last outputs that are auxiliary, 0 … {m - 1} (f has {m} "
                        "output(s); at least one is differentiated)")
    if not len(f.dom):
        raise ArgumentError("nc.torch.compile needs a diagram with inputs: a call reads its sizes and device off them")
    signature = Signature(f)
    positions = _positions(wrt, signature)
    parts = [dumps(f), positions, aux, saved, backend, memory, sizes, depth,
             getattr(hardware, "name", hardware) or "this machine"]
    if given is not None:
        parts += [dumps(given.diagram), given.memory, sorted((str(k), v) for k, v in given.sizes.items())]
    qualified = f"{NAMESPACE}::{name}_{digest(*parts)[:16]}"
    if qualified in REGISTERED:
        return REGISTERED[qualified].napkin
    made = MADE.get(qualified)
    if made is None:
        made = CompiledOp(qualified, f, given, memory=memory, hardware=hardware, sizes=sizes, wrt=positions,
                          aux=aux, saved=saved, backend=backend, depth=depth)
        MADE.put(qualified, made)
    return made


__all__ = ["compile", "compiled", "CompiledOp", "NAMESPACE", "REGISTERED", "MADE"]

