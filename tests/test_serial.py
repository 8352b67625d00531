"""Tests of napkin_cat.serial: JSON round trips, evaluation agreement, errors, safety."""
from __future__ import annotations

import builtins
import copy
import json
import math
import os

import numpy as np
import pytest
import sympy
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import napkin_cat as nc
from napkin_cat import library, ops
from napkin_cat.adapter import Array, Diagram, Ty, is_structural, layers
from napkin_cat.axis import Axis, symbol
from napkin_cat.bubbles import REGIONS, Kernel, Region
from napkin_cat.errors import SerialisationError, UnknownPrimitiveError
from napkin_cat.evaluate import Env, free_sizes
from napkin_cat.primitive import KINDS
from napkin_cat.serial import (dumps, expression_from_json, expression_to_json, from_json, loads,
                               to_json)
from napkin_cat.weave import all_arrays


# --------------------------------------------------------------------------- helpers
def roundtrip(d: Diagram, *, indent=None) -> Diagram:
    text = dumps(d, indent=indent)
    doc = json.loads(text)
    assert doc["napkin_cat"] == 1
    e = loads(text)
    assert isinstance(e, Diagram) and type(e) is type(d)  # a box comes back a box
    assert e == d, f"round trip changed the diagram:\n{text[:2000]}"
    assert dumps(e, indent=indent) == text  # the document is canonical
    return e


def agree(d: Diagram, e: Diagram, *, sizes=None, low=1, high=4, trials=2, seed=0):
    """``d`` and ``e`` compute the same values (bit for bit, NaN included) on random inputs.

    Symbolic sizes are drawn in ``low..high``; inputs are positive (so sqrt and log are defined).
    """
    rng = np.random.default_rng(seed)
    for _ in range(trials):
        env = {symbol(k): v for k, v in (sizes or {}).items()}
        for s in free_sizes(d):
            env.setdefault(s, int(rng.integers(low, high + 1)))
        xs = [rng.uniform(0.1, 2.0, size=tuple(Env(env).size(a.size, a.name) for a in arr.axes))
              for arr in d.dom.inside]
        named = {str(k): v for k, v in env.items()}
        y1, y2 = nc.evaluate(d, *xs, sizes=named), nc.evaluate(e, *xs, sizes=named)
        y1, y2 = (y1 if isinstance(y1, tuple) else (y1,)), (y2 if isinstance(y2, tuple) else (y2,))
        assert len(y1) == len(y2)
        for a, b in zip(y1, y2):
            np.testing.assert_array_equal(a, b)


def doc_of(d: Diagram) -> dict:
    return json.loads(dumps(d))


def load_doc(doc) -> Diagram:
    return loads(json.dumps(doc))


SOFTMAX = nc.Id("q x", x=4) >> nc.softmax("q x", over="x", beta=sympy.Rational(1, 8), x=4)


# --------------------------------------------------------------------------- library round trips
LIBRARY_SYMBOLIC = {
    "matmul": library.matmul,
    "attention": library.attention,
    "multi_head_attention": library.multi_head_attention,
    "grouped_query_attention": library.grouped_query_attention,
    "linear": library.linear,
    "linear_no_bias": lambda: library.linear(bias=False),
    "mlp": library.mlp,
    "mlp_silu": lambda: library.mlp(activation="silu"),
    "layer_norm": library.layer_norm,
    "rms_norm": library.rms_norm,
    "transformer_block": library.transformer_block,
}

LIBRARY_CONCRETE = {
    "matmul": lambda: library.matmul(a=3, b=4, c=5),
    "attention": lambda: library.attention(q=3, x=5, d=4),
    "multi_head_attention": lambda: library.multi_head_attention(q=3, x=5, d=4, h=2),
    "grouped_query_attention": lambda: library.grouped_query_attention(q=3, x=5, d=4, h=2, g=2),
    "linear": lambda: library.linear(n=2, i=3, o=4),
    "mlp": lambda: library.mlp(n=2, i=3, f=5, o=4),
    "layer_norm": lambda: library.layer_norm(n=3, d=4),
    "rms_norm": lambda: library.rms_norm(n=3, d=4),
    "transformer_block": lambda: library.transformer_block(n=3, e=4, h=2, d=2, f=5),
    "attention_partly_concrete": lambda: library.attention(d=64),
}


