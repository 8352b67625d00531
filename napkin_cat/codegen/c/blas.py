"""Contractions that are matrix products, as one BLAS ``gemm`` call per batch index (the C printer's).

A contraction of two operands with one summed axis ``k``, one free axis per operand (``m`` of ``A``, ``n`` of
``B``) and any shared batch axes ``β`` is a matrix product per batch index::

    C[β, m, n] (+)= Σ_k A[β, m, k] · B[β, k, n]   ==   gemm(order, ta, tb, M, N, K, 1, A_β, lda, B_β, ldb, b, C_β, ldc)

(``b`` = 1 when the statement accumulates, else 0), where the layout lets it: ``C`` has a unit stride along one
of its axes (row-major: ``n``, column-major: ``m``) and a leading dimension at least the other's extent, and so
has each operand, transposed (``ta``, ``tb``) where its unit stride is along the other axis.  Where none of the
forms fits, :meth:`GemmMixin.gemm` says None and the contraction prints as element loops.

The printer uses BLAS when asked (``blas=True``), or by default where ``cblas.h`` is found
(:func:`blas_available`); where it is missing, the default says so once (:func:`tell_blas_missing`).

>>> import napkin_cat as nc
>>> from napkin_cat.codegen.c import CPrinter
>>> from napkin_cat.plan.ir import walk
>>> p = nc.plan(nc.library.matmul(), {"a": 4, "b": 6, "c": 5})
>>> printer = CPrinter(p, blas=True)
>>> g = next(printer.gemm(s) for s in walk(p.body) if getattr(s, "kind", None) == "contract")
>>> g["axes"], g["order"], g["ta"], g["tb"], (g["lda"], g["ldb"], g["ldc"])
(('a', 'c', 'b'), 'CblasRowMajor', 'CblasNoTrans', 'CblasNoTrans', (6, 5, 5))
>>> "cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 4, 5, 6, 1.0f" in printer.doprint_plan()
True
"""
from __future__ import annotations

import functools
import os
import warnings

from napkin_cat.codegen.errors import BlasMissingWarning
from napkin_cat.codegen.printer import ident

#: set to ``0`` to run as if ``cblas.h`` were missing (the loops, and the warning that says so)
NO_BLAS_ENV = "NAPKIN_BLAS"

#: where Debian (and a local install) put ``cblas.h``
CBLAS_INCLUDES = ("/usr/include", "/usr/include/x86_64-linux-gnu", "/usr/include/aarch64-linux-gnu",
                  "/usr/local/include", "/usr/include/openblas")


def blas_available() -> bool:
    """Whether ``cblas.h`` and OpenBLAS are installed (Debian's ``libopenblas-dev``); False when ``$NAPKIN_BLAS``
    is ``0``.

    >>> import os
    >>> from unittest import mock
    >>> with mock.patch.dict(os.environ, {NO_BLAS_ENV: "0"}):
    ...     blas_available()
    False
    """
    if os.environ.get(NO_BLAS_ENV) == "0":
        return False
    return any(os.path.exists(os.path.join(root, "cblas.h")) for root in CBLAS_INCLUDES)


@functools.cache
def tell_blas_missing() -> None:
    """Warn that contractions fall back to loops (the default ``blas=None`` found no cblas.h): once per process,
    the call being cached (``tell_blas_missing.cache_clear()`` makes the next call say it again)."""
    why = f"${NO_BLAS_ENV} is 0" if os.environ.get(NO_BLAS_ENV) == "0" else "cblas.h (OpenBLAS) is not installed"
    warnings.warn(f"{why}: the C kernel's contractions run as plain loops, several times slower than cblas_sgemm "
                  "(FlashAttention at N = 4096 on one core: about 3.5x); install Debian's libopenblas-dev (apt-get "
                  "install libopenblas-dev), or pass blas=False to choose the loops without this warning",
                  BlasMissingWarning, stacklevel=4)


