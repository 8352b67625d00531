"""Views between kernels: a launch of renames in global memory is an alias on the host, not a kernel.

A derived plan leaves a *view* (a box whose kind only renames axes, :func:`~napkin_cat.syntax.primitive.is_view`)
between the kernels that make and read its value.  A rename keeps every axis's position and size (its check), so
in a row-major global array the output's element at index ``i`` is the input's element at ``i``::

    strides(out) = strides(src)   ⇔   shape extents equal position by position   (rename: always)

and the output *is* the input's buffer: the launcher binds the output's name to the input's tensor (no launch, no
copy).  That holds while nothing writes either name after the view; a view that is not such an alias (a slice, an
on-chip operand, a change of format, a buffer written again later) and any other statement outside a kernel raise
:class:`~napkin_cat.codegen.errors.CodegenError` naming the statement and what would be legal.

A view that is a plan's output is its input's tensor (the launcher returns the buffer it was given):

>>> import napkin_cat as nc
>>> p = nc.plan(nc.renaming("n e -> m e", n=4, e=3), {})
>>> aliases(p)
{'y0': 'x0'}
"""
from __future__ import annotations

import sympy

from napkin_cat.codegen.errors import CodegenError
from napkin_cat.codegen.launch import launches
from napkin_cat.plan.ir import Compute, Kernel, walk, writes
from napkin_cat.syntax.primitive import is_view

LEGAL = ("outside a kernel the triton backend runs only views (renames) of whole global arrays of one format, which "
         "the launcher aliases; put anything else in a kernel (nc.kernel, or derive it: nc.derive places every "
         "computation in one)")


def is_kernel_launch(launch) -> bool:
    """Whether the launch runs a kernel (its body holds a :class:`~napkin_cat.plan.ir.Kernel`)."""
    return any(isinstance(s, Kernel) for s in launch.body)


def _describe(s) -> str:
    if isinstance(s, Compute):
        ins = ", ".join(r.var for r in s.ins)
        outs = ", ".join(r.var for r in s.outs)
        return f"{s.box.name} ({s.kind}: {outs} ← {ins})"
    return type(s).__name__


def _alias_of(p, s, later) -> tuple[str, str]:
    """``(output, input)`` of the view ``s``, checked to be an alias (see the module docstring)."""
    vm = p.variable_map
    (src,), (out,) = s.ins, s.outs
    a, b = vm[src.var], vm[out.var]
    why = None
    if not (src.whole and out.whole):
        why = "it reads or writes part of an array (a slice is no alias of a whole buffer)"
    elif a.level != 0 or b.level != 0:
        why = f"an operand is on chip (level {max(a.level, b.level)}), not a global array"
    elif a.dtype != b.dtype:
        why = f"it changes the format ({a.dtype} → {b.dtype})"
    elif len(a.shape) != len(b.shape) or any(sympy.expand(sympy.sympify(x) - sympy.sympify(y)) != 0
                                             for (_, x), (_, y) in zip(a.shape, b.shape)):
        why = (f"the extents differ position by position ({' × '.join(map(str, (e for _, e in a.shape)))} → "
               f"{' × '.join(map(str, (e for _, e in b.shape)))}): the strides are not the input's")
    elif s.accumulate:
        why = f"it accumulates ({s.accumulate}) into its output"
    else:
        again = sorted({v for t in later for v in writes(t)} & {src.var, out.var})
        if again:
            why = f"{again[0]} is written again after the view (an alias would see the later values)"
    if why:
        raise CodegenError(f"the triton backend cannot alias the view {_describe(s)}: {why}; {LEGAL}")
    return out.var, src.var


def aliases(p) -> dict:
    """The plan's views outside kernels as aliases, ``{output: input}`` in plan order (an input may itself be an
    alias: bind them in this order); raises where a statement outside a kernel is no such view."""
    ls = launches(p)
    out = {}
    for k, launch in enumerate(ls):
        if is_kernel_launch(launch):
            continue
        later = [t for rest in ls[k + 1:] for t in walk(rest.body)]
        for s in launch.body:
            if launch.grids or not (isinstance(s, Compute) and is_view(s.box) and len(s.ins) == len(s.outs) == 1):
                where = f" inside {len(launch.grids)} Grid loop(s) without a kernel" if launch.grids else ""
                raise CodegenError(f"the triton backend runs kernels: {_describe(s)} is outside any kernel{where}; "
                                   f"{LEGAL}")
            o, i = _alias_of(p, s, later)
            out[o] = i
    return out


__all__ = ["aliases", "is_kernel_launch", "LEGAL"]