@pytest.mark.parametrize("name", sorted(LIBRARY_SYMBOLIC))
def test_library_symbolic_round_trip(name):
    d = LIBRARY_SYMBOLIC[name]()
    e = roundtrip(d)
    agree(d, e)


@pytest.mark.parametrize("name", sorted(LIBRARY_CONCRETE))
def test_library_concrete_round_trip(name):
    d = LIBRARY_CONCRETE[name]()
    e = roundtrip(d, indent=2)
    agree(d, e)


def test_transformer_block_evaluates_the_same_after_round_trip(rng):
    d = library.transformer_block(n=3, e=4, h=2, d=2, f=5)
    e = roundtrip(d)
    shapes = [(3, 4), (4,), (4,), (4, 2, 2), (4, 2, 2), (4, 2, 2), (2, 2, 4), (4,), (4,), (4, 5), (5,),
              (5, 4), (4,)]
    xs = [rng.normal(size=s) for s in shapes]
    np.testing.assert_array_equal(nc.evaluate(d, *xs), nc.evaluate(e, *xs))


def test_attention_keeps_symbolic_inverse_temperature():
    d = library.attention()
    doc = doc_of(d)
    softmax = [layer["box"] for layer in doc["diagram"]["layers"] if layer["box"].get("kind") == "softmax"]
    assert softmax[0]["params"] == {"beta": {"expr": ["Pow", "d", ["Rational", -1, 2]]}}
    e = loads(json.dumps(doc))
    beta = [b for b in e.boxes if getattr(b.data, "kind", None) == "softmax"][0].data.param("beta")
    assert beta == 1 / sympy.sqrt(symbol("d"))


def test_layer_norm_has_swaps_copies_and_discards():
    d = library.layer_norm()
    assert "copy" in {is_structural(b) for b in d.boxes}
    agree(d, roundtrip(d))
    b = nc.Builder(nc.types("n d, d, d"))
    X, g, _unused = b.inputs
    y = b(nc.elementwise("mul", "n d, d -> n d"), X, g)
    d2 = b.build(g, y, X)
    assert {"discard", "copy", "swap"} <= {is_structural(b) for b in d2.boxes}
    agree(d2, roundtrip(d2))


def test_structural_boxes_alone():
    a = Array((Axis("q"), Axis("d", 4)), 1, "fp16")
    b = Array((Axis("x", symbol("s") * 2),), 0, "bf16")
    for d in (Diagram.swap(Ty(a), Ty(b)), Diagram.copy(Ty(a), 3), Diagram.copy(Ty(b), 0),
              Diagram.swap(Ty(a, b), Ty(a)), Diagram.copy(Ty(a, b), 2), Diagram.id(Ty(a, b)),
              Diagram.id(Ty())):
        roundtrip(d)
    m = Diagram.merge(Ty(a), 2)
    assert loads(dumps(m)) == m


def test_every_array_feature_round_trips():
    q, g, s = symbol("q"), symbol("g_q"), symbol("s")
    arrays = [Array(()),
              Array((Axis("q"), Axis("d", 64)), 2, "fp8"),
              Array((Axis("q", q / 2), Axis("x", g * s), Axis("y", g + 3)), 1, "bf16"),
              Array((Axis("z", 2 ** s), Axis("w", sympy.Max(q, 4)), Axis("v", sympy.ceiling(q / 3))), 0,
                    "fp16"),
              Array((Axis("u", sympy.Symbol("u", positive=True)),))]
    d = Diagram.id(Ty(*arrays))
    e = roundtrip(d)
    assert [a for a in e.dom.inside] == arrays


