"""Drawing: the layout, the matplotlib PNG/SVG backend and the TikZ printer.

Every count is checked twice: what the diagram says should be drawn (computed
here from its arrays and boxes, not by the layout) against what the artists
of the figure (or the TikZ source) actually contain.
"""
from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections import Counter

import pytest
from hypothesis import given, settings, strategies as st

import napkin_cat as nc
from napkin_cat.syntax.adapter import Diagram, Ty
from napkin_cat.syntax.flat import compose_all, is_structural, layers
from napkin_cat.algorithms.partitions import group, kernel, stream, unfused
from napkin_cat.algorithms.bubbles import Kernel, Region
from napkin_cat.render.draw import draw, gallery, render
from napkin_cat.errors import NapkinError
from napkin_cat.render.foliate import foliate
from napkin_cat.render.layout import layout
from napkin_cat.render.style import GAP, LEVEL_COLORS, WIRE, level_color, size_label
from napkin_cat.syntax.primitive import kind_of
from napkin_cat.render.tikz import tex_escape, to_tikz

ORANGE = (0.96, 0.65, 0.14)


def flash_attention():
    return group(stream(kernel(nc.library.attention()), "x", "s_x"), "q", "g_q")


LIBRARY = {
    "attention": nc.library.attention,
    "matmul": nc.library.matmul,
    "multi_head_attention": nc.library.multi_head_attention,
    "grouped_query_attention": nc.library.grouped_query_attention,
    "linear": nc.library.linear,
    "mlp": nc.library.mlp,
    "layer_norm": nc.library.layer_norm,
    "rms_norm": nc.library.rms_norm,
    "transformer_block": nc.library.transformer_block,
    "kernel_matmul": lambda: Kernel.around(nc.at_level(nc.library.matmul(), 1), level=1),
    "kernel_attention": lambda: kernel(nc.library.attention()),
    "unfused_attention": lambda: unfused(nc.library.attention()),
    "flash_attention": flash_attention,
}


# --------------------------------------------------------------------------- what should be drawn
def boxes(diagram):
    """Every box, regions' insides included (depth first)."""
    for _, box in layers(diagram):
        yield box
        if isinstance(box, Region):
            yield from boxes(box.arg)


def primitives(diagram):
    return [b for b in boxes(diagram) if not isinstance(b, Region) and not is_structural(b)]


def expected_wire_labels(diagram, outer=None) -> list[str]:
    """One label per axis of every input and of every box output (structural boxes only move wires).

    Inside a region the inner inputs are labelled where their axes differ from the outer ones
    (a Grid's ``g_q``), and the region's outputs where they differ from the inner outputs.
    """
    def names(arrays):
        return [size_label(a.size)[0] for arr in arrays for a in arr.axes]
    dom = list(diagram.dom.inside)
    labels = names(a for i, a in enumerate(dom)
                   if outer is None or i >= len(outer) or outer[i].axes != a.axes)
    for _, box in layers(diagram):
        if isinstance(box, Region):
            labels += expected_wire_labels(box.arg, list(box.dom.inside))
            inner = list(box.arg.cod.inside)
            labels += names(a for j, a in enumerate(box.cod.inside)
                            if len(inner) != len(box.cod) or inner[j].axes != a.axes)
        elif not is_structural(box):
            labels += names(box.cod.inside)
    return labels


def expected_separators(diagram) -> int:
    """One dashed line between each pair of neighbouring arrays, in every data column."""
    width = len(diagram.dom)
    total = max(0, width - 1)
    for column in foliate(diagram):
        width += sum(len(b.cod) - len(b.dom) for _, b in column)
        total += max(0, width - 1)
        total += sum(expected_separators(b.arg) for _, b in column if isinstance(b, Region))
    return total


def levels(diagram) -> set[int]:
    out = {a.level for a in diagram.dom.inside}
    for box in boxes(diagram):
        out |= {a.level for a in box.cod.inside}
    return out


def weaves(diagram) -> set[str]:
    return {n for b in primitives(diagram) if kind_of(b.data.kind).shape != "transfer"
            for n in b.data.weave_names}


