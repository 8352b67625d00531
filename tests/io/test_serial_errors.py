"""Tests of napkin_cat.io.serial: every documented error names its path; hostile documents are refused
without executing anything."""
from __future__ import annotations

import builtins
import copy
import json
import os

import pytest
import sympy

import napkin_cat as nc
from napkin_cat import library
from napkin_cat.syntax.adapter import Diagram
from napkin_cat.syntax.flat import is_structural
from napkin_cat.syntax.axis import symbol
from napkin_cat.algorithms.bubbles import REGIONS, Kernel, Region
from napkin_cat.errors import SerialisationError, UnknownPrimitiveError
from napkin_cat.io.serial import (dumps, expression_from_json, from_json, loads,
                               to_json)

SOFTMAX = nc.Id("q x", x=4) >> nc.softmax("q x", over="x", beta=sympy.Rational(1, 8), x=4)


def doc_of(d: Diagram) -> dict:
    return json.loads(dumps(d))


def load_doc(doc) -> Diagram:
    return loads(json.dumps(doc))


# --------------------------------------------------------------------------- errors
def test_dumps_rejects_what_it_cannot_write(scratch_kinds):
    with pytest.raises(SerialisationError, match="dumps takes a napkin_cat Diagram, got str"):
        dumps("not a diagram")
    nc.declare("odd", lambda xs, core: [xs[0]])
    d = nc.apply("odd", "n", params={"obj": object()})
    with pytest.raises(SerialisationError, match=r"diagram\.params\.obj: cannot serialise "
                                                 r"a parameter of type object"):
        dumps(d)
    d = nc.apply("odd", "n", params={"c": sympy.Symbol("a b")})
    with pytest.raises(SerialisationError, match=r"diagram\.params\.c\.expr: symbol name 'a b' is not "
                                                 r"identifier-like"):
        dumps(d)
    d = nc.apply("odd", "n", params={"c": sympy.I})
    with pytest.raises(SerialisationError, match=r"params\.c\.expr: cannot serialise the sympy "
                                                 r"ImaginaryUnit I; serialisable nodes are"):
        dumps(d)


@pytest.mark.parametrize("text, message", [
    ("{not json", r"malformed JSON at line 1 column 2"),
    ("", r"malformed JSON at line 1 column 1"),
    ('{"napkin_cat": 1, "diagram": NaN}', r"malformed JSON: non-standard JSON constant NaN"),
    ('{"napkin_cat": ' + "9" * 5000 + "}", r"malformed JSON: .*integer string conversion"),
    ("[1, 2]", r"document: expected a JSON object"),
    ('{"diagram": {}}', r"document: missing field 'napkin_cat'"),
    ('{"napkin_cat": 2, "diagram": {}}', r"napkin_cat: unsupported format version 2; this napkin_cat reads "
                                         r"version 1"),
    ('{"napkin_cat": "1", "diagram": {}}', r"unsupported format version \"1\""),
    ('{"napkin_cat": true, "diagram": {}}', r"unsupported format version true"),
    ('{"napkin_cat": 1}', r"document: a napkin_cat document is missing field\(s\) \['diagram'\]"),
    ('{"napkin_cat": 1, "diagram": {"dom": [], "cod": [], "layers": []}, "x": 0}',
     r"document: a napkin_cat document has unknown field\(s\) \['x'\]"),
    ('{"napkin_cat": 1, "diagram": []}', r"diagram: expected a diagram \(an object with fields "
                                         r"\['dom', 'cod', 'layers'\]\), got \[\]"),
    ('{"napkin_cat": 1, "diagram": {"dom": [], "cod": []}}',
     r"diagram: a diagram is missing field\(s\) \['layers'\]"),
    ('{"napkin_cat": 1, "diagram": {"dom": [], "cod": [], "layers": {}}}',
     r"diagram\.layers: expected a list of layers"),
    ('{"napkin_cat": 1, "diagram": {"dom": 3, "cod": [], "layers": []}}',
     r"diagram\.dom: expected a list of arrays, got 3"),
    ("[" * 100000 + "]" * 100000, r"malformed JSON: nested too deeply"),
])
def test_malformed_documents(text, message):
    with pytest.raises(SerialisationError, match=message):
        loads(text)


def test_loads_rejects_non_strings():
    with pytest.raises(SerialisationError, match="loads takes a JSON string, got dict"):
        loads({"napkin_cat": 1})
    assert loads(dumps(SOFTMAX).encode()) == SOFTMAX  # bytes are fine


def _mutated(mutate, d=SOFTMAX):
    doc = copy.deepcopy(doc_of(d))
    mutate(doc)
    return json.dumps(doc)


