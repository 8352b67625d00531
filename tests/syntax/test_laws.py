"""The laws of the syntax and its functors, as hypothesis properties.

Diagrams are drawn from the public constructors with random axis names:

* monoidal category: ``>>`` and ``@`` are associative and unital (structural ``==``);
* weaving is functorial::

      weave_S(f >> g) == weave_S(f) >> weave(g)        (every output of f reads a weaved input)
      weave_S(f >> g) ≡  weave_S(f) >> weave(g)        (otherwise: equal as functions)
      weave_{S ⊔ T}(f @ g) ≡ weave_S(f) @ weave_T(g)

* ``evaluate`` is a functor: ``evaluate(f >> g) = evaluate(g) ∘ evaluate(f)`` and ``@`` is the product.
"""
from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings, strategies as st

import napkin_cat as nc
from napkin_cat import testing
from napkin_cat.syntax.array import Array
from napkin_cat.syntax.adapter import Ty
from napkin_cat.syntax.axis import symbol
from napkin_cat.semantics.equivalent import free_sizes

POOL = ("a", "b", "c", "d", "e")       # axis names of the random diagrams; weaves use h and k
UNARY = ("neg", "tanh", "relu", "sigmoid", "silu", "square")
LAWS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# --------------------------------------------------------------------------- strategies
def sig(arr: Array) -> str:
    return " ".join(arr.names)


def kw(arr: Array, names=None) -> dict:
    """Constructor keywords that reproduce ``arr``'s sizes (renamed axes keep their old symbol)."""
    names = arr.names if names is None else names
    sizes = {a.name: a.size for a in arr.axes if a.name in names and a.size != symbol(a.name)}
    return dict(sizes, level=arr.level, dtype=arr.dtype)


@st.composite
def arrays(draw, min_rank=1, max_rank=3):
    names = draw(st.lists(st.sampled_from(POOL), min_size=min_rank, max_size=max_rank, unique=True))
    return Array(tuple(nc.Axis(n) for n in names))


@st.composite
def step(draw, arr: Array):
    """One single-input box from ``arr``, chosen among the constructors."""
    names = list(arr.names)
    choices = ["unary", "softmax", "transpose", "scale", "cast", "load"]
    if len(names) >= 2:
        choices.append("reduce")
    if set(POOL) - set(names):
        choices.append("rename")
    if arr.level > 0:
        choices.append("save")
    kind = draw(st.sampled_from(choices))
    if kind == "unary":
        return nc.elementwise(draw(st.sampled_from(UNARY)), sig(arr), **kw(arr))
    if kind == "scale":
        return nc.elementwise("scale", sig(arr), const=draw(st.sampled_from([0.5, -2, 3])), **kw(arr))
    if kind == "softmax":
        over = draw(st.lists(st.sampled_from(names), min_size=1, max_size=len(names), unique=True))
        return nc.softmax(sig(arr), over=" ".join(over), beta=draw(st.sampled_from([1, 0.5])), **kw(arr))
    if kind == "transpose":
        perm = draw(st.permutations(names))
        return nc.einsum(f"{sig(arr)} -> {' '.join(perm)}", **kw(arr))
    if kind == "reduce":
        keep = draw(st.lists(st.sampled_from(names), min_size=1, max_size=len(names) - 1, unique=True))
        return nc.reduce(draw(st.sampled_from(["sum", "max", "mean"])), f"{sig(arr)} -> {' '.join(keep)}",
                         **kw(arr))
    if kind == "rename":
        old = draw(st.sampled_from(names))
        new = draw(st.sampled_from(sorted(set(POOL) - set(names))))
        out = " ".join(new if n == old else n for n in names)
        return nc.renaming(f"{sig(arr)} -> {out}", **kw(arr))
    if kind == "cast":
        return nc.cast(sig(arr), to=draw(st.sampled_from(["fp16", "bf16"])), **kw(arr))
    return nc.transfer(kind, arr)


@st.composite
def chains(draw, arr: Array, min_size=1, max_size=3):
    """A composite of single-input boxes starting at ``arr`` (composed once)."""
    boxes = []
    for _ in range(draw(st.integers(min_size, max_size))):
        box = draw(step(arr))
        boxes.append(box)
        arr = box.cod.inside[0]
    return nc.Diagram.id(Ty(boxes[0].dom.inside[0])).then(*boxes)


@st.composite
def contractions(draw):
    """A two-input einsum ``A, B -> C`` over the pool (some axes shared, some contracted)."""
    left = draw(arrays())
    right = draw(arrays())
    present = sorted(set(left.names) | set(right.names))
    out = draw(st.lists(st.sampled_from(present), min_size=1, max_size=len(present), unique=True))
    return nc.einsum(f"{sig(left)}, {sig(right)} -> {' '.join(out)}")


