"""The paper's visual vocabulary: spacings, level colours, size labels and box texts.

>>> level_color(0), level_color(1)
((0.0, 0.0, 0.0), (0.96, 0.65, 0.14))
"""
from __future__ import annotations

import sympy

from napkin_cat.syntax.primitive import kind_of

WIRE = 0.7        # spacing of the wires of one array
GAP = 1.2         # spacing between two arrays of a tuple
BODY_GAP = 0.3    # clearance between pictograms of one function column
PAD_X, PAD_Y, TITLE = 0.45, 0.35, 0.55   # region frame paddings and title band
CHAR = 0.2        # width of one label character at 9pt, in diagram units

BLACK, WHITE, GREY = (0.0, 0.0, 0.0), (1.0, 1.0, 1.0), (0.45, 0.45, 0.45)
LEVEL_COLORS = {0: BLACK, 1: (0.96, 0.65, 0.14), 2: (0.49, 0.83, 0.13), 3: (0.29, 0.56, 0.89)}
PALETTE = [(0.58, 0.40, 0.74), (0.84, 0.15, 0.16), (0.09, 0.75, 0.81), (0.55, 0.34, 0.29)]


def level_color(level: int) -> tuple:
    """The color of memory ``level``: black, orange, green, blue, then a palette.

    >>> level_color(1), level_color(4) == PALETTE[0]
    ((0.96, 0.65, 0.14), True)
    """
    return LEVEL_COLORS.get(level, PALETTE[(level - len(LEVEL_COLORS)) % len(PALETTE)])


# --------------------------------------------------------------------------- labels
def size_label(size) -> tuple[str, str | None]:
    """``(text, tex)`` for an axis size: ``64`` as text, a symbol such as ``g_q`` as math.

    >>> from napkin_cat.syntax.axis import symbol
    >>> size_label(64), size_label(symbol("g_q"))
    (('64', None), ('g_q', 'g_{q}'))
    """
    if isinstance(size, int) or (isinstance(size, sympy.Basic) and size.is_Integer):
        return str(int(size)), None
    return str(size), sympy.latex(size)


def box_text(box) -> str:
    """The text inside a box's pictogram: a box given its own name shows it, any other its kind's symbol
    (``Kind.symbol``: ``+``, ``Σ``, a cast's target, a rename's axes), else its name.

    >>> import napkin_cat as nc
    >>> [box_text(nc.elementwise(k, "n").boxes[0]) for k in ("mul", "exp")], box_text(nc.reduce("sum", "n ->").boxes[0])
    (['×', 'exp'], 'Σ')
    """
    kind = kind_of(box.data.kind)
    return box.name if box.name != kind.label else kind.drawn(box)
