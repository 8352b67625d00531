"""Torch tensors bound to a diagram's arrays: the sizes a call reads off its tensors, checked, and its outputs.

A diagram ``f : X₁ ⊗ … ⊗ Xₙ → Y₁ ⊗ … ⊗ Yₘ`` takes one tensor per input array, its dimensions the array's
axes in order, and gives one tensor per output array::

    sizes(x₁, …, xₙ) = {a: xᵢ.shape[k]  for axis a at position k of Xᵢ}      (one size per axis name)
    shape(Yⱼ)        = (sizes[a] for a in the axes of Yⱼ)

An axis the diagram fixes (``d[8]``) takes only that size; a symbolic one takes the tensors' (the same on
every input that carries it).  Formats: a real array (``fp32`` in the diagram) takes a float32 or a float64
tensor, every real input of a call the same one (the call's *real* dtype: its real outputs have it, and its
kernel computes in it); an ``int32`` array an integer tensor (int64, torch's dtype of indices and class targets,
converted to int32 where its values fit: :meth:`Signature.exact`), a ``bool`` array a bool tensor.  All tensors of a
call are on one device.  Anything else is refused by name (:class:`~napkin_cat.errors.ShapeError` for a rank or
a size, :class:`~napkin_cat.errors.TensorError` for a dtype or a device), before any kernel runs.

Under ``torch.compile`` the sizes may be symbolic integers (the fake implementation reads them the same way,
never converting them to ``int``).

>>> import torch, napkin_cat as nc
>>> sig = Signature(nc.library.attention(d=4))
>>> sizes = sig.sizes([torch.ones(3, 4), torch.ones(5, 4), torch.ones(5, 4)])
>>> sorted(sizes.items()), sig.shapes(sizes)
([('d', 4), ('q', 3), ('x', 5)], [(3, 4)])
>>> sig.sizes([torch.ones(3, 4), torch.ones(5, 4), torch.ones(6, 4)])
Traceback (most recent call last):
...
napkin_cat.errors.ShapeError: axis 'x' is 5 on input 1 (x×d) but 6 on input 2 (x×d): a call has one size per axis
"""
from __future__ import annotations

import sympy
import torch

from napkin_cat.errors import ArgumentError, ShapeError, TensorError

#: a diagram's real format and the tensor dtypes a real array takes (the first: the default)
REAL = "fp32"
REAL_DTYPES = (torch.float32, torch.float64)
#: the other formats a compiled op exchanges, and the tensor dtype each takes
EXACT = {"int32": torch.int32, "bool": torch.bool}
#: the integer dtypes an ``int32`` array takes, converted to int32 (checked to fit): torch's indices are int64
INTEGERS = (torch.int32, torch.int64, torch.int16, torch.int8, torch.uint8)
#: the devices a compiled op runs on, and its kernel there
DEVICES = {"cpu": "C/OpenMP", "cuda": "Triton"}


def describe(array) -> str:
    """An array for a message: its axes, ``q×d`` (``item`` for a scalar)."""
    return "×".join(array.names) or "item"