@st.composite
def sources(draw):
    """A diagram with one or two inputs and one output, every output depending on every input."""
    first = draw(st.one_of(contractions(), arrays().flatmap(lambda a: chains(a, 1, 1))))
    if draw(st.booleans()):
        return first >> draw(chains(first.cod.inside[0], 1, 2))
    return first


def sample_sizes(diagram, seed):
    rng = np.random.default_rng(seed)
    return {str(s): int(rng.integers(1, 4)) for s in free_sizes(diagram)}


def random_inputs(diagram, sizes, seed):
    rng = np.random.default_rng(seed)
    xs = []
    for arr in diagram.dom.inside:
        shape = tuple(a.size if isinstance(a.size, int) else sizes[str(a.size)] for a in arr.axes)
        xs.append(rng.normal(size=shape))
    return xs


def as_tuple(y):
    return y if isinstance(y, tuple) else (y,)


def rounding_of(diagram) -> float:
    """The relative tolerance two evaluation orders of one function may differ by: 1e-12 in float64, and a
    few steps of the narrowest format a cast rounds to (a cast rounds a last-bit difference of float64 to
    one step of its format, which the boxes after it carry on)."""
    from napkin_cat.syntax.flat import layers
    narrow = [b.cod.inside[0].dtype.mantissa for _, b in layers(diagram)
              if len(b.dom) == len(b.cod) == 1 and b.dom.inside[0].dtype != b.cod.inside[0].dtype]
    return max(1e-12, 4 * 2.0 ** -min(narrow)) if narrow else 1e-12


def assert_same_values(ys, zs, rtol=1e-12):
    ys, zs = as_tuple(ys), as_tuple(zs)
    assert len(ys) == len(zs)
    for y, z in zip(ys, zs):
        assert y.shape == z.shape
        np.testing.assert_allclose(y, z, rtol=rtol, atol=0)


def assert_equivalent(d1, d2):
    """The library's assertion (its failure names the sizes, tiles, seed and largest difference), small sizes."""
    testing.assert_equivalent(d1, d2, trials=2, high=3)


# --------------------------------------------------------------------------- category laws
@LAWS
@given(st.data())
def test_then_is_associative_and_unital(data):
    f = data.draw(sources())
    g = data.draw(chains(f.cod.inside[0]))
    h = data.draw(chains(g.cod.inside[0]))
    assert (f >> g) >> h == f >> (g >> h)
    assert f >> nc.Id(f.cod) == f == nc.Id(f.dom) >> f
    assert nc.Diagram.id(f.dom).then(f, g, h) == f >> g >> h


@LAWS
@given(st.lists(sources(), min_size=3, max_size=3))
def test_tensor_is_associative_and_unital(fgh):
    f, g, h = fgh
    assert (f @ g) @ h == f @ (g @ h)
    assert f @ nc.Id() == f == nc.Id() @ f
    assert (f @ g).dom == f.dom @ g.dom and (f @ g).cod == f.cod @ g.cod


@LAWS
@given(st.data())
def test_interchange_law_holds_as_functions(data):
    f, g = data.draw(sources()), data.draw(sources())
    f2, g2 = data.draw(chains(f.cod.inside[0])), data.draw(chains(g.cod.inside[0]))
    assert_equivalent((f @ g) >> (f2 @ g2), (f >> f2) @ (g >> g2))


# --------------------------------------------------------------------------- weave functoriality
def subsets(n, *, nonempty=False):
    return st.sets(st.integers(0, n - 1), min_size=1 if nonempty else 0, max_size=n).map(sorted)


@LAWS
@given(st.data())
def test_weave_distributes_over_then_literally(helpers, data):
    """Every output of f reads a weaved input, so no copy is needed in between: equal as diagrams."""
    f = data.draw(sources())
    g = data.draw(chains(f.cod.inside[0]))
    S = data.draw(subsets(len(f.dom), nonempty=True))
    position = data.draw(st.sampled_from([0, -1]))
    whole = nc.weave(f >> g, "h", inputs=S, position=position)
    parts = nc.weave(f, "h", inputs=S, position=position) >> nc.weave(g, "h", position=position)
    helpers.well_typed(whole)
    assert whole == parts


def joining(left: Array, right: Array):
    """An einsum ``A, B -> A ∪ B`` (an outer product on the shared axes), when the types allow it."""
    shared = set(left.names) & set(right.names)
    if (left.level, left.dtype) != (right.level, right.dtype) or any(
            left.axis(n).size != right.axis(n).size for n in shared):
        return None
    out = " ".join(dict.fromkeys(left.names + right.names))
    return nc.einsum(f"{sig(left)}, {sig(right)} -> {out}", **{**kw(left), **kw(right)})


