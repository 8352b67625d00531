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
recursively inside a dashed, titled frame.  The wires of integers and masks (positions, segment ids,
gather indices, comparisons) are dashed: a mask is a box fed by dashed position wires, not an input.

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


from napkin_cat.render.foliate import foliate
from napkin_cat.render.picture import Z_ORDER, Label, Layout, Line, Shape, shifted, z_order  # noqa: F401
from napkin_cat.render.style import (BLACK, BODY_GAP, CHAR, GAP, GREY, PAD_X, PAD_Y, TITLE, WIRE, box_text,
                                     level_color, size_label)
from napkin_cat.syntax.adapter import Diagram
from napkin_cat.syntax.flat import is_structural
from napkin_cat.syntax.wiring import route
from napkin_cat.syntax.primitive import kind_of
from napkin_cat.algorithms.bubbles import Region

def layout(diagram: Diagram) -> Layout:
    """Lay out ``diagram`` (see module docstring); regions are laid out recursively.

    >>> import napkin_cat as nc
    >>> from napkin_cat.algorithms.bubbles import Kernel
    >>> lay = layout(Kernel.around(nc.at_level(nc.library.matmul(), 1), level=1))
    >>> lay.summary()["frames"], lay.summary()["level_colors"]
    (['Kernel(level=1)'], {1: (0.96, 0.65, 0.14)})
    """
    return _Engine().run(diagram)


# --------------------------------------------------------------------------- the engine
class _Slot:
    """A live array: the ``top`` y of its wires and where each wire's straight run started."""

    __slots__ = ("array", "top", "runs", "names")

    def __init__(self, array, top: float, run: float):
        self.array, self.top, self.names = array, top, array.names or (None,)
        self.runs = [run] * len(self.names)

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


def _free_y(ys, lo: float, hi: float, centre: float, radius: float, default: float) -> float:
    """The y in [lo, hi] nearest ``centre`` at least ``radius`` from every wire, else ``default``."""
    ys = sorted(set(ys))
    options = [(a + b) / 2 for a, b in zip(ys, ys[1:]) if b - a >= 2 * radius and lo <= (a + b) / 2 <= hi]
    return min(options, key=lambda o: abs(o - centre)) if options else default


class _Seg:
    """One entry of a function column: an identity array (``box`` None), a box or a region.

    ``body`` is its vertical extent, ``width`` its width, ``out_tops`` where its
    outputs would like to go and ``pre`` the sources of each output wire:
    ``(x offset from the segment's left, or None for the end of the body zone, y)``.
    """

    def __init__(self, ins, box=None):
        self.ins, self.box, self.delta, self.width = ins, box, 0.0, 0.0
        self.kind = "id" if box is None else "box"
        self.outs = [ins[0].array] if box is None else list(box.cod.inside)
        ys = [y for s in ins for y in s.ys()]
        self.body = (min(ys), max(ys)) if ys else None
        self.out_tops = [ins[0].top] if box is None else []
        self.pre = [[[(0.0, y)] for y in ins[0].ys()]] if box is None else []


