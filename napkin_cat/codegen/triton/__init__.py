"""Triton: one program per Grid index, on-chip variables as block tensors (:mod:`~napkin_cat.codegen.triton.printer`,
with the structures and index kinds of :mod:`~napkin_cat.codegen.triton.structures` and
:mod:`~napkin_cat.codegen.triton.indices`), its host side (:mod:`~napkin_cat.codegen.triton.host`: runtime sizes,
launch shape, launcher) and the kernel object run under the interpreter in a worker process
(:mod:`~napkin_cat.codegen.triton.kernel`, :mod:`~napkin_cat.codegen.triton.worker`).

>>> import napkin_cat as nc
>>> from napkin_cat.codegen.triton import triton
>>> p = nc.plan(nc.group(nc.library.matmul(), "a", "g_a"), {"a": 4, "b": 4, "c": 4, "g_a": 2})
>>> "@triton.jit" in triton(p).source
True
"""
from napkin_cat.codegen.triton.kernel import TritonKernel, triton
from napkin_cat.codegen.triton.printer import TritonPrinter

__all__ = ["triton", "TritonKernel", "TritonPrinter"]
