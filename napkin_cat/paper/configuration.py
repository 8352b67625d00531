"""§5.5-5.6 (Tables 1-2): the paper's configuration, made by the library and tabulated.

The inputs are what the paper states: attention with FP8 queries and keys and FP16 values, scores,
probabilities and output (Table 1's quantisation), derived into FlashAttention by the rule book; the
toy hierarchy of the GPU (Hopper: SMEM per block, tensor cores per warpgroup, registers per thread);
Table 1's caption sizes ``t_q = 1, s_x = u_x = 64, d = 128, d′ = 32, d″ = 8`` with ``w_q`` the threads
of the scaling unit times ``t_q`` (128 on Hopper); the split of the output accumulation along ``d``
(``d′`` on the block, ``d″`` on the threads); the sub-loop ``u_x`` of the ``s_x`` stream.  Everything
else, every row and total of Tables 1-2, comes out of :func:`napkin_cat.hardware.configure` and the
hardware model.

>>> c = configuration("h100-sxm5")
>>> t = table(c, "h100-sxm5")
>>> float(t.pool("registers").M_WG) / 1024, t.n, round(float(t.pool("registers").excess_thread))
(74.75, 3, 85)
"""
from __future__ import annotations

from functools import lru_cache

from napkin_cat import library
from napkin_cat.hardware.configured import configure
from napkin_cat.hardware.errors import HardwareError
from napkin_cat.hardware.model import load
from napkin_cat.hardware.toy import hierarchy_of
from napkin_cat.paper import throughput
from napkin_cat.rewriting.registry import rulebook
from napkin_cat.cost.iocost import cost
from napkin_cat.hardware.clock import clock_table_of
from napkin_cat.hardware.overlap import inter, intra, overlap_table, tasks_of
from napkin_cat.plan.ir import Compute, Load, walk

#: number formats: the paper's configuration (Table 1), the same in FP16 throughout (what a GPU without FP8
#: tensor cores runs), and FlashAttention-3's (§6)
FORMATS = {**throughput.FORMATS,
           "fp16": {"Q": "fp16", "K": "fp16", "S": "fp16", "P": "fp16", "V": "fp16", "O": "fp16"}}
#: Table 1's caption (w_q is the scaling unit's threads times t_q: 128 on Hopper)
SIZES = {"t_q": 1, "s_x": 64, "u_x": 64, "d": 128, "d'": 32, "d''": 8}
#: the output accumulation split along d: d' on the block (the tensor cores' D), d'' on the threads
SPLITS = {"d": {"SMEM": "d'", "registers": "d''"}}
#: the s_x stream's sub-loop (§5.2, step 2)
SUBLOOPS = {"x": "u_x"}
#: Table 2's N
N = 3


@lru_cache(maxsize=None)
def flash(variant: str = "paper"):
    """FlashAttention derived by the rule book from attention in ``variant``'s number formats."""
    if variant not in FORMATS:
        raise HardwareError(f"no variant {variant!r}; variants are {sorted(FORMATS)}")
    return rulebook().derivations["flash_attention"](library.attention(formats=FORMATS[variant])).diagram


def sizes_for(gpu, *, d: int = 128, n: int | None = N, **more) -> dict:
    """Table 1's sizes on ``gpu``: its scaling unit's tile ``w_q = threads · t_q``, ``g_q = n · w_q``."""
    gpu = load(gpu)
    h = hierarchy_of(gpu)
    sizes = {**SIZES, "d": d, **more}
    unit = h.scaling_unit
    tile = next((lv.tile for lv in h.levels if lv.unit == unit and lv.tile), None)
    if tile is None:
        raise HardwareError(f"toy hierarchy {h.name!r} names no tile for its scaling unit {unit!r}")
    w = f"{tile}_q"
    sizes.setdefault(w, gpu.threads(unit) * sizes["t_q"])
    if n is not None:
        sizes["g_q"] = n * sizes[w]
    return sizes


