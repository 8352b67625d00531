"""JSON serialisation of diagrams: :func:`dumps` and :func:`loads`, with no code execution.

A document is ``{"napkin_cat": 1, "diagram": D}`` where a diagram ``D`` is::

    {"dom": [A, ...], "cod": [A, ...], "layers": [{"offset": k, "box": B}, ...]}

or, when the diagram *is* a single box (discopy tells a box from the one-box
diagram around it, and so does equality), that box ``B`` itself;

an array ``A`` is ``{"axes": [[name, size], ...], "level": int, "dtype": "fp32"|"fp16"|"bf16"|"fp8"}``
and a box ``B`` is one of::

    {"type": "box", "kind": k, "name": n, "dom": [A], "cod": [A],
     "weaves": [{"name": axis, "inputs": [int, ...]}, ...],   # innermost first
     "params": {key: V}}
    {"type": "swap", "left": [A], "right": [A]}
    {"type": "copy", "dom": [A], "n": int}                      # n >= 1 copies (1: discopy's identity copy)
    {"type": "discard", "dom": [A]}
    {"type": "merge", "cod": [A], "n": int}
    {"type": "region", "region": key, "params": {key: V}, "dom": [A], "cod": [A], "diagram": D}

The left and right context of each layer is not stored: it is recomputed from
the wires, which also checks that every box fits where it is placed.

A size is a JSON integer or an *expression tree*: an integer is ``Integer``, a
string is the axis symbol of that name (``napkin_cat.syntax.axis.symbol``: positive,
integer), and a list ``[node, args...]`` is one of ``Symbol`` (name and
assumptions), ``Rational`` (p, q), ``Float`` (mantissa, exponent, precision:
exactly ``mantissa * 2**exponent``), ``Add``, ``Mul``, ``Pow``, the functions
``floor``, ``ceiling``, ``Max``, ``Min``, ``exp``, ``log``, ``Abs``, ``Mod`` and the
constants ``["pi"]``, ``["E"]``, ``["oo"]``.  Trees are decoded by building the
sympy objects directly; strings are never parsed or evaluated as code.  Numbers
are bounded so that a hostile document cannot make sympy build huge ones:
integers and rationals up to 512 bits, Floats up to 1024 bits of precision, the
numbers an ``Add``/``Mul``/``Pow`` combines up to 65536 bits, exponents of a
number up to ±1024.

A parameter value ``V`` is JSON ``null``/``true``/``false``/number/string/list,
or a tagged object with one key: ``{"expr": tree}`` (a sympy expression),
``{"tuple": [V, ...]}``, ``{"dict": {key: V}}``, ``{"float": "inf"|"-inf"|"nan"}``.

Limits (a document past them is refused before anything is built, so that a document cannot take minutes or exhaust
memory, :mod:`napkin_cat.io.extent`; within them a document loads in time linear in its length): at most
:data:`MAX_DOCUMENT_CHARS` characters and :data:`~napkin_cat.io.extent.MAX_VALUES` JSON values,
:data:`~napkin_cat.io.extent.MAX_LAYERS` layers and :data:`~napkin_cat.io.extent.MAX_ARRAYS` arrays in the whole
document (regions' insides included), :data:`MAX_WIRES` wires side by side (inputs, outputs, one layer's wires, a
merge's inputs), :data:`~napkin_cat.io.extent.MAX_AREA` wires summed over the layers (each layer holds the wires
beside its box), :data:`MAX_COPIES` copies from one copy box, and :data:`~napkin_cat.syntax.axis.MAX_AXES` axes in
an array; expression trees have their own limits (:mod:`napkin_cat.io.exprjson`). A box or an array written again
(the same JSON) is built once.

Every error raised by :func:`loads` is a :class:`~napkin_cat.errors.SerialisationError`
naming the place in the document (e.g. ``diagram.layers[3].box.kind``) and what
would be legal; an unknown primitive kind raises
:class:`~napkin_cat.errors.UnknownPrimitiveError` instead.

>>> import napkin_cat as nc
>>> att = nc.library.attention(d=64)
>>> text = dumps(att)
>>> loads(text) == att
True
>>> import json; json.loads(text)["diagram"]["dom"][0]
{'axes': [['q', 'q'], ['d', 64]], 'level': 0, 'dtype': 'fp32'}
>>> import sympy; expression_to_json(1 / nc.symbol("d") ** sympy.Rational(1, 2))
['Pow', 'd', ['Rational', -1, 2]]
>>> loads('{"napkin_cat": 2, "diagram": {}}')
Traceback (most recent call last):
...
napkin_cat.errors.SerialisationError: napkin_cat: unsupported format version 2; this napkin_cat reads ...
"""
from __future__ import annotations

