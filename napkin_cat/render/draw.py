"""Draw a neural circuit diagram with matplotlib (PNG or SVG), from :mod:`napkin_cat.render.layout`.

``draw(d, path)`` returns the matplotlib ``Figure``; ``fig.napkin_summary``
is read back from the artists that were drawn (not from the layout), so a
test checks the picture itself:

>>> import napkin_cat as nc
>>> fig = draw(nc.library.attention())
>>> s = fig.napkin_summary
>>> s["wire_labels"], s["triangles"], s["weaves"]
(['q', 'd', 'x', 'd', 'x', 'd', 'q', 'x', 'q', 'x', 'q', 'd'], 1, ['d', 'q', 'x'])
>>> draw(nc.library.matmul(), "matmul.pdf")
Traceback (most recent call last):
...
napkin_cat.errors.NapkinError: cannot draw to 'matmul.pdf': the extension must be one of .png, .svg
"""
from __future__ import annotations

import os

import numpy as np

from napkin_cat.errors import NapkinError, PathError
from napkin_cat.render.layout import Z_ORDER, Label, Line, Shape, layout
from napkin_cat.render.tikz import to_tikz  # noqa: F401  (re-exported as nc.to_tikz)
from napkin_cat.syntax.flat import require_diagram
from napkin_cat import library
from napkin_cat.algorithms.bubbles import Kernel
from napkin_cat.algorithms.partitions import group, kernel, stream
from napkin_cat.syntax.relabel import at_level

EXTENSIONS = (".png", ".svg")
SCALE = 0.32                   # inches per diagram unit
MAX_PIXELS = 40e6              # PNGs larger than this are saved at a lower dpi
_STYLES = {"solid": "solid", "dashed": (0, (3, 2)), "dotted": (0, (1, 2))}
_ANCHORS = {"sw": ("left", "bottom"), "nw": ("left", "top"), "c": ("center", "center")}


def _bezier(points, n: int = 24) -> np.ndarray:
    p0, c1, c2, p3 = (np.asarray(p, float) for p in points)
    t = np.linspace(0.0, 1.0, n)[:, None]
    return (1 - t) ** 3 * p0 + 3 * (1 - t) ** 2 * t * c1 + 3 * (1 - t) * t ** 2 * c2 + t ** 3 * p3


def _check_path(path) -> str:
    ext = os.path.splitext(str(path))[1].lower()
    if ext not in EXTENSIONS:
        raise NapkinError(f"cannot draw to {str(path)!r}: the extension must be one of "
                          f"{', '.join(EXTENSIONS)}")
    in_folder(path)
    return ext


def in_folder(path) -> str:
    """``path`` if the folder it names exists, else :class:`~napkin_cat.errors.PathError` naming that folder.

    >>> in_folder("/no/such/folder/a.png")
    Traceback (most recent call last):
    ...
    napkin_cat.errors.PathError: cannot write '/no/such/folder/a.png': the folder '/no/such/folder' does not exist; \
create it first
    """
    folder = os.path.dirname(os.path.abspath(str(path)))
    if not os.path.isdir(folder):
        raise PathError(f"cannot write {str(path)!r}: the folder {os.path.dirname(str(path))!r} does not exist; "
                        f"create it first")
    return str(path)


def draw(diagram, path=None, *, figsize=None, dpi: int = 150, title: str | None = None):
    """Draw ``diagram``; save to ``path`` (``.png`` or ``.svg``) when given; return the Figure.

    >>> import napkin_cat as nc, tempfile, os
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     fig = draw(nc.library.matmul(), os.path.join(tmp, "matmul.svg"), title="matmul")
    ...     os.path.getsize(os.path.join(tmp, "matmul.svg")) > 0
    True
    """
    require_diagram(diagram, "nc.draw")
    ext = _check_path(path) if path is not None else None
    fig = render(layout(diagram), figsize=figsize, dpi=dpi, title=title)
    if ext == ".png":           # a huge raster is slow to encode and to view: SVG suits those
        w, h = fig.get_size_inches()
        dpi = max(20, min(dpi, int((MAX_PIXELS / (w * h)) ** 0.5), int(60000 / max(w, h))))
        fig.savefig(path, format="png", dpi=dpi, pil_kwargs={"compress_level": 1})
    elif ext == ".svg":
        from matplotlib import rc_context
        with rc_context({"svg.fonttype": "none"}):      # labels stay searchable text
            fig.savefig(path, format="svg")
    if ext:
        fig.napkin_summary["dpi"] = dpi
    return fig