BOX = lambda doc, i=0: doc["diagram"]["layers"][i]["box"]  # noqa: E731


@pytest.mark.parametrize("mutate, message", [
    # arrays
    (lambda doc: doc["diagram"]["dom"][0].update(dtype="fp64"),
     r"diagram\.dom\[0\]\.dtype: unknown dtype \"fp64\"; legal dtypes are "
     r"\['bf16', 'bool', 'fp16', 'fp32', 'fp8', 'int32'\]"),
    (lambda doc: doc["diagram"]["dom"][0].update(level=-1),
     r"diagram\.dom\[0\]\.level: a level is an integer 0 … 16, got -1"),
    (lambda doc: doc["diagram"]["dom"][0].update(level=True),
     r"diagram\.dom\[0\]\.level: a level is an integer 0 … 16, got true"),
    (lambda doc: doc["diagram"]["dom"][0].pop("dtype"),
     r"diagram\.dom\[0\]: an array is missing field\(s\) \['dtype'\]"),
    (lambda doc: doc["diagram"]["dom"][0].update(shape=[1]),
     r"diagram\.dom\[0\]: an array has unknown field\(s\) \['shape'\]"),
    (lambda doc: doc["diagram"]["dom"][0].update(axes="q x"),
     r"diagram\.dom\[0\]\.axes: expected a list of \[name, size\] pairs"),
    (lambda doc: doc["diagram"]["dom"][0]["axes"].__setitem__(0, ["q"]),
     r"diagram\.dom\[0\]\.axes\[0\]: an axis is a pair \[name, size\]"),
    (lambda doc: doc["diagram"]["dom"][0]["axes"].__setitem__(0, ["1q", 3]),
     r"diagram\.dom\[0\]\.axes\[0\]\[0\]: axis name \"1q\" is not legal"),
    (lambda doc: doc["diagram"]["dom"][0]["axes"].__setitem__(0, ["q", 0]),
     r"diagram\.dom\[0\]\.axes\[0\]\[1\]: size of axis 'q' must be a positive integer, got 0"),
    (lambda doc: doc["diagram"]["dom"][0]["axes"].__setitem__(0, ["q", 2.5]),
     r"diagram\.dom\[0\]\.axes\[0\]\[1\]: expected an expression, got 2\.5"),
    (lambda doc: doc["diagram"]["dom"][0]["axes"].__setitem__(0, ["q", ["Rational", 1, 0]]),
     r"axes\[0\]\[1\]\[2\]: the denominator of a Rational must not be 0"),
    # layers and boxes
    (lambda doc: doc["diagram"]["layers"][0].update(offset="0"),
     r"diagram\.layers\[0\]\.offset: expected a wire offset, got \"0\""),
    (lambda doc: doc["diagram"]["layers"][0].update(offset=1),
     r"diagram\.layers\[0\]\.offset: offset 1 is out of range: the box takes 1 wire\(s\) and there are 1, "
     r"so legal offsets are 0\.\.0"),
    (lambda doc: doc["diagram"]["layers"][0].pop("box"),
     r"diagram\.layers\[0\]: a layer is missing field\(s\) \['box'\]"),
    (lambda doc: BOX(doc).update(type="lambda"),
     r"diagram\.layers\[0\]\.box\.type: unknown box type \"lambda\"; legal types are \['box', 'swap'"),
    (lambda doc: BOX(doc).pop("type"), r"diagram\.layers\[0\]\.box: a box is missing field 'type'"),
    (lambda doc: BOX(doc).pop("weaves"),
     r"diagram\.layers\[0\]\.box: a 'box' box is missing field\(s\) \['weaves'\]"),
    (lambda doc: BOX(doc).update(kind=3),
     r"diagram\.layers\[0\]\.box\.kind: a kind is a string naming a declared primitive kind, got 3"),
    (lambda doc: BOX(doc).update(name=None), r"diagram\.layers\[0\]\.box\.name: a box name is a string"),
    (lambda doc: BOX(doc).update(weaves=[{"name": "q", "inputs": [3]}]),
     r"diagram\.layers\[0\]\.box\.weaves\[0\]\.inputs\[0\]: input index 3 out of range; the box has "
     r"inputs 0\.\.0"),
    (lambda doc: BOX(doc).update(weaves=[{"name": "q"}]),
     r"diagram\.layers\[0\]\.box\.weaves\[0\]: a weave is missing field\(s\) \['inputs'\]"),
    (lambda doc: BOX(doc).update(weaves=[{"name": "q", "inputs": []}]),
     r"diagram\.layers\[0\]\.box: inconsistent 'softmax' box: softmax: weave axis 'q' and input 0"),
    (lambda doc: BOX(doc)["cod"][0]["axes"].pop(),
     r"diagram\.layers\[0\]\.box: inconsistent 'softmax' box"),
    (lambda doc: BOX(doc)["cod"][0]["axes"].append(["q", "q"]),
     r"diagram\.layers\[0\]\.box\.cod\[0\]\.axes: an array carries each axis once, but 'q' appears twice"),
    (lambda doc: BOX(doc)["dom"][0].update(level=1),
     r"diagram\.layers\[0\]\.box: the box takes \['q×x\[4\]@1'\] but the wires at offset 0 carry "
     r"\['q×x\[4\]'\]"),
    (lambda doc: doc["diagram"]["cod"][0].update(dtype="fp16"),
     r"diagram\.cod: the layers output \['q×x\[4\]'\] but the diagram declares \['q×x\[4\]:fp16'\]"),
    # parameters
    (lambda doc: BOX(doc).update(params=[]), r"diagram\.layers\[0\]\.box\.params: expected an object of "
                                             r"parameters"),
    (lambda doc: BOX(doc)["params"].update(beta={"eval": "1"}),
     r"diagram\.layers\[0\]\.box\.params\.beta: a tagged parameter value is an object with exactly one key "
     r"among \['expr', 'tuple', 'dict', 'float'\], got keys \['eval'\]"),
    (lambda doc: BOX(doc)["params"].update(beta={"float": "1e400"}),
     r"params\.beta\.float: a tagged float is 'inf', '-inf' or 'nan'"),
    (lambda doc: BOX(doc)["params"].update(beta={"tuple": 3}), r"params\.beta\.tuple: expected a list"),
    (lambda doc: BOX(doc)["params"].update(beta={"expr": ["Function", "f", "x"]}),
     r"params\.beta\.expr\[0\]: expression node \"Function\" is not allowed; allowed nodes are \['Symbol'"),
    (lambda doc: BOX(doc)["params"].update(beta={"expr": "__import__('os').system('x')"}),
     r"params\.beta\.expr: symbol name \"__import__\('os'\)\.system\('x'\)\" is not legal"),
    (lambda doc: BOX(doc)["params"].update(beta={"expr": ["Symbol", "a b", {}]}),
     r"params\.beta\.expr\[1\]: symbol name \"a b\" is not legal"),
    (lambda doc: BOX(doc)["params"].update(beta={"expr": ["Symbol", "a", {"evil": True}]}),
     r"params\.beta\.expr\[2\]\.evil: unknown assumption; legal assumptions are"),
    (lambda doc: BOX(doc)["params"].update(beta={"expr": ["Symbol", "a", {"positive": "yes"}]}),
     r"params\.beta\.expr\[2\]\.positive: an assumption is true or false"),
    (lambda doc: BOX(doc)["params"].update(beta={"expr": ["Symbol", "a", {"positive": True,
                                                                          "negative": True}]}),
     r"params\.beta\.expr\[2\]: inconsistent assumptions"),
    (lambda doc: BOX(doc)["params"].update(beta={"expr": ["Pow", 10, 10 ** 9]}),
     r"params\.beta\.expr\[2\]: an exponent of a number is limited to ±1024"),
    (lambda doc: BOX(doc)["params"].update(beta={"expr": ["Pow", "x"]}),
     r"params\.beta\.expr: node 'Pow' takes 2 argument\(s\), got 1"),
    (lambda doc: BOX(doc)["params"].update(beta={"expr": ["Float", 1, 0, 10 ** 6]}),
     r"params\.beta\.expr\[3\]: a Float's precision is 2\.\.1024 bits"),
    (lambda doc: BOX(doc)["params"].update(beta={"expr": 2 ** 600}),
     r"params\.beta\.expr: integers in expressions are limited to 512 bits"),
    (lambda doc: BOX(doc)["params"].update(beta={"expr": ["Rational", 1, 2 ** 600]}),
     r"params\.beta\.expr\[2\]: integers in expressions are limited to 512 bits"),
    (lambda doc: BOX(doc)["params"].update(beta={"expr": ["Mul"] + [2 ** 511 + 1] * 200}),
     r"params\.beta\.expr: the numbers of this Mul exceed 65536 bits together"),
    (lambda doc: BOX(doc)["params"].update(beta={"expr": ["Pow", ["Pow", 2 ** 511 + 1, ["Rational", 1, 2]],
                                                          1000]}),
     r"params\.beta\.expr: the power of a number is limited to about 65536 bits"),
    (lambda doc: BOX(doc)["params"].update(beta={"expr": {"Add": [1, 2]}}),
     r"params\.beta\.expr: expected an expression, got \{\"Add\": \[1, 2\]\}"),
    (lambda doc: BOX(doc)["params"].update(beta={"expr": True}),
     r"params\.beta\.expr: a boolean is not an expression"),
])
def test_documented_errors_name_the_path(mutate, message):
    with pytest.raises(SerialisationError, match=message):
        loads(_mutated(mutate))


