"""The curves of a derivation search: every candidate's ``H*(M)``, their lower envelope and the lower bound.

``plot_derivation(r, path)`` draws a :func:`napkin_cat.derive` result on log-log axes (PNG or SVG) and
returns the matplotlib ``Figure``; ``fig.napkin_summary`` lists the curves drawn (their labels and the
number of points), read back from the artists:

>>> import napkin_cat as nc
>>> r = nc.derive(nc.library.matmul(), memory=[2 ** 8, 2 ** 10], sizes={"a": 64, "b": 64, "c": 64})
>>> fig = plot_derivation(r)
>>> [(label, n) for label, n in fig.napkin_summary["curves"]][-2:]
[('H* (envelope)', 2), ('lower bound', 2)]

``compare_derivations({label: r, ...}, path)`` puts several results on one pair of axes (a forward
pass beside its backward): each one's envelope, its unfused candidate and its lower bound, from the
same numbers :func:`plot_derivation` draws:

>>> fig = compare_derivations({"matmul": r, "again": r})
>>> [label for label, _ in fig.napkin_summary["curves"]][:3]
['matmul: H* (envelope)', 'matmul: unfused', 'matmul: lower bound']
"""
from __future__ import annotations

import os

import sympy

from napkin_cat.errors import NapkinError
from napkin_cat.search.envelope import reference_sizes
from napkin_cat.syntax.axis import symbol
from napkin_cat.syntax.sizes import Sizes

EXTENSIONS = (".png", ".svg")


def _numbers(r):
    """``(memories, [(label, [H or None])], envelope, bound)`` to draw."""
    M = symbol("M")
    if isinstance(r.memory, list) or isinstance(r.memory, int):
        ms = list(r.memory) if isinstance(r.memory, list) else [r.memory]
        cands = [(label, [hs.get(m) for m in ms]) for label, hs in r.candidates]
        env = Sizes(r.sizes or {}).env
        envelope = [r.regimes[k].H for k in range(len(ms))]
        bound = [float(r.bound.at({**env, M: m})) for m in ms] if r.bound is not None else None
        return ms, cands, envelope, bound
    sizes = r.sizes or reference_sizes(r.start)
    env = Sizes(sizes).env
    lo = max(2.0, float(sympy.sympify(r.regimes[0].lower).subs(env)))
    ms = [lo * 2 ** (k / 4) for k in range(0, 4 * 24 + 1)]

    def value(expr, m):
        try:
            v = complex(sympy.sympify(expr).subs(env).subs(M, m))
        except (TypeError, ValueError):
            return None
        return v.real if v == v and abs(v.imag) < 1e-9 * max(1.0, abs(v.real)) else None
    cands = [(label, [value(h, m) for m in ms]) for label, h in r.candidates]
    pieces = [(value(g.lower, 0), value(g.upper, 0) if g.upper != sympy.oo else float("inf"), g.H) for g in r.regimes]
    envelope = [next((value(h, m) for lo_, hi, h in pieces if lo_ is not None and hi is not None and lo_ <= m < hi),
                     None) for m in ms]
    bound = [float(r.bound.at({**env, M: m})) for m in ms] if r.bound is not None else None
    return ms, cands, envelope, bound


def _figure(path):
    """A figure of one pair of axes, once ``path`` (None: not saved) is known to name a picture file."""
    if path is not None and os.path.splitext(path)[1].lower() not in EXTENSIONS:
        raise NapkinError(f"cannot plot to {path!r}: the extension must be one of {', '.join(EXTENSIONS)}")
    from matplotlib.figure import Figure
    fig = Figure(figsize=(8, 5))
    return fig, fig.add_subplot(1, 1, 1)


def _finish(fig, ax, drawn: list, path, *, levels: str, legend: dict):
    """Log-log axes of H* over M at ``levels``, the legend, ``fig.napkin_summary``; saved to ``path`` if given."""
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel(f"M (values at level {levels})")
    ax.set_ylabel("values moved H*")
    ax.legend(**legend)
    ax.grid(True, which="both", alpha=0.3)
    fig.napkin_summary = {"curves": drawn}
    if path is not None:
        fig.savefig(path, dpi=120, bbox_inches="tight")
    return fig


def plot_derivation(r, path: str | None = None):
    """Draw the candidates' curves, the envelope (the derivation's ``H``) and the bound; save to ``path``."""
    fig, ax = _figure(path)
    ms, cands, envelope, bound = _numbers(r)
    drawn = []
    for label, hs in cands:
        pts = [(m, h) for m, h in zip(ms, hs) if h is not None]
        if pts:
            short = label if len(label) < 70 else label[:67] + "…"
            ax.plot(*zip(*pts), marker=".", linewidth=1, alpha=0.7, label=short)
            drawn.append((label, len(pts)))
    pts = [(m, h) for m, h in zip(ms, envelope) if h is not None]
    ax.plot(*zip(*pts), color="black", linewidth=2.5, label="H* (envelope)")
    drawn.append(("H* (envelope)", len(pts)))
    if bound is not None and r.bound.structural:
        ax.plot(ms, bound, color="grey", linestyle="--", label="lower bound")
        drawn.append(("lower bound", len(ms)))
    return _finish(fig, ax, drawn, path, levels=str(r.level), legend={"fontsize": 6, "loc": "upper right"})


def compare_derivations(results: dict, path: str | None = None, *, title: str | None = None):
    """``{label: derivation}`` on one pair of axes: per derivation its envelope (solid), its unfused candidate
    (dotted) and its lower bound (dashed, when the bound is structural), in one colour; save to ``path``."""
    fig, ax = _figure(path)
    drawn, levels = [], set()
    for k, (name, r) in enumerate(results.items()):
        colour = f"C{k}"
        ms, cands, envelope, bound = _numbers(r)
        levels.add(r.level)
        curves = [("H* (envelope)", envelope, {"linewidth": 2.5, "marker": "o"}),
                  ("unfused", dict(cands).get("unfused"), {"linestyle": ":", "linewidth": 1.5})]
        if bound is not None and r.bound.structural:
            curves.append(("lower bound", bound, {"linestyle": "--", "linewidth": 1}))
        for what, hs, style in curves:
            pts = [(m, h) for m, h in zip(ms, hs or ()) if h is not None]
            if pts:
                ax.plot(*zip(*pts), color=colour, label=f"{name}: {what}", **style)
                drawn.append((f"{name}: {what}", len(pts)))
    if title:
        ax.set_title(title, fontsize=9)
    return _finish(fig, ax, drawn, path, levels=", ".join(map(str, sorted(levels))),
                   legend={"fontsize": 7, "loc": "lower left"})