def softmaxes(diagram) -> int:
    return sum(kind_of(b.data.kind).shape == "triangle" for b in primitives(diagram))


# --------------------------------------------------------------------------- PNG and SVG
@pytest.mark.parametrize("name", sorted(LIBRARY))
def test_drawing_shows_every_array_level_weave_and_pictogram(name, tmp_path):
    d = LIBRARY[name]()
    for ext in ("png", "svg"):
        path = tmp_path / f"{name}.{ext}"
        fig = draw(d, path)
        assert path.stat().st_size > 1000
        s = fig.napkin_summary
        assert Counter(s["wire_labels"]) == Counter(expected_wire_labels(d))
        assert set(s["level_colors"]) == levels(d)
        for level, color in s["level_colors"].items():
            assert color == pytest.approx(level_color(level))
        assert s["triangles"] == softmaxes(d)
        assert s["boxes"] == len(primitives(d))
        assert set(s["weaves"]) == weaves(d)
        assert s["separators"] == expected_separators(d) and s["dashed_separators"]
        assert sorted(s["frames"]) == sorted(b.name for b in boxes(d) if isinstance(b, Region))
    assert (tmp_path / f"{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_summary_is_read_from_the_artists():
    fig = draw(nc.library.attention())
    ax = fig.axes[0]
    wire_texts = [t for t in ax.texts if t.get_gid().startswith("napkin-wire-label")]
    assert [t.get_text() for t in wire_texts] == ["$q$", "$d$", "$x$", "$d$", "$x$", "$d$",
                                                  "$q$", "$x$", "$q$", "$x$", "$q$", "$d$"]
    triangles = [p for p in ax.patches if p.get_gid().startswith("napkin-triangle")]
    assert len(triangles) == 1 and len(triangles[0].get_xy()) == 4
    weave_gids = {c.get_gid() for c in ax.collections if c.get_gid().startswith("napkin-weave")}
    assert {"napkin-weave-level0-q", "napkin-weave-level0-x", "napkin-weave-level0-d"} <= weave_gids
    assert fig.napkin_summary == layout(nc.library.attention()).summary()


def test_level_one_diagram_is_orange_and_framed(tmp_path):
    d = Kernel.around(nc.at_level(nc.library.matmul(), 1), level=1)
    fig = draw(d, tmp_path / "k.png")
    ax = fig.axes[0]
    wire_colors = {tuple(round(float(v), 3) for v in c.get_colors()[0][:3]) for c in ax.collections
                   if c.get_gid().startswith("napkin-wire-level")}
    assert wire_colors == {ORANGE}
    frames = [p for p in ax.patches if p.get_gid().startswith("napkin-frame")]
    assert len(frames) == 1 and frames[0].get_linestyle()[1]          # a dash pattern
    titles = [t.get_text() for t in ax.texts if t.get_gid().startswith("napkin-title")]
    assert titles == ["Kernel(level=1)"]


def test_grid_and_stream_show_relabelled_sizes():
    labels = draw(flash_attention()).napkin_summary["wire_labels"]
    assert {"g_q", "s_x"} <= set(labels)
    assert sorted(draw(flash_attention()).napkin_summary["frames"]) == [
        "Grid(axis=q, size=g_q)", "Kernel(level=1)", "Stream(axis=x, size=s_x)"]


def test_svg_is_xml_with_named_weaves(tmp_path):
    path = tmp_path / "mha.svg"
    draw(nc.library.multi_head_attention(), path)
    ids = {el.get("id") for el in ET.parse(path).iter() if el.get("id")}
    assert {"napkin-weave-level0-h", "napkin-weave-level0-q"} <= ids
    assert any(i.startswith("napkin-triangle") for i in ids)


def test_svg_keeps_titles_as_text(tmp_path):
    path = tmp_path / "flash.svg"
    draw(flash_attention(), path)
    texts = {el.text for el in ET.parse(path).iter() if el.tag.endswith("text")}
    assert {"Grid(axis=q, size=g_q)", "Kernel(level=1)", "Stream(axis=x, size=s_x)"} <= texts


@pytest.mark.parametrize("bad", ["a.pdf", "a", "a.PNG.txt", "a.jpg"])
def test_bad_extension_names_the_legal_ones(bad, tmp_path):
    with pytest.raises(NapkinError, match=r"must be one of \.png, \.svg"):
        draw(nc.library.matmul(), tmp_path / bad)
    assert not (tmp_path / bad).exists()


def test_uppercase_extension_is_accepted(tmp_path):
    draw(nc.library.matmul(), tmp_path / "A.SVG")
    assert (tmp_path / "A.SVG").read_text().lstrip().startswith("<?xml")


def test_figsize_title_and_no_pyplot(tmp_path):
    import matplotlib.pyplot as plt
    before = plt.get_fignums()
    fig = draw(nc.library.attention(), tmp_path / "a.png", figsize=(4, 3), title="Attention", dpi=80)
    assert tuple(fig.get_size_inches()) == (4, 3)
    assert any(t.get_text() == "Attention" for t in fig.axes[0].texts)
    assert plt.get_fignums() == before


def test_huge_png_is_saved_at_a_lower_dpi(tmp_path, monkeypatch):
    import importlib
    module = importlib.import_module("napkin_cat.render.draw")     # `nc.draw` is the function
    monkeypatch.setattr(module, "MAX_PIXELS", 1e5)
    fig = draw(nc.library.attention(), tmp_path / "a.png", dpi=300)
    assert fig.napkin_summary["dpi"] < 300


# --------------------------------------------------------------------------- pictograms
def test_pictograms_by_kind():
    lay = layout(flash_attention())
    roles = Counter(s.role for s in lay.shapes())
    n_transfers = sum(b.data.kind in ("load", "save") for b in primitives(flash_attention()))
    assert roles == {"chevron": n_transfers, "contract": 2, "triangle": 1}
    saves = [s for s in lay.shapes("chevron") if s.fill == LEVEL_COLORS[0]]
    assert len(saves) == 1                  # the save back to level 0 is black, loads are orange
    ln = layout(nc.library.layer_norm())
    assert Counter(s.role for s in ln.shapes()) == {"map": 7, "box": 2}
    assert len([s for s in ln.items if getattr(s, "role", None) == "dot"]) == 2 * 2   # two copies of n×d
    texts = {t.text for t in ln.labels("box")}
    assert {"−", "×", "+", "mean", "rsqrt"} <= texts


def test_a_users_kind_draws_the_symbol_its_record_declares(scratch_kinds):
    """``symbol=`` a text, or a function of the box (a parameter shown); none: the box's name; a box given its own
    name shows that name.  Drawn in the layout (what every backend draws) and in TikZ."""
    nc.declare("hadamard", lambda xs, core: [xs[0] * xs[1]], symbol="⊙")
    nc.declare("leaky", lambda xs, core: [xs[0]], symbol=lambda box: f"α={box.data.param('alpha')}")
    nc.declare("plain", lambda xs, core: [xs[0]])
    d = (nc.apply("hadamard", "n, n -> n") >> nc.apply("leaky", "n -> n", params={"alpha": 0.1})
         >> nc.apply("plain", "n -> n"))
    assert [t.text for t in layout(d).labels("box")] == ["⊙", "α=0.1", "plain"]
    assert [t.text for t in layout(nc.apply("hadamard", "n, n -> n", name="H")).labels("box")] == ["H"]
    tex = to_tikz(d)
    assert "{\\texttt{[U+2299]}};  % box" in tex and "{$\\alpha$=0.1};  % box" in tex
    with pytest.raises(nc.SignatureError, match=r"kind 'boxed': symbol is the text drawn in its box \(a string, or a "
                                                r"function of the box\), got int 7"):
        nc.declare("boxed", lambda xs, core: [xs[0]], symbol=7)


def test_weave_passes_over_the_triangle_and_core_wire_enters_it():
    lay = layout(nc.softmax("q x", over="x"))
    (tri,) = lay.shapes("triangle")
    xs = [p[0] for p in tri.points]
    (q_over,) = [l for l in lay.lines("weave") if l.axis == "q"]
    assert q_over.halo and q_over.points[0][0] == min(xs) and q_over.points[-1][0] == max(xs)
    x_wires = [l for l in lay.lines("wire") if l.axis == "x"]
    assert any(l.points[-1][0] == pytest.approx(min(xs)) for l in x_wires)   # x ends at the triangle
    assert not [l for l in lay.lines("weave") if l.axis == "x"]


def test_swap_crosses_and_discard_ends_at_a_dot():
    a, b = nc.types("q d"), nc.types("x")
    lay = layout(Diagram.swap(a, b))
    assert len([l for l in lay.lines("wire") if l.curve]) == 3
    assert lay.outputs == [[0.0], [GAP, GAP + WIRE]]
    lay = layout(Diagram.copy(a, 0))
    assert len([s for s in lay.items if getattr(s, "role", None) == "dot"]) == 2


def test_item_wire_is_dotted():
    lay = layout(nc.einsum("x, x -> "))
    (item,) = [l for l in lay.lines("wire") if l.axis is None]
    assert item.style == "dotted"
    assert lay.wire_labels() == ["x", "x"]


# --------------------------------------------------------------------------- layout laws
def test_independent_boxes_share_a_column():
    mm, sm = nc.einsum("a b, b c -> a c"), nc.softmax("q x", over="x")
    assert len(foliate(mm @ sm)) == 1
    assert len(foliate(sm >> nc.elementwise("exp", "q x"))) == 2
    assert [len(c) for c in foliate((mm @ sm) >> (nc.Id("a c") @ nc.elementwise("exp", "q x")))] == [2, 1]


def replay(diagram):
    """Run the columns of :func:`foliate` on the boundary types: each box must find its inputs."""
    wires = list(diagram.dom.inside)
    for column in foliate(diagram):
        out, ptr = [], 0
        for p, box in column:
            assert p >= ptr and wires[p:p + len(box.dom)] == list(box.dom.inside), (p, box)
            out += wires[ptr:p] + list(box.cod.inside)
            ptr = p + len(box.dom)
        wires = out + wires[ptr:]
    assert wires == list(diagram.cod.inside)
    for box in boxes(diagram):
        if isinstance(box, Region):
            replay(box.arg)


@pytest.mark.parametrize("name", sorted(LIBRARY))
def test_foliation_is_a_valid_schedule(name):
    d = LIBRARY[name]()
    replay(d)
    assert sum(len(c) for c in foliate(d)) == len(d.boxes)


def _chain(kinds):
    return compose_all(Ty(*nc.types("q x").inside), *(nc.elementwise(k, "q x") for k in kinds))


@settings(max_examples=25, deadline=None)
@given(st.lists(st.sampled_from(["exp", "relu", "neg", "square"]), min_size=1, max_size=6),
       st.integers(1, 4))
def test_arrays_never_overlap_and_labels_never_collide(kinds, copies):
    d = _chain(kinds)
    for _ in range(copies - 1):
        d = d @ _chain(kinds)
    lay = layout(d)
    assert lay.columns == len(kinds)          # the copies run in parallel
    for up, down in zip(lay.outputs, lay.outputs[1:]):
        assert down[0] - up[-1] >= GAP - 1e-9
    by_column = {}
    for t in lay.labels("wire"):
        by_column.setdefault(round(t.pos[0], 6), []).append(t.pos[1])
    for ys in by_column.values():
        ys.sort()
        assert all(b - a >= WIRE - 1e-9 for a, b in zip(ys, ys[1:]))


@st.composite
def random_diagrams(draw_):
    """Random well-typed diagrams of maps, reductions, contractions, swaps, copies and discards."""
    wires = [nc.types(t).inside[0] for t in draw_(st.lists(st.sampled_from(["q x", "x d", "q d", "d"]),
                                                          min_size=1, max_size=4))]
    dom, steps = Ty(*wires), []
    for _ in range(draw_(st.integers(1, 8))):
        i = draw_(st.integers(0, len(wires) - 1))
        a = wires[i]
        sig = " ".join(a.names)
        options = ["copy"] + ["map", "softmax"] * bool(a.axes) + ["reduce"] * (len(a.axes) > 1)
        if len(wires) > 1:
            options += ["discard"]
        if i + 1 < len(wires):
            options += ["swap"]
            b = wires[i + 1]
            if set(a.names) & set(b.names) and set(a.names) != set(b.names):
                options += ["contract"]
        op = draw_(st.sampled_from(options))
        if op == "map":
            step = nc.elementwise("exp", sig)
        elif op == "softmax":
            step = nc.softmax(sig, over=a.names[-1])
        elif op == "reduce":
            step = nc.reduce("sum", f"{sig} -> {' '.join(a.names[:-1])}")
        elif op == "copy":
            step = Diagram.copy(Ty(a), 2)
        elif op == "discard":
            step = Diagram.copy(Ty(a), 0)
        elif op == "swap":
            step = Diagram.swap(Ty(a), Ty(wires[i + 1]))
        else:
            b = wires[i + 1]
            out = [n for n in a.names + b.names if (n in a.names) != (n in b.names)]
            step = nc.einsum(f"{sig}, {' '.join(b.names)} -> {' '.join(dict.fromkeys(out))}")
        k = len(step.dom)
        steps.append(Diagram.id(Ty(*wires[:i])) @ step @ Diagram.id(Ty(*wires[i + k:])))
        wires[i:i + k] = list(step.cod.inside)
        if not wires:
            break
    return compose_all(dom, *steps)


@settings(max_examples=60, deadline=None)
@given(random_diagrams())
def test_random_diagrams_lay_out_and_draw(d):
    replay(d)
    lay = layout(d)
    assert Counter(lay.wire_labels()) == Counter(expected_wire_labels(d))
    assert lay.summary()["separators"] == expected_separators(d)
    for up, down in zip(lay.outputs, lay.outputs[1:]):
        assert down[0] - up[-1] >= GAP - 1e-9
    assert all(abs(v) < 1e4 for item in lay.lines() for p in item.points for v in p)
    assert render(lay).napkin_summary == lay.summary()


def test_shapes_of_one_column_do_not_overlap():
    for name in ("layer_norm", "transformer_block", "flash_attention", "unfused_attention"):
        lay = layout(LIBRARY[name]())
        spans = {}
        for s in lay.shapes() + [f for f in lay.items if getattr(f, "role", None) == "frame"]:
            if s.geometry == "circle":
                continue
            xs, ys = [p[0] for p in s.points], [p[1] for p in s.points]
            spans.setdefault((round(min(xs), 6), round(max(xs), 6)), []).append((min(ys), max(ys)))
        for col in spans.values():
            col.sort()
            for (a0, a1), (b0, b1) in zip(col, col[1:]):
                assert b0 >= a1 - 1e-9 or b1 <= a1, (name, col)


# --------------------------------------------------------------------------- TikZ
@pytest.mark.parametrize("name", sorted(LIBRARY))
def test_tikz_draws_the_same_picture(name):
    d = LIBRARY[name]()
    src = to_tikz(d)
    assert src.startswith(r"\begin{tikzpicture}") and src.rstrip().endswith(r"\end{tikzpicture}")
    assert src.count("% wire") == len(expected_wire_labels(d))
    assert src.count("% triangle") == softmaxes(d)
    assert {m for m in re.findall(r"% weave (\S+)", src)} == weaves(d)
    for level in levels(d):
        r, g, b = level_color(level)
        assert re.search(rf"\\definecolor{{level{level}}}{{rgb}}{{{r:g},{g:g},{b:g}}}", src)
    assert src.count("dashed") >= expected_separators(d)
    for region in (b for b in boxes(d) if isinstance(b, Region)):
        assert "{" + tex_escape(region.name) + "}" in src
    assert src.count("{") == src.count("}")


def test_tikz_labels_and_standalone_document():
    src = to_tikz(flash_attention(), standalone=True)
    lines = src.splitlines()
    assert lines[0] == r"\documentclass{article}" and r"\begin{document}" in lines
    # only what Debian's texlive-latex-base + texlive-pictures + preview-latex-style provide (no T1 fonts)
    assert set(re.findall(r"\\usepackage(?:\[[^]]*\])?\{(\w+)\}", src)) == {"tikz", "preview"}
    assert src.isascii()
    assert lines[-1] == r"\end{document}"
    assert r"{$g_{q}$};  % wire" in src and r"{$s_{x}$};  % wire" in src
    assert r"{Grid(axis=q, size=g\_q)};  % title" in src
    assert "\\definecolor{level1}{rgb}{0.96,0.65,0.14}" in src


def test_tikz_escapes_box_names():
    assert tex_escape("a_b & 50%") == r"a\_b \& 50\%"
    assert "{$\\times$}" in to_tikz(nc.elementwise("mul", "q x, x -> q x"))


# --------------------------------------------------------------------------- gallery
def test_gallery_renders_the_library(tmp_path):
    paths = gallery(tmp_path)
    names = {p.split("/")[-1] for p in paths}
    assert {"attention.png", "mha.png", "flash_attention.png", "matmul_kernel.png"} <= names
    assert all((tmp_path / n).read_bytes()[:4] == b"\x89PNG" for n in names)


def test_render_of_a_layout_is_reusable():
    """Each render of one layout draws what the diagram says, where the layout put it."""
    d = nc.library.mlp()
    lay = layout(d)
    where = sorted((t.text, t.pos) for t in lay.labels("wire"))
    for _ in range(2):
        ax = render(lay).axes[0]
        drawn = sorted((t.napkin_text, tuple(float(v) for v in t.get_position())) for t in ax.texts
                       if (t.get_gid() or "").startswith("napkin-wire-label"))
        assert [text for text, _ in drawn] == sorted(expected_wire_labels(d))
        assert drawn == where
        patches = [p for p in ax.patches if p.get_gid().split("-")[1] in ("box", "map", "contract", "triangle")]
        assert len(patches) == len(primitives(d))


def test_a_mask_is_a_box_fed_by_dashed_position_wires(tmp_path):
    """Positions, comparisons and masks are integers: their wires are dashed; the scores' stay solid."""
    lay = layout(nc.library.causal_attention())
    boxes = [t.text for t in lay.labels("box")]
    assert boxes.count("pos") == 2 and "≤" in boxes and "where" in boxes
    dashed = {l.axis for l in lay.lines() if l.role in ("wire", "weave") and l.style == "dashed"}
    solid = {l.axis for l in lay.lines() if l.role in ("wire", "weave") and l.style == "solid"}
    assert dashed == {"q", "x"} and {"q", "x", "d"} <= solid
    fig = draw(nc.library.causal_attention(), path=str(tmp_path / "causal.svg"))
    assert fig.napkin_summary["boxes"] == len(lay.shapes())


def test_a_gather_takes_its_index_on_a_dashed_wire():
    lay = layout(nc.library.cross_entropy())
    assert "gather" in [t.text for t in lay.labels("box")] and "LSE" in [t.text for t in lay.labels("box")]
    assert any(l.style == "dashed" and l.axis == "n" for l in lay.lines())


def test_a_drawing_into_a_missing_folder_names_the_folder(tmp_path):
    """nc.draw and a derivation's strip refuse a path whose folder does not exist, naming it (a typed error that is
    also a FileNotFoundError), before anything is drawn; an existing folder still works."""
    import napkin_cat as nc
    from rewrites import SIMPLIFY
    missing = tmp_path / "no" / "such"
    strip = nc.rewrite(nc.elementwise("id", "q") >> nc.elementwise("exp", "q"), SIMPLIFY).trace
    assert len(strip) == 1
    for drawer in (lambda p: nc.draw(nc.library.matmul(), p), strip.draw):
        for name in ("m.png", "m.svg"):
            with pytest.raises(nc.errors.PathError, match=rf"the folder '{missing}' does not exist") as info:
                drawer(str(missing / name))
            assert isinstance(info.value, FileNotFoundError)
    assert (tmp_path / "m.png").exists() is False
    nc.draw(nc.library.matmul(), str(tmp_path / "m.png"))
    assert (tmp_path / "m.png").stat().st_size > 0
