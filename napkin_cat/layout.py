"""Layout of a neural circuit diagram, left to right, in the paper's visual language (§2).

Columns alternate data types and functions.  Every array is a stack of
horizontal wires, one per axis, labelled with the axis size where the array is
born; arrays of one tuple are separated by a dashed line in each data column;
a wire's color is its memory level.  In a function column a weaved box lets
its weave wires pass straight over it (``role="weave"``) while only its core
wires enter the pictogram: a triangle for the SoftMax family, wires joining at
a dot for a contraction, a circle for an elementwise map, a labelled box for a
reduction, a chevron for Load/Save; swaps cross, copies split at a dot,
discards end at a dot.  Regions (Kernel, Grid, Stream) are laid out
recursively inside a dashed, titled frame.

The output is a flat list of backend-independent primitives (:class:`Line`,
:class:`Shape`, :class:`Label`) in diagram units, ``y`` growing downward.
Independent boxes share a column (a greedy foliation); the layout is linear in
boxes times live arrays.

>>> import napkin_cat as nc
>>> lay = layout(nc.library.attention())
>>> lay.wire_labels()
['q', 'd', 'x', 'd', 'x', 'd', 'q', 'x', 'q', 'x', 'q', 'd']
>>> [s.role for s in lay.shapes()]
['contract', 'triangle', 'contract']
>>> sorted({l.axis for l in lay.lines("weave")})
['d', 'q', 'x']
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import sympy

from napkin_cat.adapter import Diagram, is_structural, layers
from napkin_cat.primitive import kind_of

WIRE = 0.7        # spacing of the wires of one array
GAP = 1.2         # spacing between two arrays of a tuple
BODY_GAP = 0.3    # clearance between pictograms of one function column
PAD_X, PAD_Y, TITLE = 0.45, 0.35, 0.55   # region frame paddings and title band
CHAR = 0.2        # width of one label character at 9pt, in diagram units

BLACK, WHITE, GREY = (0.0, 0.0, 0.0), (1.0, 1.0, 1.0), (0.55, 0.55, 0.55)
LEVEL_COLORS = {0: BLACK, 1: (0.96, 0.65, 0.14), 2: (0.49, 0.83, 0.13), 3: (0.29, 0.56, 0.89)}
PALETTE = [(0.58, 0.40, 0.74), (0.84, 0.15, 0.16), (0.09, 0.75, 0.81), (0.55, 0.34, 0.29)]
SYMBOLS = {"add": ("+", "+"), "sub": ("−", "-"), "mul": ("×", r"\times"), "div": ("÷", r"\div"),
           "sum": ("Σ", r"\Sigma")}


def level_color(level: int) -> tuple:
    """The color of memory ``level``: black, orange, green, blue, then a palette.

    >>> level_color(1), level_color(4) == PALETTE[0]
    ((0.96, 0.65, 0.14), True)
    """
    return LEVEL_COLORS.get(level, PALETTE[(level - len(LEVEL_COLORS)) % len(PALETTE)])


# --------------------------------------------------------------------------- primitives
@dataclass(frozen=True)
class Line:
    """A polyline, or one cubic Bézier when ``curve`` (points ``p0, c1, c2, p3``)."""

    points: tuple
    color: tuple = BLACK
    width: float = 1.2          # points
    style: str = "solid"        # solid | dashed | dotted
    role: str = "wire"          # wire | weave | separator | link
    curve: bool = False
    halo: bool = False          # drawn over a white halo (a wire passing over a box)
    level: int | None = None
    axis: str | None = None


@dataclass(frozen=True)
class Shape:
    """A pictogram: ``polygon`` (vertices), ``circle`` (centre; ``size`` radius), ``rect`` (corners)."""

    geometry: str
    points: tuple
    size: float = 0.0
    fill: tuple | None = WHITE
    edge: tuple | None = BLACK
    style: str = "solid"
    role: str = "box"           # triangle | contract | map | box | chevron | dot | frame
    width: float = 1.0


@dataclass(frozen=True)
class Label:
    """A text at ``pos``: ``text`` (unicode), ``tex`` (LaTeX), ``math`` (typeset as math)."""

    pos: tuple
    text: str
    tex: str
    anchor: str = "sw"          # sw | c | nw
    size: float = 9.0
    color: tuple = BLACK
    role: str = "wire"          # wire | box | title
    math: bool = False


def _shift(item, dx: float, dy: float):
    pts = tuple((x + dx, y + dy) for x, y in (item.points if not isinstance(item, Label) else (item.pos,)))
    if isinstance(item, Label):
        return dataclasses.replace(item, pos=pts[0])
    return dataclasses.replace(item, points=pts)


@dataclass
class Layout:
    """The primitives of a drawing, its wire extent ``width`` and bounding box ``(x0, y0, x1, y1)``."""

    items: list
    width: float
    bbox: tuple
    inputs: list                # per dom array: the y of each wire at x = 0
    outputs: list               # per cod array: the y of each wire at x = width
    columns: int = 0

    def lines(self, role=None):
        return [i for i in self.items if isinstance(i, Line) and role in (None, i.role)]

    def shapes(self, role=None):
        return [i for i in self.items if isinstance(i, Shape) and role in (None, i.role)
                and (role is not None or i.role not in ("dot", "frame"))]

    def labels(self, role=None):
        return [i for i in self.items if isinstance(i, Label) and role in (None, i.role)]

    def wire_labels(self) -> list[str]:
        return [t.text for t in self.labels("wire")]

    def summary(self) -> dict:
        """Counts a test can check against the diagram (what a backend must draw)."""
        wires = [l for l in self.lines() if l.role in ("wire", "weave") and l.level is not None]
        return {"wire_labels": self.wire_labels(),
                "level_colors": {l.level: l.color for l in wires},
                "boxes": len(self.shapes()),
                "triangles": len(self.shapes("triangle")),
                "frames": [t.text for t in self.labels("title")],
                "weaves": sorted({l.axis for l in self.lines("weave")}),
                "separators": len(self.lines("separator")),
                "columns": self.columns}


# --------------------------------------------------------------------------- labels
def size_label(size) -> tuple[str, str, bool]:
    """``(text, tex, math)`` for an axis size: ``64``, or ``g_q`` typeset as math.

    >>> from napkin_cat.axis import symbol
    >>> size_label(64), size_label(symbol("g_q"))
    (('64', '64', False), ('g_q', 'g_{q}', True))
    """
    if isinstance(size, int) or (isinstance(size, sympy.Basic) and size.is_Integer):
        return str(int(size)), str(int(size)), False
    return str(size), sympy.latex(size), True


_SUBSCRIPTS = {c: str(k) for k, c in enumerate("₀₁₂₃₄₅₆₇₈₉")}


def tex_escape(text: str) -> str:
    """Plain text as LaTeX (``_`` and friends escaped, unicode subscripts as math).

    >>> tex_escape("Grid(axis=q, size=g_q)"), tex_escape("SoftMax₀")
    ('Grid(axis=q, size=g\\\\_q)', 'SoftMax$_0$')
    """
    out = []
    for c in text:
        if c in "_#%&{}$":
            out.append("\\" + c)
        elif c in _SUBSCRIPTS:
            out.append(f"$_{_SUBSCRIPTS[c]}$")
        elif c in "·×−Σ→":
            out.append({"·": r"$\cdot$", "×": r"$\times$", "−": "$-$", "Σ": r"$\Sigma$", "→": r"$\to$"}[c])
        else:
            out.append(c)
    return "".join(out)


def _box_text(box) -> tuple[str, str]:
    spec = box.data
    kind = spec.kind
    if kind.startswith("reduce_"):
        kind = kind[len("reduce_"):]
    if box.name == kind_of(spec.kind).label and kind in SYMBOLS:
        return SYMBOLS[kind]
    if spec.kind == "cast" and box.name == "cast":
        return f"→{spec.param('dtype')}", rf"$\to${spec.param('dtype')}"
    if spec.kind == "rename" and box.name == "rename":
        woven = set(spec.weave_names)
        a = [n for n in box.dom.inside[0].names if n not in woven]
        b = [n for n in box.cod.inside[0].names if n not in woven]
        text = f"{' '.join(a)}→{' '.join(b)}"
        return text, tex_escape(text)
    return box.name, tex_escape(box.name)


# --------------------------------------------------------------------------- columns
def foliate(diagram: Diagram) -> list[list[tuple[int, object]]]:
    """Group the layers into columns of independent boxes: ``[(offset before the column, box)]``.

    A box joins the current column when its inputs touch no output of that
    column (the interchange law); else it starts a new column.

    >>> import napkin_cat as nc
    >>> d = nc.einsum("a b, b c -> a c") @ nc.softmax("q x", over="x")
    >>> [[b.name for _, b in col] for col in foliate(d)]
    [['·', 'SoftMax']]
    """
    columns, current = [], []
    for offset, box in layers(diagram):
        k = len(box.dom)
        pre, shift, ok = offset, 0, bool(current)
        for p, b in current:                # kept sorted by offset
            start = p + shift
            m = len(b.cod)
            if offset + k <= start and not (k == 0 and offset == start and m == 0):
                break
            if offset >= start + m:
                shift += m - len(b.dom)
                pre = offset - shift
                continue
            ok = False
            break
        if ok:
            current.append((pre, box))
            current.sort(key=lambda pb: (pb[0], len(pb[1].dom) > 0))
        else:
            if current:
                columns.append(current)
            current = [(offset, box)]
    if current:
        columns.append(current)
    return columns


def layout(diagram: Diagram) -> Layout:
    """Lay out ``diagram`` (see module docstring); regions are laid out recursively."""
    return _Engine().run(diagram)


# --------------------------------------------------------------------------- the engine
class _Slot:
    """A live array: its wires' top ``y`` and where each wire's straight run started."""

    __slots__ = ("array", "top", "runs", "names")

    def __init__(self, array, top: float, runs):
        self.array, self.top = array, top
        self.names = array.names or (None,)
        self.runs = list(runs) if not isinstance(runs, (int, float)) else [runs] * len(self.names)

    def ys(self):
        return [self.top + k * WIRE for k in range(len(self.names))]

    @property
    def bottom(self):
        return self.top + (len(self.names) - 1) * WIRE


def _height(array) -> float:
    return (max(1, len(array.axes)) - 1) * WIRE


def _stack(arrays, top: float) -> list[float]:
    tops = []
    for a in arrays:
        tops.append(top)
        top += _height(a) + GAP
    return tops


def _free_y(ys, lo: float, hi: float, centre: float, radius: float, above: float) -> float:
    """The y in [lo, hi] nearest ``centre`` at least ``radius`` from every wire (else ``above``)."""
    ys = sorted(set(ys))
    options = [(a + b) / 2 for a, b in zip(ys, ys[1:]) if b - a >= 2 * radius and lo <= (a + b) / 2 <= hi]
    return min(options, key=lambda o: abs(o - centre)) if options else above


class _Seg:
    """One entry of a function column: an identity array, a box, or a region."""

    def __init__(self, kind, ins, box=None):
        self.kind, self.ins, self.box = kind, ins, box
        self.outs = [] if box is None else list(box.cod.inside)
        self.delta, self.width, self.body = 0.0, 0.0, None
        self.pre = []           # per output array, per wire: [(x offset from the segment's left | None, y)]


class _Engine:
    def __init__(self):
        self.items = []

    # ---- emission helpers
    def wire(self, array, name, x0, x1, y, role="wire", halo=False):
        if x1 - x0 > 1e-9:
            item = not array.axes
            self.items.append(Line(((x0, y), (x1, y)), level_color(array.level), 2.2 if item else 1.2,
                                   "dotted" if item else "solid", role, False, halo, array.level, name))

    def bend(self, array, name, p, q):
        if abs(p[1] - q[1]) < 1e-9:
            return self.wire(array, name, p[0], q[0], p[1])
        mx = (p[0] + q[0]) / 2
        self.items.append(Line((p, (mx, p[1]), (mx, q[1]), q), level_color(array.level),
                               2.2 if not array.axes else 1.2, "dotted" if not array.axes else "solid",
                               "wire", True, False, array.level, name))

    def end(self, slot, k, x):
        self.wire(slot.array, slot.names[k], slot.runs[k], x, slot.top + k * WIRE)
        slot.runs[k] = x

    def dot(self, x, y, color=BLACK, r=0.09):
        self.items.append(Shape("circle", ((x, y),), r, color, None, role="dot"))

    # ---- the diagram
    def run(self, diagram: Diagram) -> Layout:
        slots = [_Slot(a, t, 0.0) for a, t in zip(diagram.dom.inside, _stack(diagram.dom.inside, 0.0))]
        inputs = [s.ys() for s in slots]
        x = self.data_column(slots, slots, 0.0)
        columns = foliate(diagram)
        for column in columns:
            slots, born, x = self.column(slots, column, x)
            x = self.data_column(slots, born, x)
        for s in slots:
            for k in range(len(s.names)):
                self.end(s, k, x)
        return Layout(self.items, x, self.bbox(x), inputs, [s.ys() for s in slots], len(columns))

    def bbox(self, width):
        xs, ys = [0.0, width], [0.0]
        for i in self.items:
            if isinstance(i, Label):
                (x, y), w, h = i.pos, CHAR * len(i.text) * i.size / 9, 0.4 * i.size / 9
                x0 = x - w / 2 if i.anchor == "c" else x
                y0 = y - h if i.anchor == "sw" else y if i.anchor == "nw" else y - h / 2
                xs += [x0, x0 + w]
                ys += [y0, y0 + h]
            else:
                r = i.size if isinstance(i, Shape) and i.geometry == "circle" else 0.0
                for x, y in i.points:
                    xs += [x - r, x + r]
                    ys += [y - r, y + r]
        return (min(xs), min(ys), max(xs), max(ys))

    def data_column(self, slots, born, x):
        """Wire labels of the arrays born here, and dashed lines between the arrays of the tuple."""
        w = 0.55
        for s in born:
            for k, a in enumerate(s.array.axes):
                text, tex, math = size_label(a.size)
                self.items.append(Label((x + 0.08, s.top + k * WIRE - 0.07), text, tex, "sw", 9.0,
                                        level_color(s.array.level), "wire", math))
                w = max(w, 0.2 + CHAR * len(text) * (0.75 if math and "_" in text else 1.0))
        for up, down in zip(slots, slots[1:]):
            ym = (up.bottom + down.top) / 2
            self.items.append(Line(((x + 0.05, ym), (x + w - 0.05, ym)), GREY, 0.8, "dashed", "separator"))
        return x + w

    def column(self, slots, column, x0):
        segs, boxes, i = [], dict(), 0
        for off, box in column:
            boxes.setdefault(off, []).append(box)
        while i <= len(slots):
            for box in boxes.get(i, []):
                k = len(box.dom)
                seg = _Seg("box", slots[i:i + k], box)
                anchor = slots[i - 1].bottom + GAP if i else (slots[0].top - GAP if slots else 0.0)
                self.measure(seg, anchor)
                segs.append(seg)
                i += k
                if k:
                    break
            else:
                if i < len(slots):
                    seg = _Seg("id", [slots[i]])
                    seg.outs, seg.body = [slots[i].array], (slots[i].top, slots[i].bottom)
                    seg.out_tops = [slots[i].top]
                    seg.pre = [[[("run", y)] for y in slots[i].ys()]]
                    segs.append(seg)
                i += 1
        # body sweep: pictograms and frames must not overlap (their inputs bend down)
        prev = -1e9
        for seg in segs:
            if seg.body is not None:
                seg.delta = max(0.0, prev + BODY_GAP - seg.body[0])
                prev = seg.body[1] + seg.delta
        # output sweep: the arrays of the next data column are stacked in order
        prev, finals = -1e9, []
        for seg in segs:
            tops = [t + seg.delta for t in seg.out_tops] if seg.outs else []
            push = max(0.0, prev + GAP - tops[0]) if tops else 0.0
            tops = [t + push for t in tops]
            if tops:
                prev = tops[-1] + _height(seg.outs[-1])
            finals.append(tops)
        entry = 0.7 if any(s.delta > 1e-9 for s in segs) else 0.0
        body = max([s.width for s in segs] + [0.0])
        move = 0.0
        for seg, tops in zip(segs, finals):
            for arr, t, wires in zip(seg.outs, tops, seg.pre):
                for k, sources in enumerate(wires):
                    for _, y in sources:
                        move = max(move, abs(t + k * WIRE - y - seg.delta) + (len(sources) > 1))
        bend = min(2.4, 0.8 + 0.2 * move) if move > 1e-9 else 0.0
        bx0 = x0 + entry
        bx1, x1 = bx0 + body, bx0 + body + bend
        out_slots, born = [], []
        for seg, tops in zip(segs, finals):
            for s in seg.ins:
                if seg.delta > 1e-9:
                    for k, y in enumerate(s.ys()):
                        self.end(s, k, x0)
                        self.bend(s.array, s.names[k], (x0, y), (bx0, y + seg.delta))
                        s.runs[k] = bx0
                    s.top += seg.delta
            sx0 = bx0 + (body - seg.width) / 2
            if seg.kind == "id":
                slot = seg.ins[0]
                for k, y in enumerate(slot.ys()):
                    if abs(tops[0] + k * WIRE - y) > 1e-9:
                        self.end(slot, k, bx1)
                        self.bend(slot.array, slot.names[k], (bx1, y), (x1, tops[0] + k * WIRE))
                        slot.runs[k] = x1
                slot.top = tops[0]
                out_slots.append(slot)
                continue
            self.emit(seg, sx0, bx1, x1, tops)
            for arr, t, wires in zip(seg.outs, tops, seg.pre):
                slot = _Slot(arr, t, x1)
                for k, sources in enumerate(wires):
                    y_out = t + k * WIRE
                    (off, y), = sources[:1] or [(None, y_out - seg.delta)]
                    xs = bx1 if off is None else sx0 + off
                    if len(sources) == 1 and abs(y + seg.delta - y_out) < 1e-9:
                        slot.runs[k] = xs
                        continue
                    for off, y in sources:
                        xs = bx1 if off is None else sx0 + off
                        self.wire(arr, slot.names[k], xs, bx1, y + seg.delta)
                        self.bend(arr, slot.names[k], (bx1, y + seg.delta), (x1, y_out))
                    if is_structural(seg.box) == "merge":
                        self.dot(x1, y_out, level_color(arr.level))
                out_slots.append(slot)
                if seg.kind == "region" or not is_structural(seg.box):
                    born.append(slot)
        return out_slots, born, x1

    # ---- measuring a box: its width, body extent, natural outputs and pre-bend sources
    def measure(self, seg, anchor):
        from napkin_cat.bubbles import Region
        box = seg.box
        ins_ys = [y for s in seg.ins for y in s.ys()]
        lo, hi = (min(ins_ys), max(ins_ys)) if ins_ys else (anchor, anchor)
        seg.body = (lo, hi) if ins_ys else None
        struct = is_structural(box)
        if isinstance(box, Region):
            return self.measure_region(seg, lo, hi)
        if struct in ("swap", "copy", "merge"):
            if struct == "swap":
                n = len(box.left)
                seg.pre = [[[(0.0, y)] for y in s.ys()] for s in seg.ins[n:] + seg.ins[:n]]
            elif struct == "copy":
                seg.pre = [[[(None, y)] for y in seg.ins[0].ys()] for _ in seg.outs]
            else:
                seg.pre = [[[(None, s.ys()[k]) for s in seg.ins] for k in range(len(seg.ins[0].names))]]
            block = sum(_height(a) for a in seg.outs) + GAP * (len(seg.outs) - 1)
            seg.out_tops = _stack(seg.outs, lo if struct == "swap" else (lo + hi - block) / 2)
            return
        if struct == "discard":
            seg.width, seg.out_tops = 0.25, []
            return
        spec = box.data
        shape = kind_of(spec.kind).shape
        text, tex = _box_text(box)
        woven = set() if shape == "transfer" else set(spec.weave_names)
        core_in, weave_src = [], {}
        for s in seg.ins:
            for n, y in zip(s.names, s.ys()):
                (weave_src.setdefault(n, []) if n in woven else core_in).append(y)
        n_out = sum(1 for a in seg.outs for n in (a.names or (None,)) if n not in woven)
        c_lo, c_hi = (min(core_in), max(core_in)) if core_in else (lo, hi)
        cy = (c_lo + c_hi) / 2
        if shape == "contract" and core_in:
            cy = _free_y(ins_ys, c_lo, c_hi, cy, 0.25, cy)
        elif not core_in:
            cy = _free_y(ins_ys, lo, hi, cy, 0.32, lo - 0.62) if ins_ys else anchor
        pre_core = core_in if n_out == len(core_in) else [cy + (i - (n_out - 1) / 2) * WIRE
                                                            for i in range(n_out)]
        ext = core_in + pre_core + [cy]
        if shape == "triangle":
            top, bot = min(ext) - 0.38, max(ext) + 0.38
            w = min(1.3, max(0.75, 0.55 * (bot - top)))
        elif shape == "transfer":
            top, bot, w = lo - 0.3, hi + 0.3, 0.5
        elif shape == "contract":
            top, bot, w = min(ext) - 0.15, max(ext) + 0.15, 0.9
        elif shape == "circle":
            top, bot = cy - 0.28, cy + 0.28
            w = 0.56 if len(text) <= 2 else 0.3 + 0.85 * CHAR * len(text)
        else:
            top, bot = min(ext) - 0.3, max(ext) + 0.3
            w = max(0.7, 0.3 + CHAR * len(text))
        seg.width, seg.geom = w, (shape, cy, top, bot, text, tex, woven)
        seg.body = (min(top, lo), max(bot, hi))

        def offset(y):
            if shape == "triangle":
                return w * (1 - abs(y - cy) / ((bot - top) / 2))
            if shape == "transfer":
                return 0.55 * w + self.notch(y, cy, top, bot, w)
            return w
        it = iter(pre_core)
        seg.pre = [[[(w, y) for y in weave_src.get(n, [])] or [(w, cy)] if n in woven
                    else [(offset(y), y) for y in [next(it)]] for n in (a.names or (None,))]
                   for a in seg.outs]
        same = [s for s in seg.ins if seg.outs and s.array.names == seg.outs[0].names]
        if same:
            seg.out_tops = _stack(seg.outs, same[0].top)
        else:
            ys = [y for wires in seg.pre for srcs in wires for _, y in srcs] or [cy]
            block = sum(_height(a) for a in seg.outs) + GAP * (len(seg.outs) - 1)
            seg.out_tops = _stack(seg.outs, sum(ys) / len(ys) - block / 2)

    @staticmethod
    def notch(y, cy, top, bot, w):
        return 0.45 * w * (1 - abs(y - cy) / ((bot - top) / 2))

    def measure_region(self, seg, lo, hi):
        box, inner = seg.box, _Engine().run(seg.box.arg)
        seg.kind, seg.inner = "region", inner
        ix = PAD_X - min(0.0, inner.bbox[0])
        right = ix + max(inner.width, inner.bbox[2])
        seg.width = w = max(right + PAD_X, 0.4 + 0.8 * CHAR * len(box.name))
        dy = seg.ins[0].top - inner.inputs[0][0] if seg.ins and inner.inputs else lo - inner.bbox[1]
        ftop, fbot = inner.bbox[1] + dy - TITLE - PAD_Y, inner.bbox[3] + dy + PAD_Y
        seg.geom = (ix, dy, ftop, fbot)
        seg.body = (min(ftop, lo), max(fbot, hi))
        outs = inner.outputs
        seg.pre = [[[(ix + inner.width, outs[j][k] + dy)] if j < len(outs) and k < len(outs[j])
                    else [(w, (ftop + fbot) / 2)] for k in range(len(a.names or (None,)))]
                   for j, a in enumerate(seg.outs)]
        seg.out_tops = ([outs[j][0] + dy for j in range(len(seg.outs))] if len(outs) == len(seg.outs)
                        else _stack(seg.outs, seg.pre[0][0][0][1] if seg.outs else 0.0))

    # ---- emitting a box's body (its input wires end here)
    def emit(self, seg, sx0, bx1, x1, tops):
        struct, d = is_structural(seg.box), seg.delta
        if seg.kind == "region":
            return self.emit_region(seg, sx0)
        if struct:
            for s in seg.ins:
                for k, y in enumerate(s.ys()):
                    x = {"swap": sx0, "discard": sx0 + 0.12}.get(struct, bx1)
                    self.end(s, k, x)
                    if struct in ("copy", "discard"):
                        self.dot(x, y, level_color(s.array.level))
            return
        shape, cy, top, bot, text, tex, woven = seg.geom
        cy, top, bot, w = cy + d, top + d, bot + d, seg.width
        dot = (sx0 + 0.6 * w, cy)
        for s in seg.ins:
            for k, (n, y) in enumerate(zip(s.names, s.ys())):
                if n in woven:
                    self.end(s, k, sx0)
                    self.wire(s.array, n, sx0, sx0 + w, y, role="weave", halo=True)
                elif shape == "transfer":
                    self.end(s, k, sx0 + self.notch(y, cy, top, bot, w))
                else:
                    self.end(s, k, sx0)
                    if shape == "contract":
                        self.bend(s.array, n, (sx0, y), dot)
        out = seg.outs[0].level if seg.outs else 0
        if shape == "triangle":
            self.items.append(Shape("polygon", ((sx0, top), (sx0, bot), (sx0 + w, cy)), role="triangle"))
            sub = text[len("SoftMax"):] if text.startswith("SoftMax") else text
            if sub:
                self.items.append(Label((sx0 + 0.33 * w, cy), sub, tex_escape(sub), "c", 8.0, role="box"))
            return
        if shape == "contract":
            self.items.append(Shape("circle", (dot,), 0.1, BLACK, BLACK, role="contract"))
            return
        if shape == "transfer":
            n = self.notch(cy, cy, top, bot, w)
            pts = ((sx0, top), (sx0 + 0.55 * w, top), (sx0 + w, cy), (sx0 + 0.55 * w, bot), (sx0, bot),
                   (sx0 + n, cy))
            self.items.append(Shape("polygon", pts, 0.0, level_color(out), level_color(out), role="chevron"))
            return
        if shape == "circle" and len(text) <= 2:
            self.items.append(Shape("circle", ((sx0 + w / 2, cy),), 0.28, role="map"))
        else:
            self.items.append(Shape("rect", ((sx0, top), (sx0 + w, bot)), 0.28 if shape == "circle" else 0.08,
                                    role="map" if shape == "circle" else "box"))
        self.items.append(Label((sx0 + w / 2, cy), text, tex, "c", 10.0 if len(text) <= 2 else 8.5,
                                role="box"))

    def emit_region(self, seg, sx0):
        box, inner, d = seg.box, seg.inner, seg.delta
        ix, dy, ftop, fbot = seg.geom
        for i, s in enumerate(seg.ins):
            for k, y in enumerate(s.ys()):
                self.end(s, k, sx0)
                if i < len(inner.inputs) and k < len(inner.inputs[i]):
                    self.bend(s.array, s.names[k], (sx0, y), (sx0 + ix, inner.inputs[i][k] + dy + d))
        self.items.extend(_shift(item, sx0 + ix, dy + d) for item in inner.items)
        color = level_color(box.params.get("level", 0)) if box.region == "kernel" else (0.3, 0.3, 0.3)
        self.items.append(Shape("rect", ((sx0, ftop + d), (sx0 + seg.width, fbot + d)), 0.25, None, color,
                                "dashed", "frame", 1.1))
        self.items.append(Label((sx0 + 0.15, ftop + d + 0.1), box.name, tex_escape(box.name), "nw", 8.0,
                                color, "title"))
