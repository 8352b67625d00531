"""Log-probabilities and the one picked: log SoftMax is the scores less their log-sum-exp, and a gather is taken
before the pointwise maps it reads (cross-entropy's laws, in the normal form).

Cross-entropy written as ``−log(SoftMax(x))[t]`` maps log over n × v values and gathers one per row; written as
``LSE(x) − x[t]`` it reads the logits once (one streamed kernel).  These two rules (role ``normalise``) bring the
first to the second: ``log_of_softmax`` writes the log-probabilities as ``x − LSE(x)``, ``gather_before_maps``
gathers ``x`` before the subtraction, which then runs on n values.

=======================  ==============================================================================
rule                     lhs → rhs
=======================  ==============================================================================
``log_of_softmax``       log SoftMax_{A,β}(x)  →  βx − LSE_A(βx)
``gather_before_maps``   gather_v(f(x₁, …, xₖ), t)  →  [0 ≤ t < |v|] · f(x₁′, …, xₖ′),
                         xᵢ′ = gather_v(xᵢ, t) where xᵢ carries v, xᵢ else
=======================  ==============================================================================

Numerics of ``log_of_softmax``: in exact arithmetic log(exp(xᵢ)/Σⱼ exp(xⱼ)) = xᵢ − log Σⱼ exp(xⱼ) (the symbolic
proof); in floating point the written form underflows, the rewritten one does not: a probability below the
smallest double (xᵢ − LSE < ~−745) is 0 and its log −∞ by hand, where ``x − LSE`` is the finite value.  On −∞
scores the two forms agree: a masked entry is −∞ in both (log 0; −∞ − LSE), a row all −∞ is NaN in both (0/0;
−∞ − (−∞)), and a +∞ score is NaN at its place and −∞ elsewhere in its row in both.  The proofs draw finite
scores that do not underflow, or −∞ (:func:`rewrites.softmax_instances.moderate_inputs`).

``gather_before_maps`` is exact on every index: a gather reads 0 at an index outside ``v`` (so that the slices
of a stream along ``v`` add up), where ``f`` of the gathered operands is ``f(0, …)``; the rewrite keeps the 0
there by the guard ``[0 ≤ t < |v|]`` (``where(gather_v(position_v, t) = t, ·, 0)``: the position read at ``t`` is
``t`` exactly when ``t`` is one).  It takes the maps in one step: the whole cone of pointwise maps (and copies)
that the gather alone reads, each writing the table's axes, so the maps run on ``|table| / |v|`` values.

Termination: ``gather_before_maps`` leaves its gathers reading no map of its cone, and no rule of the normal form
puts a map between a gather and what it reads, except ``log_of_softmax``, which removes a SoftMax (no rule of the
normal form makes one from a subtraction and a log-sum-exp).

>>> import napkin_cat as nc
>>> picked = nc.softmax("n v", over="v") >> nc.elementwise("log", "n v")
>>> [b.data.kind for b in log_of_softmax.apply(picked).boxes if b.data is not None]
['reduce_logsumexp', 'sub']
"""
from __future__ import annotations

import sympy

import napkin_cat as nc
from napkin_cat.rewriting import OUTPUT, Condition, Obligation, Rule, RuleSet
from napkin_cat.rewriting.match import Pattern, kind
from napkin_cat.syntax.primitive import kind_of
from rewrites.normal_form_boxes import box_like, reduced
from rewrites.softmax_instances import moderate_inputs


def _sig(names) -> str:
    return " ".join(names) or "()"


def _sizes(*arrays) -> dict:
    return {a.name: a.size for arr in arrays for a in arr.axes}


def _one_format(m):
    """The matched values (but a gather's index) are in one format at one level."""
    arrays = {(a.level, a.dtype) for v in m.nodes for a in (*m.node(v).dom, *m.node(v).cod)
              if not (v == "g" and a is m.node(v).dom[1])}
    return len(arrays) == 1 or f"the matched values are in {len(arrays)} formats or levels"


