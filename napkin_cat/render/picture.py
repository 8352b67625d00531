"""Backend-independent drawing primitives: lines, shapes, labels, and the :class:`Layout` holding them.

:mod:`napkin_cat.render.layout` produces them; :mod:`napkin_cat.render.draw` (matplotlib) and
:mod:`napkin_cat.render.tikz` print them.  Coordinates are diagram units, ``y`` growing downward.

>>> Line(((0, 0), (1, 0)), (0.0, 0.0, 0.0)).points
((0, 0), (1, 0))
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

BLACK, WHITE = (0.0, 0.0, 0.0), (1.0, 1.0, 1.0)
Z_ORDER = {"frame": 1, "separator": 1.5, "wire": 2, "box": 3, "triangle": 3, "map": 3, "chevron": 3,
           "contract": 4, "halo": 4.5, "weave": 5, "dot": 6, "label": 7}

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
    """A text at ``pos``; ``tex`` is its LaTeX math source when it is typeset as math (axis sizes)."""

    pos: tuple
    text: str
    tex: str | None = None
    anchor: str = "sw"          # sw | c | nw
    size: float = 9.0
    color: tuple = BLACK
    role: str = "wire"          # wire | box | title


def z_order(item) -> float:
    """Drawing order: frames, wires, pictograms, weaves over them, dots, labels."""
    return Z_ORDER["label"] if isinstance(item, Label) else Z_ORDER.get(item.role, 2)


def shifted(item, dx: float, dy: float):
    """The drawing primitive ``item`` (a shape, line or label) moved by ``(dx, dy)``."""
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
                "dashed_separators": all(l.style == "dashed" for l in self.lines("separator"))}
