"""TikZ source of a neural circuit diagram, from the same layout as the PNG/SVG drawing.

Colors are declared with ``\\definecolor`` (``level0``, ``level1``, … for the
memory levels); every weave is preceded by a ``% weave <axis>`` comment and
drawn over a white halo.  ``standalone=True`` gives a document that compiles with
plain ``pdflatex`` and only the ``tikz`` and ``preview`` packages (Debian:
``texlive-latex-base``, ``texlive-pictures``, ``preview-latex-style``); every label
is ASCII LaTeX, so no font encoding or Unicode setup is needed.

>>> import napkin_cat as nc
>>> src = to_tikz(nc.library.attention())
>>> src.splitlines()[0]
'\\\\begin{tikzpicture}[x=0.6cm, y=-0.6cm]'
>>> "\\\\definecolor{level0}{rgb}{0,0,0}" in src, "% weave q" in src
(True, True)
>>> to_tikz(nc.library.matmul(), standalone=True).splitlines()[:2]
['\\\\documentclass{article}', '\\\\usepackage{tikz}']
>>> src.isascii()
True
"""
from __future__ import annotations

import unicodedata

from napkin_cat.render.layout import Line, Shape, layout, z_order
from napkin_cat.render.style import level_color
from napkin_cat.syntax.flat import require_diagram

_ANCHORS = {"sw": "south west", "nw": "north west", "c": "center"}
_SPECIAL = {"·": r"$\cdot$", "×": r"$\times$", "−": "$-$", "÷": r"$\div$", "Σ": r"$\Sigma$", "→": r"$\to$",
            "⇒": r"$\Rightarrow$", "≡": r"$\equiv$", "⊗": r"$\otimes$", "√": r"$\surd$", "′": "$'$",
            "…": r"\dots{}", "≤": r"$\le$", "≥": r"$\ge$", "∞": r"$\infty$", "∘": r"$\circ$",
            "≠": r"$\neq$", "∧": r"$\wedge$", "∨": r"$\vee$", "¬": r"$\neg$",
            "~": r"\textasciitilde{}", "^": r"\textasciicircum{}", "\\": r"\textbackslash{}",
            "<": r"$<$", ">": r"$>$", "|": r"$|$", "ß": r"{\ss}", "ø": r"{\o}", "Ø": r"{\O}", "æ": r"{\ae}",
            "Æ": r"{\AE}", "œ": r"{\oe}", "Œ": r"{\OE}", "ł": r"{\l}", "Ł": r"{\L}", "ı": r"{\i}"}
# combining marks and the text accents of plain LaTeX (é = e + U+0301 → \'{e})
_ACCENTS = {"\u0300": "`", "\u0301": "'", "\u0302": "^", "\u0303": "~", "\u0304": "=", "\u0306": "u",
            "\u0307": ".", "\u0308": '"', "\u030a": "r", "\u030b": "H", "\u030c": "v", "\u0327": "c",
            "\u0328": "k"}
_ESCAPED = "_#%&{}$"
# Greek letters by their Unicode names: TeX has a macro for each small letter but omicron, and for the
# capitals that do not look like Latin ones; those are typeset as the Latin letter
_GREEK_SMALL = {n: f"$\\{n}$" for n in ("alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi "
                                        "pi rho sigma tau upsilon phi chi psi omega").split()}
_GREEK_SMALL.update(lamda=r"$\lambda$", omicron="$o$", final=r"$\varsigma$")
_GREEK_CAPITAL = {n.lower(): f"$\\{n}$" for n in "Gamma Delta Theta Lambda Xi Pi Sigma Upsilon Phi Psi Omega".split()}
_GREEK_CAPITAL.update(lamda=r"$\Lambda$", alpha="A", beta="B", epsilon="E", zeta="Z", eta="H", iota="I", kappa="K",
                      mu="M", nu="N", omicron="O", rho="P", tau="T", chi="X")
# the document preamble: `preview` crops the page to the picture (what the `standalone` class does,
# without needing texlive-latex-extra)
PREAMBLE = (r"\documentclass{article}", r"\usepackage{tikz}", r"\usepackage[active,tightpage]{preview}",
            r"\PreviewEnvironment{tikzpicture}", r"\setlength\PreviewBorder{4pt}", r"\begin{document}")


def _tex_char(c: str) -> str:
    """One non-ASCII character as ASCII LaTeX: a symbol, a Greek letter, a sub/superscript, a base letter."""
    if c in _SPECIAL:
        return _SPECIAL[c]
    name = unicodedata.name(c, "")
    words = name.split()
    if words[:1] == ["GREEK"] and "LETTER" in words and words.index("LETTER") + 1 < len(words):
        letter = words[words.index("LETTER") + 1].lower()        # ALPHA in "… LETTER ALPHA WITH TONOS"
        table = _GREEK_CAPITAL if "CAPITAL" in words else _GREEK_SMALL
        if letter in table:
            return table[letter]
    if "SUBSCRIPT" in words or "SUPERSCRIPT" in words:
        base = unicodedata.normalize("NFKD", c)
        if base.isascii() and base.isprintable():
            return ("$_{" if "SUBSCRIPT" in words else "$^{") + tex_escape(base).strip("$") + "}$"
    base, *marks = unicodedata.normalize("NFD", c)
    if base.isascii() and marks and all(m in _ACCENTS for m in marks):
        out = tex_escape(base)
        for m in marks:
            out = f"\\{_ACCENTS[m]}{{{out}}}"
        return out
    compatible = unicodedata.normalize("NFKC", c)          # ﬁ → fi, … → ...
    if compatible != c and all(ch.isascii() or ch in _SPECIAL for ch in compatible):
        return tex_escape(compatible)
    return r"\texttt{[U+%04X]}" % ord(c)          # visible and compilable, never a TeX error


def tex_escape(text: str) -> str:
    """Plain text as ASCII LaTeX: ``_`` and friends escaped, symbols and Greek letters as math.

    Any character becomes something plain ``pdflatex`` typesets (an unknown one shows its code point).

    >>> print(tex_escape("Grid(axis=q, size=g_q)"), tex_escape("SoftMax₀"), tex_escape("×"))
    Grid(axis=q, size=g\\_q) SoftMax$_{0}$ $\\times$
    >>> print(tex_escape("μ ≡ σ′ ⇒ Δ"), tex_escape("x²"), tex_escape("🙂"))
    $\\mu$ $\\equiv$ $\\sigma$$'$ $\\Rightarrow$ $\\Delta$ x$^{2}$ \\texttt{[U+1F642]}
    >>> print(tex_escape("λς ά Α ϝ"), tex_escape("Gödel ça ﬁt ß"))
    $\\lambda$$\\varsigma$ $\\alpha$ A \\texttt{[U+03DD]} G\\"{o}del \\c{c}a fit {\\ss}
    """
    return "".join("\\" + c if c in _ESCAPED else _SPECIAL.get(c, c) if c.isascii() else _tex_char(c)
                   for c in text)


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
        lines = [*PREAMBLE, *lines, r"\end{document}"]
    return "\n".join(lines) + "\n"


def to_tikz(diagram, *, standalone: bool = False, scale: float = 0.6) -> str:
    """TikZ source of ``diagram`` (a ``tikzpicture``; a whole document when ``standalone``)."""
    require_diagram(diagram, "nc.to_tikz")
    return render_tikz(layout(diagram), standalone=standalone, scale=scale)