import json
from types import SimpleNamespace


from napkin_cat.algorithms.bubbles import REGIONS, Region
from napkin_cat.rewriting.trace import HOOKS
from napkin_cat.syntax.array import MAX_LEVEL, Array
from napkin_cat.syntax.adapter import Box, Bubble, Diagram, Ty
from napkin_cat.syntax.flat import from_layers, is_structural, layers
from napkin_cat.syntax.weave import build_box
from napkin_cat.syntax.axis import MAX_AXES, Axis
from napkin_cat.syntax.dtype import DTYPES
from napkin_cat.errors import NapkinError, SerialisationError, UnknownPrimitiveError
from napkin_cat.syntax.primitive import KINDS, Spec, Weave
from napkin_cat.io.extent import check_extent
from napkin_cat.io.exprjson import (LEGAL_NAME, checked_int, count_values, expression_from_json,  # noqa: F401
                                    expression_to_json, fail_at, show_value, value_from_json, value_to_json)

VERSION = 1
#: the most copies one copy box makes in a document (discopy builds an n-copy box in time ~n²)
MAX_COPIES = 1024
#: the most wires side by side in a document's diagram
MAX_WIRES = 4096
#: the most characters of a document: thirty times the largest diagram of the library (the gradient of
#: ``transformer_block``, 144,312), refused before ``json.loads`` (1.5 s for 5 MB on a loaded two-core machine)
MAX_DOCUMENT_CHARS = 1 << 22



def _params_to_json(params: dict, path: str) -> dict:
    out = {}
    for k, v in params.items():
        if not isinstance(k, str):
            fail_at(path, f"parameter keys must be strings, got {k!r}")
        out[k] = value_to_json(v, f"{path}.{k}")
    return out


def _params_from_json(obj, path: str) -> dict:
    if not isinstance(obj, dict):
        fail_at(path, f"expected an object of parameters, got {show_value(obj)}")
    return {k: value_from_json(v, f"{path}.{k}") for k, v in obj.items()}


# =========================================================================== arrays
def _size_to_json(size, path):
    return expression_to_json(size, path)


def array_to_json(array: Array, path: str = "array") -> dict:
    """An array as JSON: ``{"axes": [[name, size], …], "level", "dtype"}`` (``path``: where it sits, for errors).

    >>> import napkin_cat as nc
    >>> a = nc.types("q d", q=4).inside[0]
    >>> array_from_json(array_to_json(a)) == a
    True
    """
    return {"axes": [[a.name, _size_to_json(a.size, f"{path}.axes[{i}][1]")]
                     for i, a in enumerate(array.axes)],
            "level": array.level, "dtype": array.dtype.name}


def _fields(obj, path: str, required: tuple, what: str) -> dict:
    if not isinstance(obj, dict):
        fail_at(path, f"expected {what} (an object with fields {list(required)}), got {show_value(obj)}")
    missing = [k for k in required if k not in obj]
    if missing:
        fail_at(path, f"{what} is missing field(s) {missing}; its fields are {list(required)}")
    extra = sorted(k for k in obj if k not in required)
    if extra:
        fail_at(path, f"{what} has unknown field(s) {extra}; its fields are {list(required)}")
    return obj


