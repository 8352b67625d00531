"""The C kernel's statements timed: ``nc.codegen.c(plan, profile=True)`` and ``k.statement_times()``.

A time model (:mod:`napkin_cat.hardware.cputime`) claims, per kernel, how long its transfers, its contractions
and its element loops take.  The kernel's total time checks the sum; the statements' own times check each term,
so a measurement says *which* assumption it refutes (a contraction slower at its tile's shape than the rate
table says, a store of a tile's short rows slower than a copy, an element loop that runs in lanes).

With ``profile=True`` the printer wraps each leaf statement of the plan (a load, store, copy, fill, combine or
compute; never a loop, whose statements are timed inside it) in two reads of ``omp_get_wtime()``::

    nc_p0 = omp_get_wtime();
    <the statement as printed without profile>
    nc_profiled(k, nc_p0);          /* nc_prof[k] += now − nc_p0, atomically: the threads' seconds summed */

``k`` numbers the statements as printed (a statement printed in two trip variants, full and partial, is two
entries of one statement).  The source without ``profile`` is unchanged, so is its kernel (its cache key is
the source).  Reading the timings resets them: :meth:`~napkin_cat.codegen.c.kernel.CKernel.statement_times`
answers the seconds since the last read, per statement, as :class:`StatementTime` records.  A clock read costs
tens of nanoseconds; a statement runs once per trip of the loops around it, so the overhead is the number of
trips times two clock reads (attention's backward, N = 1,024-4,096: the profiled kernel's wall time 0.99-1.05× the
plain one's, timed alternately by ``benchmarks/cpu_terms.py``).

>>> import numpy as np, napkin_cat as nc
>>> p = nc.plan(nc.group(nc.stream(nc.library.matmul(), "b", "s_b"), "a", "g_a"),
...             {"a": 64, "b": 64, "c": 32, "s_b": 16, "g_a": 32})
>>> k = nc.codegen.c(p, blas=False, profile=True)
>>> A, B = np.ones((64, 64), np.float32), np.ones((64, 32), np.float32)
>>> float(k(A, B)[0, 0])
64.0
>>> times = k.statement_times()
>>> sorted({t.kind for t in times}) == ["Compute", "Fill", "Load", "Store"], all(t.seconds >= 0 for t in times)
(True, True)
>>> sum(t.seconds for t in k.statement_times())         # read: reset until the next run
0.0
"""
from __future__ import annotations

from dataclasses import dataclass, field

from napkin_cat.plan.ir import Combine, Compute, Copy, Fill, Load, Store

#: the statements timed: leaves of the plan (a loop's statements are timed inside it)
TIMED = (Load, Store, Copy, Fill, Combine, Compute)


@dataclass(frozen=True)
class StatementTime:
    """One printed statement's seconds since the last read, summed over the threads that ran it: ``label`` its
    comment in the source (``contract20 ← ·(x5_1, x2_1)``), ``statement`` the plan's statement (its ``box`` and
    the maps fused into it, for a compute), ``launch`` the kernel function it sits in (``nc_kernel0``)."""

    label: str
    statement: object = field(repr=False)
    launch: str
    seconds: float

    @property
    def kind(self) -> str:
        """The statement's kind: ``Load``, ``Store``, ``Copy``, ``Fill``, ``Combine`` or ``Compute``."""
        return type(self.statement).__name__

    @property
    def boxes(self) -> tuple:
        """A compute's box kinds, its own first, then those of the maps fused into it (their boxes computed in
        its element loop); empty for any other statement."""
        if not isinstance(self.statement, Compute):
            return ()
        out, todo = [], [self.statement]
        while todo:
            s = todo.pop(0)
            out.append(s.kind)
            todo += [r for _, r in s.inlined]
        return tuple(out)


class ProfileMixin:
    """The printer's side: each leaf statement timed where ``profile`` is on (module docstring)."""

    def profile_setup(self, profile: bool) -> None:
        #: ``(label, statement, launch)`` of each timed statement, in print order (its index in ``nc_prof``)
        self.profiled = [] if profile else None
        self._launch = ""

    def timed(self, s, lines: list, depth: int) -> list:
        if self.profiled is None or not isinstance(s, TIMED):
            return lines
        k = len(self.profiled)
        self.profiled.append((_label(lines, s), s, self._launch))
        return [self.line(depth, "nc_p0 = omp_get_wtime();")] + lines + [
            self.line(depth, f"nc_profiled({k}, nc_p0);")]

    def launch_locals(self, launch, depth: int) -> list:
        """The lines a launch's threads declare first: the clock read of the statement being timed."""
        self._launch = launch.name
        return [] if self.profiled is None else [self.line(depth, "double nc_p0;   /* a timed statement's start */")]

    def profile_declaration(self) -> str:
        """What the prelude declares for the launches (defined by :meth:`profile_definitions`, after them)."""
        return "" if self.profiled is None else "static void nc_profiled(int k, double t0);\n"

    def profile_definitions(self) -> list:
        """The source's parts after the launches: the seconds per statement, the atomic add the statements call, and
        ``nc_profile_read`` (copy, reset); none without ``profile`` (the source as printed without it)."""
        if self.profiled is None:
            return []
        n = max(len(self.profiled), 1)
        return [f"static double nc_prof[{n}];   /* seconds per timed statement, the threads' summed */\n"
                "static void nc_profiled(int k, double t0) {\n"
                "    const double dt = omp_get_wtime() - t0;\n"
                "    #pragma omp atomic\n"
                "    nc_prof[k] += dt;\n"
                "}\n"
                f"void nc_profile_read(double *out) {{\n"
                f"    for (int k = 0; k < {n}; ++k) {{ out[k] = nc_prof[k]; nc_prof[k] = 0.0; }}\n"
                "}"]


def _label(lines: list, s) -> str:
    """The statement's comment as printed (the first ``//`` text of its lines), else its kind."""
    for line in lines:
        at = line.find("// ")
        if at >= 0:
            return line[at + 3:].strip()
    return type(s).__name__
