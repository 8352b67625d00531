"""The partition a partition record stands for, built: what a plan (and a time model that reads one) needs.

A partition *record* (:attr:`~napkin_cat.algorithms.bubbles.Partition.relabelled` False: ``nc.group`` /
``nc.stream`` with ``relabelled=False``, a search variant's ``record``) is the bubble around its inside as it was;
the cost functor reads that inside through the relabelling the record stands for
(:meth:`~napkin_cat.algorithms.bubbles.Partition.inside_view`), outermost first.  :func:`built` applies those same
relabellings to the drawing, outermost first, so that it is the partition the partition functions build::

    built(group(…stream(kernel(f), b, s_b, relabelled=False)…, a, g_a, relabelled=False))
        == group(…stream(kernel(f), b, s_b)…, a, g_a)

a record's inside relabelled by :func:`~napkin_cat.syntax.relabel.tile_relabel` (its axis to its size: every array's
for a Stream, the arrays of the full size its outputs carry for a Grid, as seen through the records around it), then
the records inside it built in turn, each partition inside keeping the size it was drawn with (a partition drawn
inside another was drawn after it, in its terms: :meth:`~napkin_cat.algorithms.bubbles.Partition.seen`, a sub-loop's
``u_b`` in the slices ``s_b``); ``cost(built(d)) == cost(d)`` field by field, as for the record and its built
partition.  A diagram without records is returned as it is (the same object).

>>> import napkin_cat as nc
>>> rec = nc.group(nc.stream(nc.library.attention(), "x", "s_x", relabelled=False), "q", "g_q", relabelled=False)
>>> built(rec) == nc.group(nc.stream(nc.library.attention(), "x", "s_x"), "q", "g_q")
True
>>> b = built(rec)
>>> has_records(rec), has_records(b), built(b) is b
(True, False, True)
"""
from __future__ import annotations

from napkin_cat.algorithms.bubbles import Grid, Partition, Region, Stream
from napkin_cat.errors import RewriteError
from napkin_cat.syntax.adapter import Diagram
from napkin_cat.syntax.flat import from_layers, layers
from napkin_cat.syntax.relabel import map_arrays, tile_relabel


def has_records(diagram: Diagram) -> bool:
    """Whether a partition record (a Partition not relabelled) is anywhere in ``diagram``, inside regions too."""
    for _, box in layers(diagram):
        if isinstance(box, Partition) and not box.relabelled:
            return True
        if isinstance(box, Region) and has_records(box.arg):
            return True
    return False


def built(diagram: Diagram) -> Diagram:
    """``diagram`` with every partition record built (see the module docstring for the law); ``diagram`` itself when
    it holds none.  A record of a partition other than a Grid or a Stream (none is drawn) is refused."""
    return _built(diagram, diagram) if has_records(diagram) else diagram


def built_region(region: Region) -> Region:
    """The region ``region`` (a kernel, or a partition record itself) with every partition record in it built, the
    region itself built where it is a record (:func:`built` of a diagram of one box); ``region`` itself when it holds
    none."""
    if not (isinstance(region, Partition) and not region.relabelled) and not has_records(region.arg):
        return region
    return _built_box(region, region)


def _built(diagram: Diagram, drawn: Diagram) -> Diagram:
    """``diagram`` (``drawn`` mapped by the relabellings of the records around it: the same layers, box for box)
    with its records built, each partition's size as ``drawn`` holds it: a partition drawn inside another was drawn
    after it, in its terms (a sub-loop's ``u_b`` inside the slices ``s_b``), as the cost functor reads it
    (:meth:`~napkin_cat.algorithms.bubbles.Partition.seen`), not mapped by the outer relabelling."""
    items = []
    for layer, was in zip(diagram.inside, drawn.inside):
        left, box, right = layer.boxes_or_types[:3]
        items.append((left, _built_box(box, was.boxes_or_types[1]) if isinstance(box, Region) else box, right))
    return from_layers(diagram.dom, diagram.cod, items)


def _built_box(box: Region, was: Region) -> Region:
    params = dict(box.params)
    if isinstance(box, Partition):
        params.update({k: was.params[k] for k in box.size_params if k in was.params})
    if isinstance(box, Partition) and not box.relabelled:
        if type(box) not in (Grid, Stream):
            raise RewriteError(f"{box.name} is a record of a {type(box).__name__}, which has no built form here: "
                               "draw it with relabelled=True")
        del params["relabelled"]
        fa = tile_relabel(box.axis, params["size"], box.full_size() if box.carrier == "cod" else None)
        return type(box).rebuild(_built(map_arrays(box.arg, fa, key=fa.key), was.arg), box.dom, box.cod, params)
    if params == box.params and not has_records(box.arg):
        return box
    return type(box).rebuild(_built(box.arg, was.arg), box.dom, box.cod, params)


__all__ = ["built", "built_region", "has_records"]