def array_from_json(obj, path: str = "array") -> Array:
    """The array of :func:`array_to_json`'s JSON, each field checked (an error naming ``path`` and the field)."""
    _fields(obj, path, ("axes", "level", "dtype"), "an array")
    axes_obj = obj["axes"]
    if not isinstance(axes_obj, list):
        fail_at(f"{path}.axes", f"expected a list of [name, size] pairs, got {show_value(axes_obj)}")
    if len(axes_obj) > MAX_AXES:
        fail_at(f"{path}.axes", f"{len(axes_obj)} axes; an array carries at most {MAX_AXES} (the most dimensions "
                                "numpy holds before numpy 2)")
    axes = []
    for i, pair in enumerate(axes_obj):
        where = f"{path}.axes[{i}]"
        if not isinstance(pair, list) or len(pair) != 2:
            fail_at(where, f"an axis is a pair [name, size], got {show_value(pair)}")
        name, size = pair
        if not isinstance(name, str) or not LEGAL_NAME.match(name):
            fail_at(f"{where}[0]", f"axis name {show_value(name)} is not legal: use an identifier-like "
                                   "name such as 'q', 'd_k' or 'x2'")
        value = expression_from_json(size, f"{where}[1]")
        try:
            axes.append(Axis(name, value))
        except NapkinError as e:
            fail_at(f"{where}[1]", str(e))
    level = obj["level"]
    if isinstance(level, bool) or not isinstance(level, int) or not 0 <= level <= MAX_LEVEL:
        fail_at(f"{path}.level", f"a level is an integer 0 … {MAX_LEVEL}, got {show_value(level)}")
    dtype = obj["dtype"]
    if not isinstance(dtype, str) or dtype not in DTYPES:
        fail_at(f"{path}.dtype", f"unknown dtype {show_value(dtype)}; legal dtypes are {sorted(DTYPES)}")
    try:
        return Array(tuple(axes), level, dtype)
    except NapkinError as e:      # an axis named twice
        fail_at(f"{path}.axes", str(e))


def _arrays_shown(arrays, most: int = 8) -> str:
    """A list of arrays for a message: the first ``most``, then how many more."""
    shown = [str(a) for a in arrays[:most]]
    return str(shown) if len(arrays) <= most else f"{shown[:-1] + ['…']} ({len(arrays)} arrays)"


def _arrays_to_json(ty: Ty, path: str) -> list:
    return [array_to_json(a, f"{path}[{i}]") for i, a in enumerate(ty.inside)]


def _key(obj):
    """The JSON text of ``obj`` (keys sorted): what a box or an array is built from, so equal texts build equal
    values; None where ``obj`` is not JSON (a dict given to :func:`from_json` may hold anything)."""
    try:
        return json.dumps(obj, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError):
        return None


def _arrays_from_json(obj, path: str, built: dict) -> list:
    if not isinstance(obj, list):
        fail_at(path, f"expected a list of arrays, got {show_value(obj)}")
    out = []
    for i, a in enumerate(obj):
        key = _key(a)
        array = built.get(("array", key)) if key is not None else None
        if array is None:
            array = array_from_json(a, f"{path}[{i}]")
            if key is not None:
                built["array", key] = array
        out.append(array)
    return out


# =========================================================================== boxes and diagrams
def _box_to_json(box, path: str) -> dict:
    if getattr(box, "is_dagger", False):
        fail_at(path, f"cannot serialise the dagger of {box!r}")
    kind = is_structural(box)
    if kind == "swap":
        return {"type": "swap", "left": _arrays_to_json(box.left, f"{path}.left"),
                "right": _arrays_to_json(box.right, f"{path}.right")}
    if kind == "copy":
        return {"type": "copy", "dom": _arrays_to_json(box.dom, f"{path}.dom"), "n": len(box.cod)}
    if kind == "discard":
        return {"type": "discard", "dom": _arrays_to_json(box.dom, f"{path}.dom")}
    if kind == "merge":
        return {"type": "merge", "cod": _arrays_to_json(box.cod, f"{path}.cod"), "n": len(box.dom)}
    if isinstance(box, Region):
        if REGIONS.get(box.region) is not type(box):
            fail_at(path, f"region {box.region!r} ({type(box).__name__}) is not registered in "
                          f"napkin_cat.algorithms.bubbles.REGIONS; registered regions are {sorted(REGIONS)}")
        return {"type": "region", "region": box.region,
                "params": _params_to_json(box.params, f"{path}.params"),
                "dom": _arrays_to_json(box.dom, f"{path}.dom"),
                "cod": _arrays_to_json(box.cod, f"{path}.cod"),
                "diagram": _diagram_to_json(box.arg, f"{path}.diagram")}
    if isinstance(box, Bubble):
        fail_at(path, f"cannot serialise the bubble {box!r}: only regions registered in "
                      "napkin_cat.algorithms.bubbles.REGIONS are serialisable")
    spec = getattr(box, "data", None)
    if not isinstance(spec, Spec):
        fail_at(path, f"cannot serialise {box!r}: it is neither structural, a region, nor a primitive "
                      "box (whose data is a napkin_cat.syntax.primitive.Spec)")
    return {"type": "box", "kind": spec.kind, "name": box.name,
            "dom": _arrays_to_json(box.dom, f"{path}.dom"),
            "cod": _arrays_to_json(box.cod, f"{path}.cod"),
            "weaves": [{"name": w.name, "inputs": list(w.inputs)} for w in spec.weaves],
            "params": _params_to_json(dict(spec.params), f"{path}.params")}