class GemmMixin:
    """The C printer's contractions by BLAS (see the module docstring): needs ``self.blas``, ``self.real`` (its
    ``gemm``) and ``self.stage_values`` (reset per launch)."""

    def _print_contract(self, s, depth):
        g = self.gemm(s) if self.blas else None
        if g is None:
            return super()._print_contract(s, depth)
        out = s.outs[0]
        (A, B), (m, n, k), batch = g["operands"], g["axes"], g["batch"]
        bspace = self.space(out, batch)
        idx = {a: sym for sym, _, a, _ in bspace}
        zero = dict(idx, **{m: 0, n: 0, k: 0})
        staged = out.var in self.layout.aliased(s)
        target = "nc_stage" if staged else ident(out.var)
        c_off = self.code(self.offset(out, zero))
        call = (f"{self.real.gemm}({g['order']}, {g['ta']}, {g['tb']}, {self.code(self.ext(out, m))}, "
                f"{self.code(self.ext(out, n))}, {self.code(self.ext(A, k))}, 1.0f, "
                f"{ident(A.var)} + {self.code(self.offset(A, zero))}, {g['lda']}, "
                f"{ident(B.var)} + {self.code(self.offset(B, zero))}, {g['ldb']}, "
                f"{'1.0f' if s.accumulate else '0.0f'}, {target} + {c_off}, {g['ldc']});")
        lines = self._head(s, depth)
        sp = self.space(out)
        full = {a: sym for sym, _, a, _ in sp}
        if staged:
            self.stage_values = max(self.stage_values, int(self.nominal(self.variables[out.var].size)))
            if s.accumulate:
                lines += self.loop(sp, [f"nc_stage[{self.code(self.offset(out, full))}] = {self.read(out, full)};"],
                                   depth)
        lines += self.loop(bspace, [call], depth)
        if staged:
            lines += self.loop(sp, [self.store(out, full, f"nc_stage[{self.code(self.offset(out, full))}]")], depth)
        return lines

    def gemm(self, s):
        """The ``gemm`` form of a contraction (``{"operands", "axes": (m, n, k), "batch", "order", "ta", "tb",
        "lda", "ldb", "ldc"}``), or None where it is no matrix product the layout lets BLAS read (module
        docstring)."""
        if len(s.ins) != 2 or s.accumulate not in (None, "sum") or \
                any(self.variables[r.var].dtype != "fp32" for r in (*s.ins, *s.outs)):
            return None
        A, B = s.ins
        out = s.outs[0]
        a, b, o = (self.variables[r.var].axes for r in (A, B, out))
        summed = [x for x in (*a, *b) if x not in o]
        fa = [x for x in o if x in a and x not in b]
        fb = [x for x in o if x in b and x not in a]
        if len(set(summed)) != 1 or not (summed[0] in a and summed[0] in b) or len(fa) != 1 or len(fb) != 1:
            return None
        m, n, k = fa[0], fb[0], summed[0]
        batch = [x for x in o if x in a and x in b]
        sa, sb, so = self.strides(A.var), self.strides(B.var), self.strides(out.var)
        M, N, K = (self.space(r, [x])[0][3] for r, x in ((out, m), (out, n), (A, k)))
        flag = {False: "CblasNoTrans", True: "CblasTrans"}
        for row in (True, False):
            # (unit-stride axis, leading-dimension axis, least legal leading dimension) of C, A, B
            c_form = (n, m, N) if row else (m, n, M)
            if so[c_form[0]] != 1 or so[c_form[1]] < c_form[2]:
                continue
            a_forms = {False: (k, m, K) if row else (m, k, M), True: (m, k, M) if row else (k, m, K)}
            b_forms = {False: (n, k, N) if row else (k, n, K), True: (k, n, K) if row else (n, k, N)}
            ta = next((t for t, (u, ld, least) in a_forms.items() if sa[u] == 1 and sa[ld] >= least), None)
            tb = next((t for t, (u, ld, least) in b_forms.items() if sb[u] == 1 and sb[ld] >= least), None)
            if ta is None or tb is None:
                continue
            return {"operands": (A, B), "axes": (m, n, k), "batch": batch,
                    "order": "CblasRowMajor" if row else "CblasColMajor", "ta": flag[ta], "tb": flag[tb],
                    "lda": sa[a_forms[ta][1]], "ldb": sb[b_forms[tb][1]], "ldc": so[c_form[1]]}
        return None
