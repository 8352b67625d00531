"""``split(f, axis, parts)``: the partition constructor of split streams (:mod:`.splits` says what they mean).

A kernel streamed along ``axis`` gets its stream cut into ``parts`` run by parallel blocks, whose states a
combine merges; ``nc.stream(f, axis, size, parts=P)`` streams and splits at once.

>>> import napkin_cat as nc
>>> split(nc.stream(nc.library.matmul(), "b", "s_b"), "b", 4).boxes[0].arg.boxes[0].params["parts"]
4
"""
from __future__ import annotations

from napkin_cat.algorithms.bubbles import Stream
from napkin_cat.algorithms.partitions import map_kernels
from napkin_cat.algorithms.schedule import schedule_of
from napkin_cat.algorithms.splits import check_splittable
from napkin_cat.errors import RewriteError
from napkin_cat.syntax.flat import from_layers
from napkin_cat.syntax.axis import as_size


def split(diagram, axis: str, parts):
    """Every kernel's stream along ``axis`` split into ``parts`` (an int or a size name); RewriteError saying why
    where none is (no stream along it, one split already, a reducer without a merge).

    >>> import napkin_cat as nc
    >>> d = split(nc.stream(nc.library.matmul(), "b", "s_b"), "b", "p_b")
    >>> d.boxes[0].arg.boxes[0].params["parts"]
    p_b
    """
    reasons = []

    def fn(k):
        items, n = [], 0
        for layer in k.arg.inside:
            left, box, right = layer.boxes_or_types[:3]
            if isinstance(box, Stream) and box.axis == axis:
                if box.params.get("parts") is not None:
                    reasons.append(f"{k.name}: its stream along {axis!r} is split already")
                else:
                    try:
                        new = Stream(box.arg, box.dom, box.cod, {**box.params, "parts": as_size(axis, parts)})
                        check_splittable(schedule_of(new))
                        box, n = new, n + 1
                    except RewriteError as e:
                        reasons.append(f"{k.name}: {e}")
            items.append((left, box, right))
        return type(k).rebuild(from_layers(k.arg.dom, k.arg.cod, items), k.dom, k.cod, k.params) if n else None

    out, n = map_kernels(diagram, fn)
    if not n:
        raise RewriteError(f"cannot split along {axis!r}: " + ("; ".join(reasons) or
                                                              f"no kernel streams along {axis!r} (stream it first)"))
    return out


__all__ = ["split"]