def _diagram_to_json(diagram: Diagram, path: str) -> dict:
    if isinstance(diagram, Box):  # a box is its own one-layer diagram: keep it a box
        return _box_to_json(diagram, path)
    return {"dom": _arrays_to_json(diagram.dom, f"{path}.dom"),
            "cod": _arrays_to_json(diagram.cod, f"{path}.cod"),
            "layers": [{"offset": offset, "box": _box_to_json(box, f"{path}.layers[{i}].box")}
                       for i, (offset, box) in enumerate(layers(diagram))]}


_BOX_FIELDS = {
    "box": ("type", "kind", "name", "dom", "cod", "weaves", "params"),
    "swap": ("type", "left", "right"),
    "copy": ("type", "dom", "n"),
    "discard": ("type", "dom"),
    "merge": ("type", "cod", "n"),
    "region": ("type", "region", "params", "dom", "cod", "diagram"),
}


def _one_box(diagram: Diagram, path: str, what: str):
    if len(diagram.boxes) != 1:
        fail_at(path, f"{what} does not make a single box; use single-array {what}s")
    return diagram.boxes[0]


def _box_from_json(obj, path: str, built: dict):
    """The box of ``obj``; ``built``: the arrays and boxes this document built so far, by their JSON text (a box
    written again is built once; a region is not looked up, its text being as long as its inside)."""
    key = _key(obj) if isinstance(obj, dict) and obj.get("type") != "region" else None
    if key is not None and ("box", key) in built:
        return built["box", key]
    box = _new_box(obj, path, built)
    if key is not None:
        built["box", key] = box
    return box


def _new_box(obj, path: str, built: dict):
    if not isinstance(obj, dict):
        fail_at(path, f"expected a box (an object with a 'type' among {list(_BOX_FIELDS)}), got {show_value(obj)}")
    if "type" not in obj:
        fail_at(path, f"a box is missing field 'type'; legal types are {list(_BOX_FIELDS)}")
    t = obj["type"]
    if not isinstance(t, str) or t not in _BOX_FIELDS:
        fail_at(f"{path}.type", f"unknown box type {show_value(t)}; legal types are {list(_BOX_FIELDS)}")
    _fields(obj, path, _BOX_FIELDS[t], f"a {t!r} box")
    if t == "swap":
        left = _arrays_from_json(obj["left"], f"{path}.left", built)
        right = _arrays_from_json(obj["right"], f"{path}.right", built)
        if not left or not right:
            fail_at(path, "a swap needs at least one array on each side")
        return _one_box(Diagram.swap(Ty(*left), Ty(*right)), path, "swap")
    if t in ("copy", "discard"):
        dom = _arrays_from_json(obj["dom"], f"{path}.dom", built)
        if len(dom) != 1:
            fail_at(f"{path}.dom", f"a {t} acts on exactly one array, got {len(dom)}")
        n = 0
        if t == "copy":
            n = checked_int(obj["n"], f"{path}.n", "the number of copies (an integer >= 1)")
            if n < 1:
                fail_at(f"{path}.n", f"a copy makes at least 1 copy, got {n} (use 'discard' for 0)")
            if n > MAX_COPIES:
                fail_at(f"{path}.n", f"a copy makes at most {MAX_COPIES} copies (a limit of this reader), got {n}")
        return _one_box(Diagram.copy(Ty(*dom), n), path, t)
    if t == "merge":
        cod = _arrays_from_json(obj["cod"], f"{path}.cod", built)
        if len(cod) != 1:
            fail_at(f"{path}.cod", f"a merge makes exactly one array, got {len(cod)}")
        n = checked_int(obj["n"], f"{path}.n", "the number of merged wires (an integer >= 2)")
        if n < 2:
            fail_at(f"{path}.n", f"a merge takes at least 2 wires, got {n}")
        if n > MAX_COPIES:
            fail_at(f"{path}.n", f"a merge takes at most {MAX_COPIES} wires (a limit of this reader), got {n}")
        return _one_box(Diagram.merge(Ty(*cod), n), path, "merge")
    if t == "region":
        return _region_from_json(obj, path, built)
    return _primitive_from_json(obj, path, built)