# --------------------------------------------------------------------------- every primitive kind
def one_box_per_builtin_kind() -> dict[str, Diagram]:
    out = {
        "contract": nc.einsum("q d, x d -> q x", d=8),
        "softmax": nc.softmax("h q x", over="x", beta=0.125),
        "softmax_aux": nc.apply("softmax_aux", "q x, q, q -> q x, q, q, q", core="x",
                                params={"beta": 1 / sympy.sqrt(symbol("x"))}),
        "softmax_unscaled": nc.apply("softmax_unscaled", "q x, q, q -> q x, q, q, q", core="x", x=4),
        "split": nc.split("q d", along="q", parts=(2, 3), q=5),
        "join": nc.join("q d", along="q", parts=(symbol("r"), symbol("r")), q=2 * symbol("r")),
        "load": nc.transfer("load", nc.types("q d", d=3).inside[0]),
        "save": nc.transfer("save", nc.types("q d", level=2, dtype="bf16").inside[0]),
        "cast": nc.cast("q d", to="fp8", dtype="fp16"),
        "rename": nc.rename("n d -> m d", n=5),
    }
    for name in ops.UNARY:
        if name in ("scale", "shift"):
            out[name] = nc.elementwise(name, "a b", const=sympy.sqrt(2) / 3 if name == "scale" else -1.5)
        else:
            out[name] = nc.elementwise(name, "a b", b=3)
    for name in ops.BINARY:
        out[name] = nc.elementwise(name, "a b, b -> a b")
    for name in ops.REDUCTIONS:
        out[f"reduce_{name}"] = nc.reduce(name, "a b c -> b", c=2)
    return out


BUILTIN = one_box_per_builtin_kind()


def test_every_builtin_kind_is_covered():
    declared_by_ops = ({"contract", "softmax", "softmax_aux", "softmax_unscaled", "split", "join", "load",
                        "save", "cast", "rename"} | set(ops.UNARY) | set(ops.BINARY)
                       | {f"reduce_{r}" for r in ops.REDUCTIONS})
    assert declared_by_ops <= set(KINDS)
    assert set(BUILTIN) == declared_by_ops
    for kind, d in BUILTIN.items():
        assert d.boxes[0].data.kind == kind


@pytest.mark.parametrize("kind", sorted(BUILTIN))
def test_every_builtin_kind_round_trips_and_agrees(kind):
    d = BUILTIN[kind]
    e = roundtrip(d)
    assert e.boxes[0].data == d.boxes[0].data
    assert e.boxes[0].name == d.boxes[0].name
    agree(d, e)


def test_weaves_keep_their_order_and_inputs():
    d = nc.weave(nc.weave(nc.einsum("q d, x d -> q x"), "h", inputs=[0, 1]), "b", inputs=[1], position=-1)
    spec = d.boxes[0].data
    e = roundtrip(d)
    assert e.boxes[0].data.weaves == spec.weaves
    assert [w["name"] for w in doc_of(d)["diagram"]["layers"][0]["box"]["weaves"]] == list(spec.weave_names)
    agree(d, e)


def test_user_declared_kind_with_all_parameter_types(scratch_kinds):
    nc.declare("affine", lambda xs, core: [core.value(core.params["a"]) * xs[0] + core.params["b"]],
               flops=lambda core: {"general": 2})
    params = {"a": 1 / sympy.sqrt(symbol("n")), "b": 0.25, "mode": "fast", "flag": True, "none": None,
              "sizes": (1, symbol("n"), (2.5, "x")), "as_list": [1, 2], "table": {"k": sympy.Rational(3, 7)},
              "big": float("inf"), "small": float("-inf"), "count": 7, "np": np.float64(0.5)}
    d = nc.apply("affine", "n", params=params)
    e = roundtrip(d)
    loaded = dict(e.boxes[0].data.params)
    for k, v in params.items():
        assert loaded[k] == v and type(loaded[k]) is (float if k == "np" else type(v)), k
    assert math.isnan(dict(loads(dumps(nc.apply("affine", "n", params={"a": 1, "b": float("nan")})))
                           .boxes[0].data.params)["b"])
    agree(d, e)


def test_unknown_user_kind_after_undeclaring(scratch_kinds):
    nc.declare("twice", lambda xs, core: [2 * xs[0]])
    text = dumps(nc.apply("twice", "n"))
    del KINDS["twice"]
    with pytest.raises(UnknownPrimitiveError, match=r"diagram\.kind: unknown primitive "
                                                    r"kind 'twice'; declared kinds are \[.*'contract'"):
        loads(text)


