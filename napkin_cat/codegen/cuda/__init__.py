"""CUDA C++: the C family's loop nest with one thread block per Grid index (:mod:`~napkin_cat.codegen.cuda.printer`)
and the kernel object, its compiler's report without a GPU and its run on one (:mod:`~napkin_cat.codegen.cuda.kernel`).

>>> import napkin_cat as nc
>>> from napkin_cat.codegen.cuda import cuda
>>> p = nc.plan(nc.group(nc.library.matmul(), "a", "g_a"), {"a": 4, "b": 3, "c": 2, "g_a": 2})
>>> "__global__" in cuda(p).source
True
"""
from napkin_cat.codegen.cuda.kernel import CudaKernel, model_for
from napkin_cat.codegen.cuda.printer import CudaPrinter, cuda

__all__ = ["cuda", "CudaKernel", "CudaPrinter", "model_for"]