# ---------------------------------------------------------------------- log SoftMax = x − LSE
def log_of_softmax_instance(rng):
    """log SoftMax_β(x) over random axes (one or two reduced, rows in any order, none at times), at a random β,
    the log's output maybe in another order, x maybe read again."""
    rows = [str(n) for n in rng.permutation(["n", "h"])[:int(rng.integers(0 if rng.random() < 0.15 else 1, 3))]]
    over = [str(n) for n in rng.permutation(["v", "w"])[:1 + int(rng.random() < 0.3)]]
    names = [str(n) for n in rng.permutation(rows + over)]
    sig = _sig(names)
    out = _sig(rng.permutation(names)) if rng.random() < 0.3 else sig
    beta = [1, 0.5, 2, -1][int(rng.integers(4))]
    b = nc.Builder(nc.types(sig))
    (X,) = b.inputs
    y = b(nc.elementwise("log", f"{sig} -> {out}"), b(nc.softmax(sig, over=over, beta=beta), X))
    return b.build(y, b(nc.elementwise("exp", sig), X)) if rng.random() < 0.3 else b.build(y)


def log_of_exp_over_sum():
    """log(exp(βxᵢ) / Σⱼ exp(βxⱼ)) = βxᵢ − log Σⱼ exp(βxⱼ), exactly (any real β and x)."""
    xs = sympy.symbols("x1:5", real=True)
    beta = sympy.Symbol("beta", real=True)
    z = sum(sympy.exp(beta * y) for y in xs)
    for x in xs:
        written = sympy.expand_log(sympy.log(sympy.exp(beta * x) / z), force=True)
        assert sympy.simplify(written - (beta * x - sympy.log(z))) == 0, x


def scores_less_lse(b, s, scores, out):
    """βx − LSE_A(βx) wired in the builder ``b`` from ``scores`` (what the SoftMax box ``s`` reads) into an array
    like ``out``: log SoftMax_{A,β}(x), the right-hand side of ``log_of_softmax`` (and, exponentiated, the SoftMax
    itself: :mod:`rewrites.gathered_probability`)."""
    x = s.dom[0]
    beta = sympy.sympify(s.spec.param("beta", 1))
    if beta != 1:
        scores = b(box_like("scale", [x], x, params={"c": beta}), scores)
    over = reduced(s)
    rows = x.replace(axes=tuple(a for a in x.axes if a.name not in over))
    lse = b(box_like("reduce_logsumexp", [x], rows), scores)
    return b(box_like("sub", [x, rows], out), scores, lse)


def _log_softmax_rhs(m):
    s, lg = m.node("s"), m.node("lg")
    b, ins = m.wiring()
    return m.finish(b, {("lg", 0): scores_less_lse(b, s, ins[("s", 0)], lg.cod[0])})


def _fewer_special_flops(lhs, rhs, m):
    """The cost claim: the SoftMax's and the log's exponentials and logs (one per score each) become the
    log-sum-exp's (one per score, one per row); no transfer changes."""
    x = m.node("s").dom[0]
    scores = sympy.Mul(*(a.size for a in x.axes))
    rows = sympy.Mul(*(a.size for a in x.axes if a.name not in reduced(m.node("s"))))
    before, after = nc.cost(lhs), nc.cost(rhs)
    saved = before.flops.get("special", 0) - after.flops.get("special", 0)
    assert sympy.expand(saved - (scores - rows)) == 0, f"special FLOPs fell by {saved}, not {scores - rows}"
    for lv in set(before.H) | set(after.H):
        assert sympy.expand(before.H.get(lv, 0) - after.H.get(lv, 0)) == 0, f"H[{lv}] changed on the function"


log_of_softmax = Rule(
    "log_of_softmax",
    Pattern({"s": kind("softmax"), "lg": kind("log")}, [("s", 0, "lg", 0)]),
    _log_softmax_rhs,
    conditions=(Condition("one_format", _one_format, "the SoftMax and the log must compute in one format"),),
    obligation=Obligation(log_of_softmax_instance, inputs=moderate_inputs, symbolic=(log_of_exp_over_sum,),
                          cost=_fewer_special_flops, rtol=1e-9, atol=1e-9),
    doc="""log SoftMax_{A,β}(x) → βx − LSE_A(βx): the log-probabilities are the scores less their log-sum-exp.

    Over any axes ``A``, weaved over the others in any order, at any β (a scale of the scores where β ≠ 1).  The
    rewritten form is the stable one: where a probability underflows to 0 the written log is −∞ and ``βx − LSE``
    finite; on finite and −∞ scores they agree otherwise (module docstring).""")


