"""TikZ source of a neural circuit diagram, from the same layout as the PNG/SVG drawing.

Colors are declared with ``\\definecolor`` (``level0``, ``level1``, … for the
memory levels); every weave is preceded by a ``% weave <axis>`` comment and
drawn over a white halo.  ``standalone=True`` gives a compilable document.

>>> import napkin_cat as nc
>>> src = to_tikz(nc.library.attention())
>>> src.splitlines()[0]
'\\\\begin{tikzpicture}[x=0.6cm, y=-0.6cm]'
>>> "\\\\definecolor{level0}{rgb}{0,0,0}" in src, "% weave q" in src
(True, True)
>>> to_tikz(nc.library.matmul(), standalone=True).splitlines()[0]
'\\\\documentclass[tikz,border=4pt]{standalone}'
"""
from __future__ import annotations

from napkin_cat.render.layout import Line, Shape, layout, z_order
from napkin_cat.render.style import level_color

_ANCHORS = {"sw": "south west", "nw": "north west", "c": "center"}
_SPECIAL = {"·": r"$\cdot$", "×": r"$\times$", "−": "$-$", "÷": r"$\div$", "Σ": r"$\Sigma$", "→": r"$\to$",
            **{c: f"$_{k}$" for k, c in enumerate("₀₁₂₃₄₅₆₇₈₉")}}


def tex_escape(text: str) -> str:
    """Plain text as LaTeX: ``_`` and friends escaped, the pictograms' symbols as math.

    >>> print(tex_escape("Grid(axis=q, size=g_q)"), tex_escape("SoftMax₀"), tex_escape("×"))
    Grid(axis=q, size=g\\_q) SoftMax$_0$ $\\times$
    """
    return "".join("\\" + c if c in "_#%&{}$" else _SPECIAL.get(c, c) for c in text)


def _num(v: float) -> str:
    text = f"{v:.3f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def _pt(p) -> str:
    return f"({_num(p[0])},{_num(p[1])})"


def _font(size: float) -> str:
    return r"\small" if size >= 10 else r"\footnotesize" if size >= 9 else r"\scriptsize" if size >= 8 \
        else r"\tiny"


class _Colors:
    """Names for the colors used: ``level<n>`` for the level colors, ``napkin<k>`` for the rest."""

    def __init__(self):
        self.names = {}
        self.levels = {self.key(level_color(n)): f"level{n}" for n in range(8)}

    @staticmethod
    def key(color):
        return tuple(round(float(c), 4) for c in color)

    def __call__(self, color) -> str:
        key = self.key(color)
        if key not in self.names:
            self.names[key] = self.levels.get(key, f"napkin{len(self.names)}")
        return self.names[key]

    def definitions(self) -> list[str]:
        return [rf"\definecolor{{{name}}}{{rgb}}{{{','.join(_num(c) for c in key)}}}"
                for key, name in self.names.items()]


def _path(line: Line) -> str:
    if line.curve:
        p0, c1, c2, p3 = line.points
        return f"{_pt(p0)} .. controls {_pt(c1)} and {_pt(c2)} .. {_pt(p3)}"
    return " -- ".join(_pt(p) for p in line.points)


def _draw(item, colors: _Colors, scale: float) -> list[str]:
    if isinstance(item, Line):
        style = [colors(item.color), f"line width={_num(item.width)}pt"]
        style += [item.style] * (item.style != "solid")
        halo = [f"% weave {item.axis}",
                rf"\draw[white, line width={_num(item.width + 3.2)}pt] {_path(item)};"] if item.halo else []
        return halo + [rf"\draw[{', '.join(style)}] {_path(item)};"]
    if isinstance(item, Shape):
        style = [f"line width={_num(item.width)}pt",
                 f"fill={colors(item.fill)}" if item.fill is not None else "fill=none",
                 f"draw={colors(item.edge)}" if item.edge is not None else "draw=none"]
        style += [item.style] * (item.style != "solid")
        if item.geometry == "circle":
            path = f"{_pt(item.points[0])} circle[radius={_num(item.size * scale)}cm]"
        elif item.geometry == "rect":
            (a, b), (c, d) = item.points
            style.append(f"rounded corners={_num(min(item.size, abs(c - a) / 2, abs(d - b) / 2) * scale)}cm")
            path = f"{_pt((a, b))} rectangle {_pt((c, d))}"
        else:
            path = " -- ".join(_pt(p) for p in item.points) + " -- cycle"
        return [rf"\filldraw[{', '.join(style)}] {path};  % {item.role}"]
    text = f"${item.tex}$" if item.tex else tex_escape(item.text)
    return [rf"\node[anchor={_ANCHORS[item.anchor]}, inner sep=1pt, font={_font(item.size)}, "
            rf"text={colors(item.color)}] at {_pt(item.pos)} {{{text}}};  % {item.role}"]


def render_tikz(lay, *, standalone: bool = False, scale: float = 0.6) -> str:
    """TikZ source of a :class:`~napkin_cat.render.layout.Layout` (``scale`` cm per diagram unit).

    >>> import napkin_cat as nc
    >>> from napkin_cat.render.layout import layout
    >>> render_tikz(layout(nc.library.matmul())).count("% contract")
    1
    """
    colors = _Colors()
    body = []
    for item in sorted(lay.items, key=z_order):
        body += _draw(item, colors, scale)
    lines = [rf"\begin{{tikzpicture}}[x={_num(scale)}cm, y=-{_num(scale)}cm]", *colors.definitions(),
             *body, r"\end{tikzpicture}"]
    if standalone:
        lines = [r"\documentclass[tikz,border=4pt]{standalone}", r"\usepackage[T1]{fontenc}",
                 r"\begin{document}", *lines, r"\end{document}"]
    return "\n".join(lines) + "\n"


def to_tikz(diagram, *, standalone: bool = False, scale: float = 0.6) -> str:
    """TikZ source of ``diagram`` (a ``tikzpicture``; a whole document when ``standalone``)."""
    return render_tikz(layout(diagram), standalone=standalone, scale=scale)