def test_unknown_kind_is_an_unknown_primitive_error():
    text = _mutated(lambda doc: BOX(doc).update(kind="frobnicate"))
    with pytest.raises(UnknownPrimitiveError, match=r"diagram\.layers\[0\]\.box\.kind: unknown primitive "
                                                    r"kind 'frobnicate'; declared kinds are \[.*'softmax'"):
        loads(text)


@pytest.mark.parametrize("mutate, message", [
    (lambda doc: BOX(doc, 0).update(n=0), r"diagram\.layers\[0\]\.box\.n: a copy makes at least 1 copy, "
                                          r"got 0 \(use 'discard' for 0\)"),
    (lambda doc: BOX(doc, 0).update(n="2"), r"diagram\.layers\[0\]\.box\.n: expected the number of copies"),
    (lambda doc: BOX(doc, 0).update(dom=[]), r"diagram\.layers\[0\]\.box\.dom: a copy acts on exactly one "
                                             r"array, got 0"),
    (lambda doc: BOX(doc, 0).update(extra=1), r"diagram\.layers\[0\]\.box: a 'copy' box has unknown "
                                              r"field\(s\) \['extra'\]"),
    (lambda doc: BOX(doc, 1).update(right=[]), r"diagram\.layers\[1\]\.box: a swap needs at least one array "
                                               r"on each side"),
    (lambda doc: BOX(doc, 1).update(left=BOX(doc, 1)["right"]),
     r"diagram\.layers\[1\]\.box: the box takes .* but the wires at offset 1 carry"),
])
def test_structural_box_errors(mutate, message):
    b = nc.Builder(nc.types("n d, d"))
    X, g = b.inputs
    d = b.build(g, X, X)  # a copy, then swaps
    assert [is_structural(x) for x in d.boxes][:2] == ["copy", "swap"]
    with pytest.raises(SerialisationError, match=message):
        loads(_mutated(mutate, d))


