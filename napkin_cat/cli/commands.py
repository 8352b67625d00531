"""The ``napkin`` subcommands: each takes the parsed arguments and prints (text, or JSON with ``--json``).

>>> from napkin_cat.cli import main
>>> main(["cost", "attention"]) == 0
H = 2*d*q + 2*d*x + 4*q*x
...
True
"""
from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass

import numpy as np
import sympy

from napkin_cat import codegen, library
from napkin_cat.algorithms.partitions import unfused
from napkin_cat.cli.cluster import cluster_table
from napkin_cat.cli.clusterderive import cmd_cluster
from napkin_cat.cli.inputs import CLIError, algorithm, differentiated, parse_memory, parse_sizes
from napkin_cat.cost.functor import cost
from napkin_cat.cost.memory import memory_limit
from napkin_cat.cost.optimum import optimal
from napkin_cat.errors import NapkinError
from napkin_cat.render.draw import draw
from napkin_cat.rewriting.registry import rulebook
from napkin_cat.semantics.equivalent import equivalent
from napkin_cat.semantics.evaluate import evaluate
from napkin_cat.syntax.relabel import substitute
from napkin_cat.syntax.sizes import Sizes
from napkin_cat.algorithms.bubbles import Region
from napkin_cat.codegen.cuda import model_for
from napkin_cat.hardware.model import load as load_hardware
from napkin_cat.paper import configuration as paper
from napkin_cat.paper.report import reproduce
from napkin_cat.plan.program import plan, render
from napkin_cat.render.curves import plot_derivation
from napkin_cat.search import derive
from napkin_cat.syntax.flat import layers


def derivation_for(label: str, diagram):
    """The rule book's derivation of a diagram: tiled matmul for ``matmul``, else the FlashAttention-style
    partition (kernel formation, fusion, stream the contracted axis, group the carried axes)."""
    book = rulebook()
    return book.derivations["tiled_matmul" if label == "matmul" else "flash_attention"](diagram)


def writable_folder(folder: str) -> str:
    """``folder``, created if missing; a CLIError names it when it cannot be created or written."""
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as e:
        raise CLIError(f"cannot create the output folder {folder!r}: {e.strerror}") from None
    if not os.access(folder, os.W_OK):
        raise CLIError(f"the output folder {folder!r} is not writable")
    return folder


def _emit(args, data: dict, text: list):
    print(json.dumps(data, indent=1, default=str) if getattr(args, "json", False) else "\n".join(text))
    return 0


def cmd_demo(args):
    out = writable_folder(args.out)
    att = library.attention()
    rng = np.random.default_rng(0)
    Q, K, V = (rng.normal(size=s) for s in ((64, 32), (96, 32), (96, 32)))
    O = evaluate(att, Q, K, V)
    S = Q @ K.T / np.sqrt(32)
    P = np.exp(S - S.max(1, keepdims=True))
    ref = (P / P.sum(1, keepdims=True)) @ V
    print(f"attention: evaluate vs numpy, max |error| = {np.abs(O - ref).max():.2e}")
    derivation = derivation_for("attention", att)
    flash = derivation.diagram
    print("FlashAttention derived by rules: " + " ; ".join(s.rule for s in derivation.trace))
    print(f"  every step checked: {bool(derivation.trace.check())};  "
          f"equivalent to attention: {bool(equivalent(att, flash, trials=5))}")
    Of = evaluate(flash, Q, K, V, sizes={"g_q": 16, "s_x": 8})
    print(f"  tiled run (g_q=16, s_x=8) vs numpy, max |error| = {np.abs(Of - ref).max():.2e}")
    c = cost(flash)
    o = optimal(c)
    print(f"  N_g = {c.N_g},  H_g = {c.H_g[1]},  M = {c.M[1]}")
    print(f"  H* (large M) = {o.H}   tiles {o.sizes}   [paper: 2qd + 4xqd²/M]")
    print(f"  H* (exact memory model, errata D-12) = {o.exact_H}   tiles {o.exact_sizes}")
    u = cost(unfused(att))
    print(f"  unfused baseline H = {u.H[1]}")
    for name, d in (("attention", att), ("flash_attention", flash)):
        for ext in ("png", "svg"):
            draw(d, path=os.path.join(out, f"{name}.{ext}"))
    derivation.trace.draw(os.path.join(out, "flash_derivation.png"))
    print(f"drawings written to {out}/attention.png, {out}/flash_attention.png (and .svg), "
          f"{out}/flash_derivation.png (one row per rewrite)")
    return 0


