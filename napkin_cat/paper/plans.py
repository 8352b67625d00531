"""§5.1 reproduced by running: the plans of the derived algorithms count the transfers of §3's formulas, and their
kernels compute what the plans compute.

§5.1 (From Diagrams to Pseudocode): the expansion of a streamed algorithm "allows us to pre-allocate memory to
derive the exact memory usages, as well as per-group transfer and compute costs".  Here each algorithm of §3 is
derived by the rule book, planned (``nc.plan``) at concrete sizes, and *run*: the instrumented runner counts the
values its loads and stores move and the values live on chip at once, from the arrays it handles.  Those counts
are the library's values; the paper's are its printed formulas (Figs. dot_product_streamable, softmax_streamable)
at the same sizes and tiles.  The tiles come from the library: the large-M optimum of §3 (``g_q = M/2d``,
``g_a = g_c = √M``) evaluated at a memory ``M``, and the exact integer optimum at that ``M`` (errata D-12: the
printed forms are large-M bounds; the exact optimum moves at least as much).

The kernels: the C kernel printed from the plan (``nc.codegen.c``) is compiled and run on the same inputs as
the plan's numpy run; the CUDA kernel is compiled by ``nvcc`` and ptxas's shared memory is compared with the
plan's.  A machine without a C compiler or ``nvcc`` skips those claims and the report says so.

>>> from napkin_cat.paper.ledger import Ledger
>>> from napkin_cat.paper.context import Context
>>> book = Ledger(); section_5_1(book, Context(out=None), kernels=False, cases=("matmul",))
>>> book.ok, sorted(c.status for c in book.claims if c.id.startswith("S5.1-matmul-H"))
(True, ['reproduced', 'reproduced'])
"""
from __future__ import annotations

import numpy as np
import sympy

from napkin_cat.cost.iocost import cost
from napkin_cat.cost.numeric import at
from napkin_cat.cost.optimum import optimal
from napkin_cat.errors import NapkinError
from napkin_cat.paper.context import M, S
from napkin_cat.plan.program import plan
from napkin_cat.codegen import ToolNotFoundError, c as c_kernel, cuda as cuda_kernel

a, b, c, q, x, d = S(*"abcqxd")
g_a, g_c, s_b, g_q, s_x = S("g_a", "g_c", "s_b", "g_q", "s_x")

#: (name, derivation attribute of the context, section, sizes, memory M in values, the paper's printed formulas)
CASES = (
    ("attention", "flash", "§3.2 Fig. softmax_streamable", {"q": 512, "x": 512, "d": 64}, 8192,
     {"H": 2 * q * d + 2 * x * d * q / g_q, "H*": 2 * q * d + 4 * x * q * d ** 2 / M,
      "M": 2 * g_q * d + 2 * s_x * d, "tiles": "g_q = M/2d"}),
    ("matmul", "tiled_matmul", "§3.1 Fig. dot_product_streamable", {"a": 256, "b": 256, "c": 256}, 4096,
     {"H": a * b * c * (1 / g_c + 1 / g_a) + a * c, "H*": 2 * a * b * c / sympy.sqrt(M) + a * c,
      "M": g_a * g_c + g_a * s_b + s_b * g_c, "tiles": "g_a = g_c = √M"}),
)


def _tex(expr) -> str:
    return f"${sympy.latex(expr)}$"


def _inputs(p, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(tuple(int(sympy.sympify(e).subs(p.sizes)) for _, e in p.variable_map[n].shape))
            .astype(np.float32) for n in p.inputs]


def _at(expr, sizes: dict, memory=None):
    env = {S(k): v for k, v in sizes.items()}
    if memory is not None:
        env[M] = memory
    return sympy.sympify(expr).subs(env)


def _counted(p, xs):
    """The instrumented run's counts and the cost functor at the plan's sizes (two routes to H and M), and the
    run's outputs (what the kernels must compute)."""
    outputs, n = p.run(*xs)
    functor = at(p.diagram, {str(k): v for k, v in p.sizes.items()})
    return n, functor, outputs


