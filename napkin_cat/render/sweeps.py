"""A cluster sweep drawn: each device form's predicted step time against the swept size, the choice marked, and the
sizes where the choice changes.

``plot_cluster_sweep(s, path)`` draws a :func:`napkin_cat.hardware.clustersweep.sweep` on log-log axes (PNG or
SVG) and returns the matplotlib ``Figure``: one thin line per form (where it fits and the rules make it), the
chosen form's points as a thick black line, a dotted vertical line between the two values of each change with its
reason (``time`` or ``memory``).  ``fig.napkin_summary`` lists what was drawn:

>>> import napkin_cat as nc
>>> from napkin_cat.hardware.clustersweep import sweep
>>> c = nc.hardware.cluster("h100-sxm5", devices=2, link="nvlink4")
>>> mm = nc.einsum("n k, k m -> n m", dtype="bf16", out_dtype="fp32")
>>> s = sweep(mm, c, {"k": 1024, "m": 1024}, axes=("n",), values=[64, 4096], compute="transfers")
>>> fig = plot_cluster_sweep(s)
>>> fig.napkin_summary["chosen"], fig.napkin_summary["changes"]
(2, [])
"""
from __future__ import annotations

import os

from napkin_cat.errors import NapkinError
from napkin_cat.render.curves import EXTENSIONS


def plot_cluster_sweep(s, path: str | None = None, *, title: str | None = None):
    """Draw the sweep ``s`` (see the module docstring); save to ``path`` (.png or .svg)."""
    if path is not None and os.path.splitext(path)[1].lower() not in EXTENSIONS:
        raise NapkinError(f"cannot plot to {path!r}: the extension must be one of {', '.join(EXTENSIONS)}")
    from matplotlib.figure import Figure
    fig = Figure(figsize=(9, 5.5))
    ax = fig.add_subplot(1, 1, 1)
    drawn = []
    for label, ts in s.times().items():
        pts = [(v, t) for v, t in zip(s.values, ts) if t is not None]
        if pts:
            short = label if len(label) < 60 else label[:57] + "…"
            ax.plot(*zip(*pts), marker=".", linewidth=1, alpha=0.75, label=short)
            drawn.append((label, len(pts)))
    chosen = [(p.value, p.derivation.time) for p in s.points if p.derivation is not None]
    if chosen:
        ax.plot(*zip(*chosen), color="black", linewidth=3, alpha=0.35, label="chosen", zorder=0)
        ax.scatter(*zip(*chosen), color="black", s=14, zorder=3)
    changes = s.changes()
    for a, b, before, after, why in changes:
        x = (a * b) ** 0.5
        ax.axvline(x, color="grey", linestyle=":", linewidth=1)
        ax.annotate(f"{why}: → {after or 'none fits'}", (x, 0.02), xycoords=("data", "axes fraction"),
                    rotation=90, fontsize=6, ha="right", va="bottom")
    refused = [p.value for p in s.points if p.derivation is None]
    for v in refused:
        ax.axvline(v, color="red", alpha=0.2, linewidth=4)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel(" = ".join(s.axes) + " (swept)")
    ax.set_ylabel("predicted step time (s)")
    ax.set_title(title or s.cluster, fontsize=9)
    ax.legend(fontsize=6, loc="upper left")
    ax.grid(True, which="both", alpha=0.3)
    fig.napkin_summary = {"curves": drawn, "chosen": len(chosen), "changes": changes, "none_fits": refused}
    if path is not None:
        fig.savefig(path, dpi=120, bbox_inches="tight")
    return fig


__all__ = ["plot_cluster_sweep"]