def _cost_at(diagram, args):
    """``(cost, sizes)``: the cost at ``--sizes`` (``nc.cost(d, sizes=)``: integers, ragged tiles exact) when they
    give every axis and tile, else symbolic in the sizes not given; a name the diagram lacks is refused."""
    sizes = Sizes(parse_sizes(getattr(args, "sizes", None))).of(diagram)
    if sizes and not sizes.missing(diagram):
        return cost(diagram, sizes=sizes), dict(sizes)
    return cost(substitute(diagram, sizes.env) if sizes else diagram), dict(sizes)


def cmd_cost(args):
    if args.memory is not None:
        if not args.derived:
            raise CLIError("--memory is the memory of the optimum of the --derived algorithm: give --derived")
        args.memory = memory_limit(args.memory, text=True)    # refused here (exit 2) when it is no memory
    label, d = algorithm(args.algorithm, name=args.name)
    d = derivation_for(label, d).diagram if args.derived else unfused(d)
    c, sizes = _cost_at(d, args)
    data = {"algorithm": label, "derived": args.derived, "sizes": sizes,
            "H": {lvl: str(h) for lvl, h in c.H.items()}, "M": {lvl: str(m) for lvl, m in c.M.items()},
            "flops": {p: str(f) for p, f in c.flops.items()}}
    text = [f"H = {c.H[lvl]}" if lvl == 1 else f"H[{lvl}] = {c.H[lvl]}" for lvl in c.levels if lvl in c.H]
    text += [f"M[{lvl}] = {m}" for lvl, m in c.M.items()] + [f"FLOPs = {c.flops}"]
    if args.derived and c.groups:
        o = optimal(c, memory=args.memory if args.memory else "M")
        data["optimum"] = {"H": str(o.H), "tiles": {str(k): str(v) for k, v in o.sizes.items()}}
        text.append(f"H* = {o.H}  with {dict(o.sizes)}")
    return _emit(args, data, text)


def _search_memory(text: str):
    """``--memory`` of the search: a symbol name (symbolic mode), else an int or a range (numeric mode)."""
    text = text.strip()
    if text.isidentifier():
        return text
    return parse_memory(text)


def row_text(r) -> tuple:
    """A derivation regime as the columns of ``napkin search``'s table: memory, H, gap, variant, tiles."""
    tiles = " ".join(f"{k}={v}" for k, v in r.tiles.items())
    ratio = "—" if r.gap is None else (f"{float(r.gap):.2f}" if sympy.sympify(r.gap).is_number else str(r.gap))
    where = str(r.memory) if r.memory is not None else (f"{r.lower} ≤ M" + ("" if r.upper == sympy.oo
                                                                          else f" < {r.upper}"))
    return where, str(r.H), ratio, r.variant.describe(), tiles


def _draw_strip(trace, path: str, data: dict, text: list) -> None:
    writable_folder(os.path.dirname(os.path.abspath(path)))
    trace.draw(path)
    data["strip"] = path
    text.append(path)


def _signature(label: str, d) -> tuple[dict, str]:
    """What a gradient diagram takes and gives (``--grad``), for the JSON and the first line of the text."""
    ins, outs = [str(a) for a in d.dom.inside], [str(a) for a in d.cod.inside]
    return {"inputs": ins, "outputs": outs}, f"{label}: ({', '.join(ins)}) → ({', '.join(outs)})"