# --------------------------------------------------------------------------- regions
def test_kernel_region_round_trips():
    k = Kernel.around(nc.at_level(library.attention(), 1), level=1)
    e = roundtrip(k)
    assert e.boxes[0].params == {"level": 1} and isinstance(e.boxes[0], Kernel)
    agree(k, e)
    assert doc_of(k)["diagram"]["type"] == "region"  # a bare box is written as that box


def test_kernel_between_loads_and_saves_and_nested():
    att = library.attention(d=8)
    inner = Kernel.around(nc.at_level(att, 2), level=2)
    outer = Kernel.around(_transfers(nc.at_level(att, 1), inner), level=1)
    d = _transfers(att, outer)
    e = roundtrip(d)
    assert isinstance(e.boxes[3], Kernel) and isinstance(e.boxes[3].arg.boxes[3], Kernel)
    agree(d, e)


def _transfers(outside: Diagram, region) -> Diagram:
    """Loads into ``region``'s level, the region, saves back to ``outside``'s level."""
    loads_ = [nc.transfer("load", a) for a in outside.dom.inside]
    saves = [nc.transfer("save", a) for a in region.cod.inside]
    load = loads_[0]
    for b in loads_[1:]:
        load = load @ b
    save = saves[0]
    for b in saves[1:]:
        save = save @ b
    return load >> region >> save


class Tagged(Region):
    """A test-only region: checks that serial is generic over ``REGIONS``."""

    region = "test_tagged"


@pytest.fixture
def tagged_region():
    REGIONS[Tagged.region] = Tagged
    yield Tagged
    del REGIONS[Tagged.region]


def test_any_registered_region_round_trips(tagged_region):
    body = nc.softmax("q x", over="x", beta=0.5)
    params = {"axis": "x", "size": symbol("s_x") * 2, "tiles": (1, 2), "note": None, "ratio": 0.75}
    r = Tagged(body, body.dom, body.cod, params)
    d = nc.elementwise("exp", "q x") >> r >> nc.reduce("sum", "q x -> q")
    e = roundtrip(d)
    assert e.boxes[1].params == params and type(e.boxes[1]) is Tagged
    agree(d, e)
    text = dumps(d)
    del REGIONS[Tagged.region]
    try:
        with pytest.raises(SerialisationError, match=r"diagram\.layers\[1\]\.box\.region: unknown region "
                                                     r"\"test_tagged\"; registered regions are \[.*'kernel'"):
            loads(text)
        with pytest.raises(SerialisationError, match=r"diagram\.layers\[1\]\.box: region 'test_tagged'.*"
                                                     r"not registered"):
            dumps(d)
    finally:
        REGIONS[Tagged.region] = Tagged


@pytest.mark.parametrize("how", ["group", "stream"])
def test_grid_and_stream_regions_round_trip(how):
    """Grid and Stream regions (napkin_cat.algorithm) round-trip with their parameters."""
    from napkin_cat import algorithm
    kernel = Kernel.around(nc.at_level(library.matmul(), 1), level=1)
    d = _transfers(library.matmul(), kernel)
    d = algorithm.group(d, "a", "g_a") if how == "group" else algorithm.stream(d, "b", "s_b")
    regions = [b for b in _all_boxes(d) if isinstance(b, Region)]
    assert {r.region for r in regions} >= {"kernel", "grid" if how == "group" else "stream"}
    e = roundtrip(d)
    agree(d, e, sizes={"g_a": 1, "s_b": 1})


def _all_boxes(d):
    for _, b in layers(d):
        yield b
        if isinstance(b, Region):
            yield from _all_boxes(b.arg)


# --------------------------------------------------------------------------- random diagrams
NAMES = ("a", "b", "c", "i", "j", "k", "h", "w")
SIZES = st.one_of(st.none(), st.integers(1, 4),
                  st.sampled_from([2 * symbol("m"), symbol("g") * symbol("s"), symbol("t") + 1]))
