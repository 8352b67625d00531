"""Timelines of overlap schedules in the paper's style (Figs. clock_cycles, three_warpgroup, fp16strats, fp8strats).

One row per warpgroup; a block per op, its width the op's clocks per thread, coloured by pipeline
(tensor blue, threads green, special-function purple); the overhead accommodated after it hatched;
barriers as thick dotted lines where a warpgroup waited for another; a ruler of ``ruler`` clocks.

>>> from fractions import Fraction as F
>>> from napkin_cat.hardware.overlap import Task, intra, simulate
>>> s = simulate(intra([Task("QK", "tensor", F(2)), Task("SM", "special", F(4), F(1, 2)), Task("PV", "tensor", F(4))]))
>>> fig = draw_timeline(s, iterations=(30, 33))
>>> fig.napkin_timeline["blocks"], fig.napkin_timeline["hatched"]
(9, 3)
"""
from __future__ import annotations

from napkin_cat.render.style import LEVEL_COLORS, PALETTE
from napkin_cat.errors import NapkinError

PIPELINE_COLORS = {"tensor": LEVEL_COLORS[3], "general": LEVEL_COLORS[2], "special": PALETTE[0]}


def _check_path(path) -> str:
    suffix = str(path).rsplit(".", 1)[-1].lower()
    if suffix not in ("png", "svg", "pdf"):
        raise NapkinError(f"cannot draw a timeline to {path!r}: give a .png, .svg or .pdf path")
    return suffix


def draw_timeline(schedule, path=None, *, iterations=None, ruler=1, dpi: int = 150, title: str | None = None):
    """A matplotlib Figure of ``schedule`` between ``iterations = (first, last)`` (default: the steady window's start
    and three iterations on); saved to ``path`` (``.png``/``.svg``/``.pdf``) when given."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.patches import Rectangle

    if path is not None:
        _check_path(path)
    program = schedule.program
    first, last = iterations or (schedule.iterations // 3, schedule.iterations // 3 + 3)
    shown = [e for e in schedule.events if first <= e.iteration < last]
    t0 = min(e.start for e in shown)
    t1 = max(e.end for e in shown)
    width = float(t1 - t0)
    fig = Figure(figsize=(max(6.0, min(18.0, width / 2.5)), 0.8 + 0.6 * program.warpgroups), dpi=dpi)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    hatched = 0
    for e in shown:
        y = program.warpgroups - 1 - e.wg
        x = float(e.start - t0)
        color = PIPELINE_COLORS.get(e.pipeline, PALETTE[1])
        ax.add_patch(Rectangle((x, y + 0.1), float(e.work_end - e.start), 0.8, facecolor=color, edgecolor="black",
                               linewidth=0.8))
        if e.end > e.work_end:
            hatched += 1
            ax.add_patch(Rectangle((float(e.work_end - t0), y + 0.1), float(e.end - e.work_end), 0.8, fill=False,
                                   hatch="///", edgecolor=color, linewidth=0.8))
        name = program.tasks[e.task].name
        ax.text(x + float(e.work_end - e.start) / 2, y + 0.5, f"{name}{e.iteration}", ha="center", va="center",
                fontsize=7, color="white" if e.pipeline == "tensor" else "black")
        for _ in e.waited_on:
            ax.plot([x, x], [y - 0.05, y + 1.05], linestyle=":", linewidth=2.5, color="black")
    tick = 0.0
    while tick <= width:
        ax.plot([tick, tick], [-0.35, -0.15], color="black", linewidth=0.8)
        tick += float(ruler)
    ax.plot([0, width], [-0.25, -0.25], color="black", linewidth=0.8)
    ax.set_xlim(-0.5, width + 0.5)
    ax.set_ylim(-0.5, program.warpgroups + 0.1)
    ax.set_yticks([program.warpgroups - 0.5 - w for w in range(program.warpgroups)],
                  [f"WG {w + 1}" for w in range(program.warpgroups)])
    ax.set_xticks([])
    for side in ("top", "right", "bottom"):
        ax.spines[side].set_visible(False)
    ax.set_title(title or f"{program.name}: tensor utilisation {float(schedule.utilisation()):.1%}", fontsize=9)
    fig.napkin_timeline = {"blocks": len(shown), "hatched": hatched, "barriers": sum(len(e.waited_on) for e in shown),
                           "clocks": width}
    if path is not None:
        fig.savefig(path, bbox_inches="tight")
    return fig