def cmd_search(args, label, d, memory=None):
    memory = _search_memory(args.memory) if memory is None else memory
    sizes = dict(Sizes(parse_sizes(args.sizes)).of(d)) or None
    r = derive(d, memory=memory, level=args.level, sizes=sizes, tiles=args.tiles)
    rows = [row_text(g) for g in r.regimes]
    data = {"algorithm": label, "level": args.level, "sizes": sizes, "memory": str(memory),
            "H": str(r.H) if not isinstance(r.H, dict) else {str(k): v for k, v in r.H.items()},
            "bound": r.bound.source,
            "rows": [{"M": row[0], "H_star": row[1], "bound_ratio": row[2], "variant": g.variant.as_json(),
                      "tiles": {k: str(v) for k, v in g.tiles.items()}, "trace": [s.rule for s in g.trace]}
                     for row, g in zip(rows, r.regimes)]}
    width = max(len(row[0]) for row in rows)
    hwidth = max(len(row[1]) for row in rows)
    text = []
    if getattr(args, "grad", False):
        data["grad"], line = _signature(label, d)
        text.append(line)
    text.append(f"{'M':>{width}}  {'H*':>{hwidth}}  {'ratio':>6}  variant  |  tiles")
    text += [f"{m:>{width}}  {h:>{hwidth}}  {ratio:>6}  {variant}  |  {tiles}" for m, h, ratio, variant, tiles in rows]
    text.append(f"ratio: H* over the lower bound ({r.bound.source})")
    if isinstance(r.H, sympy.Piecewise):
        text.append(f"H* = {r.H}")
    if r.notes:             # what the answer as a whole does not guarantee (a symbolic envelope's upper bounds)
        data["notes"] = list(r.notes)
        text += [f"note: {n}" for n in r.notes]
    if args.plot:
        writable_folder(os.path.dirname(os.path.abspath(args.plot)))
        plot_derivation(r, args.plot)
        data["plot"] = args.plot
        text.append(args.plot)
    if args.strip:          # the winner at the largest memory (the last regime: the largest M range)
        _draw_strip(r.regimes[-1].trace, args.strip, data, text)
    return _emit(args, data, text)


def cmd_derive(args):
    label, d = algorithm(args.algorithm, name=args.name)
    if not args.grad:
        for flag, given in (("--wrt", args.wrt is not None), ("--saved", args.saved), ("--aux", args.aux)):
            if given:
                raise CLIError(f"{flag} says how --grad differentiates: add --grad")
    if args.grad:
        label, d = differentiated(label, d, args.wrt, saved=args.saved, aux=args.aux)
        if args.memory is None:     # the rule book's derivations are the forward's: search the backward's
            return cmd_search(args, label, d, memory="M")
    if args.cluster is not None:
        return cmd_cluster(args, label, d, _emit, writable_folder)
    for flag in ("sweep", "layout"):
        if getattr(args, flag) is not None:
            raise CLIError(f"--{flag} belongs to --cluster: give --cluster GPU:P:LINK")
    if args.memory is not None:
        return cmd_search(args, label, d)
    if args.plot or args.sizes:
        raise CLIError("--plot and --sizes belong to the search: give --memory (e.g. --memory 2^10..2^20)")
    try:
        r = derivation_for(label, d)
        o = optimal(cost(r.diagram))
    except NapkinError as e:     # e.g. a backward pass: the paper's derivation is the forward's
        raise CLIError(f"{label}: the rule book's derivation does not apply ({str(e).splitlines()[0]}); search its "
                       "algorithms with --memory (e.g. --memory M)") from None
    checked = bool(r.trace.check())
    data = {"algorithm": label, "trace": [s.rule for s in r.trace], "checked": checked,
            "H_star": str(o.H), "tiles": {str(k): str(v) for k, v in o.sizes.items()}}
    text = [f"{k}: {step.rule}" for k, step in enumerate(r.trace)]
    text += [f"checked: {checked}", f"H* = {o.H}  with {o.sizes}"]
    if args.strip:
        _draw_strip(r.trace, args.strip, data, text)
    return _emit(args, data, text)


def cmd_draw(args):
    label, d = algorithm(args.algorithm, name=args.name)
    if args.derived:
        d = derivation_for(label, d).diagram
    writable_folder(os.path.dirname(os.path.abspath(args.path)))
    draw(d, path=args.path)
    print(args.path)
    return 0


def _tiles_by_optimum(d, sizes: dict, capacity: int) -> dict:
    """Tile sizes of an algorithm's partitions chosen by ``nc.optimal``'s integer search at ``capacity`` values."""
    c = cost(d)
    if not c.groups:
        return {}
    o = optimal(c, memory=capacity, sizes=sizes)
    return {str(k): int(v) for k, v in o.sizes.items()}


