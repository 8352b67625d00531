"""A derivation drawn as a strip of equations: one row per rewrite, ``before =rule⇒ after``.

Registered as the drawer of :meth:`napkin_cat.rewriting.trace.Trace.draw`: a ``.png`` or
``.svg`` path gets a matplotlib figure, a ``.tex`` path a standalone TikZ document
(:func:`strip_tikz`, laid out by :func:`strip_layout` from the diagrams' own layouts).

>>> import tempfile, os, napkin_cat as nc
>>> from napkin_cat.rewriting import Pattern, kind
>>> drop = nc.Rule("drop_identity", Pattern({"f": kind("id")}), lambda m: nc.Id(m.dom), doc="id(x) → x")
>>> r = nc.rewrite(nc.elementwise("id", "q") >> nc.elementwise("exp", "q"), [drop])
>>> with tempfile.TemporaryDirectory() as tmp:
...     os.path.getsize(r.trace.draw(os.path.join(tmp, "strip.png"))) > 0
True
>>> strip_tikz(r.trace).count("% rule")
1
"""
from __future__ import annotations

import os
import tempfile

from napkin_cat.errors import NapkinError
from napkin_cat.render.draw import EXTENSIONS, draw, in_folder
from napkin_cat.render.layout import layout
from napkin_cat.render.picture import Label, Layout, shifted
from napkin_cat.render.style import CHAR
from napkin_cat.render.tikz import render_tikz
from napkin_cat.rewriting.trace import HOOKS, Step, Trace
from napkin_cat.syntax.wiring import computes

ROW_GAP, ARROW_PAD = 1.2, 0.6      # diagram units between rows, and around the ``= rule ⇒`` label


def strip_layout(trace: Trace) -> Layout:
    """One :class:`~napkin_cat.render.picture.Layout` of the whole strip: per step, the layout of
    ``before``, a label ``= rule ⇒`` and the layout of ``after``, rows stacked downward."""
    items, top, right = [], 0.0, 0.0
    for step in trace.steps:
        sides = [layout(d) if d is not None else None for d in (step.before, step.after)]
        if None in sides:
            raise NapkinError(f"step {step.rule!r} holds no diagrams (a trace loaded without them): replay it "
                              "from its start diagram first")
        height = max(lay.bbox[3] - lay.bbox[1] for lay in sides)
        text = f"= {step.rule} ⇒"
        x = 0.0
        for k, lay in enumerate(sides):
            x0, y0, x1, y1 = lay.bbox
            dy = top + (height - (y1 - y0)) / 2 - y0          # rows centred vertically
            items += [shifted(item, x - x0, dy) for item in lay.items]
            x += x1 - x0
            if k == 0:
                label_width = CHAR * len(text)
                items.append(Label((x + ARROW_PAD + label_width / 2, top + height / 2), text, None, "c", 9.0,
                                   role="rule"))
                x += label_width + 2 * ARROW_PAD
        right, top = max(right, x), top + height + ROW_GAP
    return Layout(items, right, (0.0, 0.0, right, max(top - ROW_GAP, 0.0)), [], [])


def strip_tikz(trace: Trace, *, standalone: bool = False, scale: float = 0.6) -> str:
    """TikZ source of the strip (one ``tikzpicture``; a whole document when ``standalone``)."""
    return render_tikz(strip_layout(trace), standalone=standalone, scale=scale)


STRIP_WIDTH = 10.0                 # inches; a side's panel is 4/9 of it
PANEL_PIXELS = 2 * 100 * STRIP_WIDTH * 4 / 9   # a side is drawn twice as wide as it shows at 100 dpi


def _draw_panel(diagram, png: str) -> None:
    """``diagram`` drawn to ``png`` about :data:`PANEL_PIXELS` wide (at most :func:`draw`'s 150 dpi): a larger
    raster is only shrunk again, and encoding, decoding and resampling it dominated long strips."""
    fig = draw(diagram)
    width = fig.get_size_inches()[0]
    fig.savefig(png, format="png", dpi=max(20, min(150, int(PANEL_PIXELS / width))),
                pil_kwargs={"compress_level": 1})


def draw_trace(trace: Trace, path: str) -> str:
    """One row per step: ``before  =rule⇒  after``, each side drawn by :func:`~napkin_cat.render.draw.draw`;
    a ``.tex`` path gets the standalone TikZ document of :func:`strip_tikz`."""
    ext = os.path.splitext(str(path))[1].lower()
    if ext in EXTENSIONS + (".tex",):
        in_folder(path)
    if ext == ".tex":
        with open(path, "w", encoding="ascii") as f:
            f.write(strip_tikz(trace, standalone=True))
        return path
    if ext not in EXTENSIONS:
        raise NapkinError(f"cannot draw a derivation to {str(path)!r}: the extension must be one of "
                          f"{', '.join(EXTENSIONS + ('.tex',))}")
    from matplotlib.figure import Figure   # here: `import napkin_cat` stays fast
    from matplotlib.image import imread
    rows = max(len(trace.steps), 1)
    fig = Figure(figsize=(STRIP_WIDTH, 2.6 * rows))
    axes = fig.subplots(rows, 3, squeeze=False, gridspec_kw={"width_ratios": [4, 1, 4]})
    pictures: list = []        # (diagram, picture): a step's ``after`` is the next step's ``before``
    with tempfile.TemporaryDirectory() as tmp:
        for k, step in enumerate(trace.steps or [Step("(no steps)", (), "")]):
            for col, d in ((0, step.before), (2, step.after)):
                ax = axes[k][col]
                ax.axis("off")
                if d is None:
                    continue
                picture = next((pic for seen, pic in pictures[-2:] if seen is d or seen == d), None)
                if picture is None:
                    try:
                        png = os.path.join(tmp, f"{k}-{col}.png")
                        _draw_panel(d, png)
                        picture = imread(png)
                    except Exception:  # a drawing backend failure must not lose the trace
                        picture = None
                    pictures.append((d, picture))
                if picture is not None:
                    ax.imshow(picture)
                else:
                    names = [b.name for b in d.boxes if computes(b)]
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