def _region_from_json(obj, path: str, built: dict):
    key = obj["region"]
    if not isinstance(key, str) or key not in REGIONS:
        fail_at(f"{path}.region", f"unknown region {show_value(key)}; registered regions are {sorted(REGIONS)}")
    params = _params_from_json(obj["params"], f"{path}.params")
    dom = _arrays_from_json(obj["dom"], f"{path}.dom", built)
    cod = _arrays_from_json(obj["cod"], f"{path}.cod", built)
    arg = _diagram_from_json(obj["diagram"], f"{path}.diagram", built)
    try:
        return REGIONS[key].rebuild(arg, Ty(*dom), Ty(*cod), params)
    except SerialisationError:
        raise
    except (NapkinError, TypeError, ValueError, KeyError, AssertionError) as e:
        fail_at(path, f"the {key!r} region does not accept this content: {e}")


def _primitive_from_json(obj, path: str, built: dict):
    kind = obj["kind"]
    if not isinstance(kind, str):
        fail_at(f"{path}.kind", f"a kind is a string naming a declared primitive kind, got {show_value(kind)}")
    if kind not in KINDS:
        raise UnknownPrimitiveError(f"{path}.kind: unknown primitive kind {kind!r}; "
                                    f"declared kinds are {sorted(KINDS)}")
    name = obj["name"]
    if not isinstance(name, str):
        fail_at(f"{path}.name", f"a box name is a string, got {show_value(name)}")
    dom = _arrays_from_json(obj["dom"], f"{path}.dom", built)
    cod = _arrays_from_json(obj["cod"], f"{path}.cod", built)
    weaves_obj = obj["weaves"]
    if not isinstance(weaves_obj, list):
        fail_at(f"{path}.weaves", f"expected a list of weaves, got {show_value(weaves_obj)}")
    weaves = []
    for i, w in enumerate(weaves_obj):
        where = f"{path}.weaves[{i}]"
        _fields(w, where, ("name", "inputs"), "a weave")
        if not isinstance(w["name"], str) or not LEGAL_NAME.match(w["name"]):
            fail_at(f"{where}.name", f"a weave names an axis (identifier-like), got {show_value(w['name'])}")
        inputs = w["inputs"]
        if not isinstance(inputs, list):
            fail_at(f"{where}.inputs", f"expected a list of input indices, got {show_value(inputs)}")
        for j, k in enumerate(inputs):
            checked_int(k, f"{where}.inputs[{j}]", "an input index")
            if not 0 <= k < len(dom):
                fail_at(f"{where}.inputs[{j}]", f"input index {k} out of range; the box has inputs "
                                                f"0..{len(dom) - 1}")
        weaves.append(Weave(w["name"], tuple(inputs)))
    params = _params_from_json(obj["params"], f"{path}.params")
    try:
        box = build_box(kind, dom, cod, weaves, params, name=name)
    except (NapkinError, TypeError, ValueError) as e:
        fail_at(path, f"inconsistent {kind!r} box: {e}")
    except Exception as e:  # a user-declared kind's check may raise anything
        fail_at(path, f"the {kind!r} kind rejects this box: {type(e).__name__}: {e}")
    return box