def planned(args, *, hardware=None):
    """The plan ``napkin plan`` makes of ``args.algorithm`` at ``args.sizes``: the algorithm derived by the rules
    when it is a function (``args.derivation`` names the rule book's derivation, else :func:`derivation_for`
    picks it), tile sizes not in ``--sizes`` chosen by ``nc.optimal`` at the shared memory per thread block of
    the hardware model.  Returns a :class:`Planned`."""
    label, d = algorithm(args.algorithm, name=args.name)
    derivation = getattr(args, "derivation", None)
    if derivation:
        book = rulebook()
        if derivation not in book.derivations:
            raise CLIError(f"unknown derivation {derivation!r}: the rule book's are {', '.join(book.derivations)}")
        d = book.derivations[derivation](d).diagram
    elif not any(isinstance(b, Region) for _, b in layers(d)):
        d = derivation_for(label, d).diagram  # a function: plan the algorithm the rules derive from it
    sizes = dict(Sizes(parse_sizes(args.sizes)).of(d))
    needed = sorted({str(s) for arr in d.dom.inside for a in arr.axes if not isinstance(a.size, int)
                     for s in a.size.free_symbols} - set(sizes))
    if needed:
        raise CLIError(f"the plan needs the size of every input axis: add {', '.join(f'{n}=…' for n in needed)} "
                       f"to --sizes")
    gpu = load_hardware(hardware if hardware is not None else args.hardware)
    bytes_per_value = max((a.dtype.bytes for a in (*d.dom.inside, *d.cod.inside)), default=4)
    capacity = int(gpu.smem_per_block) // bytes_per_value
    chosen = {k: v for k, v in _tiles_by_optimum(d, sizes, capacity).items() if k not in sizes}
    p = plan(d, {**sizes, **chosen}, memory={1: capacity})
    return Planned(label, p, chosen, capacity, gpu, bytes_per_value)


@dataclass(frozen=True)
class Planned:
    """A plan as the CLI made it: the tiles it chose and the memory it chose them for."""

    label: str
    plan: object
    chosen: dict
    capacity: int
    gpu: object
    bytes_per_value: int

    def chosen_line(self) -> str:
        return (f"# tiles {self.chosen} chosen by nc.optimal for level 1 = {self.capacity} values "
                f"({self.gpu.name} shared memory per thread block, {self.bytes_per_value} B per value)")


def cmd_plan(args):
    made = planned(args)
    p = made.plan
    if args.json:
        data = json.loads(render(p, fmt="json"))
        data["tiles_chosen"] = made.chosen
        data["capacity"] = {"level": 1, "values": made.capacity, "hardware": made.gpu.name}
        print(json.dumps(data, indent=1, ensure_ascii=False))
    else:
        if made.chosen:
            print(made.chosen_line())
        print(render(p))
    return 0


def cmd_reproduce(args):
    out = writable_folder(args.out)
    book = reproduce(out, progress=not args.no_progress)
    counts = book.counts()
    if args.json:
        print(json.dumps({"claims": [c.as_json() for c in book.claims], "counts": counts, "ok": book.ok},
                         indent=1))
    else:
        print(f"{len(book.claims)} claims: {counts['reproduced']} reproduced, {counts['erratum']} errata "
              f"(corrected values computed), {counts['differs']} differ")
        for c in book.claims:
            if c.status == "differs":
                print(f"  DIFFERS {c.id} ({c.section}): {c.what}: paper {c.paper}, library {c.library}")
        print(f"report: {os.path.join(out, 'report.md')} and {os.path.join(out, 'report.json')} "
              f"(errata explained in {os.path.join(out, 'errata.md')})")
    return 0 if book.ok else 1


