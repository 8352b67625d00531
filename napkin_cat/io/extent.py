"""A document's extent: the limits a diagram's JSON is checked against before anything of it is built.

A document is refused (a :class:`~napkin_cat.errors.SerialisationError` naming where) past :data:`MAX_VALUES` JSON
values, :data:`MAX_LAYERS` layers, :data:`MAX_ARRAYS` arrays or :data:`MAX_AREA` wires summed over its layers, its
regions' insides included, in one pass over the JSON, in time linear in the document; the reader
(:mod:`napkin_cat.io.serial`) then builds only what fits.  The law: a layer of ``w`` wires beside its box adds ``w``
to the area, and its box changes the wires by its outputs less its inputs (:func:`box_extent`)::

    area = Σ_layers wires(layer),  wires(next) = max(0, wires + outputs(box) − inputs(box))

>>> check_extent({"dom": [{"axes": []}], "cod": [], "layers": [{"offset": 0, "box": {"type": "discard"}}]})
{'layers': 1, 'arrays': 1, 'area': 1}
"""
from __future__ import annotations

from napkin_cat.io.exprjson import count_values, fail_at

#: the most layers in a document, its regions' insides included: fifteen times the largest diagram the library
#: builds (the gradient of ``transformer_block``, 665 layers); a distinct box takes a millisecond or two to build
#: (discopy checks its types), so this bounds the time of a document of distinct boxes (10,000 distinct ``scale``
#: boxes took 14.6 s on a loaded two-core machine; 10,000 identity copies, built once, 1.0 s)
MAX_LAYERS = 10_000
#: the most arrays (``{"axes": …}`` objects) in a document: each distinct one is built with its axes' sizes as
#: sympy expressions
MAX_ARRAYS = 1 << 16
#: the most wires summed over a document's layers: every layer stores the wires beside its box (4,096 distinct
#: copies on 4,096 wires, 16.7 million wire-layers, took 11 s to load), so this is an eighth of that
MAX_AREA = 1 << 21
#: the most JSON values (numbers, strings, lists, objects) in a document: fifty times the largest diagram of the
#: library (the gradient of ``transformer_block``, 19,402 values)
MAX_VALUES = 1 << 20


def box_extent(box) -> tuple:
    """``(arrays, change)`` of a box's JSON: the arrays it writes and how many wires it adds (its outputs less its
    inputs); zero for what is malformed (the reader then says what is wrong)."""
    if not isinstance(box, dict):
        return 0, 0
    arrays = sum(len(box[k]) for k in ("dom", "cod", "left", "right") if isinstance(box.get(k), list))
    n = box.get("n") if isinstance(box.get("n"), int) else 1
    kind = box.get("type")
    change = {"copy": n - 1, "discard": -1, "merge": 1 - n, "swap": 0}.get(kind) if isinstance(kind, str) else None
    if change is None:
        ins, outs = box.get("dom"), box.get("cod")
        change = len(outs) - len(ins) if isinstance(ins, list) and isinstance(outs, list) else 0
    return arrays, change


def check_extent(obj, path: str = "diagram") -> dict:
    """Refuse a diagram's JSON past this reader's limits (:data:`MAX_VALUES`, :data:`MAX_LAYERS`, :data:`MAX_ARRAYS`,
    :data:`MAX_AREA`) before anything is built: one pass over the JSON, its regions' insides included, in time
    linear in the document.  Returns ``{"layers", "arrays", "area"}``.

    >>> check_extent({"dom": [], "cod": [], "layers": [{"offset": 0, "box": {"type": "swap"}}] * 10**5})
    Traceback (most recent call last):
    ...
    napkin_cat.errors.SerialisationError: diagram.layers: the document has more than 10000 layers (regions' ...
    """
    total = {"layers": 0, "arrays": 0, "area": 0}
    limits = {"layers": MAX_LAYERS, "arrays": MAX_ARRAYS, "area": MAX_AREA}
    what = {"layers": "layers", "arrays": "arrays", "area": "wires summed over its layers"}

    def count(key, n, where):
        total[key] += n
        if total[key] > limits[key]:
            fail_at(where, f"the document has more than {limits[key]} {what[key]} (regions' insides included), "
                           f"this reader's limit")

    stack = [(obj, path)]
    while stack:
        d, where = stack.pop()
        if not isinstance(d, dict):
            continue
        if "type" in d:              # a diagram that is a single box
            count("layers", 1, where)
            count("arrays", box_extent(d)[0], where)
            if d.get("type") == "region":
                stack.append((d.get("diagram"), f"{where}.diagram"))
            continue
        ends = [d.get(k) for k in ("dom", "cod")]
        count("arrays", sum(len(e) for e in ends if isinstance(e, list)), where)
        wires = len(ends[0]) if isinstance(ends[0], list) else 0
        items = d.get("layers") if isinstance(d.get("layers"), list) else []
        count("layers", len(items), f"{where}.layers")
        for i, layer in enumerate(items):
            box = layer.get("box") if isinstance(layer, dict) else None
            arrays, change = box_extent(box)
            count("arrays", arrays, f"{where}.layers[{i}]")
            count("area", wires, f"{where}.layers[{i}]")
            wires = max(0, wires + change)
            if isinstance(box, dict) and box.get("type") == "region":
                stack.append((box.get("diagram"), f"{where}.layers[{i}].box.diagram"))
    if count_values(obj, MAX_VALUES) > MAX_VALUES:     # after the layers: a long list of layers is refused at once
        fail_at(path, f"the document has more than {MAX_VALUES} JSON values, this reader's limit")
    return total


__all__ = ["check_extent", "box_extent", "MAX_LAYERS", "MAX_ARRAYS", "MAX_AREA", "MAX_VALUES"]
