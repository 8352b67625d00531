"""A derivation strip: one row per step, each side the diagram's own picture, fitted into its cell.

The pictures are checked against matplotlib's own PNG of the diagram (``draw`` then ``savefig`` at the panel's dpi,
read back by ``imread``), the geometry against the strip's PNG read back pixel by pixel."""
import dataclasses
import gc
import os
import weakref

import numpy as np
import pytest
from matplotlib.image import imread

import napkin_cat as nc
from napkin_cat.render import strip
from napkin_cat.rewriting import Pattern, kind

DROP = nc.Rule("drop_identity", Pattern({"f": kind("id")}), lambda m: nc.Id(m.dom), doc="id(x) → x")


def two_steps(axes: str = "q"):
    """id ; id ; exp  =drop⇒  id ; exp  =drop⇒  exp on symbolic axes (their labels are typeset as math): one axis
    is a wide picture (its cell's width bounds it), eight a tall one (its cell's height does)."""
    d = nc.elementwise("id", axes) >> nc.elementwise("id", axes) >> nc.elementwise("exp", axes)
    trace = nc.rewrite(d, [DROP]).trace
    assert len(trace) == 2
    return trace


def ink(image: np.ndarray) -> np.ndarray:
    return image[..., :3].min(axis=2) < 0.9


def ink_box(mask: np.ndarray) -> tuple[int, int, int, int]:
    rows, cols = np.nonzero(mask.any(axis=1))[0], np.nonzero(mask.any(axis=0))[0]
    return rows[0], rows[-1] + 1, cols[0], cols[-1] + 1


def test_a_panel_is_the_diagrams_png_read_back(tmp_path):
    """Pixel for pixel what ``savefig`` writes at the panel's dpi, for panels drawn one after another (the math
    parser they share must give each its own labels at its own dpi)."""
    wide = nc.library.attention()
    for d in (wide, nc.elementwise("exp", "q"), wide):
        fig = nc.draw(d)
        dpi = strip.panel_dpi(fig.get_size_inches()[0])
        fig.savefig(tmp_path / "p.png", format="png", dpi=dpi)
        expected = imread(tmp_path / "p.png")
        got = strip.panel_raster(d)
        assert got.dtype == expected.dtype and got.shape == expected.shape
        assert np.array_equal(got, expected)
        assert got.shape[1] <= strip.PANEL_PIXELS * 2 ** (1 / 16) or dpi == strip.PANEL_DPIS[-1]


@pytest.mark.parametrize("axes", ["q", "a b c d e f g h"])
def test_each_step_is_a_row_its_sides_fitted_into_their_cells(axes, tmp_path):
    trace = two_steps(axes)
    path = trace.draw(str(tmp_path / "strip.png"))
    image = imread(path)
    dpi = 100                                          # matplotlib's default figure dpi, which savefig keeps
    row = round(strip.ROW_HEIGHT * dpi)
    assert image.shape[:2] == (row * len(trace), round(strip.STRIP_WIDTH * dpi))
    pad = round(strip.PAD * dpi)
    mask = ink(image)
    for k, step in enumerate(trace.steps):
        band = mask[k * row:(k + 1) * row]
        assert not band[:pad - 1].any() and not band[row - pad + 1:].any(), f"row {k} crosses its cell"
        columns = np.nonzero(band.any(axis=0))[0]
        # three runs of ink: the before, the rule label, the after, in that order and apart
        gaps = np.nonzero(np.diff(columns) > pad)[0]
        assert len(gaps) == 2, f"row {k}: {len(gaps) + 1} groups of ink"
        sides = [(columns[0], columns[gaps[0]] + 1), (columns[gaps[1] + 1], columns[-1] + 1)]
        for (c0, c1), d in zip(sides, (step.before, step.after)):
            panel = strip.panel_raster(d)
            r0, r1, p0, p1 = ink_box(ink(panel))
            s0, s1, _, _ = ink_box(band[:, c0:c1])
            # the side keeps its picture's aspect: ink width over height as in the panel
            assert (c1 - c0) / (s1 - s0) == pytest.approx((p1 - p0) / (r1 - r0), rel=0.12)
        assert sides[0][1] <= strip.STRIP_WIDTH * dpi / 2 <= sides[1][0]


