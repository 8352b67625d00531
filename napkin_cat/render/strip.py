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

import collections
import functools
import gc
import os
import warnings

import numpy as np

from napkin_cat.errors import NapkinError
from napkin_cat.render.draw import EXTENSIONS, draw, in_folder
from napkin_cat.render.layout import layout
from napkin_cat.render.picture import Label, Layout, shifted
from napkin_cat.render.style import CHAR
from napkin_cat.render.tikz import render_tikz
from napkin_cat.rewriting.trace import HOOKS, Step, Trace
from napkin_cat.syntax.primitive import KINDS
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


STRIP_WIDTH, ROW_HEIGHT = 10.0, 2.6   # inches: the strip's width, and one row per step
PAD = 0.15                           # inches around every cell (matplotlib's tight-layout pad at 10 pt)
PANEL_PIXELS = 2 * 100 * STRIP_WIDTH * 4 / 9   # a side is drawn twice as wide as it shows at 100 dpi
PANEL_DPIS = tuple(round(150 * 2 ** (-k / 8)) for k in range(24))   # 150 … 20, a ratio 2^(1/8) apart


def panel_dpi(width: float) -> int:
    """The dpi a panel ``width`` inches wide is drawn at: the largest of :data:`PANEL_DPIS` that keeps it at most
    about :data:`PANEL_PIXELS` wide (the smallest of them for a wider one).  A few dpis shared by all panels let
    matplotlib reuse a math label's parse (cached per string and dpi) from panel to panel.

    >>> panel_dpi(1.0), panel_dpi(PANEL_PIXELS / 100), panel_dpi(1000.0)
    (150, 97, 20)
    """
    return next((d for d in PANEL_DPIS if d * width <= PANEL_PIXELS * 2 ** (1 / 16)), PANEL_DPIS[-1])


@functools.lru_cache(maxsize=4)
def math_parser(settings: tuple):
    """One matplotlib math-text parser for every panel drawn under the ``mathtext.*`` rc ``settings``: its cache,
    keyed by the string, dpi and font, then holds across panels (a renderer's own parser, new with each figure,
    parsed each label of each panel again); a change of those settings gets a parser of its own."""
    from matplotlib.mathtext import MathTextParser     # here: `import napkin_cat` stays fast
    return MathTextParser("path")


def mathtext_settings() -> tuple:
    """The ``mathtext.*`` rc parameters now in force (what a parse reads besides its string, dpi and font)."""
    from matplotlib import rcParams
    return tuple((k, str(v)) for k, v in sorted(rcParams.items()) if k.startswith("mathtext."))


class DrawingFallbackWarning(UserWarning):
    """A strip's panel could not be drawn as a picture and shows its boxes' names instead (the step and the
    drawing's error are named). The test suite turns it into an error (``pyproject.toml``'s
    ``filterwarnings``), so a drawing failure cannot hide behind the fallback."""


#: the bytes of panels (uint8 RGBA) kept for a later strip of this process (:func:`panel_raster`)
PANEL_MEMORY = 64 * 2 ** 20
RASTERS: collections.OrderedDict = collections.OrderedDict()    # (diagram, settings) -> uint8 raster, newest last


#: rc parameters no panel's pixels read (a panel is drawn on its own Agg canvas): importing pyplot resolves
#: ``backend`` and changes ``backend_fallback``, which must not make every kept panel look new
NOT_DRAWN = ("backend", "backend_fallback", "interactive", "toolbar", "keymap.", "webagg.", "figure.raise_window")


def drawing_settings() -> tuple:
    """What a panel's pixels depend on besides its diagram: :data:`PANEL_PIXELS`, every matplotlib rc parameter
    now in force but those of :data:`NOT_DRAWN` (fonts, line widths, math text) and the declared kinds (a box is
    drawn with its kind's label and pictogram: a kind declared again is another object, so a diagram of it is
    drawn again)."""
    from matplotlib import rcParams
    return (PANEL_PIXELS, tuple((k, str(v)) for k, v in sorted(rcParams.items()) if not k.startswith(NOT_DRAWN)),
            tuple(sorted(KINDS.items())))


def panel_raster(diagram):
    """``diagram`` drawn by :func:`~napkin_cat.render.draw.draw` as an RGBA array (floats in [0, 1], as a PNG
    reads back) about :data:`PANEL_PIXELS` wide: a larger raster is only shrunk again in the strip.

    A panel's figure is thousands of artists in reference cycles, garbage once its pixels are read: the collector
    is paused while it is drawn and its youngest generation collected after, so the figure is freed young instead
    of being promoted and found again by full collections, each of which walks the whole heap (a derivation's
    search leaves hundreds of thousands of objects: those collections were a third of a long strip's time).

    A diagram drawn once in a process is not drawn again under the same settings (:func:`drawing_settings`): its
    pixels are kept (the last :data:`PANEL_MEMORY` bytes of them) and read back, the same values.  Strips of one
    process share panels: ``napkin reproduce`` draws FlashAttention derived by the rules (§3.2) and by the search
    (§7), the same thirteen diagrams (0.13 s each).

    >>> import napkin_cat as nc
    >>> f = nc.library.matmul()
    >>> a = panel_raster(f)
    >>> b = panel_raster(nc.library.matmul())            # equal, not the same object: read back
    >>> a.dtype, a.shape[2], bool((a == b).all()), a is not b
    (dtype('float32'), 4, True, True)
    """
    key = (diagram, drawing_settings())
    rgba = RASTERS.get(key)
    if rgba is None:
        enabled = gc.isenabled()
        gc.disable()
        try:
            rgba = _pixels(diagram)
        finally:
            gc.collect(0)
            if enabled:
                gc.enable()
        RASTERS[key] = rgba
        while sum(r.nbytes for r in RASTERS.values()) > PANEL_MEMORY and len(RASTERS) > 1:
            RASTERS.popitem(last=False)
    else:
        RASTERS.move_to_end(key)
    return np.asarray(rgba, dtype=np.float32) / 255