def configuration(hardware="h100-sxm5", *, variant: str = "paper", d: int = 128, n: int | None = N, **sizes):
    """The paper's configuration of ``variant`` on ``hardware`` (its toy hierarchy), at head dimension ``d``."""
    gpu = load(hardware)
    s = sizes_for(gpu, d=d, n=n if n is not None else 1, **sizes)
    return configure(flash(variant), hierarchy_of(gpu), s, axis="q", splits=SPLITS, subloops=SUBLOOPS)


def d01_row(configured) -> str:
    """Table 1's ``A`` (weighted scores for the tensor cores): the value piped from the threads to the tensor
    cores through SMEM (errata D-01: the paper prints 8192 B for it, its size gives 16384 B)."""
    threads = configured.hierarchy.unit_level("thread")
    found = [p.var for p in configured.pipes if p.source == threads.name
             and any(configured.hierarchy.level(t).offers == ("tensor",) or "tensor" in
                     configured.hierarchy.level(t).offers for t in p.targets)]
    if len(found) != 1:
        raise HardwareError(f"expected one value piped from {threads.name} to the tensor cores, found {found}")
    return found[0]


def table(configured, hardware="h100-sxm5", *, n: int | None = None, printed: bool = True, strict: bool = True):
    """Tables 1-2; with ``printed``, also Table 2 as the paper prints it (errata D-01: A = 8192 B)."""
    over = {d01_row(configured): (8192, "errata D-01")} if printed else None
    return configured.table(hardware, n=n, printed=over, strict=strict)


# ---------------------------------------------------------------------------------------------- Table 3, §5.7
#: the stream tile of Table 3 (the paper's configuration) and of FlashAttention-3 (§6.1: s_x = 128)
STREAM_TILE = {"paper": 64, "fp16": 64, "fa3-fp16": 128, "fa3-fp8": 128}
#: §5.7 (Fig. three_warpgroup): 50% overhead for SoftMax, 100% for the FP16 multiply-add
OVERHEAD = {"special": "1/2", "general": "1"}


def clock(hardware="h100-sxm5", *, variant: str = "paper", d: int = 128):
    """Table 3 of ``variant``'s FlashAttention on ``hardware`` (its cost functor's ops, the model's rates)."""
    gpu = load(hardware)
    sizes = {"d": d, "s_x": STREAM_TILE[variant], "g_q": sizes_for(gpu, d=d, n=1)["g_q"]}
    return clock_table_of(cost(flash(variant)), gpu, sizes)


def overlap(hardware="h100-sxm5", *, variant: str = "paper", d: int = 128, overhead: dict | None = None):
    """The overlap strategies of §5.7 on Table 3's columns, with ``overhead`` per pipeline (default §5.7's)."""
    from fractions import Fraction
    over = {k: Fraction(v) for k, v in (OVERHEAD if overhead is None else overhead).items()}
    return overlap_table(clock(hardware, variant=variant, d=d), overhead=over)


# ---------------------------------------------------------------------------------------------- the ledger
#: Table 1 as the paper prints it: name → (Q., level, M_TB, M_WG) in bytes
TABLE1 = {"Q": ("fp8", "SMEM", 0, 16384), "K": ("fp8", "SMEM", 16384, 0), "V": ("fp16", "SMEM", 32768, 0),
          "S": ("fp16", "registers", 0, 16384), "P": ("fp16", "SMEM", 0, 16384),
          "P'": ("fp16", "registers", 0, 16384), "A": ("fp16", "SMEM", 0, 8192),
          "α": ("fp16", "registers", 0, 768), "O'": ("fp16", "registers", 0, 32768),
          "D": ("fp16", "registers", 0, 8192), "ΔO": ("fp16", "SMEM", 0, 8192),
          "ΔO'": ("fp16", "registers", 0, 2048)}
#: Table 2 as printed: pool → (M_max, M_TB, M_WG, N_max, excess per TB, per WG (KB), per thread (B))
TABLE2 = {"SMEM": (227, 48, 48, 3.7, 35, 11.67, None), "registers": (256, 0, 74.75, 3.4, 31.75, 10.58, 85)}
#: errata D-01's corrected SMEM column (A = w_q×u_x×2 B = 16384 B): M_WG 56 KB, N_max 3.20, excess 11 KB / 3.67 KB
D01 = {"MWG": 56, "Nmax": 3.20, "excess-TB": 11, "excess-WG": 3.67}