def section_5_1(book, ctx, *, kernels: bool = True, cases: tuple | None = None):
    """§5.1: the derived plans' counted transfers and memory against §3's formulas; their kernels against them
    (``cases``: the names of the :data:`CASES` to run, all by default)."""
    known = [case[0] for case in CASES]
    for name in cases or ():
        if name not in known:
            raise NapkinError(f"§5.1 has no case {name!r}; its cases are {known}")
    curves = {}
    for name, attr, sec, sizes, memory, paper in CASES:
        if cases is not None and name not in cases:
            continue
        derivation = getattr(ctx, attr)
        large = ctx.optimum_of(derivation)
        tiles = {str(k): _at(v, sizes, memory) for k, v in large.sizes.items()}
        if not all(t.is_Integer and t > 0 for t in tiles.values()):
            raise NapkinError(f"the large-M tiles {tiles} of {name} at M = {memory} are not positive integers: "
                              "choose sizes and M they divide")
        at_large = {**sizes, **{k: int(t) for k, t in tiles.items()}}
        p = plan(derivation.diagram, at_large)
        xs = _inputs(p)
        n, functor, _ = _counted(p, xs)
        where = ", ".join(f"{k}={v}" for k, v in at_large.items())
        book.number(f"S5.1-{name}-H-star-counted", sec, f"{name}: H ≥ {_tex(paper['H*'])} is met at the large-M "
                    f"tiles {paper['tiles']} (M = {memory}): the plan's run counts",
                    paper=int(_at(paper["H*"], sizes, memory)), library=n.transfers[1], abs_=0, note=f"at {where}")
        book.fact(f"S5.1-{name}-counted-is-functor", "§5.1", f"{name}: the plan's run moves and holds what the cost "
                  "functor reads off the diagram (H and M at level 1)", paper="pseudocode gives exact memory usage "
                  "and transfer costs", library=n.transfers == functor.H and n.peak == {1: functor.M[1]},
                  note=f"counted H = {n.transfers[1]}, M = {n.peak[1]}; functor H = {functor.H[1]}, "
                       f"M = {functor.M[1]} at {where}")
        _memory(book, f"S5.1-{name}-M-large-tiles", sec, name, paper, derivation, n, functor, at_large, where)
        peak_large = n.peak[1]
        exact = optimal(cost(derivation.diagram), memory=memory, sizes=sizes)
        at_exact = {**sizes, **{str(k): int(v) for k, v in exact.sizes.items()}}
        p = plan(derivation.diagram, at_exact, memory={1: memory})
        n, functor, outputs = _counted(p, xs)
        where = ", ".join(f"{k}={v}" for k, v in at_exact.items())
        book.number(f"S5.1-{name}-H-counted", sec, f"{name}: H = {_tex(paper['H'])}, counted by running the plan at "
                    f"the exact optimum's tiles for M = {memory}", paper=int(_at(paper["H"], at_exact)),
                    library=n.transfers[1], abs_=0, note=f"at {where}")
        book.erratum(f"S5.1-{name}-exact-optimum", sec, f"{name}: H* at M = {memory} (D-12: the printed "
                     f"{_tex(paper['H*'])} is a large-M bound; tiles that fit M move at least as much)",
                     paper=int(_at(paper["H*"], sizes, memory)), library=n.transfers[1], corrected=int(exact.H),
                     erratum="D-12", note=f"library: counted at {where}; corrected: nc.optimal's integer optimum")
        _memory(book, f"S5.1-{name}-M-counted", sec, name, paper, derivation, n, functor, at_exact, where)
        book.fact(f"S5.1-{name}-tiles-fit", sec, f"{name}: {paper['tiles']} is a large-M approximation (D-12): at "
                  f"M = {memory} those tiles hold more than M, the exact optimum's fit", paper=paper["tiles"],
                  library=peak_large > memory >= n.peak[1],
                  note=f"counted peaks: {peak_large} values at the large-M tiles, {n.peak[1]} at {where}")
        if kernels:
            _kernels(book, ctx, name, p, xs, outputs, where)
        curves[name] = (derivation, sizes, at_exact)
    if "attention" in curves:
        _curve(book, ctx, curves["attention"])