class _Engine:
    def __init__(self):
        self.items = []

    def wire(self, array, name, x0, x1, y, role="wire", halo=False, to=None):
        """A straight run of a wire at ``y`` from ``x0`` to ``x1``, or an S-bend to the point ``to``."""
        if to is not None and abs(to[1] - y) > 1e-9:
            points = ((x0, y), ((x0 + to[0]) / 2, y), ((x0 + to[0]) / 2, to[1]), to)
        elif x1 - x0 > 1e-9:
            points = ((x0, y), (x1, y))
        else:
            return
        item = not array.axes
        style = "dotted" if item else "dashed" if array.dtype.is_integer else "solid"    # an index or a mask: dashed
        self.items.append(Line(points, level_color(array.level), 2.2 if item else 1.2, style, role, len(points) == 4,
                               halo, array.level, name))

    def bend(self, array, name, p, q):
        self.wire(array, name, p[0], q[0], p[1], to=q)

    def end(self, slot, k, x):
        self.wire(slot.array, slot.names[k], slot.runs[k], x, slot.top + k * WIRE)
        slot.runs[k] = x

    def dot(self, x, y, color=BLACK):
        self.items.append(Shape("circle", ((x, y),), 0.09, color, None, role="dot"))

    def run(self, diagram: Diagram, outer=None) -> Layout:
        """Lay out ``diagram``; inside a region, label only the inputs that differ from ``outer``."""
        slots = [_Slot(a, t, 0.0) for a, t in zip(diagram.dom.inside, _stack(diagram.dom.inside, 0.0))]
        inputs, outer = [s.ys() for s in slots], list(outer.inside) if outer is not None else []
        x = self.data_column(slots, [s for i, s in enumerate(slots)
                                     if i >= len(outer) or outer[i].axes != s.array.axes], 0.0)
        columns = foliate(diagram)
        for column in columns:
            slots, born, x = self.column(slots, column, x)
            x = self.data_column(slots, born, x)
        for s in slots:
            for k in range(len(s.names)):
                self.end(s, k, x)
        return Layout(self.items, x, self.bbox(x), inputs, [s.ys() for s in slots], len(columns))

    def bbox(self, width):
        x0, y0, x1, y1 = 0.0, 0.0, width, 0.0
        for i in self.items:
            if isinstance(i, Label):
                (x, y), w, h = i.pos, CHAR * len(i.text) * i.size / 9, 0.4 * i.size / 9
                x, y = x - w / 2 * (i.anchor == "c"), y - h * {"sw": 1, "nw": 0, "c": 0.5}[i.anchor]
                x0, y0, x1, y1 = min(x0, x), min(y0, y), max(x1, x + w), max(y1, y + h)
            else:
                r = i.size if getattr(i, "geometry", None) == "circle" else 0.0
                for x, y in i.points:
                    x0, y0, x1, y1 = min(x0, x - r), min(y0, y - r), max(x1, x + r), max(y1, y + r)
        return (x0, y0, x1, y1)

    def data_column(self, slots, born, x):
        """Wire labels of the arrays born here, and dashed lines between the arrays of the tuple."""
        w = 0.75
        for s in born:
            for k, a in enumerate(s.array.axes):
                text, tex = size_label(a.size)
                self.items.append(Label((x + 0.08, s.top + k * WIRE - 0.07), text, tex, "sw", 9.0,
                                        level_color(s.array.level)))
                w = max(w, 0.2 + CHAR * len(text) * (0.75 if "_" in text else 1.0))
        for up, down in zip(slots, slots[1:]):
            ym = (up.bottom + down.top) / 2
            self.items.append(Line(((x + 0.05, ym), (x + w - 0.05, ym)), GREY, 0.8, "dashed", "separator"))
        return x + w

    def column(self, slots, column, x0):
        """One function column: sweep the bodies, then the outputs, then draw (entry | body | bends)."""
        segs, at, i = [], {}, 0
        for off, box in column:
            at.setdefault(off, []).append(box)
        while i <= len(slots):
            for box in at.get(i, []):
                seg = _Seg(slots[i:i + len(box.dom)], box)
                self.measure(seg, slots[i - 1].bottom + GAP if i else (slots[0].top - GAP if slots else 0.0))
                segs.append(seg)
                i += len(box.dom)
                if box.dom:
                    break
            else:
                if i < len(slots):
                    segs.append(_Seg([slots[i]]))
                i += 1
        prev = -1e9                         # bodies must not overlap: their inputs bend down
        for seg in segs:
            if seg.body is not None:
                seg.delta = max(0.0, prev + BODY_GAP - seg.body[0])
                prev = seg.body[1] + seg.delta
        prev, finals, move = -1e9, [], 0.0  # the next data column stacks the outputs in order
        for seg in segs:
            tops = [t + seg.delta for t in seg.out_tops]
            tops = [t + max(0.0, prev + GAP - tops[0]) for t in tops]
            prev = tops[-1] + _height(seg.outs[-1]) if tops else prev
            finals.append(tops)
            move = max([move] + [abs(t + k * WIRE - y - seg.delta) + (len(srcs) > 1)
                                 for t, wires in zip(tops, seg.pre) for k, srcs in enumerate(wires)
                                 for _, y in srcs])
        bx0 = x0 + (0.7 if any(s.delta > 1e-9 for s in segs) else 0.0)
        bx1 = bx0 + max([s.width for s in segs] + [0.0])
        x1 = bx1 + (min(2.4, 0.8 + 0.2 * move) if move > 1e-9 else 0.0)
        out_slots, born = [], []
        for seg, tops in zip(segs, finals):
            for s in seg.ins:
                if seg.delta > 1e-9:
                    for k, y in enumerate(s.ys()):
                        self.end(s, k, x0)
                        self.bend(s.array, s.names[k], (x0, y), (bx0, y + seg.delta))
                        s.runs[k] = bx0
                    s.top += seg.delta
            sx0 = bx0 + (bx1 - bx0 - seg.width) / 2
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
            (self.emit_region if seg.kind == "region" else self.emit)(seg, sx0, bx1)
            inner = seg.box.arg.cod.inside if seg.kind == "region" else None
            for j, (arr, t, wires) in enumerate(zip(seg.outs, tops, seg.pre)):
                slot = _Slot(arr, t, x1)
                for k, sources in enumerate(wires):
                    y_out = t + k * WIRE
                    if len(sources) == 1 and abs(sources[0][1] + seg.delta - y_out) < 1e-9:
                        slot.runs[k] = bx1 if sources[0][0] is None else sx0 + sources[0][0]
                        continue
                    for off, y in sources:
                        self.wire(arr, slot.names[k], bx1 if off is None else sx0 + off, bx1, y + seg.delta)
                        self.bend(arr, slot.names[k], (bx1, y + seg.delta), (x1, y_out))
                    if is_structural(seg.box) == "merge":
                        self.dot(x1, y_out, level_color(arr.level))
                out_slots.append(slot)
                if (inner is None and not is_structural(seg.box)) or (
                        inner is not None and (len(inner) != len(seg.outs) or inner[j].axes != arr.axes)):
                    born.append(slot)
        return out_slots, born, x1

    def measure(self, seg, anchor):
        """A box's width, body, natural output tops and the sources of its output wires."""
        box, ins_ys = seg.box, [y for s in seg.ins for y in s.ys()]
        lo, hi = seg.body or (anchor, anchor)
        struct = is_structural(box)
        if isinstance(box, Region):
            return self.measure_region(seg, lo, hi)
        if struct in ("swap", "copy", "merge"):
            # where each output wire comes from: the wiring's own routing of the input slots; a swap's
            # wires cross the whole box (from its left edge), a copy forks and a merge joins at its right edge
            seg.pre = ([[[(0.0 if struct == "swap" else None, y)] for y in s.ys()] for s in route(box, seg.ins)]
                       if struct != "merge"
                       else [[[(None, s.ys()[k]) for s in seg.ins] for k in range(len(seg.ins[0].names))]])
            block = sum(_height(a) for a in seg.outs) + GAP * (len(seg.outs) - 1)
            seg.out_tops = _stack(seg.outs, lo if struct != "merge" else (lo + hi - block) / 2)
            return
        if struct == "discard":
            seg.width = 0.25
            return
        spec = box.data
        shape, text = kind_of(spec.kind).shape, box_text(box)
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
        elif not core_in:       # a map on items: its label sits between the wires passing over it
            cy = _free_y(ins_ys, lo, hi, cy, 0.45, lo - 0.45) if ins_ys else anchor
        pre_core = core_in if n_out == len(core_in) else [cy + (i - (n_out - 1) / 2) * WIRE
                                                            for i in range(n_out)]
        ext = core_in + pre_core + [cy]
        pad, w = {"triangle": 0.38, "contract": 0.15}.get(shape, 0.3), max(0.7, 0.3 + CHAR * len(text))
        top, bot = min(ext) - pad, max(ext) + pad
        if shape == "triangle":
            w = min(1.3, max(0.75, 0.55 * (bot - top)))
        elif shape == "transfer":
            top, bot, w = lo - 0.3, hi + 0.3, 0.5
        elif shape == "contract":
            w = 0.9
        elif shape == "circle":
            top, bot, w = min(top, lo - 0.3), max(bot, hi + 0.3), max(0.6, 0.35 + CHAR * len(text))
        seg.width, seg.geom = w, (shape, cy, top, bot, text, woven)
        seg.body = (min(top, lo), max(bot, hi))

        def offset(y):          # where a core output leaves the pictogram
            half = (bot - top) / 2
            return {"triangle": w * (1 - abs(y - cy) / half),
                    "transfer": 0.55 * w + 0.45 * w * (1 - abs(y - cy) / half)}.get(shape, w)
        it = iter(pre_core)
        seg.pre = [[[(w, y) for y in weave_src.get(n, [])] or [(w, cy)] if n in woven
                    else [(offset(y), y) for y in [next(it)]] for n in (a.names or (None,))]
                   for a in seg.outs]
        same = [s for s in seg.ins if seg.outs and s.array.names == seg.outs[0].names]
        ys = [y for wires in seg.pre for srcs in wires for _, y in srcs] or [cy]
        block = sum(_height(a) for a in seg.outs) + GAP * (len(seg.outs) - 1)
        seg.out_tops = _stack(seg.outs, same[0].top if same else sum(ys) / len(ys) - block / 2)

    def emit(self, seg, sx0, bx1):
        """Draw a box's pictogram; its input wires end at it, its weave wires pass over it."""
        struct, d = is_structural(seg.box), seg.delta
        if struct:
            for s in seg.ins:
                for k, y in enumerate(s.ys()):
                    x = {"swap": sx0, "discard": sx0 + 0.12}.get(struct, bx1)
                    self.end(s, k, x)
                    if struct in ("copy", "discard"):
                        self.dot(x, y, level_color(s.array.level))
            return
        shape, cy, top, bot, text, woven = seg.geom
        cy, top, bot, w = cy + d, top + d, bot + d, seg.width
        dot, notch = (sx0 + 0.6 * w, cy), (lambda y: 0.45 * w * (1 - 2 * abs(y - cy) / (bot - top)))
        for s in seg.ins:
            for k, (n, y) in enumerate(zip(s.names, s.ys())):
                self.end(s, k, sx0 + notch(y) if shape == "transfer" and n not in woven else sx0)
                if n in woven:
                    self.wire(s.array, n, sx0, sx0 + w, y, role="weave", halo=True)
                elif shape == "contract":
                    self.bend(s.array, n, (sx0, y), dot)
        color = level_color(seg.outs[0].level if seg.outs else 0)
        if shape == "triangle":
            self.items.append(Shape("polygon", ((sx0, top), (sx0, bot), (sx0 + w, cy)), role="triangle"))
            sub = text[len("SoftMax"):] if text.startswith("SoftMax") else text
            if sub:
                self.items.append(Label((sx0 + 0.33 * w, cy), sub, None, "c", 8.0, role="box"))
        elif shape == "contract":
            self.items.append(Shape("circle", (dot,), 0.1, BLACK, BLACK, role="contract"))
        elif shape == "transfer":
            pts = ((sx0, top), (sx0 + 0.55 * w, top), (sx0 + w, cy), (sx0 + 0.55 * w, bot), (sx0, bot),
                   (sx0 + notch(cy), cy))
            self.items.append(Shape("polygon", pts, 0.0, color, color, role="chevron"))
        else:
            self.items.append(Shape("rect", ((sx0, top), (sx0 + w, bot)), min(w / 2, 0.3) if shape == "circle"
                                    else 0.08, role="map" if shape == "circle" else "box"))
            self.items.append(Label((sx0 + w / 2, cy), text, None, "c", 10.0 if len(text) <= 2 else 8.5,
                                    role="box"))

    def measure_region(self, seg, lo, hi):
        box, inner = seg.box, _Engine().run(seg.box.arg, seg.box.dom)
        seg.kind, seg.inner = "region", inner
        ix = PAD_X - min(0.0, inner.bbox[0])
        seg.width = w = max(ix + max(inner.width, inner.bbox[2]) + PAD_X, 0.4 + 0.8 * CHAR * len(box.name))
        dy = seg.ins[0].top - inner.inputs[0][0] if seg.ins and inner.inputs else lo - inner.bbox[1]
        ftop, fbot = inner.bbox[1] + dy - TITLE - PAD_Y, inner.bbox[3] + dy + PAD_Y
        seg.geom, seg.body, outs = (ix, dy, ftop, fbot), (min(ftop, lo), max(fbot, hi)), inner.outputs
        seg.pre = [[[(ix + inner.width, outs[j][k] + dy)] if j < len(outs) and k < len(outs[j])
                    else [(w, (ftop + fbot) / 2)] for k in range(len(a.names or (None,)))]
                   for j, a in enumerate(seg.outs)]
        seg.out_tops = ([outs[j][0] + dy for j in range(len(seg.outs))] if len(outs) == len(seg.outs)
                        else _stack(seg.outs, seg.pre[0][0][0][1] if seg.outs else 0.0))

    def emit_region(self, seg, sx0, bx1):
        """The inner layout, shifted into place, in a dashed frame titled with the region's name."""
        box, inner, d = seg.box, seg.inner, seg.delta
        ix, dy, ftop, fbot = seg.geom
        for i, s in enumerate(seg.ins):
            for k, y in enumerate(s.ys()):
                self.end(s, k, sx0)
                if i < len(inner.inputs) and k < len(inner.inputs[i]):
                    self.bend(s.array, s.names[k], (sx0, y), (sx0 + ix, inner.inputs[i][k] + dy + d))
        self.items.extend(shifted(item, sx0 + ix, dy + d) for item in inner.items)
        color = level_color(box.params.get("level", 0)) if box.region == "kernel" else (0.3, 0.3, 0.3)
        self.items.append(Shape("rect", ((sx0, ftop + d), (sx0 + seg.width, fbot + d)), 0.25, None, color,
                                "dashed", "frame", 1.1))
        self.items.append(Label((sx0 + 0.15, ftop + d + 0.1), box.name, None, "nw", 8.0, color, "title"))