def paper_rows(configured) -> dict:
    """The configured plan's variables under Table 1's names, read off what each variable is: the tiles of
    attention's inputs (Q, K, V in order), the tensor cores' products (S, then D), their pipes through SMEM
    (P, ΔO) and the threads' copies (P′, ΔO′), the SoftMax output piped to the tensor cores (A), the
    accumulator (O′) and the per-row values on the threads (α: μ, z, δ)."""
    c = configured
    p = c.plan
    loads, tensor = {}, []
    for s in walk(p.body):
        if isinstance(s, Load):
            loads.setdefault(s.src.var, s.dst.var)
        if isinstance(s, Compute) and "tensor" in c.hierarchy.level(p.variable_map[s.outs[0].var].level).offers:
            tensor += [r.var for r in s.outs if r.var not in tensor]
    pipes = {x.value: x.var for x in c.pipes}
    rows = {name: loads[f"x{k}"] for k, name in enumerate("QKV")}
    rows["S"], rows["D"] = tensor[0], tensor[1]
    rows["P"], rows["ΔO"] = pipes[rows["S"]], pipes[rows["D"]]
    rows["P'"], rows["ΔO'"] = loads[rows["P"]], loads[rows["ΔO"]]
    rows["A"] = d01_row(c)
    regs = [n for n in c.steady if c.hierarchy.level(p.variable_map[n].level).name == "registers"
            and n not in rows.values()]
    rows["O'"] = next(n for n in regs if p.variable_map[n].role == "state" and len(p.variable_map[n].shape) == 2)
    rows["α"] = tuple(n for n in regs if n != rows["O'"])
    return rows


