"""Probes of the device the time model's assumptions are tested against, measured once per run beside the ceilings
(:func:`measure.environment`), by kernels that are not the library's (a second route to the model's terms):

* ``launch_s``: one launch of an empty Triton kernel from Python, back to back (``do_bench``'s median): the
  seconds a kernel costs before it does anything (the model's ``launch``, 4 µs by assumption);
* ``trips``: HBM read bandwidth of a streaming reduction whose every program reads ``T`` tiles of 128 × 128 bf16
  (32 KiB) one after another (a software pipeline of Triton's stages) and writes one number, over the same 1 GiB,
  for ``T`` = 1, 2, 4, 16, 64: the bandwidth a kernel of ``T`` trips per program reaches.  The model charges bytes
  at the copy's bandwidth whatever ``T`` (item 7 of the GPU notes: decoding's pick has ``T`` = 1).

Every function needs a GPU; :func:`probes` returns them all as one dict for the results' ``"probes"``.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

import measure

TILE = 128
TRIPS = (1, 2, 4, 16, 64)


@triton.jit
def _noop(x):
    pass


@triton.jit
def _stream(src, dst, T: tl.constexpr, TILE: tl.constexpr):
    """Program p sums tiles p·T … p·T + T − 1 of ``src`` (TILE × TILE each, contiguous) into ``dst[p]``."""
    p = tl.program_id(0)
    r = tl.arange(0, TILE)
    offs = r[:, None] * TILE + r[None, :]
    acc = tl.zeros((TILE, TILE), dtype=tl.float32)
    for t in range(T):
        base = (p.to(tl.int64) * T + t) * TILE * TILE
        acc += tl.load(src + base + offs).to(tl.float32)
    tl.store(dst + p, tl.sum(acc))


def launch_seconds() -> float:
    """Seconds per launch of an empty kernel (one program), launched back to back from Python."""
    x = torch.empty(1, device="cuda")
    return measure.bench(lambda: _noop[(1,)](x))["median"]


def trip_bandwidth(total_bytes: int = 2 ** 30) -> dict:
    """``{T: bytes/s}``: the streaming reduction's read bandwidth at ``T`` tiles per program (see the module)."""
    tiles = total_bytes // (TILE * TILE * 2)
    src = torch.randn(tiles * TILE * TILE, device="cuda").to(torch.bfloat16)
    out = {}
    for T in TRIPS:
        dst = torch.empty(tiles // T, device="cuda")
        t = measure.bench(lambda: _stream[(tiles // T,)](src, dst, T=T, TILE=TILE))["median"]
        out[T] = tiles * TILE * TILE * 2 / t
    return out


def probes() -> dict:
    """Every probe, for a run's results (``"probes"``); a probe that fails says why instead."""
    out = {}
    for name, fn in (("launch_s", launch_seconds), ("trips_bytes_per_s", trip_bandwidth)):
        try:
            out[name] = fn()
        except Exception as e:     # a probe that cannot run is reported, the run goes on
            out[name] = f"failed: {type(e).__name__}: {str(e)[:300]}"
    return out