def render(lay, *, figsize=None, dpi: int = 150, title: str | None = None):
    """A matplotlib Figure of a :class:`~napkin_cat.render.layout.Layout` (no pyplot, no window).

    >>> import napkin_cat as nc
    >>> render(layout(nc.library.matmul())).napkin_summary["wire_labels"]
    ['a', 'b', 'b', 'c', 'a', 'c']
    """
    x0, y0, x1, y1 = lay.bbox
    m = 0.3
    x0, y0, x1, y1 = x0 - m, y0 - m - (0.8 if title else 0.0), x1 + m, y1 + m
    natural = ((x1 - x0) * SCALE, (y1 - y0) * SCALE)
    from matplotlib.backends.backend_agg import FigureCanvasAgg   # here: `import napkin_cat` stays fast
    from matplotlib.collections import LineCollection
    from matplotlib.figure import Figure
    fig = Figure(figsize=figsize or natural, dpi=dpi)
    FigureCanvasAgg(fig)                # no pyplot, no window: Agg renders PNG, the SVG backend SVG
    w, h = fig.get_size_inches()
    lw = min(w / natural[0], h / natural[1])      # fonts and line widths follow a given figsize
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_axis_off()
    ax.set_xlim(x0, x1)
    ax.set_ylim(y1, y0)                 # layout y grows downward
    if figsize is None:
        ax.set_aspect("equal")
    groups = {}
    for item in lay.items:
        if isinstance(item, Line):
            pts = _bezier(item.points) if item.curve else np.asarray(item.points, float)
            key = (item.role, item.level, item.color, item.width, item.style, item.halo and item.axis)
            groups.setdefault(key, []).append(pts)
    for (role, level, color, width, style, axis), segs in groups.items():
        tag = "-".join(["napkin", role] + [f"level{level}"] * (level is not None) + [axis] * bool(axis))
        if role == "weave":     # the halo stops short of the ends: no white seam where wires join
            halos = [p + np.array([[0.06, 0.0], [-0.06, 0.0]]) for p in segs]
            ax.add_collection(LineCollection(halos, colors=[(1, 1, 1)], linewidths=(width + 3.2) * lw,
                                             zorder=Z_ORDER["halo"], capstyle="butt", gid=tag + "-halo"))
        ax.add_collection(LineCollection(segs, colors=[color], linewidths=width * lw,
                                         linestyles=_STYLES[style], zorder=Z_ORDER.get(role, 2),
                                         capstyle="butt" if style == "dashed" else "round", gid=tag))
    for k, item in enumerate(lay.items):
        if isinstance(item, Shape):
            ax.add_artist(_patch(item, lw, f"napkin-{item.role}-{k}"))     # the limits are set: no autoscaling
        elif isinstance(item, Label):
            ha, va = _ANCHORS[item.anchor]
            text = f"${item.tex}$" if item.tex else item.text.replace("$", r"\$")
            artist = ax.text(*item.pos, text, ha=ha, va=va, fontsize=item.size * lw, color=item.color,
                             zorder=Z_ORDER["label"], gid=f"napkin-{item.role}-label-{k}")
            artist.napkin_text = item.text
    if title:
        ax.text((x0 + x1) / 2, y0 + 0.2, title, ha="center", va="top", fontsize=11 * lw,
                gid="napkin-figure-title")
    fig.napkin_summary = summary(fig)
    return fig