CONSTS = st.one_of(st.floats(-2, 2, allow_nan=False, allow_infinity=False),
                   st.integers(-3, 3),
                   st.sampled_from([sympy.Rational(1, 3), sympy.sqrt(2), sympy.Float(0.1, 30)]))


@st.composite
def random_chain(draw, sizes: dict, level: int, dtype: str):
    """A chain of constructor boxes on one array (extra operands enter through ``@``)."""

    def sz(*groups):
        return {n: sizes[n] for g in groups for n in g if sizes[n] is not None}

    def sig(names):
        return " ".join(names)

    def ident(names):
        return nc.Id(sig(names), level=level, dtype=dtype, **sz(names))

    pool = draw(st.lists(st.sampled_from(NAMES[:6]), min_size=1, max_size=3, unique=True))
    cur = list(pool)
    d = ident(cur)
    for _ in range(draw(st.integers(1, 4))):
        options = ["unary", "scale", "softmax", "binary", "einsum", "weave", "load", "cast"]
        if len(cur) >= 2:
            options.append("reduce")
        op = draw(st.sampled_from(options))
        kw = dict(level=level, dtype=dtype)
        if op == "unary":
            name = draw(st.sampled_from(["exp", "neg", "relu", "tanh", "square", "sigmoid", "id"]))
            g = nc.elementwise(name, sig(cur), **kw, **sz(cur))
        elif op == "scale":
            c = draw(CONSTS)
            if draw(st.booleans()):
                c = 1 / sympy.sqrt(Axis(cur[0], sizes[cur[0]]).size)
            g = nc.elementwise(draw(st.sampled_from(["scale", "shift"])), sig(cur), const=c, **kw, **sz(cur))
        elif op == "softmax":
            over = draw(st.lists(st.sampled_from(cur), min_size=1, max_size=len(cur), unique=True))
            beta = draw(st.one_of(st.just(1), CONSTS.filter(lambda v: v != 1)))
            g = nc.softmax(sig(cur), over=" ".join(over), beta=beta, **kw, **sz(cur))
        elif op == "reduce":
            keep = draw(st.lists(st.sampled_from(cur), min_size=1, max_size=len(cur) - 1, unique=True))
            g = nc.reduce(draw(st.sampled_from(sorted(ops.REDUCTIONS))), f"{sig(cur)} -> {sig(keep)}",
                          **kw, **sz(cur))
            cur = keep
        elif op == "binary":
            other = draw(st.lists(st.sampled_from(cur), min_size=1, max_size=len(cur), unique=True))
            d = d @ ident(other)
            g = nc.elementwise(draw(st.sampled_from(["add", "sub", "mul", "max", "min"])),
                               f"{sig(cur)}, {sig(other)} -> {sig(cur)}", **kw, **sz(cur))
        elif op == "einsum":
            other = draw(st.lists(st.sampled_from(NAMES[:6]), min_size=1, max_size=2, unique=True))
            both = sorted(set(cur) | set(other))
            out = draw(st.permutations(both).flatmap(
                lambda p: st.integers(1, len(p)).map(lambda n: list(p[:n]))))
            d = d @ ident(other)
            g = nc.einsum(f"{sig(cur)}, {sig(other)} -> {sig(out)}", **kw, **sz(cur, other))
            cur = out
        elif op == "weave":
            used = {n for arr in all_arrays(d) for n in arr.names}
            free = [n for n in NAMES if n not in used]
            if not free:
                continue
            name = draw(st.sampled_from(free))
            d = nc.weave(d, name, position=0, **sz([name]))
            cur = [name] + cur
            continue
        elif op == "load":
            g = nc.transfer("load", d.cod.inside[0])
            level += 1
        else:
            new = draw(st.sampled_from(["fp32", "fp16", "bf16"]))
            g = nc.cast(sig(cur), to=new, **kw, **sz(cur))
            dtype = new
        d = d >> g
    return d