# ---------------------------------------------------------------------- a gather before the maps
def _pointwise(net, nid) -> bool:
    """An elementwise map whose values do not depend on where it runs (a map ``nc.elementwise`` builds, not a
    position or a gather)."""
    node = net.nodes[nid]
    if node.kind != "box":
        return False
    k = kind_of(node.spec.kind)
    return k.arity is not None and k.locates is None


def _cone(net, nodes):
    """The maps and copies that the gather alone reads, each writing the table's axes: every node upstream of the
    gather's table through maps and copies whose every consumer is in the cone or is the gather's table."""
    (g,) = nodes.values()
    table = net.nodes[g].dom[0]
    (src, _), _ = net.producers(g)

    def fits(n):
        node = net.nodes[n]
        return node.kind == "copy" or (_pointwise(net, n) and set(node.cod[0].names) == set(table.names))

    cone, stack = set(), [src]
    while stack:
        n = stack.pop()
        if n in cone or n not in net.nodes or not fits(n):
            continue
        cone.add(n)
        stack += [p[0] for p in net.producers(n)]
    changed = True
    while changed:
        changed = False
        for n in sorted(cone):
            if all((c != OUTPUT and c in cone) or (c, port) == (g, 0) for c, port in net.consumers(n)):
                continue
            cone.discard(n)
            changed = True
    if src not in cone or not any(net.nodes[n].kind == "box" for n in cone):
        return None
    return {f"f{j}": n for j, n in enumerate(sorted(cone))}


def _gathered_axis(m) -> str:
    g = m.node("g")
    (v,) = [n for n in g.dom[0].names if n not in g.spec.weave_names]
    return v


def _index_in_table(m):
    g = m.node("g")
    extra = [n for n in g.dom[1].names if n not in g.dom[0].names]
    return not extra or (f"the index carries {extra}, which the table does not: gathered first, the maps would run "
                         f"on more values")


def _order(m) -> list:
    """The cone's variables, producers first."""
    ids = {m.nodes[v]: v for v in m.nodes if v != "g"}
    done, out = set(), []

    def visit(n):
        if n in done:
            return
        done.add(n)
        for p, _ in m.net.producers(n):
            if p in ids:
                visit(p)
        out.append(ids[n])
    for n in sorted(ids):
        visit(n)
    return out


def maps_of_gathered(m, b, ins):
    """In the builder ``b`` (on the match's inputs ``ins``): the cone's maps on the gathered operands, each operand
    that carries the gathered axis gathered once.  Its wire is the gather's value at every position of the axis
    (unguarded: ``f(0, …)`` at an index outside it)."""
    g = m.node("g")
    table, index = g.dom[0], g.dom[1]
    v = _gathered_axis(m)
    t = ins[("g", 1)]
    gathered, value = {}, {}

    def operand(var, port):
        key = (var, port)
        if key not in ins:
            return value[m.net.producers(m.nodes[var])[port]]
        w = m.input_wires[m.inputs.index(key)]
        arr = m.net.wires[w].array
        if v not in arr.names:
            return ins[key]
        if w not in gathered:
            to = [n for n in arr.names if n != v] + [n for n in index.names if n not in arr.names]
            gathered[w] = b(nc.gather(f"{_sig(arr.names)}, {_sig(index.names)} -> {_sig(to)}", dtype=arr.dtype,
                                      index_dtype=index.dtype, level=table.level, **_sizes(arr, index)), ins[key], t)
        return gathered[w]

    for var in _order(m):
        node, nid = m.node(var), m.nodes[var]
        args = [operand(var, j) for j in range(len(node.dom))]
        if node.kind == "copy":
            value.update({(nid, j): args[0] for j in range(len(node.cod))})
            continue
        y = node.cod[0].replace(axes=tuple(a for a in node.cod[0].axes if a.name != v))
        value[(nid, 0)] = b(box_like(node.spec.kind, [w.array for w in args], y, params=dict(node.spec.params)),
                            *args)
    return value[m.net.producers(m.nodes["g"])[0]]