def _pixels(diagram):
    fig = draw(diagram)
    fig.set_dpi(panel_dpi(fig.get_size_inches()[0]))
    fig.canvas.get_renderer().mathtext_parser = math_parser(mathtext_settings())   # the renderer the draw below uses
    fig.canvas.draw()
    return np.array(fig.canvas.buffer_rgba(), dtype=np.uint8)


def cells(labels: list[float]) -> tuple[float, float, float]:
    """The strip's columns ``(left, middle, right)`` widths in inches: the middle one fits the widest rule label
    ``labels`` (their widths) and is at least a ninth of the strip, the two sides share the rest equally.

    >>> [round(w, 3) for w in cells([2.0])]
    [3.85, 2.3, 3.85]
    """
    inner = STRIP_WIDTH - 6 * PAD
    middle = max(max(labels, default=0.0), inner / 9)
    side = (inner - middle) / 2
    return side + 2 * PAD, middle + 2 * PAD, side + 2 * PAD


def fit(shape, x0: float, y0: float, w: float, h: float) -> tuple[float, float, float, float]:
    """The extent ``(left, right, bottom, top)`` of an image of ``shape`` (rows, columns) fitted into the cell at
    ``(x0, y0)`` of size ``w`` × ``h`` with its aspect kept, centred (``y`` grows downward).

    >>> fit((10, 40), 0.0, 0.0, 4.0, 4.0)
    (0.0, 4.0, 2.5, 1.5)
    """
    scale = min(w / shape[1], h / shape[0])
    iw, ih = shape[1] * scale, shape[0] * scale
    left, top = x0 + (w - iw) / 2, y0 + (h - ih) / 2
    return (left, left + iw, top + ih, top)


def draw_trace(trace: Trace, path: str) -> str:
    """One row per step: ``before  =rule⇒  after``, each side drawn by :func:`~napkin_cat.render.draw.draw`;
    a ``.tex`` path gets the standalone TikZ document of :func:`strip_tikz`.

    The sides are rasters (a step's ``after`` is the next step's ``before``: drawn once), placed in one axes
    spanning the figure whose units are inches: no axes per panel and no tight layout pass."""
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
    from matplotlib import rc_context
    from matplotlib.backends.backend_agg import FigureCanvasAgg   # here: `import napkin_cat` stays fast
    from matplotlib.figure import Figure
    steps = trace.steps or [Step("(no steps)", (), "")]
    height = ROW_HEIGHT * len(steps)
    fig = Figure(figsize=(STRIP_WIDTH, height))
    FigureCanvasAgg(fig)
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_axis_off()
    rules = [ax.text(0, 0, f"= {step.rule} ⇒", ha="center", va="center", fontsize=9) for step in steps]
    renderer = fig.canvas.get_renderer()
    widths = cells([t.get_window_extent(renderer).width / fig.dpi for t in rules])
    lefts = (0.0, widths[0], widths[0] + widths[1])
    pictures: list = []        # (diagram, picture): a step's ``after`` is the next step's ``before``
    for k, step in enumerate(steps):
        top = k * ROW_HEIGHT
        rules[k].set_position((lefts[1] + widths[1] / 2, top + ROW_HEIGHT / 2))
        for col, d in ((0, step.before), (2, step.after)):
            if d is None:
                continue
            drawn = next(((pic,) for seen, pic in pictures[-2:] if seen is d or seen == d), None)
            if drawn is not None:
                picture, = drawn                             # drawn once, failed drawings included
            else:
                try:
                    picture = panel_raster(d)
                except Exception as err:  # a drawing backend failure must not lose the trace, nor pass unseen
                    warnings.warn(DrawingFallbackWarning(
                        f"step {k} ({step.rule}): its {'before' if col == 0 else 'after'} diagram could not be "
                        f"drawn ({type(err).__name__}: {err}); the strip shows its boxes' names instead"),
                        stacklevel=2)
                    picture = None
                pictures.append((d, picture))
            cell = (lefts[col] + PAD, top + PAD, widths[col] - 2 * PAD, ROW_HEIGHT - 2 * PAD)
            if picture is not None:
                ax.imshow(picture, extent=fit(picture.shape, *cell), aspect="auto")
            else:
                names = [b.name for b in d.boxes if computes(b)]
                ax.text(cell[0] + cell[2] / 2, cell[1] + cell[3] / 2,
                        "\n".join(names[:12] + (["…"] if len(names) > 12 else [])),
                        ha="center", va="center", fontsize=8, family="monospace",
                        bbox={"boxstyle": "round", "fc": "#f4f4f4"})
    ax.set_xlim(0, STRIP_WIDTH)
    ax.set_ylim(height, 0)
    with rc_context({"image.composite_image": False}):     # an SVG keeps one image per panel
        fig.savefig(path)
    return path


HOOKS["drawer"] = draw_trace