def _patch(item: Shape, lw: float, gid: str):
    from matplotlib.patches import Circle, FancyBboxPatch, Polygon
    common = dict(facecolor=item.fill if item.fill is not None else "none",
                  edgecolor=item.edge if item.edge is not None else "none", linewidth=item.width * lw,
                  linestyle=_STYLES[item.style], zorder=Z_ORDER.get(item.role, 3), gid=gid)
    if item.geometry == "circle":
        return Circle(item.points[0], item.size, **common)
    if item.geometry == "rect":
        (a, b), (c, d) = item.points
        r = min(item.size, (c - a) / 2, (d - b) / 2)
        return FancyBboxPatch((a, b), c - a, d - b, boxstyle=f"round,pad=0,rounding_size={r}", **common)
    return Polygon(item.points, closed=True, joinstyle="miter", **common)


def summary(fig) -> dict:
    """What was drawn, read back from the artists' ids: labels, level colors, pictograms, frames.

    >>> import napkin_cat as nc
    >>> s = summary(render(layout(nc.at_level(nc.softmax("q x", over="x"), 2))))
    >>> s["triangles"], s["level_colors"], s["weaves"]
    (1, {2: (0.49, 0.83, 0.13)}, ['q'])
    """
    ax = fig.axes[0]
    out = {"wire_labels": [], "level_colors": {}, "boxes": 0, "triangles": 0, "frames": [], "weaves": [],
           "separators": 0, "dashed_separators": True}
    for t in ax.texts:
        gid = t.get_gid() or ""
        if gid.startswith("napkin-wire-label"):
            out["wire_labels"].append(getattr(t, "napkin_text", t.get_text()))
        elif gid.startswith("napkin-title-label"):
            out["frames"].append(t.get_text())
    weaves = set()
    for c in ax.collections:
        gid = c.get_gid() or ""
        if "-level" in gid and not gid.endswith("-halo"):
            level = int(gid.split("-level")[1].split("-")[0])
            out["level_colors"][level] = tuple(float(v) for v in c.get_colors()[0][:3])
        if gid.startswith("napkin-weave") and not gid.endswith("-halo"):
            weaves.add(gid.split("-level")[1].split("-", 1)[1])
        if gid.startswith("napkin-separator"):
            out["separators"] += len(c.get_segments())
            out["dashed_separators"] &= all(ls[1] is not None for ls in c.get_linestyles())
    for p in ax.patches:
        role = (p.get_gid() or "").split("-")[1]
        out["boxes"] += role in ("box", "triangle", "map", "contract", "chevron")
        out["triangles"] += role == "triangle" and len(p.get_xy()) == 4    # a closed triangle
    out["weaves"] = sorted(weaves)
    return out


def gallery(out_dir) -> list[str]:
    """Render the library algorithms (and FlashAttention) to PNGs in ``out_dir``; return the paths.

    >>> import tempfile, os
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     paths = gallery(tmp)
    ...     sorted(os.path.basename(p) for p in paths)[:3]
    ['attention.png', 'flash_attention.png', 'gqa.png']
    """
    os.makedirs(out_dir, exist_ok=True)
    att = library.attention()
    pictures = {
        "attention": (att, "Attention"),
        "mha": (library.multi_head_attention(), "Multi-head attention"),
        "gqa": (library.grouped_query_attention(), "Grouped-query attention"),
        "matmul": (library.matmul(), "Matrix multiplication"),
        "matmul_kernel": (Kernel.around(at_level(library.matmul(), 1), level=1), "A level-1 kernel"),
        "mlp": (library.mlp(), "MLP"),
        "layer_norm": (library.layer_norm(), "LayerNorm"),
        "flash_attention": (group(stream(kernel(att), "x", "s_x"), "q", "g_q"), "FlashAttention"),
    }
    paths = []
    for name, (diagram, title) in pictures.items():
        path = os.path.join(str(out_dir), f"{name}.png")
        draw(diagram, path, title=title, dpi=200)
        paths.append(path)
    return paths


# ``nc.draw`` is this function (it shadows the module's name in the package): keep the module's
# helpers reachable from it, so that ``nc.draw.gallery("docs/img")`` works too.
draw.gallery, draw.render, draw.summary = gallery, render, summary