def _memory(book, id, sec, name, paper, derivation, n, functor, sizes, where):
    """The printed memory model against the counted peak: equal where the cost functor's M is the printed one,
    else an erratum (D-12) whose corrected value is the cost functor's M at the sizes."""
    printed = int(_at(paper["M"], sizes))
    if sympy.expand(cost(derivation.diagram).M[1] - paper["M"]) == 0:
        book.number(id, sec, f"{name}: M = {_tex(paper['M'])}, the most values the run holds on chip at once",
                    paper=printed, library=n.peak[1], abs_=0, note=f"at {where}")
    else:
        book.erratum(id, sec, f"{name}: M ≥ {_tex(paper['M'])} (D-12: the run also holds the score tile and per-row "
                     "auxiliaries)", paper=printed, library=n.peak[1], corrected=functor.M[1], erratum="D-12",
                     note=f"library: the counted peak; corrected: the cost functor's M; at {where}")


def _kernels(book, ctx, name, p, xs, outputs, where):
    """The C kernel's output against the plan's numpy run (``outputs``: what the counted run returned); the CUDA
    kernel's shared memory against the plan's."""
    try:
        got = c_kernel(p)(*xs)
    except ToolNotFoundError as missing:
        ctx.note(f"{name}: the C kernel was not run ({missing})")
    else:
        want = outputs[0] if len(outputs) == 1 else outputs
        err = float(np.abs(np.asarray(got, np.float64) - want).max())
        scale = float(np.abs(want).max())
        book.fact(f"S5.1-{name}-c-kernel", "§5.1", f"{name}: the C kernel printed from the plan computes what the plan "
                  "computes (\"as this expansion is built from ... a streamable function, correctness is ensured\")",
                  paper="correct", library=err <= 1e-4 * max(scale, 1.0),
                  note=f"max |error| {err:.2e} against the numpy runner (largest |value| {scale:.3g}; fp32) at {where}")
    try:
        k = cuda_kernel(p)
        report = k.compile(arch="sm_90")
    except ToolNotFoundError as missing:
        ctx.note(f"{name}: the CUDA kernel was not compiled ({missing})")
        return
    static = [i["smem"] for i in k.printer.kernels.values() if not i["dynamic"]]
    book.fact(f"S5.1-{name}-cuda-smem", "§5.1", f"{name}: the CUDA kernel pre-allocates the plan's variables: ptxas's "
              "shared memory per thread block is the plan's exact memory usage, byte for byte",
              paper="exact memory usage", library=bool(static) and report["smem"] == p.smem_bytes == max(static)
              == p.peak_bytes[1], note=f"ptxas (sm_90): {report['smem']} B static shared memory, {report['registers']} "
                                       f"registers, {report['spills']} B spilled; plan: {p.smem_bytes} B at {where}")


def _curve(book, ctx, case):
    """Counted transfers of FlashAttention over g_q beside §3.2's formula (a figure and one claim per point)."""
    derivation, sizes, _ = case
    (_, _, sec, _, _, paper), = (case for case in CASES if case[0] == "attention")
    formula = paper["H"]
    groups = [16, 32, 64, 128, 256]
    counted, printed = [], []
    for g in groups:
        p = plan(derivation.diagram, {**sizes, "g_q": g, "s_x": 64})
        counted.append(p.run(*_inputs(p))[1].transfers[1])
        printed.append(int(_at(formula, {**sizes, "g_q": g})))
    book.fact("S5.1-attention-H-curve", sec, "attention: the counted transfers fall as 1/g_q on the printed "
              f"curve {_tex(formula)}", paper=printed, library=counted == printed,
              note=f"g_q = {groups}, s_x = 64; counted {counted}")
    path = ctx.figure("plan_counts.png")
    if not path:
        return
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib.figure import Figure
    fig = Figure(figsize=(5, 3.2))
    ax = fig.subplots()
    fine = np.geomspace(groups[0], groups[-1], 50)
    ax.plot(fine, [float(_at(formula, {**sizes, "g_q": float(g)})) for g in fine], "-", label="paper: 2qd + 2xdq/g_q")
    ax.plot(groups, counted, "o", label="counted by running the plan")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("g_q")
    ax.set_ylabel("H: values moved to level 1")
    ax.set_title("FlashAttention (derived), " + ", ".join(f"{k} = {v}" for k, v in sizes.items()) + ", s_x = 64")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


SECTIONS = [("§5.1 plans and kernels", section_5_1)]