@pytest.mark.parametrize("mutate, message", [
    (lambda doc: BOX(doc).update(region="triton"),
     r"diagram\.layers\[0\]\.box\.region: unknown region \"triton\"; registered regions are \[.*'kernel'"),
    (lambda doc: BOX(doc).update(params={"level": {"expr": ["Function"]}}),
     r"diagram\.layers\[0\]\.box\.params\.level\.expr\[0\]: expression node \"Function\" is not allowed"),
    (lambda doc: BOX(doc)["diagram"]["layers"][0]["box"].update(kind="nope"), None),
    (lambda doc: BOX(doc)["diagram"]["layers"][1]["box"]["params"].update(
        beta={"expr": ["Pow", "x", "__class__()"]}), None),
    (lambda doc: BOX(doc)["diagram"].pop("layers"),
     r"diagram\.layers\[0\]\.box\.diagram: a diagram is missing field\(s\) \['layers'\]"),
])
def test_region_errors_name_the_nested_path(mutate, message):
    k = Kernel.around(nc.at_level(nc.einsum("q d, x d -> q x") >> nc.softmax("q x", over="x", beta=0.5), 1),
                      level=1)
    text = _mutated(mutate, Diagram.id(k.dom) >> k)
    if message is None:
        with pytest.raises((SerialisationError, UnknownPrimitiveError),
                           match=r"diagram\.layers\[0\]\.box\.diagram\.layers\[[01]\]\.box\."):
            loads(text)
    else:
        with pytest.raises(SerialisationError, match=message):
            loads(text)


def test_region_that_rejects_its_content_is_reported(tagged_region):
    class Picky(Region):
        region = "test_picky"

        @classmethod
        def rebuild(cls, arg, dom, cod, params):
            if "level" not in params:
                raise ValueError("Picky needs a 'level' parameter")
            return cls(arg, dom, cod, params)

    REGIONS[Picky.region] = Picky
    try:
        r = Picky(SOFTMAX, SOFTMAX.dom, SOFTMAX.cod, {"level": 0})
        text = _mutated(lambda doc: BOX(doc).update(params={}), Diagram.id(r.dom) >> r)
        with pytest.raises(SerialisationError, match=r"diagram\.layers\[0\]\.box: the 'test_picky' region "
                                                     r"does not accept this content: Picky needs a 'level'"):
            loads(text)
    finally:
        del REGIONS[Picky.region]


