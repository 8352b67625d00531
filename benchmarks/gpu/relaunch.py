"""A printed kernel relaunched as the time model times it: each kernel at the model's threads.

The printer launches every kernel of a plan with one ``num_warps``. It takes them from the largest product's rows
(``codegen/triton/host.num_warps``). The time model times each kernel at its own issuing threads. Its rows are the
product's rows as its cost record orders the operands (``predict.KernelForm``). The two disagree on the backward's
dK, dV kernel: the model gives it 256 threads; at the dQ kernel's g_q = 64 the printer launches it with 4 warps
(``results/residency-3b7d25755447.md``). ``run.py --relaunch`` times each backward pass both ways. It runs the same
printed kernels with only the launcher's options rewritten (:func:`relaunched`), and gates them as the pass itself
is gated. That is what decides whether the printer should follow the model or the model the printer.

>>> src = '''def nc_run(a):
...     kernel = nc_kernel0 if (n) % 64 == 0 else nc_kernel0_ragged
...     kernel[(g,)](a, n, num_warps=8, num_stages=2)
...     nc_kernel1[(g,)](a, n, num_warps=8, num_stages=2)
...     return a,'''
>>> print(relaunched(src, {"nc_kernel0": (8, 2), "nc_kernel1": (4, 2)}).splitlines()[3])
    nc_kernel1[(g,)](a, n, num_warps=4, num_stages=2)
"""
from __future__ import annotations

import re

import napkin_cat as nc

_CHOSEN = re.compile(r"^\s*kernel = (nc_kernel\d+) if ")
_CALL = re.compile(r"^\s*(nc_kernel\d+|kernel)\[\(.*num_warps=(\d+), num_stages=(\d+)\)$")


def model_shapes(plan, kernel, model) -> tuple[dict | None, str]:
    """``(shapes, why)``: per printed launch, ``(num_warps, num_stages)`` with the warps the time model times it at
    (its threads / 32) and the stages as printed; None, and why, where the model's kernels are not the printed
    launches one to one (a split's combine is a launch the model does not time apart)."""
    predicted = nc.hardware.predict(plan, model)
    names = [launch.name for launch in kernel.printer.kernel_launches()]
    if any(kt.combine is not None for kt in predicted.kernels) or len(names) != len(predicted.kernels):
        return None, f"{len(predicted.kernels)} timed kernels (a combine among them) for {len(names)} launches"
    return {n: (kt.bytes["threads"] // 32, kernel.printer.num_stages) for n, kt in zip(names, predicted.kernels)}, ""


def relaunched(source: str, shapes: dict) -> str:
    """``source`` (a printed Triton module) with each kernel's launch options set to ``shapes`` (name → ``(num_warps,
    num_stages)``); every other line as printed.  A launch the source has and ``shapes`` lacks is refused."""
    out, chosen = [], None
    for line in source.splitlines():
        m = _CHOSEN.match(line)
        if m:
            chosen = m.group(1)
        call = _CALL.match(line)
        if call:
            name = chosen if call.group(1) == "kernel" else call.group(1)
            if name not in shapes:
                raise KeyError(f"no launch shape for {name}: shapes are given for {sorted(shapes)}")
            warps, stages = shapes[name]
            line = re.sub(r"num_warps=\d+, num_stages=\d+\)$", f"num_warps={warps}, num_stages={stages})", line)
        out.append(line)
    return "\n".join(out) + ("\n" if source.endswith("\n") else "")