@st.composite
def random_diagram(draw):
    sizes = {n: draw(SIZES) for n in NAMES}
    level = draw(st.integers(0, 1))
    dtype = draw(st.sampled_from(["fp32", "fp16"]))
    d = draw(random_chain(sizes, level, dtype))
    if draw(st.booleans()):
        d2 = draw(random_chain(sizes, level, dtype))
        d = d @ d2
        n1 = len(d.cod) - len(d2.cod)
        if draw(st.booleans()):
            d = d >> Diagram.swap(Ty(*d.cod.inside[:n1]), Ty(*d.cod.inside[n1:]))
    shape = draw(st.sampled_from(["plain", "copy", "discard", "kernel"]))
    if shape == "copy":
        d = d >> (Diagram.copy(Ty(d.cod.inside[0]), 2) @ Diagram.id(Ty(*d.cod.inside[1:])))
    elif shape == "discard" and len(d.cod) > 1:
        d = d >> (Diagram.copy(Ty(d.cod.inside[0]), 0) @ Diagram.id(Ty(*d.cod.inside[1:])))
    elif shape == "kernel":
        d = Diagram.id(d.dom) >> Kernel.around(d, level=level)
    return d


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_diagram())
def test_random_diagrams_round_trip_and_agree(d):
    e = roundtrip(d)
    agree(d, e, low=1, high=3)


@settings(max_examples=200, deadline=None)
@given(st.recursive(
    st.one_of(st.integers(1, 10 ** 6).map(sympy.Integer),
              st.sampled_from(["q", "x", "d", "g_q", "s'"]).map(symbol),
              st.fractions(min_value=0, max_denominator=50).filter(bool).map(sympy.Rational),
              st.floats(1e-6, 1e6).map(sympy.Float),
              st.sampled_from([sympy.pi, sympy.E, sympy.Symbol("m"), sympy.Symbol("r", real=True)])),
    lambda sub: st.one_of(
        st.lists(sub, min_size=2, max_size=3).map(lambda xs: sympy.Add(*xs)),
        st.lists(sub, min_size=2, max_size=3).map(lambda xs: sympy.Mul(*xs)),
        st.tuples(sub, st.sampled_from([sympy.Rational(1, 2), sympy.Integer(-1), sympy.Integer(2),
                                        symbol("q")])).map(lambda t: sympy.Pow(*t)),
        sub.map(sympy.floor), sub.map(sympy.ceiling),
        st.lists(sub, min_size=2, max_size=2).map(lambda xs: sympy.Max(*xs))),
    max_leaves=8))
def test_random_expressions_round_trip(expr):
    assume(not expr.has(sympy.zoo, sympy.nan, sympy.I))
    tree = expression_to_json(expr)
    assert json.loads(json.dumps(tree)) == tree
    back = expression_from_json(json.loads(json.dumps(tree)))
    # sympy may evaluate a rebuilt node further (ceiling(1/q) is 1 for a positive integer q)
    assert back == expr or sympy.simplify(back - expr) == 0, (expr, tree, back)


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
     r"diagram\.dom\[0\]\.dtype: unknown dtype \"fp64\"; legal dtypes are \['bf16', 'fp16', 'fp32', 'fp8'\]"),
    (lambda doc: doc["diagram"]["dom"][0].update(level=-1),
     r"diagram\.dom\[0\]\.level: a level is a non-negative integer, got -1"),
    (lambda doc: doc["diagram"]["dom"][0].update(level=True),
     r"diagram\.dom\[0\]\.level: a level is a non-negative integer, got true"),
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
     r"diagram\.layers\[0\]\.box: inconsistent 'softmax' box: softmax: output 0 names axis 'q' twice"),
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
    (lambda doc: BOX(doc, 0).update(n=1), r"diagram\.layers\[0\]\.box\.n: a copy makes at least 2 copies, "
                                          r"got 1 \(use 'discard' for 0\)"),
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
    with pytest.raises(SerialisationError, match=r"x: expression nested too deeply"):
        expression_from_json(tree, "x")
    deep = '["Add", ' * 600 + "1" + ", 1]" * 600
    text = _mutated(lambda doc: BOX(doc)["params"].update(beta={"expr": "PLACEHOLDER"}))
    with pytest.raises(SerialisationError, match=r"nested too deeply"):
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