def test_deeply_nested_expression_is_rejected():
    tree = 1
    for _ in range(5000):
        tree = ["Add", tree, 1]
    with pytest.raises(SerialisationError, match=r"x: an expression has at most 256 nodes"):
        expression_from_json(tree, "x")
    deep = '["Add", ' * 600 + "1" + ", 1]" * 600
    text = _mutated(lambda doc: BOX(doc)["params"].update(beta={"expr": "PLACEHOLDER"}))
    with pytest.raises(SerialisationError, match=r"params\.beta\.expr: an expression has at most 256 nodes"):
        loads(text.replace('"PLACEHOLDER"', deep))
    deep = '["Add", ' * 100000 + "1" + ", 1]" * 100000
    with pytest.raises(SerialisationError, match=r"nested too deeply"):
        loads(text.replace('"PLACEHOLDER"', deep))


def test_from_json_and_to_json_are_the_dict_level_api():
    doc = to_json(SOFTMAX)
    assert from_json(doc) == SOFTMAX
    with pytest.raises(SerialisationError, match=r"document: expected a JSON object"):
        from_json("{}")


# --------------------------------------------------------------------------- safety
MALICIOUS_EXPRESSIONS = [
    "__import__('os').system('x')",
    "os.system",
    ["Function", "system", "x"],
    ["__import__", "os"],
    ["eval", "1"],
    ["Symbol", "__import__('os').system('x')", {}],
    ["Lambda", "x", "x"],
    ["Add", 1, ["exec", "print(1)"]],
    ["Symbol", "x", {"positive": True, "__class__": True}],
]


@pytest.fixture
def tripwires(monkeypatch):
    """Any call to eval/exec/compile/os.system/sympify-on-strings during loads fails the test."""
    calls = []

    def trip(name):
        def f(*args, **kwargs):
            calls.append((name, args))
            raise AssertionError(f"{name} was called with {args!r}")
        return f

    for name in ("eval", "exec", "compile"):
        monkeypatch.setattr(builtins, name, trip(name))
    monkeypatch.setattr(os, "system", trip("os.system"))
    monkeypatch.setattr(sympy, "parse_expr", trip("parse_expr"), raising=False)
    import sympy.parsing.sympy_parser as parser
    monkeypatch.setattr(parser, "parse_expr", trip("parse_expr"))
    monkeypatch.setattr(parser, "eval_expr", trip("eval_expr"))
    import pickle
    monkeypatch.setattr(pickle, "loads", trip("pickle.loads"))
    return calls


@pytest.mark.parametrize("payload", MALICIOUS_EXPRESSIONS)
def test_malicious_expressions_are_rejected_without_executing_anything(payload, tripwires):
    as_param = _mutated(lambda doc: BOX(doc)["params"].update(beta={"expr": payload}))
    as_size = _mutated(lambda doc: [a["axes"].__setitem__(0, ["q", payload])
                                    for a in (doc["diagram"]["dom"][0], doc["diagram"]["cod"][0])])
    for text in (as_param, as_size):
        with pytest.raises(SerialisationError, match=r"is not (allowed|legal)|unknown assumption"):
            loads(text)
    assert tripwires == []


def test_legitimate_documents_load_without_eval_or_parsing(tripwires):
    texts = [dumps(d) for d in (library.transformer_block(), library.attention(d=64),
                                Kernel.around(nc.at_level(library.attention(), 1), level=1))]
    for text in texts:
        loads(text)
    assert tripwires == []


def test_malicious_names_elsewhere_are_rejected():
    for mutate, message in [
        (lambda doc: BOX(doc).update(kind="__import__('os').system('x')"), r"unknown primitive kind"),
        (lambda doc: BOX(doc)["weaves"][0].update(name="q;rm -rf"),
         r"weaves\[0\]\.name: a weave names an axis"),
        (lambda doc: doc["diagram"]["dom"][0]["axes"][0].__setitem__(0, "q)"),
         r"axis name \"q\)\" is not legal"),
    ]:
        with pytest.raises((SerialisationError, UnknownPrimitiveError), match=message):
            loads(_mutated(mutate))


def test_symbols_decode_as_napkin_axis_symbols():
    d = nc.einsum("q d, x d -> q x")
    e = loads(dumps(d))
    assert e.dom.inside[0].axes[0].size is symbol("q")
    assert expression_from_json(["Symbol", "m", {}]) == sympy.Symbol("m")
    assert expression_from_json(["Symbol", "m", {}]) != symbol("m")
