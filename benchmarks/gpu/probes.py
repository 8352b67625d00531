"""Probes of the device the time model's assumptions are tested against, measured once per run beside the ceilings
(:func:`measure.environment`), by kernels that are not the library's (a second route to the model's terms):

* ``launch_s``: one launch of an empty Triton kernel from Python, back to back (``do_bench``'s median): the
  seconds a kernel costs before it does anything (the model's ``launch``, 4 µs by assumption);
* ``wave_s``: one wave of one-trip blocks (one per SM, each reading one tile and writing one number) less an
  empty launch and the tiles' bytes at the copy's bandwidth: the seconds a wave waits before its work overlaps
  (the model's ``WAVE``, fitted to run 6's decoding sweep; this is its second route);
* ``block_bytes_per_s``: one block per SM (and two) streaming 256 tiles each: what one block reads per second
  alone on its SM (the model assumes a block alone gets its SM's share of HBM);
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


def _sms() -> int:
    return torch.cuda.get_device_properties(0).multi_processor_count


def wave_seconds(launch_s: float, hbm: float) -> float:
    """One wave of one-trip blocks less an empty launch and its bytes at ``hbm`` (see the module)."""
    n = _sms()
    src = torch.randn(n * TILE * TILE, device="cuda").to(torch.bfloat16)
    dst = torch.empty(n, device="cuda")
    t = measure.bench(lambda: _stream[(n,)](src, dst, T=1, TILE=TILE, num_warps=8))["median"]
    return t - launch_s - src.numel() * 2 / hbm


def block_bandwidth(trips: int = 256) -> dict:
    """``{k: bytes/s of one block}`` with ``k`` blocks per SM, each streaming ``trips`` tiles (8 warps)."""
    n, out = _sms(), {}
    for k in (1, 2):
        src = torch.randn(k * n * trips * TILE * TILE, device="cuda").to(torch.bfloat16)
        dst = torch.empty(k * n, device="cuda")
        t = measure.bench(lambda: _stream[(k * n,)](src, dst, T=trips, TILE=TILE, num_warps=8))["median"]
        out[k] = trips * TILE * TILE * 2 / t
    return out


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


def probes(hbm: float) -> dict:
    """Every probe, for a run's results (``"probes"``; ``hbm``: the copy's bandwidth measured); a probe that fails
    says why instead."""
    out = {}
    for name, fn in (("launch_s", launch_seconds),
                     ("wave_s", lambda: wave_seconds(out["launch_s"], hbm)),
                     ("block_bytes_per_s", block_bandwidth), ("trips_bytes_per_s", trip_bandwidth)):
        try:
            out[name] = fn()
        except Exception as e:     # a probe that cannot run is reported, the run goes on
            out[name] = f"failed: {type(e).__name__}: {str(e)[:300]}"
    return out