def in_range(b, t, axis):
    """In the builder ``b``: the mask ``0 ≤ t < |axis|`` of the index wire ``t``, as ``gather(position, t) = t``
    (the position read at ``t`` is ``t`` exactly when ``t`` is a position; elsewhere the gather reads 0, and 0 is
    a position)."""
    index, idx = t.array, _sig(t.array.names)
    kw = dict(level=index.level, **_sizes(index))
    pos = b(nc.position(axis.name, level=index.level, dtype=index.dtype, **{axis.name: axis.size}))
    at = b(nc.gather(f"{axis.name}, {idx} -> {idx}", dtype=index.dtype, index_dtype=index.dtype,
                     **kw, **{axis.name: axis.size}), pos, t)
    return b(nc.compare("eq", f"{idx}, {idx} -> {idx}", dtype=index.dtype, **kw), at, t)


def _gather_first_rhs(m):
    b, ins = m.wiring()
    table, out = m.node("g").dom[0], m.node("g").cod[0]
    top = maps_of_gathered(m, b, ins)
    inside = in_range(b, ins[("g", 1)], table.axes[table.names.index(_gathered_axis(m))])
    y = b(nc.where(f"{_sig(inside.array.names)}, {_sig(top.array.names)} -> {_sig(out.names)}", other=0.0,
                   dtype=out.dtype, level=out.level, **_sizes(out)), inside, top)
    return m.finish(b, {("g", 0): y})


def gather_before_maps_instance(rng):
    """A gather along ``v`` (index over some of the table's other axes) of a cone of 1-3 maps (unary and binary,
    broadcast operands with or without ``v``, a value read twice, a scale), the table's axes in any order."""
    rows = [str(n) for n in rng.permutation(["n", "h"])[:int(rng.integers(1, 3))]]
    names = [str(n) for n in rng.permutation(rows + ["v"])]
    sig = _sig(names)
    idx = [n for n in rows if rng.random() < 0.7] or rows[:1]
    narrow = [n for n in names if rng.random() < 0.5]
    b = nc.Builder(nc.types(f"{sig}, {_sig(narrow)}") @ nc.types(_sig(idx), dtype=nc.INT32))
    X, Y, t = b.inputs
    x = X
    for _ in range(int(rng.integers(1, 4))):
        k = int(rng.integers(5))
        if k == 0:
            x = b(nc.elementwise(str(rng.choice(["exp", "tanh", "neg", "square"])), sig), x)
        elif k == 1:
            x = b(nc.elementwise("scale", sig, const=[0.5, -3][int(rng.integers(2))]), x)
        elif k == 2:
            x = b(nc.elementwise("mul", f"{sig}, {sig}"), x, x)
        else:
            pair = (x, Y) if rng.integers(2) else (Y, x)
            sigs = f"{sig}, {_sig(narrow)}" if pair[0] is x else f"{_sig(narrow)}, {sig}"
            x = b(nc.elementwise(str(rng.choice(["sub", "add", "mul"])), f"{sigs} -> {sig}"), *pair)
    picked = [n for n in names if n != "v"]
    y = b(nc.gather(f"{sig}, {_sig(idx)} -> {_sig(rng.permutation(picked))}"), x, t)
    return b.build(y, b(nc.elementwise("exp", sig), X)) if rng.random() < 0.3 else b.build(y)


def _guard_flops(diagram):
    """One general FLOP per value written by the diagram's gathers, comparisons and ``where`` boxes."""
    return sum((sympy.Mul(*(a.size for a in box.cod.inside[0].axes)) for box in diagram.boxes
                if getattr(box.data, "kind", None) in ("gather", "eq", "where")), sympy.Integer(0))


