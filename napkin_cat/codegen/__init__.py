"""Layer 6, codegen: kernels printed from plans by one printer over the plan IR (paper §5).

``triton(p)``, ``cuda(p)`` and ``c(p)`` return kernel objects with ``.source`` and ``.save(folder)``, and what
this machine can do with them: the C kernel runs (``k(*arrays)``, compiled by ``cc -O3 -fopenmp``), the
Triton kernel runs under Triton's interpreter and compiles for a GPU target (``k.compile(arch=90)``),
the CUDA kernel compiles (``k.compile(arch="sm_90")``, ptxas's registers, spills and shared memory, static
and dynamic) and, on a GPU, runs (``k(*arrays)``, ``k.run_device``, the driver's ``k.attributes()``): a
reference that checks the plan by execution, not the fast path (that is Triton's; see
:mod:`~napkin_cat.codegen.cuda`).

One folder per backend, over what they share here (adding a backend is one folder: docs/adding-a-backend.md):

* here: the printer (:mod:`~napkin_cat.codegen.printer`: one ``_print_<Node>`` per IR node), how it reads a kind's
  printed form (:mod:`~napkin_cat.codegen.kinds`), the on-chip layout (:mod:`~napkin_cat.codegen.layout`), the kernel
  object and its cache (:mod:`~napkin_cat.codegen.kernel`), the errors;
* :mod:`~napkin_cat.codegen.c`: the C family (the loop nest C and CUDA share, its structures) and C/OpenMP;
* :mod:`~napkin_cat.codegen.cuda`: CUDA C++, on the C family;
* :mod:`~napkin_cat.codegen.triton`: the Triton dialect, its host side and its worker.

A statement prints by its kind's printed form, which the kind's record holds (``Kind.part(dialect)``,
:mod:`napkin_cat.syntax.printed`): no printer keeps a table of kinds.  On-chip variables take the byte offsets of
:mod:`~napkin_cat.codegen.layout`.

May import: every layer up to plan and search (and the hardware models beside it).

>>> import numpy as np, napkin_cat as nc
>>> p = nc.plan(nc.group(nc.stream(nc.library.matmul(), "b", "s_b"), "a", "g_a"),
...             {"a": 5, "b": 7, "c": 3, "s_b": 3, "g_a": 2})
>>> k = c(p)
>>> A, B = np.ones((5, 7), np.float32), np.ones((7, 3), np.float32)
>>> bool(np.array_equal(k(A, B), p(A, B)))
True
"""
from napkin_cat.codegen.c import CKernel, CPrinter, c
from napkin_cat.codegen.cuda import CudaKernel, CudaPrinter, cuda
from napkin_cat.codegen.errors import BlasMissingWarning, CodegenError, ToolNotFoundError, UnknownKindError
from napkin_cat.codegen.printer import CodePrinter
from napkin_cat.codegen.triton import TritonKernel, TritonPrinter, triton

__all__ = ["c", "cuda", "triton", "CKernel", "CudaKernel", "TritonKernel", "CodePrinter", "CPrinter", "CudaPrinter",
           "TritonPrinter", "CodegenError", "UnknownKindError", "ToolNotFoundError", "BlasMissingWarning"]