def section_5_6(book, ctx):
    """§5.5-5.6, Tables 1-2: every row and total from the configured plan and the hardware model (D-01)."""
    sec = "§5.6 Table 1"
    c = configuration("h100-sxm5")
    t = table(c, "h100-sxm5")
    rows = paper_rows(c)
    covered = {n for v in rows.values() for n in (v if isinstance(v, tuple) else (v,))}
    book.fact("S5.6-rows", sec, "Table 1 lists the variables pre-allocated for the loop (12 rows)",
              paper=", ".join(TABLE1), library=covered == set(c.steady) and len(rows) == len(TABLE1),
              note=f"{len(c.steady)} variables of the configured plan's steady state, α = {len(rows['α'])} of them "
                   f"(μ, z, δ); the tail's {len(c.tail)} reuse the loop's storage")
    for name, (dtype, level, tb, wg) in TABLE1.items():
        names = rows[name] if isinstance(rows[name], tuple) else (rows[name],)
        got = [t.row(n) for n in names]
        lib_tb, lib_wg = sum(r.per_tb for r in got), sum(r.per_wg for r in got)
        lib_pool = {r.pool for r in got}
        key = name.replace("'", "p").replace("Δ", "d").replace("α", "alpha")
        book.fact(f"S5.6-{key}-format", sec, f"{name}: quantisation {dtype.upper()}, {level}",
                  paper=f"{dtype}, {level}",
                  library={r.variable.dtype for r in got} == {dtype} and lib_pool == {level},
                  note=f"library: {', '.join(sorted({r.variable.dtype for r in got}))} in {', '.join(lib_pool)}; "
                       f"size {', '.join(str(r.size) for r in got)}")
        what = f"{name}: bytes per thread block and per warpgroup"
        if name == "A":
            book.erratum(f"S5.6-{key}-bytes", sec, what + " (D-01: w_q×u_x×2 B)", paper=(tb, wg),
                         library=(lib_tb, lib_wg), corrected=(0, 16384), erratum="D-01")
        else:
            book.expr(f"S5.6-{key}-bytes", sec, what, paper=(tb, wg), library=(lib_tb, lib_wg))
    sec = "§5.6 Table 2"
    KB = 1024
    for pool, (m_max, m_tb, m_wg, n_max, ex_tb, ex_wg, ex_th) in TABLE2.items():
        got, shown = t.pool(pool), t.printed.pool(pool)
        k = pool[:4].lower()
        book.number(f"S5.6-{k}-Mmax", sec, f"{pool}: M_max (KB)", paper=m_max, library=got.M_max / KB, abs_=0)
        book.number(f"S5.6-{k}-MTB", sec, f"{pool}: M_TB (KB)", paper=m_tb, library=got.M_TB / KB, abs_=0)
        fixed = pool == "SMEM"      # D-01 moves the SMEM column only
        for field, printed, mine, as_printed, digits in (
                ("MWG", m_wg, got.M_WG / KB, shown.M_WG / KB, 0.005),
                ("Nmax", n_max, float(got.N_max), float(shown.N_max), 0.05),
                ("excess-TB", ex_tb, float(got.excess_tb) / KB, float(shown.excess_tb) / KB, 0.005),
                ("excess-WG", ex_wg, float(got.excess_wg) / KB, float(shown.excess_wg) / KB, 0.005)):
            what = f"{pool}: {field.replace('-', ' per ').replace('excess', 'excess at N = 3')}"
            if fixed:
                book.erratum(f"S5.6-{k}-{field}", sec, what + " (D-01)", paper=printed, library=mine,
                             corrected=D01[field], erratum="D-01", abs_=digits,
                             note=f"with A as printed (8192 B) the library gives {as_printed:.4g}")
                book.number(f"S5.6-{k}-{field}-printed", sec, what + " with A = 8192 B as printed", paper=printed,
                            library=as_printed, abs_=digits)
            else:
                book.number(f"S5.6-{k}-{field}", sec, what, paper=printed, library=mine, abs_=digits)
        if ex_th is not None:
            book.number(f"S5.6-{k}-thread", sec, f"{pool}: excess bytes per thread at N = 3", paper=ex_th,
                        library=float(got.excess_thread), abs_=0.5)
    book.fact("S5.6-three-fit", sec, "three warpgroups fit; the register limit (3.4) binds",
              paper="N = 3", library=t.n == 3 and t.pool("registers").N_max < t.printed.pool("SMEM").N_max,
              note=f"largest N that fits: {t.n}")


# ---------------------------------------------------------------------------------------------- Appendix A.5
#: FlashAttention-3's configurations (§6, Appendix A.5): its number formats and overlap strategy, on the Hopper toy
#: hierarchy in which threads manipulate tensor-core fragments (``hopper-fragments``: no SMEM pipes), with §6.1's
#: effective g_q = 128 and s_x = 128 held by two consumer warpgroups of 64 rows each (wgmma's m = 64).
FA3 = {"fp16-intra": ("fa3-fp16", "intra"), "fp8-inter": ("fa3-fp8", "inter"), "fp8-intra": ("fa3-fp8", "intra")}
FA3_HIERARCHY = "hopper-fragments"
FA3_SIZES = {"w_q": 64, "g_q": 128, "s_x": 128}