def cmd_table(args):
    """``napkin table config|clock|overlap``: the paper's configuration (or a variant) on a hardware model;
    ``napkin table cluster``: :mod:`napkin_cat.cli.cluster`."""
    from fractions import Fraction
    if args.which == "cluster":
        return _emit(args, *cluster_table(args))
    gpu = load_hardware(args.hardware)
    if args.d < 1:
        raise CLIError(f"--d {args.d}: the head dimension must be a positive int")
    if args.which == "config":
        if args.n is not None and args.n < 1:
            raise CLIError(f"--n {args.n}: the number of {paper.hierarchy_of(gpu).scaling_unit}s per block must be "
                           "a positive int")
        if args.variant.startswith("fa3-"):    # FlashAttention-3 (Appendix A.5): its hierarchy, sizes, strategy
            strategy = args.strategy or ("intra" if args.variant == "fa3-fp16" else "inter")
            name = f"{args.variant[4:]}-{strategy}"
            if name not in paper.FA3:
                raise CLIError(f"--variant {args.variant} --strategy {strategy}: FlashAttention-3's configurations are "
                               f"{', '.join(sorted(paper.FA3))}")
            c = paper.fa3_configuration(name, gpu, d=args.d)
        elif args.strategy:
            raise CLIError("--strategy chooses a FlashAttention-3 configuration: use it with --variant fa3-fp16 "
                           "or fa3-fp8")
        else:
            c = paper.configuration(gpu, variant=args.variant, d=args.d, n=args.n or 1)
        checked = c.check(gpu)
        is_paper = args.variant == "paper" and args.d == 128 and gpu.name == "h100-sxm5"
        fa3 = args.variant.startswith("fa3-")    # FlashAttention-3's block holds its two consumer warpgroups
        t = paper.table(c, gpu, n=args.n or (None if fa3 else "fit"), printed=is_paper, strict=not args.no_strict)
        if args.json:
            data = t.to_dict()
            data["variant"] = args.variant
            data["divisor_constraints"] = [{"tile": d.tile, "divisor": str(d.divisor), "reason": d.reason}
                                           for d in checked]
            data["tail"] = [v.name for v in c.variables(tail=True)]
            return _emit(args, data, [])
        text = [t.to_text(), f"divisor constraints: {len(checked)} checked, all satisfied"]
        tail = c.variables(tail=True)
        if tail:
            text.append("after the loop (reusing the loop's storage): " + ", ".join(
                f"{v.name} [{v.size}] on {c.hierarchy.level(v.level).name}" for v in tail))
        return _emit(args, {}, text)
    overhead = None
    if args.overhead:
        overhead = {}
        for part in args.overhead.split(","):
            key, _, value = part.partition("=")
            try:
                overhead[key.strip()] = Fraction(value.strip())
            except (ValueError, ZeroDivisionError):
                raise CLIError(f"malformed --overhead {args.overhead!r}: {part!r} is not pipeline=fraction "
                               "(e.g. special=2/3,general=1)") from None
            if overhead[key.strip()] < 0:
                raise CLIError(f"--overhead {part!r}: an overhead is a fraction ≥ 0")
    if args.which == "clock":
        t = paper.clock(gpu, variant=args.variant, d=args.d)
    else:
        t = paper.overlap(gpu, variant=args.variant, d=args.d, overhead=overhead)
    return _emit(args, t.to_dict(), [t.to_text()])


# ---------------------------------------------------------------------------------------------- napkin codegen
TARGETS = ("triton", "cuda", "c")
#: the default architecture ``--compile`` builds for, per GPU target
DEFAULT_ARCH = {"cuda": "sm_90", "triton": "sm_90"}
#: ``--run``'s tolerance on the largest error, relative to the largest output value, per output format
RUN_TOLERANCE = {"fp32": 1e-4, "fp16": 1e-2}


def _kernel(target, p, gpu):
    if target == "cuda":
        return codegen.cuda(p, hardware=gpu)
    return codegen.triton(p) if target == "triton" else codegen.c(p)


def _compile_report(target, k, arch, p) -> tuple[dict, list]:
    """Compile ``k``; the report (a dict) and its lines beside the plan's shared memory."""
    if target == "c":
        path = str(k.library_path())
        return {"library": path}, [f"compiled: {path} (cc -O3 -fopenmp, cached by the source's hash)"]
    if target == "cuda":
        r = k.compile(arch=arch)
        lines = [f"{r['arch']} ({r['hardware']}): {r['registers']} registers, {r['spills']} B spilled; "
                 f"the plan: {p.smem_bytes} B shared memory per thread block (smem_bytes), "
                 f"{r['estimate']['registers']} staged values per thread"]
        for name, info in k.printer.kernels.items():
            ptxas = r["kernels"].get(name, {}).get("smem_static", 0)
            if info["dynamic"]:
                lines.append(f"  {name}: {info['smem']} B dynamic shared memory (extern __shared__, past the 48 KiB "
                             f"static window; the launch asks for it), ptxas counts {ptxas} B static")
            else:
                same = "=" if ptxas == info["smem"] else "≠"
                lines.append(f"  {name}: ptxas reports {ptxas} B static shared memory {same} the arena's "
                             f"{info['smem']} B")
        r["dynamic_smem"] = {n: i["smem"] for n, i in k.printer.kernels.items() if i["dynamic"]}
        return r, lines
    r = k.compile(arch=arch)
    return r, [f"triton sm_{r['arch']} ({r['num_warps']} warps, {r['num_stages']} stages): {r['smem']} B shared "
               f"memory; the plan: {r['plan_smem']} B (Triton keeps accumulators in registers and buffers the "
               f"stream's loads once per pipelining stage: {r['stream_loads']} B per stage)"]


