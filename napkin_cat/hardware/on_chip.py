"""A kernel's bytes on chip per thread block, read off its plan once, and the least any of its tilings holds.

The time model (:class:`~napkin_cat.hardware.predict.KernelForm`) charges a kernel the bytes its plan holds at
``level`` at once: per live column ``i`` (:func:`~napkin_cat.plan.static.live_columns`, read off the plan made at
sample sizes) the bytes of its variables there, a stream's loads twice (double-buffered), and refuses a tiling
whose most exceeds the block's shared memory::

    M(t) = max_i  column_i(t)          refused where M(t) > smem_per_block

Each ``column_i`` is an expression in the kernel's sizes and tiles.  Where it is built of sums and products of
numbers ≥ 0, sizes and tiles (integer powers ≥ 1), it can only grow with every tile, so at tiles each at least
``t₀``::

    M(t) ≥ max over such columns i of column_i(t₀) = least_on_chip(columns, t₀)

(a column of another shape is left out of the bound, which stays a bound).  A search that times every tiling of
a kernel whose tiles are each at least ``t₀`` (the smallest the hardware allows,
:func:`~napkin_cat.hardware.timed.tile_values`) thus drops, before reading the kernel's cost or compiling its
terms, every kernel the model would refuse at each of those tilings: ``least_on_chip > smem_per_block``.

>>> import napkin_cat as nc
>>> mm = nc.group(nc.stream(nc.kernel(nc.library.matmul()), "b", "s_b"), "a", "g_a")
>>> (k,) = [b for _, b in nc.syntax.flat.layers(mm) if b.name.startswith("Grid")]
>>> sizes = {nc.symbol(n): v for n, v in {"a": 64, "b": 64, "c": 32, "g_a": 16, "s_b": 8}.items()}
>>> chip = chip_forms(k, 1, sizes)
>>> least_on_chip(chip.columns, sizes)        # an A tile and a B slice twice (4·(16·8 + 8·32)·2), C's 16 rows
5120
>>> least_on_chip(chip.columns, {**sizes, nc.symbol("s_b"): 16}) > 5120      # larger tiles hold more
True
"""
from __future__ import annotations

from dataclasses import dataclass

import sympy

from napkin_cat.algorithms.records import built_region
from napkin_cat.cost.exact_arithmetic import value
from napkin_cat.plan import plan
from napkin_cat.plan.ir import Load, StreamLoop, walk
from napkin_cat.plan.static import live_columns
from napkin_cat.syntax.dtype import as_dtype
from napkin_cat.syntax.sizes import Sizes


@dataclass(frozen=True)
class ChipForms:
    """A kernel's on-chip forms: per live column, its bytes at the level (``columns``, a stream's loads twice),
    the bytes of its block tensors other than loaded tiles, state in fp32 (``registers``), and the bytes of all of
    them, loaded tiles once (``in_registers``: a kernel without tensor-core products keeps its tiles in its
    threads' registers, nothing staged in shared memory); and the values of its largest on-chip tensor
    (``largest``); expressions in the kernel's sizes and tiles."""

    columns: tuple
    registers: tuple
    in_registers: tuple = ()
    largest: object = 0


def chip_forms(box, level: int, sample: dict) -> ChipForms:
    """The on-chip forms of kernel ``box`` at ``level``, read off its plan at ``sample`` (symbols → ints; the sizes
    the kernel reads, as :class:`~napkin_cat.hardware.predict.KernelForm` reads them)."""
    box = built_region(box)        # a partition record: the plan is of the partition it stands for
    p = plan(box, Sizes(sample).restrict(box))
    columns = [[p.variable_map[n] for n in col if p.variable_map[n].level == level] for col in live_columns(p)]
    streamed = {st.dst.var for loop in walk(p.body) if isinstance(loop, StreamLoop)
                for st in loop.body if isinstance(st, Load)}
    # a stream's loads are double-buffered (the next slice arrives while this one is used: §5 step 5)
    # each column one Add of its terms (a Python sum rebuilds the Add at every term: quadratic in a column's
    # variables, and a deep kernel has as many columns as variables, issue 35); the same canonical expression
    # and each variable's bytes read once (a variable lives in many columns: read per column, ~k² products)
    held, kept, sizes = {}, {}, {}
    for col in columns:
        for v in col:
            if v.name not in held:
                held[v.name], sizes[v.name] = v.bytes, v.size
                kept[v.name] = v.size * (4 if v.role == "state" else as_dtype(v.dtype).bytes) \
                    if v.role != "tile" else None
    extra = sympy.Add(*(p.variable_map[n].bytes for n in streamed if p.variable_map[n].level == level))
    return ChipForms(
        tuple(sympy.Add(*(held[v.name] for v in col), extra) for col in columns),
        tuple(sympy.Add(*(kept[v.name] for v in col if kept[v.name] is not None)) for col in columns),
        tuple(sympy.Add(*(held[v.name] if kept[v.name] is None else kept[v.name] for v in col)) for col in columns),
        sympy.Max(*sizes.values(), evaluate=False) if sizes else sympy.Integer(0))


def growing(expr) -> bool:
    """Whether ``expr`` is built of sums and products of numbers at least 0 and symbols, raised to integer powers
    of at least 1: then it does not decrease as any symbol grows (over positive values).

    >>> import napkin_cat as nc
    >>> g, n = nc.symbol("g"), nc.symbol("n")
    >>> growing(4 * g ** 2 * n + 2 * g), growing(n / g), growing(n - g), growing(sympy.ceiling(n / g))
    (True, False, False, False)
    """
    expr = sympy.sympify(expr)
    if expr.is_Symbol:
        return True
    if expr.is_Number:
        return bool(expr.is_nonnegative)
    if expr.is_Add or expr.is_Mul:
        return all(growing(a) for a in expr.args)
    if expr.is_Pow:
        exp = expr.exp
        return bool(exp.is_Integer and exp >= 1) and growing(expr.base)
    return False


def least_on_chip(columns, least: dict) -> int:
    """The least bytes on chip of a kernel whose ``columns`` (:attr:`ChipForms.columns`) are read at tiles each at
    least ``least`` (symbols → ints, every symbol the columns read): the most of its growing columns
    (:func:`growing`) at ``least``, exactly; 0 where none grows (see the module docstring for the law)."""
    return max((int(value(c, least)) for c in columns if growing(c)), default=0)


__all__ = ["ChipForms", "chip_forms", "growing", "least_on_chip"]
