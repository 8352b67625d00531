"""The Triton kernel's host side: which sizes are runtime arguments, the launch shape, the launcher.

**Runtime sizes.**  A kernel is compiled for its tiles, not for its sizes: an axis size becomes a
runtime argument (``i32``) unless something on chip depends on it::

    runtime(plan) = sizes − tiles − { s : s in an on-chip variable's shape or a primitive's parameter }

So a sequence length, a batch or a head count (they only set trip counts, strides and masks) vary
between calls; ``d`` in attention (a tile holds all of it, and β = d^-1/2) does not.

**Two variants.**  Where the plan's tiles divide its sizes, the kernel is printed *even*: extents are the
tiles, no mask is computed.  The conditions it assumed (``q % 128 == 0``) are collected while printing;
the launcher checks them on the sizes it is called with and launches the masked (ragged) variant when
one fails, so any size runs and sizes like the plan's run without masks.

**Launch shape.**  ``num_warps``: a warpgroup (4 warps) per 64 rows of the kernel's tensor-core products
(wgmma's m), 1 to 2 warpgroups; without products, one warp per 2,048 fp32 values of the largest on-chip
tensor, 4 to 8; ``num_stages``: the most pipelining stages (2 to 3) whose buffered stream loads fit
the shared memory of a thread block beside the tiles loaded once (the hardware model's
``smem_per_block``; 227 KiB on Hopper, the default).

>>> import napkin_cat as nc
>>> p = nc.plan(nc.group(nc.stream(nc.library.matmul(), "b", "s_b"), "a", "g_a"),
...             {"a": 64, "b": 64, "c": 32, "s_b": 16, "g_a": 32})
>>> [str(s) for s in runtime_sizes(p)]
['a', 'b']
"""
from __future__ import annotations

import sympy

from napkin_cat.codegen.errors import CodegenError
from napkin_cat.plan.ir import Compute, GridLoop, Load, StreamLoop, walk
from napkin_cat.hardware.issuing import register_warps, warpgroups
from napkin_cat.syntax.dtype import as_dtype

#: shared memory per thread block assumed when no hardware model is given (Hopper, opt-in maximum)
SMEM_PER_BLOCK = 227 * 1024


def tile_symbols(plan) -> set:
    """The tile sizes of the plan's loops (symbols)."""
    return {s.tile for s in walk(plan.body) if isinstance(s, (GridLoop, StreamLoop))
            and isinstance(s.tile, sympy.Symbol)}


def pinned(plan) -> set:
    """Sizes something on chip depends on: on-chip shapes and primitives' parameters."""
    out = set()
    for v in plan.variables:
        if v.level > 0:
            for _, e in v.shape:
                out |= sympy.sympify(e).free_symbols
    for s in walk(plan.body):
        if isinstance(s, Compute):
            for c in (s,) + tuple(r for r in s.ins if isinstance(r, Compute)):
                for _, v in c.box.data.params:
                    if isinstance(v, sympy.Basic):
                        out |= v.free_symbols
    return out


def runtime_sizes(plan, requested=True) -> tuple:
    """The sizes passed at run time (see the module docstring); ``requested``: True (every eligible
    size), False (none) or names (each must be eligible)."""
    keys = [k for k in plan.sizes]
    eligible = [k for k in keys if k not in tile_symbols(plan) and k not in pinned(plan)]
    if requested is True:     # every eligible size an input carries (a split's parts are on none: a constant)
        carried = {sympy.sympify(e) for n in plan.inputs for _, e in plan.variable_map[n].shape}
        return tuple(k for k in eligible if k in carried)
    if requested is False or requested is None:
        return ()
    by_name = {str(k): k for k in keys}
    out = []
    for name in requested:
        if str(name) not in by_name:
            raise CodegenError(f"runtime size {name!r} is not a size of the plan; its sizes are {sorted(by_name)}")
        k = by_name[str(name)]
        if k not in eligible:
            why = "a tile" if k in tile_symbols(plan) else "an on-chip shape or a parameter depends on it"
            raise CodegenError(f"size {name!r} cannot vary at run time: {why}; runtime-eligible sizes are "
                               f"{sorted(map(str, eligible))}")
        out.append(k)
    return tuple(out)


def dot_rows(printer) -> list[int]:
    """Rows (the padded first side of the output) of each matrix product the kernel gives the tensor cores."""
    out = []
    for s in walk(printer.plan.body):
        if isinstance(s, Compute) and s.outs and getattr(printer.form(s), "structure", None) == "contract":
            axes = printer.block_axes(s.outs[0].var)
            if len(axes) == 2 and len(s.ins) == 2 and all(
                    not isinstance(r, Compute) and len(printer.block_axes(r.var)) == 2 for r in s.ins):
                out.append(printer.shape(s.outs[0].var)[0])
    return out


def num_warps(printer) -> int:
    """One warpgroup (4 warps) per 64 rows of the tensor-core products, 1 to 2 (the time model's rule:
    :func:`napkin_cat.hardware.issuing.warpgroups`); a kernel with none: one warp per 2,048 fp32 values of
    its largest on-chip tensor, 4 to 8."""
    rows = dot_rows(printer)
    if rows:
        return 4 * warpgroups(max(rows))
    largest = 1
    for v in printer.plan.variables:
        if v.level > 0:
            n = 1
            for side in printer.shape(v.name):
                n *= side
            largest = max(largest, n)
    return register_warps(largest)


