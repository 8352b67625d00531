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
from napkin_cat.paper.throughput import FORMATS as _THROUGHPUT_FORMATS
from napkin_cat.rewriting.registry import rulebook

#: number formats: the paper's configuration (Table 1), the same in FP16 throughout (what a GPU without FP8
#: tensor cores runs), and FlashAttention-3's (§6)
FORMATS = {**_THROUGHPUT_FORMATS,
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
