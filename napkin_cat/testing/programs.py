"""Random straight-line programs with a numpy reference written independently of the library.

A program is 1-3 input arrays and 1-7 operations drawn from the shapes that break libraries like this
one: elementwise maps with broadcasting and permuted outputs, sum/max/min/mean/log-sum-exp reductions (full
ones too), SoftMax over one or several axes with β ≠ 1, einsums of 1-3 operands (full contractions, axes
that one operand alone carries), renames, weaves of a sub-operation (weaved and copied inputs), splits
and joins, dead values and several outputs; axes of size 1, sizes up to 13, symbolic or concrete, and
axis names that collide with sympy or Python (``E``, ``N``, ``pi``, ``lambda``, ``k'``, ``Q``, ``sum``).

Each :class:`Program` carries its diagram, the sizes to run it at, the Python source that builds it (so
that a failure prints a standalone reproducer) and its numpy reference (float64, by ``np.einsum`` and
friends, never through ``napkin_cat``).

>>> import numpy as np, napkin_cat as nc
>>> p = random_program(7)
>>> xs = p.arrays(np.random.default_rng(0))
>>> got = nc.evaluate(p.diagram, *xs, sizes=p.sizes)
>>> want = p.reference(*xs)
>>> all(np.allclose(g, w, equal_nan=True) for g, w in zip(got if isinstance(got, tuple) else (got,), want))
True
>>> nc.isomorphic(eval_source(p.source), p.diagram)
True
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

import napkin_cat as nc
from napkin_cat.syntax.adapter import Diagram, Ty
from napkin_cat.syntax.axis import symbol
from napkin_cat.syntax.builder import Builder
from napkin_cat.syntax.construct import einsum, elementwise, join, reduce, renaming, softmax, spell, split, types
from napkin_cat.syntax.weave import weave
from napkin_cat.testing.masks import APPLIED, MaskOps
from napkin_cat.testing.operation import NUMBERS, Op, Value, align, call_source, letters, size_source, sizes_of

#: axis names: plain ones and ones that are sympy or Python names (functions, constants, keywords, primes)
NAMES = ("a", "b", "c", "i", "j", "k", "E", "N", "pi", "lambda", "k'", "Q", "sum", "beta", "I", "S", "gamma",
         "x", "n_", "d")
#: elementwise maps on one operand, with their independent numpy meaning
UNARY = {
    "exp": np.exp, "tanh": np.tanh, "neg": np.negative, "square": np.square, "id": lambda x: x,
    "relu": lambda x: np.where(np.isnan(x), x, np.where(x > 0, x, 0.0)),
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)), "silu": lambda x: x / (1 + np.exp(-x)),
    "gelu": lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3))),
    "sqrt": np.sqrt,
}
BINARY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "max": np.maximum, "min": np.minimum}


def _logsumexp(x, axis):
    """``log Σ exp x`` over ``axis``, shifted by the largest entry (written from the definition, not the library)."""
    m = np.max(x, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    return np.squeeze(m, axis=axis) + np.log(np.sum(np.exp(x - m), axis=axis))


REDUCE = {"sum": np.sum, "max": np.max, "min": np.min, "mean": np.mean, "logsumexp": _logsumexp}
#: the most entries one value may have (keeps a program quick to run)
LARGEST = 2048


@dataclass(frozen=True)
class Program:
    """A random program: ``diagram``, ``sizes`` (every symbolic size → int), ``source`` (Python that builds
    ``diagram`` from ``import napkin_cat as nc``), ``reference(*arrays)`` (numpy, a tuple of outputs),
    the ``seed`` it was drawn from and ``shapes`` (what it exercises, for coverage counts)."""

    diagram: Diagram
    sizes: dict
    source: str
    reference: object = field(repr=False, compare=False)
    seed: int = 0
    shapes: frozenset = frozenset()
    call: str = ""        # the call that draws this program again (``random_program(3, n_ops=2)``)

    def arrays(self, rng) -> list:
        """Random float64 inputs at :attr:`sizes`."""
        out = []
        for arr in self.diagram.dom.inside:
            shape = tuple(a.size if isinstance(a.size, int) else self.sizes[str(a.size)] for a in arr.axes)
            out.append(rng.normal(size=shape))
        return out

    def evaluated(self, seed: int = 0):
        """``nc.evaluate(diagram, *arrays(default_rng(seed)), sizes=sizes)``, evaluated once per program and seed (the
        checks that compare with the program's own outputs on those inputs share them; a diagram is immutable).

        >>> p = random_program(2)
        >>> p.evaluated() is p.evaluated()
        True
        """
        memo = self.__dict__.setdefault("_evaluated", {})
        if seed not in memo:
            with np.errstate(all="ignore"):
                memo[seed] = nc.evaluate(self.diagram, *self.arrays(np.random.default_rng(seed)), sizes=self.sizes)
        return memo[seed]

    def reproducer(self, check: str) -> str:
        """A standalone script: build the program, then run ``check`` (code naming ``diagram``, ``sizes``)."""
        return "\n".join(["import numpy as np", "import napkin_cat as nc", self.source,
                          f"sizes = {self.sizes!r}", check])


def eval_source(source: str) -> Diagram:
    """The diagram a program's :attr:`Program.source` builds."""
    scope = {"nc": nc, "np": np}   # the source names the public API
    exec(source, scope)    # noqa: S102 (the library's own generated source)
    return scope["diagram"]


def _kw(axes) -> str:
    items = sizes_of(axes)
    body = ", ".join(f"{name!r}: {size_source(s)}" for name, s in items.items())
    return f"sizes={{{body}}}" if body else ""


def _sig(names) -> str:
    return spell(names)


# ---------------------------------------------------------------------- operations on axes lists
class _Ops:
    """The operation makers: each takes the operands' axes and returns an :class:`Op` (or None: not legal)."""

    def __init__(self, rng, fresh_names):
        self.rng, self.fresh_names = rng, fresh_names

    def pick(self, seq):
        return seq[int(self.rng.integers(len(seq)))]

    def perm(self, names, p=0.3):
        names = list(names)
        return [names[i] for i in self.rng.permutation(len(names))] if self.rng.random() < p else names

    def unary(self, axes):
        name = self.pick(sorted(UNARY) + ["scale", "shift"])
        names = [a[0] for a in axes]
        out = self.perm(names)
        const = None
        if name in ("scale", "shift"):
            const = float(self.pick([0.5, 2.0, -1.5]))
        sig = f"{_sig(names)} -> {_sig(out)}"
        d = elementwise(name, sig, const=const, sizes=sizes_of(axes))
        f = UNARY.get(name) or ((lambda x, c=const: c * x) if name == "scale" else (lambda x, c=const: x + c))
        run = {a[0]: a[2] for a in axes}
        src = call_source("elementwise", name, sig, axes=axes, **({"const": repr(const)} if const is not None else {}))
        by = {a[0]: a for a in axes}
        return Op(d, lambda x: [align(f(x), names, out, run)], src, (tuple(by[n] for n in out),))

    def binary(self, ax1, ax2):
        by = {a[0]: a for a in (*ax1, *ax2)}
        if any(a != by[a[0]] for a in (*ax1, *ax2)) or len(by) > 4:
            return None
        name = self.pick(sorted(BINARY))
        n1, n2 = [a[0] for a in ax1], [a[0] for a in ax2]
        out = self.perm(list(dict.fromkeys(n1 + n2)), 0.5)
        sig = f"{_sig(n1)}, {_sig(n2)} -> {_sig(out)}"
        d = elementwise(name, sig, sizes=sizes_of(by.values()))
        run = {a[0]: a[2] for a in by.values()}
        fn = BINARY[name]
        return Op(d, lambda x, y: [fn(align(x, n1, out, run), align(y, n2, out, run))],
                  call_source("elementwise", name, sig, axes=tuple(by.values())), (tuple(by[n] for n in out),))

    def contract(self, operands):
        by = {}
        for ax in operands:
            for a in ax:
                if by.setdefault(a[0], a) != a:
                    return None
        if len(by) > 5:
            return None
        names = [[a[0] for a in ax] for ax in operands]
        union = list(by)
        keep = [n for n in union if self.rng.random() < 0.5]
        out = self.perm(keep, 0.5)
        if len(operands) == 1 and out == names[0]:
            return None   # an identity contraction says nothing
        sig = ", ".join(_sig(n) for n in names) + f" -> {_sig(out)}"
        d = einsum(sig, sizes=sizes_of(by.values()))
        letter = letters(union)
        spec = ",".join("".join(letter[n] for n in ns) for ns in names) + "->" + "".join(letter[n] for n in out)
        return Op(d, lambda *xs: [np.einsum(spec, *xs)], call_source("einsum", sig, axes=tuple(by.values())),
                  (tuple(by[n] for n in out),))

    def reduce(self, axes):
        if not axes:
            return None
        names = [a[0] for a in axes]
        name = self.pick(sorted(REDUCE))
        keep = [n for n in names if self.rng.random() < 0.5]
        if len(keep) == len(names):
            keep = keep[:-1]
        sig = f"{_sig(names)} -> {_sig(keep)}"
        d = reduce(name, sig, sizes=sizes_of(axes))
        axis = tuple(k for k, n in enumerate(names) if n not in keep)
        fn = REDUCE[name]
        by = {a[0]: a for a in axes}
        return Op(d, lambda x: [np.asarray(fn(x, axis=axis))], call_source("reduce", name, sig, axes=axes),
                  (tuple(by[n] for n in keep),))

    def softmax(self, axes):
        if not axes:
            return None
        names = [a[0] for a in axes]
        over = [n for n in names if self.rng.random() < 0.4] or [self.pick(names)]
        beta = self.pick([1, 1, 0.5, 2.0, -1.0])
        d = softmax(_sig(names), over=_sig(over), beta=beta, sizes=sizes_of(axes))
        axis = tuple(k for k, n in enumerate(names) if n in over)

        def fn(x):
            z = beta * x
            z = z - np.max(z, axis=axis, keepdims=True)
            e = np.exp(z)
            return [e / np.sum(e, axis=axis, keepdims=True)]
        opts = {"over": repr(_sig(over))} | ({"beta": repr(beta)} if beta != 1 else {})
        return Op(d, fn, call_source("softmax", _sig(names), axes=axes, **opts), (tuple(axes),))

    def rename(self, axes):
        if not axes or not self.fresh_names:
            return None
        names = [a[0] for a in axes]
        k = int(self.rng.integers(len(names)))
        new = self.fresh_names.pop()
        out = names[:k] + [new] + names[k + 1:]
        sig = f"{_sig(names)} -> {_sig(out)}"
        d = renaming(sig, sizes=sizes_of(axes))
        old = axes[k]
        new_axes = axes[:k] + ((new, old[1], old[2]),) + axes[k + 1:]
        return Op(d, lambda x: [x], call_source("renaming", sig, axes=axes), (new_axes,))

    def split(self, axes):
        cut = [k for k, a in enumerate(axes) if isinstance(a[1], int) and a[1] >= 2]
        if not cut:
            return None
        k = self.pick(cut)
        name, n, _ = axes[k]
        first = int(self.rng.integers(1, n))
        names = [a[0] for a in axes]
        d = split(_sig(names), along=name, parts=(first, n - first), sizes=sizes_of(axes))
        outs = tuple(axes[:k] + ((name, p, p),) + axes[k + 1:] for p in (first, n - first))
        return Op(d, lambda x: [np.take(x, range(first), axis=k), np.take(x, range(first, n), axis=k)],
                  call_source("split", _sig(names), along=repr(name), parts=repr((first, n - first)), axes=axes), outs)

    def join(self, ax1, ax2):
        if len(ax1) != len(ax2) or [a[0] for a in ax1] != [a[0] for a in ax2]:
            return None
        diff = [k for k, (a, b) in enumerate(zip(ax1, ax2)) if a != b]
        if len(diff) != 1 or not isinstance(ax1[diff[0]][1], int) or not isinstance(ax2[diff[0]][1], int):
            return None
        k = diff[0]
        name, p, q = ax1[k][0], ax1[k][1], ax2[k][1]
        names = [a[0] for a in ax1]
        full = ax1[:k] + ((name, p + q, p + q),) + ax1[k + 1:]
        d = join(_sig(names), along=name, parts=(p, q), sizes=sizes_of(full))
        return Op(d, lambda x, y: [np.concatenate([x, y], axis=k)],
                  call_source("join", _sig(names), along=repr(name), parts=repr((p, q)), axes=full), (full,))

    def weave(self, operands, axis):
        """A one- or two-operand operation mapped over ``axis`` (carried by the first operand, maybe the
        second); an operand without it is copied to every index."""
        name, size, run = axis
        if any(a[0] == name and a != axis for ax in operands for a in ax):
            return None
        stripped = [tuple(a for a in ax if a[0] != name) for ax in operands]
        inner = (self.unary(stripped[0]) if len(operands) == 1 else
                 self.binary(*stripped) if self.rng.random() < 0.5 else self.contract(stripped))
        if len(operands) == 1 and self.rng.random() < 0.5:
            inner = self.reduce(stripped[0]) or self.softmax(stripped[0]) or inner
        if inner is None or len(inner.diagram.cod) != 1:
            return None
        where = {i: [a[0] for a in ax].index(name) for i, ax in enumerate(operands) if name in [a[0] for a in ax]}
        position = int(self.rng.integers(len(inner.outs[0]) + 1))
        d = weave(inner.diagram, name, inputs=where, position=position, sizes={name: size})

        def fn(*xs):
            rows = []
            for t in range(run):
                args = [np.take(x, t, axis=where[i]) if i in where else x for i, x in enumerate(xs)]
                rows.append(inner.fn(*args)[0])
            return [np.stack(rows, axis=position)]
        out = list(inner.outs[0])
        out.insert(position, axis)
        src = f"nc.weave({inner.source}, {name!r}, inputs={where!r}, position={position}, {_kw([axis])})"
        return Op(d, fn, src, (tuple(out),))


# ---------------------------------------------------------------------- the program
KINDS = ("unary", "binary", "contract", "contract", "reduce", "softmax", "rename", "weave", "split", "attend", "mask",
         "mask")


def _numel(axes) -> int:
    return math.prod(a[2] for a in axes)


def random_program(seed: int, *, n_ops: int | None = None, n_inputs: int | None = None,
                   concrete: bool | None = None, readers: int | None = None) -> Program:
    """The random program number ``seed`` (see the module docstring); ``n_ops`` operations (default 1-7),
    ``n_inputs`` inputs (default 1-3), sizes ``concrete`` in the constructors or symbolic (default: either,
    or a mix).  ``readers``: the first computed value is read by that many operations where they are legal on it
    (drawn past ``n_ops`` until they are, a few draws at most), each reader's result an output: the fan-out of one
    value that kernels split between them (shape ``"readers"``).

    >>> p = random_program(3, readers=3)
    >>> "readers" in p.shapes, p.call
    (True, 'random_program(3, readers=3)')
    """
    rng = np.random.default_rng([seed, 20240611])
    names = [str(n) for n in rng.permutation(NAMES)]
    pool, spare = names[:int(rng.integers(3, 6))], names[6:]
    mode = ("concrete" if concrete else "symbolic") if concrete is not None else \
        str(rng.choice(["concrete", "symbolic", "mixed"]))
    axes = {}
    for n in pool:
        run = 1 if rng.random() < 0.15 else int(rng.integers(2, 14))
        fixed = mode == "concrete" or (mode == "mixed" and rng.random() < 0.5)
        axes[n] = (n, run if fixed else symbol(n), run)
    shapes = {mode}
    ops = _Ops(rng, spare)
    n_in = n_inputs or int(rng.integers(1, 4))
    inputs = []
    for _ in range(n_in):
        k = int(rng.integers(0, 4)) if rng.random() < 0.9 else 0
        chosen = [pool[i] for i in rng.permutation(len(pool))[:k]]
        inputs.append(tuple(axes[n] for n in chosen))
    dom = Ty()
    srcs = []
    for ax in inputs:
        dom = dom @ types(_sig([a[0] for a in ax]), sizes=sizes_of(ax))
        srcs.append(f"nc.types({_sig([a[0] for a in ax])!r}{', ' + _kw(ax) if ax else ''})")
    b = Builder(dom)
    lines = [f"b = nc.Builder({' @ '.join(srcs)})", "v = list(b.inputs)"]
    values = [Value(w, ax, k) for k, (w, ax) in enumerate(zip(b.inputs, inputs))]
    steps = []      # (fn, input refs, output refs)
    count = len(values)
    draws = n_ops if n_ops is not None else int(rng.integers(1, 8))
    hub = None      # with ``readers``: the value they read

    def read_by() -> list:
        return [] if hub is None else [outs for _, ins, outs in steps if hub.ref in ins]
    drawn = 0
    def apply(op, args) -> list:
        nonlocal count
        outs = _apply(b, op, args, values, steps, lines, count)
        count += len(outs)
        return outs
    masks = MaskOps(rng, apply)
    while drawn < draws or (readers and len(read_by()) < readers and drawn < draws + 4 * readers):
        drawn += 1
        kind = str(rng.choice(KINDS))
        numbers = [v for v in values if v.dtype == NUMBERS]     # what every kind but a mask's parts reads
        v1 = numbers[int(rng.integers(len(numbers)))]
        v2 = numbers[int(rng.integers(len(numbers)))]
        to_hub = readers is not None and hub is not None and len(read_by()) < readers
        v1 = hub if to_hub else v1
        op, args = None, [v1]
        if kind == "unary":
            op = ops.unary(v1.axes)
        elif kind == "binary":
            op, args = ops.binary(v1.axes, v2.axes), [v1, v2]
        elif kind == "contract":
            args = [numbers[int(rng.integers(len(numbers)))] for _ in range(int(rng.integers(1, 4)))]
            args = [hub, *args[1:]] if to_hub else args
            op = ops.contract([v.axes for v in args])
        elif kind == "reduce":
            op = ops.reduce(v1.axes)
        elif kind == "softmax":
            op = ops.softmax(v1.axes)
        elif kind == "rename":
            op = ops.rename(v1.axes)
        elif kind == "split":
            op = ops.split(v1.axes)
            if op is not None and rng.random() < 0.5:   # split, map a part, join again
                outs = _apply(b, op, [v1], values, steps, lines, count)
                count += len(outs)
                part = ops.unary(outs[0].axes)
                mapped = _apply(b, part, [outs[0]], values, steps, lines, count)
                count += 1
                op, args = ops.join(mapped[0].axes, outs[1].axes), [mapped[0], outs[1]]
                shapes.add("split-map-join" if op is not None else "split")
                if op is None:
                    continue
        elif kind == "attend":     # a SoftMax read by a contraction (what the online-softmax rules rewrite)
            sm = ops.softmax(v1.axes)
            if sm is not None and _numel(sm.outs[0]) <= LARGEST:
                (s_val,) = _apply(b, sm, [v1], values, steps, lines, count)
                count += 1
                shapes.add("softmax")
                op, args = ops.contract([s_val.axes, v2.axes]), [s_val, v2]
        elif kind == "mask":         # a mask from positions (or data) applied to numbers: where, select, SoftMax
            how = str(rng.choice(APPLIED))
            # a mask from data compares inputs as read: ``=`` (or ``≤``) of computed numbers is discontinuous in
            # their last bit, so two correct evaluations may disagree (random_program(1956346407, n_ops=3) compared
            # s with s·Σ SoftMax: true in one order of summation, false in the other)
            op, args = masks.applied(how, v1, v2, [v for v in numbers if v.ref < n_in])
            if how == "masked attend" and op is not None and _numel(op.outs[0]) <= LARGEST:
                (s_val,) = apply(op, args)
                op, args = ops.contract([s_val.axes, v2.axes]), [s_val, v2]
        elif kind == "weave":
            carried = [a for a in v1.axes]
            if carried:
                axis = carried[int(rng.integers(len(carried)))]
                args = [v1] if rng.random() < 0.5 else [v1, v2]
                op = ops.weave([v.axes for v in args], axis)
        if op is None or any(_numel(o) > LARGEST for o in op.outs):
            continue
        shapes.add(kind)
        outs = _apply(b, op, args, values, steps, lines, count)
        count += len(outs)
        if readers is not None and hub is None:
            hub = outs[0]
    shapes |= masks.shapes
    made = [v for v in values[len(inputs):] if v.dtype == NUMBERS]
    if not made:
        made = values[:1]
        shapes.add("identity")
    k = int(rng.integers(1, min(3, len(made)) + 1))
    picks = [made[-1]] + [made[int(i)] for i in rng.integers(len(made), size=k - 1)]
    if readers is not None:
        fan = read_by()
        by_ref = {v.ref: v for v in values}
        picks += [by_ref[outs[0]] for outs in fan if outs[0] not in {v.ref for v in picks}]
        if len(fan) >= 2:
            shapes.add("readers")
    if rng.random() < 0.1:
        picks.append(values[0])      # an input passed through
        shapes.add("passthrough")
    used = {r for _, ins, _ in steps for r in ins} | {v.ref for v in picks}
    if any(v.ref not in used for v in values):
        shapes.add("dead values")
    if len(picks) > 1:
        shapes.add("several outputs")
    if any(a[2] == 1 for v in values for a in v.axes):
        shapes.add("size-1 axis")
    index = {v.ref: k for k, v in enumerate(values)}
    lines.append(f"diagram = b.build({', '.join(f'v[{index[v.ref]}]' for v in picks)})")
    diagram = b.build(*(v.wire for v in picks))
    sizes = {str(a[1]): a[2] for v in values for a in v.axes if not isinstance(a[1], int)}
    out_refs = [v.ref for v in picks]

    def reference(*xs):
        env = dict(enumerate(np.asarray(x, dtype=float) for x in xs))
        for fn, ins, outs in steps:
            with np.errstate(all="ignore"):
                got = fn(*(env[r] for r in ins))
            env.update(zip(outs, (np.array(g, dtype=float) for g in got)))
        return tuple(env[r] for r in out_refs)
    given = (("n_ops", n_ops), ("n_inputs", n_inputs), ("concrete", concrete), ("readers", readers))
    options = "".join(f", {k}={v!r}" for k, v in given if v is not None)
    return Program(diagram, sizes, "\n".join(lines), reference, seed, frozenset(shapes),
                   f"random_program({seed}{options})")


def _apply(b, op, args, values, steps, lines, count) -> list:
    """Apply ``op`` to ``args`` in the builder; record its values, its reference step and its source line."""
    index = {v.ref: k for k, v in enumerate(values)}
    got = b(op.diagram, *(v.wire for v in args))
    got = got if isinstance(got, tuple) else (got,)
    outs = [Value(w, ax, count + k, op.dtype) for k, (w, ax) in enumerate(zip(got, op.outs))]
    targets = ", ".join(f"v[{len(values) + k}]" for k in range(len(outs)))
    call = f"b({op.source}, {', '.join(f'v[{index[v.ref]}]' for v in args)})"
    lines.append(f"v.append({call})" if len(outs) == 1 else f"v.extend({call})  # {targets}")
    steps.append((op.fn, [v.ref for v in args], [v.ref for v in outs]))
    values.extend(outs)
    return outs


#: the library's functions every check of a cost path runs over beside the random programs: dense and masked
#: attention, its backward, a matmul, a fused loss and a gated MLP (name → a function building the diagram)
LIBRARY_FUNCTIONS = {
    "attention": lambda: nc.library.attention(),
    "causal attention": lambda: nc.library.causal_attention(),
    "attention backward": lambda: nc.grad(nc.library.attention()),
    "matmul": lambda: nc.library.matmul(),
    "linear cross-entropy": lambda: nc.library.linear_cross_entropy(),
    "swiglu": lambda: nc.library.swiglu(),
}


def programs(**options):
    """A hypothesis strategy of :class:`Program` s (``options`` go to :func:`random_program`); shrinks toward
    fewer operations and smaller seeds.

    >>> from hypothesis import given, settings
    >>> @settings(max_examples=3, deadline=None)
    ... @given(programs())
    ... def test(p):
    ...     assert len(p.diagram.dom) >= 1
    >>> test()
    """
    from hypothesis import strategies as st
    n_ops = options.pop("n_ops", None)
    ops = st.just(n_ops) if n_ops is not None else st.integers(1, 7)
    return st.builds(lambda seed, n: random_program(seed, n_ops=n, **options), st.integers(0, 2 ** 32 - 1), ops)