def num_stages(printer, smem_per_block: int = SMEM_PER_BLOCK) -> int:
    """The most stages (2 to 3) whose buffered stream loads fit beside the tiles loaded once."""
    streamed = printer.stream_load_bytes()
    once = 0
    for s in walk(printer.plan.body):
        if isinstance(s, Load) and printer.variables[s.src.var].level == 0:
            n = 1
            for side in printer.shape(s.dst.var):
                n *= side
            once += n * as_dtype(printer.variables[s.dst.var].dtype).bytes
    once -= streamed
    for stages in (3, 2):
        if once + stages * streamed <= smem_per_block:
            return stages
    return 2


def host(printer, launches) -> list[str]:
    """``nc_run(*inputs)``: read the runtime sizes off the inputs (checking every other extent), allocate the
    outputs like the first input, launch each kernel (the even variant where its conditions hold)."""
    p = printer.plan
    ins = [printer.ident(n) for n in p.inputs]
    line = printer.line
    tables = [t.name for t in printer.block_tables.values()]
    lines = [f"def nc_run({', '.join(ins + [f'{t}=None' for t in tables])}):",
             line(1, '"""The launcher: torch tensors in (then the block tables: int8, none 0, partial 1, full 2; '
                     'None: every trip partial), outputs out."""' if tables else
                  '"""The launcher: torch tensors in, outputs out."""')]
    known = {}
    for name in p.inputs:
        v = printer.variables[name]
        lines.append(line(1, f"if {printer.ident(name)}.dim() != {len(v.shape)}:"))
        lines.append(line(2, f"raise ValueError(f\"input {name} has {{{printer.ident(name)}.dim()}} axes; "
                             f"it needs {len(v.shape)}: {' × '.join(a for a, _ in v.shape)}\")"))
        for k, (a, e) in enumerate(v.shape):
            e = sympy.sympify(e)
            here = f"{printer.ident(name)}.shape[{k}]"
            if e in printer.runtime and e not in known:
                known[e] = here
                lines.append(line(1, f"{printer.ident(e.name)} = {here}"))
                continue
            want = printer.code(e)
            said = want if want.isdigit() else f"{want} = {{{want}}}"
            lines.append(line(1, f"if {here} != {want}:"))
            lines.append(line(2, f"raise ValueError(f\"input {name}: axis {a!r} has {{{here}}} values; the kernel "
                                 f"needs {said}\")"))
    missing = [s for s in printer.runtime if s not in known]
    if missing:
        raise CodegenError(f"runtime sizes {sorted(map(str, missing))} are on no input: they cannot be read at "
                           "run time; pass runtime=False or name the sizes the inputs carry")
    device = f"{ins[0]}.device" if ins else '"cpu"'
    for v in printer.globals_():
        if v.role == "input" or v.name in printer.aliases:
            continue
        shape = ", ".join(printer.code(e) for _, e in v.shape)
        if v.dtype not in printer.torch_dtypes:
            raise CodegenError(f"the triton launcher allocates no {v.dtype!r} global arrays ({v.name})")
        lines.append(line(1, f"{printer.ident(v.name)} = torch.empty(({shape}{',' if len(v.shape) == 1 else ''}), "
                             f"dtype={printer.torch_dtypes[v.dtype]}, device={device})"))
    for view, src in printer.aliases.items():      # a view between kernels: the input's buffer (.views)
        lines.append(line(1, f"{printer.ident(view)} = {printer.ident(src)}   # view of {src}, no copy"))
    for t in printer.block_tables.values():
        shape = ", ".join(str(n) for n in t.shape)
        lines.append(line(1, f"if {t.name} is None:"))
        lines.append(line(2, f"{t.name} = torch.ones(({shape},), dtype=torch.int8, device={device})"))
        lines.append(line(1, f"if tuple({t.name}.shape) != ({shape},) or {t.name}.dtype != torch.int8:"))
        lines.append(line(2, f"raise ValueError(f\"block table {t.name} must be int8 of shape ({shape},), got "
                             f"{{{t.name}.dtype}} {{tuple({t.name}.shape)}}\")"))
    args = ", ".join([printer.ident(v.name) for v in printer.globals_()] + tables +
                     [printer.ident(s.name) for s in printer.runtime])
    options = f"num_warps={printer.num_warps}, num_stages={printer.num_stages}"
    for launch in launches:
        grid = printer.code(printer.blocks(launch))
        even = printer.assumed.get(launch.name)
        if even:
            test = " and ".join(f"({printer.code(full)}) % {tile} == 0" for full, tile in sorted(
                even, key=lambda ft: (str(ft[0]), ft[1])) if tile != 1) or "True"
            lines.append(line(1, f"kernel = {launch.name} if {test} else {launch.name}_ragged"))
            lines.append(line(1, f"kernel[({grid},)]({args}, {options})" if args else
                                 f"kernel[({grid},)]({options})"))
        else:
            lines.append(line(1, f"{launch.name}[({grid},)]({args}{', ' if args else ''}{options})"))
    outs = [printer.ident(n) for n in p.outputs]
    lines.append(line(1, f"return {', '.join(outs)}{',' if len(outs) == 1 else ''}"))
    return lines