def test_a_diagram_two_rows_share_is_drawn_once_and_its_figure_freed(tmp_path, monkeypatch):
    """A step's ``after`` is the next step's ``before``: three diagrams, three drawings; and every panel's figure
    is garbage collected by the time the strip is written (the collector's state is the caller's again)."""
    figures = []

    def recording(d):
        fig = nc.draw(d)
        figures.append(weakref.ref(fig))
        return fig

    monkeypatch.setattr(strip, "draw", recording)
    trace = two_steps()
    for enabled in (True, False):
        figures.clear()
        strip.RASTERS.clear()            # no panel kept from an earlier strip of this process
        (gc.enable if enabled else gc.disable)()
        try:
            trace.draw(str(tmp_path / "strip.png"))
            assert gc.isenabled() is enabled
        finally:
            gc.enable()
        assert len(figures) == 3
        assert all(ref() is None for ref in figures), "a panel's figure outlived the strip"


def test_a_panel_drawn_once_in_a_process_is_read_back_until_a_setting_changes(tmp_path, monkeypatch):
    """A second strip of the same diagrams draws none of them again and writes the same bytes; under another rc
    setting (the font) each is drawn again, and the picture differs."""
    import matplotlib
    drawn = []

    def recording(d):
        drawn.append(d)
        return nc.draw(d)

    monkeypatch.setattr(strip, "draw", recording)
    trace = two_steps()
    strip.RASTERS.clear()
    first, second, wide = (str(tmp_path / f"{name}.png") for name in ("first", "second", "wide"))
    trace.draw(first)
    assert len(drawn) == 3 and len(strip.RASTERS) == 3
    with matplotlib.rc_context({"backend": "svg", "backend_fallback": False}):      # what importing pyplot changes
        trace.draw(second)
    assert len(drawn) == 3
    assert open(first, "rb").read() == open(second, "rb").read()
    with matplotlib.rc_context({"font.family": "serif"}):
        trace.draw(wide)
    assert len(drawn) == 6 and open(wide, "rb").read() != open(first, "rb").read()
    kinds = {box.data.kind for step in trace.steps for d in (step.before, step.after) for box in d.boxes
             if hasattr(box.data, "kind")}
    name = sorted(kinds)[0]
    old = nc.engine.KINDS[name]
    monkeypatch.setitem(nc.engine.KINDS, name, dataclasses.replace(old, label="relabelled"))
    trace.draw(str(tmp_path / "relabelled.png"))               # a kind declared again: its diagrams drawn again
    assert len(drawn) > 6


def test_a_panel_that_cannot_be_drawn_is_named_in_a_warning_not_hidden(tmp_path, monkeypatch):
    """The strip keeps the trace when a panel's drawing fails (its boxes' names instead of the picture), and says
    so: a DrawingFallbackWarning naming the step, its side and the error (the suite makes it an error, so no
    test's strip passes on the fallback)."""
    trace = two_steps("q")

    def broken(diagram):
        raise RuntimeError("no renderer")

    monkeypatch.setattr(strip, "panel_raster", broken)
    with pytest.warns(strip.DrawingFallbackWarning) as seen:
        path = trace.draw(str(tmp_path / "strip.png"))
    assert os.path.getsize(path) > 0
    messages = [str(w.message) for w in seen]
    assert len(messages) == 3                                        # three distinct diagrams, each once
    assert messages[0].startswith(f"step 0 ({trace.steps[0].rule}): its before diagram")
    assert all("RuntimeError: no renderer" in m for m in messages)