def _maps_on_gathered(lhs, rhs, m):
    """The cost claim: the cone's maps run on ``|table| / |v|`` values, and the rest is the gathers and the guard
    (one general FLOP per value each writes); no transfer changes."""
    g = m.node("g")
    size = sympy.Mul(*(a.size for a in g.dom[0].axes))
    picked = sympy.Mul(*(a.size for a in g.cod[0].axes))
    maps = [nc.cost(m.node(v).box).flops for v in m.nodes if v != "g" and m.node(v).kind == "box"]
    before, after = nc.cost(lhs), nc.cost(rhs)
    for pipe in set(before.flops) | set(after.flops):
        moved = sum((f.get(pipe, 0) for f in maps), sympy.Integer(0))
        want = before.flops.get(pipe, 0) - moved + moved * picked / size + \
            (_guard_flops(rhs) - _guard_flops(lhs) if pipe == "general" else 0)
        assert sympy.expand(after.flops.get(pipe, 0) - want) == 0, f"{pipe} FLOPs {after.flops.get(pipe)} != {want}"
    for lv in set(before.H) | set(after.H):
        assert sympy.expand(before.H.get(lv, 0) - after.H.get(lv, 0)) == 0, f"H[{lv}] changed on the function"


def index_inputs(rng, diagram, sizes):
    """Normal values, and indices along the gathered axis that are mostly positions of it, some outside it (−1 and
    its size)."""
    xs = []
    box = next(box for box in diagram.boxes if getattr(box.data, "kind", None) == "gather")
    (v,) = [a for a in box.dom.inside[0].axes if a.name not in box.data.weave_names]
    n = v.size if isinstance(v.size, int) else sizes[str(v.size)]
    for arr in diagram.dom.inside:
        shape = tuple(a.size if isinstance(a.size, int) else sizes[str(a.size)] for a in arr.axes)
        if arr.dtype.is_integer:
            t = rng.integers(0, n, size=shape)
            t[rng.random(shape) < 0.2] = -1
            t[rng.random(shape) < 0.2] = n
            xs.append(t)
        else:
            xs.append(rng.normal(size=shape))
    return xs


def gather_of_map():
    """f(x)[t] = f(x[t]) at a position t, and 0 at any other index: the guard keeps it (f any function)."""
    xs = sympy.symbols("x0:4", real=True)
    f = sympy.Function("f")
    for t in range(-1, 5):
        gathered = f(xs[t]) if 0 <= t < len(xs) else 0
        inside = 1 if 0 <= t < len(xs) else 0
        assert sympy.simplify(gathered - inside * f(xs[t] if 0 <= t < len(xs) else 0)) == 0, t


gather_before_maps = Rule(
    "gather_before_maps",
    Pattern({"g": kind("gather")}, absorb=_cone),
    _gather_first_rhs,
    conditions=(Condition("index_in_table", _index_in_table,
                          "every axis of the index must be an axis of the table (the maps then run on fewer values)"),
                Condition("one_format", _one_format, "the maps and the gather must compute in one format")),
    obligation=Obligation(gather_before_maps_instance, inputs=index_inputs, symbolic=(gather_of_map,),
                          cost=_maps_on_gathered, rtol=1e-9, atol=1e-12),
    doc="""gather_v(f(x₁, …, xₖ), t) → [0 ≤ t < |v|] · f(x₁′, …, xₖ′), xᵢ′ = gather_v(xᵢ, t) where xᵢ carries v:
    the gather is taken before the pointwise maps it alone reads.

    For every position t, f(x)[t] = f(x[t]) (a map acts on each value alone; an operand without ``v`` is the
    same at every position).  At an index outside ``v`` the gather reads 0: the guard keeps it (module docstring).
    The maps run on ``|table| / |v|`` values instead of ``|table|``.""")


LOG_FORM = RuleSet((log_of_softmax, gather_before_maps))
RULES = LOG_FORM

__all__ = ["RULES", "LOG_FORM", "log_of_softmax", "gather_before_maps", "maps_of_gathered", "in_range",
           "index_inputs"]