@LAWS
@given(st.data())
def test_weave_distributes_over_then_as_functions(helpers, data):
    """f = f₁ @ f₂ weaved over some inputs: an output of f that reads none is copied along h,
    after f on the right-hand side, at the end on the left-hand side."""
    f1, f2 = data.draw(sources()), data.draw(sources())
    f = f1 @ f2
    left, right = f.cod.inside
    join = joining(left, right) if data.draw(st.booleans()) else None
    g = join if join is not None else data.draw(chains(left)) @ data.draw(chains(right))
    S = data.draw(subsets(len(f.dom)))
    whole = nc.weave(f >> g, "h", inputs=S)
    parts = nc.weave(f, "h", inputs=S) >> nc.weave(g, "h")
    helpers.well_typed(whole)
    helpers.well_typed(parts)
    assert whole.dom == parts.dom and whole.cod == parts.cod
    sizes = {**sample_sizes(whole, 0), "h": 2}
    xs = random_inputs(whole, sizes, 1)
    assert_same_values(nc.evaluate(whole, *xs, sizes=sizes), nc.evaluate(parts, *xs, sizes=sizes),
                       rtol=rounding_of(whole))


@LAWS
@given(st.data())
def test_weave_distributes_over_tensor(helpers, data):
    f, g = data.draw(sources()), data.draw(sources())
    S = data.draw(subsets(len(f.dom), nonempty=True))
    T = data.draw(subsets(len(g.dom), nonempty=True))
    whole = nc.weave(f @ g, "h", inputs=S + [len(f.dom) + t for t in T])
    parts = nc.weave(f, "h", inputs=S) @ nc.weave(g, "h", inputs=T)
    helpers.well_typed(whole)
    assert whole.dom == parts.dom and whole.cod == parts.cod
    assert_equivalent(whole, parts)


@LAWS
@given(st.data())
def test_weave_is_evaluated_as_a_map(data):
    """evaluate(weave(f, S)) runs f on every index of h, copying the un-weaved inputs."""
    f = data.draw(sources())
    S = data.draw(subsets(len(f.dom), nonempty=True))
    w = nc.weave(f, "h", inputs=S)
    sizes = {**sample_sizes(w, 3), "h": 2}
    xs = random_inputs(w, sizes, 4)
    got = as_tuple(nc.evaluate(w, *xs))
    for k in range(2):
        want = as_tuple(nc.evaluate(f, *(x[k] if i in S else x for i, x in enumerate(xs))))
        for y, z in zip(got, want, strict=True):
            np.testing.assert_allclose(y[k], z, rtol=1e-12, atol=0)


@LAWS
@given(st.data())
def test_weaves_commute_as_functions(data):
    """Weaving over h then k equals weaving over k then h, up to the order of the new axes."""
    f = data.draw(sources())
    hk = nc.weave(nc.weave(f, "h"), "k", position=-1)
    kh = nc.weave(nc.weave(f, "k", position=-1), "h")
    assert hk.dom == kh.dom and hk.cod == kh.cod
    assert_equivalent(hk, kh)


# --------------------------------------------------------------------------- evaluate is a functor
@LAWS
@given(st.data())
def test_evaluate_preserves_then(data):
    f = data.draw(sources())
    g = data.draw(chains(f.cod.inside[0]))
    seed = data.draw(st.integers(0, 2 ** 16))
    sizes = sample_sizes(f >> g, seed)
    xs = random_inputs(f, sizes, seed + 1)
    assert_same_values(nc.evaluate(f >> g, *xs), nc.evaluate(g, *as_tuple(nc.evaluate(f, *xs))))


@LAWS
@given(st.data())
def test_evaluate_preserves_tensor(data):
    f, g = data.draw(sources()), data.draw(sources())
    seed = data.draw(st.integers(0, 2 ** 16))
    sizes = sample_sizes(f @ g, seed)
    xs = random_inputs(f @ g, sizes, seed + 1)
    n = len(f.dom)
    assert_same_values(nc.evaluate(f @ g, *xs),
                       as_tuple(nc.evaluate(f, *xs[:n])) + as_tuple(nc.evaluate(g, *xs[n:])))


@LAWS
@given(arrays())
def test_evaluate_identity(arr):
    rng = np.random.default_rng(0)
    x = rng.normal(size=tuple(2 for _ in arr.axes))
    np.testing.assert_array_equal(nc.evaluate(nc.Id(Ty(arr)), x), x)