def fa3_program(name: str, hardware="h100-sxm5", *, d: int = 128):
    """The overlap program of FlashAttention-3's configuration ``name`` on Table 3's columns."""
    if name not in FA3:
        raise HardwareError(f"no FlashAttention-3 configuration {name!r}; they are {sorted(FA3)}")
    variant, strategy = FA3[name]
    tasks = tasks_of(clock(hardware, variant=variant, d=d))
    return intra(tasks) if strategy == "intra" else inter(tasks, warpgroups=FA3_SIZES["g_q"] // FA3_SIZES["w_q"])


def fa3_configuration(name: str, hardware="h100-sxm5", *, d: int = 128, s_x: int | None = None,
                      pipelined: bool = True, program=None):
    """FlashAttention-3's configuration ``name`` (a key of :data:`FA3`): its formats on the fragments hierarchy,
    with the values its overlap strategy keeps in flight buffered (:meth:`Configured.pipelined`)."""
    if name not in FA3:
        raise HardwareError(f"no FlashAttention-3 configuration {name!r}; they are {sorted(FA3)}")
    variant, _ = FA3[name]
    sizes = {**FA3_SIZES, "d": d}
    if s_x is not None:
        sizes["s_x"] = s_x
    c = configure(flash(variant), FA3_HIERARCHY, sizes, axis="q")
    if not pipelined:
        return c
    return c.pipelined(program if program is not None else fa3_program(name, hardware, d=d))


def per_thread(configured, hardware="h100-sxm5") -> float:
    """Register bytes one thread holds (a warpgroup's register bytes over its threads)."""
    t = configured.table(hardware, strict=False)
    return float(t.pool("registers").M_WG) / t.threads


def largest_stream_tile(name: str, hardware="h100-sxm5", *, step: int = 32, upper: int = 512) -> int:
    """The largest ``s_x`` (a multiple of ``step``) whose FlashAttention-3 configuration ``name`` fits one thread's
    registers (0 if none does)."""
    gpu = load(hardware)
    program = fa3_program(name, gpu)
    best = 0
    for s_x in range(step, upper + 1, step):
        if per_thread(fa3_configuration(name, gpu, s_x=s_x, program=program), gpu) <= gpu.register_bytes_per_thread:
            best = s_x
    return best


def appendix_a5(book, ctx):
    """Appendix A.5 and §6: FlashAttention-3's configuration tables from its plans (the image tables of A.5 are not
    in the source, so the claims are the text's: fewer variables, the FP16 intra-warpgroup spill, FP8's room)."""
    sec = "App. A.5"
    gpu = load("h100-sxm5")
    ours = configuration(gpu)
    limit = gpu.register_bytes_per_thread
    for name in FA3:
        c = fa3_configuration(name, gpu)
        book.fact(f"A5-{name}-fewer", sec, f"FlashAttention-3 {name} uses fewer variables than the derived algorithm "
                  "(it manipulates tensor-core data thread-wise)", paper="fewer variables",
                  library=len(c.steady) < len(ours.steady) and not [p for p in c.pipes if p.var in c.steady],
                  note=f"{len(c.steady)} variables, none piped through SMEM, vs {len(ours.steady)} with "
                       f"{len(ours.pipes)} pipes; {per_thread(c, gpu):.0f} B of registers per thread")
    fp16 = fa3_configuration("fp16-intra", gpu)
    alone = fa3_configuration("fp16-intra", gpu, pipelined=False)
    book.fact("A5-fp16-intra-spills", "§6.1", "FP16 intra-warpgroup overlap holds the next iteration's values, "
              "overloading the per-thread registers (spills)", paper="spillage",
              library=per_thread(fp16, gpu) > limit >= per_thread(alone, gpu),
              note=f"{per_thread(fp16, gpu):.0f} B per thread with two iterations in flight, "
                   f"{per_thread(alone, gpu):.0f} B with one; a thread holds {limit} B (255 registers)")
    fp8 = {n: per_thread(fa3_configuration(n, gpu), gpu) for n in ("fp8-inter", "fp8-intra")}
    book.fact("A5-fp8-fits", "§6.2", "FP8 FlashAttention-3 fits its registers with either overlap strategy",
              paper="no spill reported", library=max(fp8.values()) <= limit,
              note=", ".join(f"{n}: {b:.0f} B per thread" for n, b in fp8.items()))
    s8, s16 = largest_stream_tile("fp8-intra", gpu), largest_stream_tile("fp16-intra", gpu)
    book.fact("A5-fp8-intra-large-s_x", "§6.2", "the FP8 intra-warpgroup strategy lets a single warpgroup hold a "
              "large s_x", paper="large s_x", library=s8 >= FA3_SIZES["s_x"] > s16,
              note=f"largest s_x fitting one thread's registers: FP8 intra {s8}, FP16 intra {s16}")


SECTIONS = [("§5.6 Tables 1-2", section_5_6), ("App. A.5 FlashAttention-3 configurations", appendix_a5)]
