"""A derivation drawn as a strip of equations: one row per rewrite, ``before =rule⇒ after``.

Registered as the drawer of :meth:`napkin_cat.rewriting.trace.Trace.draw`.

>>> import tempfile, os, napkin_cat as nc
>>> from napkin_cat.rewriting import Pattern, kind
>>> drop = nc.Rule("drop_identity", Pattern({"f": kind("id")}), lambda m: nc.Id(m.dom), doc="id(x) → x")
>>> r = nc.rewrite(nc.elementwise("id", "q") >> nc.elementwise("exp", "q"), [drop])
>>> with tempfile.TemporaryDirectory() as tmp:
...     os.path.getsize(r.trace.draw(os.path.join(tmp, "strip.png"))) > 0
True
"""
from __future__ import annotations

import os
import tempfile

from napkin_cat.render.draw import draw
from napkin_cat.rewriting.trace import HOOKS, Step, Trace
from napkin_cat.syntax.adapter import is_structural


def draw_trace(trace: Trace, path: str) -> str:
    """One row per step: ``before  =rule⇒  after``, each side drawn by :func:`~napkin_cat.render.draw.draw`."""
    from matplotlib.figure import Figure   # here: `import napkin_cat` stays fast
    drawer = draw
    rows = max(len(trace.steps), 1)
    fig = Figure(figsize=(10, 2.6 * rows))
    axes = fig.subplots(rows, 3, squeeze=False, gridspec_kw={"width_ratios": [4, 1, 4]})
    with tempfile.TemporaryDirectory() as tmp:
        for k, step in enumerate(trace.steps or [Step("(no steps)", (), "")]):
            for col, d in ((0, step.before), (2, step.after)):
                ax = axes[k][col]
                ax.axis("off")
                if d is None:
                    continue
                picture = None
                if drawer is not None:
                    try:
                        png = os.path.join(tmp, f"{k}-{col}.png")
                        drawer(d, path=png)
                        from matplotlib.image import imread
                        picture = imread(png)
                    except Exception:  # a drawing backend failure must not lose the trace
                        picture = None
                if picture is not None:
                    ax.imshow(picture)
                else:
                    names = [b.name for b in d.boxes if is_structural(b) is None]
                    ax.text(0.5, 0.5, "\n".join(names[:12] + (["…"] if len(names) > 12 else [])),
                            ha="center", va="center", fontsize=8, family="monospace",
                            bbox={"boxstyle": "round", "fc": "#f4f4f4"})
            ax = axes[k][1]
            ax.axis("off")
            ax.text(0.5, 0.5, f"= {step.rule} ⇒", ha="center", va="center", fontsize=9)
    fig.tight_layout()
    fig.savefig(path)
    return path


HOOKS["drawer"] = draw_trace