def _diagram_from_json(obj, path: str, built: dict) -> Diagram:
    if isinstance(obj, dict) and "type" in obj:  # a diagram that is a single box: the box (its own one-layer diagram)
        return _box_from_json(obj, path, built)
    _fields(obj, path, ("dom", "cod", "layers"), "a diagram")
    dom = _arrays_from_json(obj["dom"], f"{path}.dom", built)
    cod = _arrays_from_json(obj["cod"], f"{path}.cod", built)
    layers_obj = obj["layers"]
    if not isinstance(layers_obj, list):
        fail_at(f"{path}.layers", f"expected a list of layers, got {show_value(layers_obj)}")
    if len(dom) > MAX_WIRES or len(cod) > MAX_WIRES:
        fail_at(path, f"more than {MAX_WIRES} inputs or outputs (a limit of this reader)")
    wires = list(dom)
    items = []
    for i, layer in enumerate(layers_obj):
        where = f"{path}.layers[{i}]"
        _fields(layer, where, ("offset", "box"), "a layer")
        box = _box_from_json(layer["box"], f"{where}.box", built)
        offset = checked_int(layer["offset"], f"{where}.offset", "a wire offset")
        k = len(box.dom)
        if not 0 <= offset <= len(wires) - k:
            fail_at(f"{where}.offset", f"offset {offset} is out of range: the box takes {k} wire(s) and "
                                       f"there are {len(wires)}, so legal offsets are 0..{len(wires) - k}")
        here = wires[offset:offset + k]
        if list(box.dom.inside) != here:
            fail_at(f"{where}.box", f"the box takes {[str(a) for a in box.dom.inside]} but the wires at "
                                    f"offset {offset} carry {[str(a) for a in here]}")
        items.append((Ty(*wires[:offset]), box, Ty(*wires[offset + k:])))
        wires[offset:offset + k] = list(box.cod.inside)
        if len(wires) > MAX_WIRES:
            fail_at(where, f"{len(wires)} wires side by side, more than this reader's limit of {MAX_WIRES}")
    if wires != cod:
        fail_at(f"{path}.cod", f"the layers output {_arrays_shown(wires)} but the diagram declares "
                               f"{_arrays_shown(cod)}")
    return from_layers(Ty(*dom), Ty(*cod), items)


# =========================================================================== entry points
def to_json(diagram: Diagram) -> dict:
    """The JSON document (a dict) of a diagram."""
    if not isinstance(diagram, Diagram):
        raise SerialisationError(f"dumps takes a napkin_cat Diagram, got {type(diagram).__name__}")
    return {"napkin_cat": VERSION, "diagram": _diagram_to_json(diagram, "diagram")}


def from_json(doc) -> Diagram:
    """The diagram of a JSON document (a dict as produced by :func:`to_json`)."""
    if not isinstance(doc, dict):
        raise SerialisationError(f"document: expected a JSON object {{\"napkin_cat\": {VERSION}, "
                                 f"\"diagram\": ...}}, got {show_value(doc)}")
    if "napkin_cat" not in doc:
        raise SerialisationError(f"document: missing field 'napkin_cat' (the format version, {VERSION}); "
                                 "is this a napkin_cat document?")
    version = doc["napkin_cat"]
    if isinstance(version, bool) or not isinstance(version, int) or version != VERSION:
        raise SerialisationError(f"napkin_cat: unsupported format version {show_value(version)}; "
                                 f"this napkin_cat reads version {VERSION}")
    _fields(doc, "document", ("napkin_cat", "diagram"), "a napkin_cat document")
    check_extent(doc["diagram"])
    try:
        return _diagram_from_json(doc["diagram"], "diagram", {})
    except RecursionError:
        raise SerialisationError("diagram: nested too deeply") from None


def dumps(diagram: Diagram, *, indent=None) -> str:
    """Serialise ``diagram`` to a JSON string (see the module docstring for the format)."""
    return json.dumps(to_json(diagram), indent=indent, ensure_ascii=False, allow_nan=False)


def _reject_constant(name):
    raise ValueError(f"non-standard JSON constant {name}")


def loads(text) -> Diagram:
    """Rebuild a diagram from :func:`dumps` output; never executes code from ``text``."""
    if not isinstance(text, (str, bytes, bytearray)):
        raise SerialisationError(f"loads takes a JSON string, got {type(text).__name__}")
    if len(text) > MAX_DOCUMENT_CHARS:
        raise SerialisationError(f"document: {len(text)} characters, more than this reader's limit of "
                                 f"{MAX_DOCUMENT_CHARS}")
    try:
        doc = json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as e:
        raise SerialisationError(f"malformed JSON at line {e.lineno} column {e.colno}: {e.msg}") from None
    except RecursionError:
        raise SerialisationError("malformed JSON: nested too deeply") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise SerialisationError(f"malformed JSON: {e}") from None
    return from_json(doc)


# traces carry their diagrams as JSON through this codec (napkin_cat.rewriting.trace.HOOKS)
HOOKS["codec"] = SimpleNamespace(dumps=dumps, loads=loads)