class Signature:
    """The arrays a compiled diagram takes and gives, as tensors (see the module docstring)."""

    def __init__(self, diagram, what: str = "the op"):
        self.inputs, self.outputs, self.what = tuple(diagram.dom.inside), tuple(diagram.cod.inside), what
        for role, arrays in (("input", self.inputs), ("output", self.outputs)):
            for k, a in enumerate(arrays):
                if a.dtype.name != REAL and a.dtype.name not in EXACT:
                    raise TensorError(f"{what}'s {role} {k} ({describe(a)}) is {a.dtype.name}: a torch op exchanges "
                                      f"real arrays ({REAL}: float32 or float64 tensors) and "
                                      f"{', '.join(EXACT)} ones; cast it in the diagram (nc.cast)")
                for axis in a.axes:
                    if not isinstance(sympy.sympify(axis.size), (sympy.Symbol, sympy.Integer)):
                        raise ShapeError(f"{what}'s {role} {k} ({describe(a)}) has axis {axis.name!r} of size "
                                         f"{axis.size}: a torch op reads each size off a tensor, so an axis is a "
                                         "symbol or a number")
        carried = {axis.name for a in self.inputs for axis in a.axes}
        for k, a in enumerate(self.outputs):
            free = [axis.name for axis in a.axes if axis.name not in carried and not axis.size.is_Integer]
            if free:
                raise ShapeError(f"{what}'s output {k} ({describe(a)}) has axes {free} that no input carries: a "
                                 "call could not read their sizes off its tensors")
        self.real_inputs = tuple(k for k, a in enumerate(self.inputs) if a.dtype.name == REAL)

    def __repr__(self):
        return (f"Signature({', '.join(map(describe, self.inputs))} -> "
                f"{', '.join(map(describe, self.outputs))})")

    # ------------------------------------------------------------------ reading a call
    def check_count(self, tensors):
        if len(tensors) != len(self.inputs):
            raise ShapeError(f"{self.what} takes {len(self.inputs)} tensor(s) "
                             f"({', '.join(map(describe, self.inputs))}), got {len(tensors)}")
        for k, t in enumerate(tensors):
            if not isinstance(t, torch.Tensor):
                raise ArgumentError(f"{self.what}'s input {k} ({describe(self.inputs[k])}) must be a torch tensor, "
                                    f"got {type(t).__name__}")

    def sizes(self, tensors) -> dict:
        """Axis name → size, read off the tensors (ints, or symbolic ints under ``torch.compile``), checked."""
        self.check_count(tensors)
        seen: dict = {}
        for k, (a, t) in enumerate(zip(self.inputs, tensors)):
            if t.dim() != len(a.axes):
                raise ShapeError(f"input {k} ({describe(a)}) of {self.what} has rank {t.dim()} (shape "
                                 f"{tuple(t.shape)}); it takes rank {len(a.axes)}: one dimension per axis, in order")
            for axis, n in zip(a.axes, t.shape):
                fixed = sympy.sympify(axis.size)
                if fixed.is_Integer and n != int(fixed):
                    raise ShapeError(f"axis {axis.name!r} is {int(fixed)} in the diagram; input {k} ({describe(a)}) "
                                     f"has {n} (shape {tuple(t.shape)})")
                if n == 0:
                    raise ShapeError(f"axis {axis.name!r} of input {k} ({describe(a)}) is empty (shape "
                                     f"{tuple(t.shape)}); sizes are positive")
                if axis.name in seen and seen[axis.name][0] != n:
                    size, j = seen[axis.name]
                    raise ShapeError(f"axis {axis.name!r} is {size} on input {j} ({describe(self.inputs[j])}) but "
                                     f"{n} on input {k} ({describe(a)}): a call has one size per axis")
                seen.setdefault(axis.name, (n, k))
        for a in self.outputs:
            for axis in a.axes:
                if axis.name not in seen:
                    seen[axis.name] = (int(axis.size), None)
        return {name: n for name, (n, _) in seen.items()}

    def real(self, tensors) -> torch.dtype:
        """The call's real dtype (float32 or float64: its real inputs'), every input's dtype checked."""
        self.check_count(tensors)
        real, first = None, None
        for k, (a, t) in enumerate(zip(self.inputs, tensors)):
            if a.dtype.name != REAL:
                if t.dtype != EXACT[a.dtype.name] and not (a.dtype.name == "int32" and t.dtype in INTEGERS):
                    takes = "an integer tensor (int32, int64, int16, int8 or uint8)" if a.dtype.name == "int32" \
                        else f"a {EXACT[a.dtype.name]} tensor"
                    raise TensorError(f"input {k} ({describe(a)}) of {self.what} is an {a.dtype.name} array: it takes "
                                      f"{takes}, got {t.dtype}")
                continue
            if t.dtype not in REAL_DTYPES:
                raise TensorError(f"input {k} ({describe(a)}) of {self.what} is {t.dtype}; a real array takes "
                                  f"{' or '.join(map(str, REAL_DTYPES))}")
            if real is None:
                real, first = t.dtype, k
            elif t.dtype != real:
                raise TensorError(f"input {k} ({describe(a)}) of {self.what} is {t.dtype} but input {first} is "
                                  f"{real}: the real inputs of a call share one dtype")
        return real if real is not None else REAL_DTYPES[0]

    def exact(self, tensors) -> list:
        """``tensors`` with each integer one of an ``int32`` array as int32 (the kernels' format), a TensorError
        naming the input where a value does not fit; the others as they are."""
        out = list(tensors)
        for k, (a, t) in enumerate(zip(self.inputs, tensors)):
            if a.dtype.name == "int32" and t.dtype != torch.int32 and t.dtype in INTEGERS:
                if t.numel() and (int(t.min()) < -2 ** 31 or int(t.max()) >= 2 ** 31):
                    raise TensorError(f"input {k} ({describe(a)}) of {self.what} holds {t.dtype} values outside "
                                      f"int32 ({int(t.min())} … {int(t.max())}), the diagram's integer format")
                out[k] = t.to(torch.int32)
        return out

    def device(self, tensors) -> torch.device:
        """The one device of the call's tensors (a type of :data:`DEVICES`)."""
        self.check_count(tensors)
        devices = [t.device for t in tensors]
        for k, d in enumerate(devices):
            if d != devices[0]:
                raise TensorError(f"input {k} of {self.what} is on {d} but input 0 on {devices[0]}: the tensors of "
                                  "a call are on one device")
        device = devices[0] if devices else torch.device("cpu")
        if device.type not in DEVICES:
            raise TensorError(f"{self.what}'s tensors are on {device}: it runs on "
                              f"{', '.join(f'{d} ({k})' for d, k in DEVICES.items())}")
        return device

    # ------------------------------------------------------------------ the outputs
    def shapes(self, sizes: dict) -> list[tuple]:
        """The outputs' shapes at ``sizes``."""
        return [tuple(sizes[axis.name] for axis in a.axes) for a in self.outputs]

    def dtypes(self, real: torch.dtype) -> list[torch.dtype]:
        """The outputs' dtypes in a call whose real dtype is ``real``."""
        return [real if a.dtype.name == REAL else EXACT[a.dtype.name] for a in self.outputs]

    def empty(self, sizes: dict, real: torch.dtype, device) -> list[torch.Tensor]:
        """Fresh output tensors of a call (contiguous, uninitialised)."""
        return [torch.empty(s, dtype=t, device=device) for s, t in zip(self.shapes(sizes), self.dtypes(real))]
