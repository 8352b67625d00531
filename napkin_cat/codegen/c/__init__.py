"""The C family: C/OpenMP for the CPU, and the loop nest it shares with CUDA C++ (``cuda/`` builds on it).

* :mod:`~napkin_cat.codegen.c.family`: the loop nest, element addresses, the on-chip arena and staging that C and
  CUDA share (running the C kernel executes the CUDA kernel's indexing and masks);
* :mod:`~napkin_cat.codegen.c.structures`, :mod:`~napkin_cat.codegen.c.indices`: the structures a kind's record
  names (contractions, reductions, the online SoftMax; positions, gathers, log-sum-exp), in C syntax;
* :mod:`~napkin_cat.codegen.c.rows`: row reductions as a CPU vectorises them;
* :mod:`~napkin_cat.codegen.c.real`: the C type of the real values (``float`` or ``double``), spelled in one place;
* :mod:`~napkin_cat.codegen.c.blas`: contractions that are matrix products as BLAS ``gemm`` calls;
* :mod:`~napkin_cat.codegen.c.openmp`: the C/OpenMP printer (``c(plan)``);
* :mod:`~napkin_cat.codegen.c.kernel`: the kernel object, compiled by ``cc`` and called by ctypes;
* :mod:`~napkin_cat.codegen.c.profile`: its statements timed (``c(plan, profile=True)``, ``k.statement_times()``).

>>> import napkin_cat as nc
>>> from napkin_cat.codegen.c import c
>>> p = nc.plan(nc.library.matmul(), {"a": 2, "b": 3, "c": 2})
>>> "#pragma omp" in c(p).source or "cblas_sgemm" in c(p).source
True
"""
from napkin_cat.codegen.c.blas import blas_available
from napkin_cat.codegen.c.kernel import CKernel
from napkin_cat.codegen.c.openmp import CPrinter, c
from napkin_cat.codegen.c.profile import StatementTime

__all__ = ["c", "CKernel", "CPrinter", "StatementTime", "blas_available"]