def _run_report(target, k, p, seed) -> tuple[dict, list, bool]:
    """Run ``k`` and the numpy runner ``p`` on the same random inputs; the largest error of each output."""
    import sympy
    rng = np.random.default_rng(seed)
    xs = [rng.standard_normal(tuple(int(sympy.sympify(e).subs(p.sizes)) for _, e in p.variable_map[n].shape))
          .astype(k.numpy_dtype(n)) for n in p.inputs]
    got, want = k(*xs), p(*xs)
    got, want = (list(v) if isinstance(v, tuple) else [v] for v in (got, want))
    rows, ok = [], True
    for name, g, w in zip(p.outputs, got, want):
        g, w = np.asarray(g, dtype=np.float64), np.asarray(w, dtype=np.float64)
        err, scale = float(np.abs(g - w).max(initial=0.0)), float(np.abs(w).max(initial=0.0))
        dtype = p.variable_map[name].dtype
        tol = RUN_TOLERANCE.get(dtype, 1e-2) * max(scale, 1.0)
        ok &= err <= tol
        rows.append({"output": name, "dtype": dtype, "max_error": err, "max_value": scale, "tolerance": tol,
                     "ok": err <= tol})
    lines = [f"run on random inputs (seed {seed}) against the numpy runner: {r['output']} ({r['dtype']}) "
             f"max |error| = {r['max_error']:.3g} (largest |value| {r['max_value']:.3g}; "
             f"tolerance {r['tolerance']:.3g}) {'ok' if r['ok'] else 'TOO LARGE'}" for r in rows]
    return {"seed": seed, "outputs": rows, "ok": ok}, lines, ok


def cmd_codegen(args):
    """``napkin codegen``: plan the algorithm as ``napkin plan`` does, print the kernel of ``--target``, save it
    with its launcher (``--out``), compile it (``--compile``) or run it against the numpy runner (``--run``)."""
    target = args.target
    compiling = args.compile is not None
    arch = DEFAULT_ARCH.get(target) if args.compile == "default" else args.compile
    if target == "c" and arch is not None:
        raise CLIError(f"--compile {arch}: the c target compiles for this CPU; give --compile without an architecture")
    if target == "cuda" and args.run:
        raise CLIError("--run needs a GPU for the cuda target (none here): use --compile to check it with ptxas, "
                       "or --target c / triton to run the same plan")
    hardware = args.hardware
    if hardware is None and compiling and target != "c":
        hardware = model_for(arch, load_hardware("h100-sxm5")).name   # tiles chosen for the GPU compiled for
    if args.algorithm in rulebook().derivations and not args.algorithm.endswith(".py"):
        raise CLIError(f"{args.algorithm!r} is a derivation, not an algorithm: give the function it derives from "
                       f"and name it, e.g. `napkin codegen attention --derivation {args.algorithm} --target {target}`")
    made = planned(args, hardware=hardware or "h100-sxm5")
    p = made.plan
    k = _kernel(target, p, made.gpu)
    data = {"algorithm": made.label, "target": target, "sizes": {str(a): v for a, v in p.sizes.items()},
            "tiles_chosen": made.chosen, "capacity": {"level": 1, "values": made.capacity, "hardware": made.gpu.name},
            "smem_bytes": p.smem_bytes}
    text = [made.chosen_line()] if made.chosen else []
    show_source = not (args.out or compiling or args.run)
    if args.out:
        paths = [str(x) for x in k.save(writable_folder(args.out))]
        data["files"] = paths
        text.append(f"{target} kernel and launcher written: {', '.join(paths)}")
    elif show_source or args.json:
        data["source"] = k.source
    ok = True
    if compiling:
        data["compile"], lines = _compile_report(target, k, arch, p)
        text += lines
    if args.run:
        data["run"], lines, ok = _run_report(target, k, p, args.seed)
        text += lines
    if args.json:
        print(json.dumps(data, indent=1, default=str))
    elif show_source:
        if text:      # the tile choice on stderr: stdout is the kernel (napkin codegen … > kernel.c)
            print("\n".join(text), file=sys.stderr)
        print(k.source, end="" if k.source.endswith("\n") else "\n")
    else:
        print("\n".join(text))
    return 0 if ok else 1
