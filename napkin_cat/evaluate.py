"""The numpy functor: what a diagram computes.

A flat layer interpreter (discopy's nested ``python.Function`` overflows the
stack past ~300 boxes).  Sizes are inferred from the input arrays; a shape that
contradicts an axis already bound is an error naming the axis and both sizes.
It is a functor::

    evaluate(f >> g, x) == evaluate(g, evaluate(f, x))
    evaluate(f @ g, x, y) == (*evaluate(f, x), *evaluate(g, y))

>>> import numpy as np, napkin_cat as nc
>>> mm = nc.einsum("a b, b c -> a c")
>>> A, B = np.ones((2, 3)), np.ones((3, 4))
>>> evaluate(mm, A, B).tolist()[0]
[3.0, 3.0, 3.0, 3.0]
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import sympy

from napkin_cat.adapter import Array, Bubble, Diagram, is_structural, layers
from napkin_cat.errors import NapkinError, ShapeError
from napkin_cat.primitive import kind_of
from napkin_cat.weave import core_of


class Env(dict):
    """Bindings of size symbols to ints, shared by one evaluation.

    ``counters`` (optional) tallies the values each Load/Save really moves, per level.
    """

    counters = None

    def child(self) -> "Env":
        """A copy for the inside of a region (new bindings stay inside; counters are shared)."""
        e = Env(self)
        e.counters = self.counters
        return e

    def size(self, expr, what: str) -> int:
        if isinstance(expr, int):
            return expr
        v = expr.subs(self) if self else expr
        if not v.is_number:
            missing = sorted(str(s) for s in v.free_symbols)
            raise ShapeError(f"the size of {what} ({expr}) is not known from the inputs: "
                             f"pass sizes={{{', '.join(repr(m) + ': …' for m in missing)}}}")
        if not v.is_integer:
            raise ShapeError(f"the size of {what} is {expr} = {v}, not an integer")
        return int(v)

    def bind(self, array: Array, value: np.ndarray, where: str):
        if value.ndim != len(array.axes):
            raise ShapeError(f"{where}: expected an array of rank {len(array.axes)} with axes "
                             f"{list(array.names)}, got shape {value.shape}")
        for axis, n in zip(array.axes, value.shape):
            size = axis.size
            if isinstance(size, int):
                if size != n:
                    raise ShapeError(f"{where}: axis {axis.name!r} has size {size}, but the array "
                                     f"has {n} along it (shape {value.shape})")
            elif isinstance(size, sympy.Symbol):
                if size in self and self[size] != n:
                    raise ShapeError(f"{where}: axis {axis.name!r} ({size}) is already bound to "
                                     f"{self[size]}, but this array has {n} along it")
                self[size] = n
            else:
                want = self.size(size, f"axis {axis.name!r}") if size.free_symbols <= set(self) else None
                if want is not None and want != n:
                    raise ShapeError(f"{where}: axis {axis.name!r} has size {size} = {want}, but the "
                                     f"array has {n} along it")


def run_primitive(box, xs: list, env: Env) -> list:
    """Apply one primitive box: transpose weaves to the front, call the kind, transpose back."""
    spec = box.data
    kind = kind_of(spec.kind)
    if env.counters is not None and spec.kind in ("load", "save"):
        lvl = max(box.dom.inside[0].level, box.cod.inside[0].level)
        env.counters[lvl] = env.counters.get(lvl, 0) + int(np.asarray(xs[0]).size)
    if kind.labelled is not None:
        return kind.labelled(xs, [a.names for a in box.dom.inside], [a.names for a in box.cod.inside])
    core = core_of(spec, box.dom, box.cod, env)
    W = [w.name for w in reversed(spec.weaves)]  # outermost first
    wsizes = {}
    batched = []
    for arr, x in zip(box.dom.inside, xs):
        names = arr.names
        present = [n for n in W if n in names]
        core_names = [n for n in names if n not in W]
        perm = [names.index(n) for n in present + core_names]
        x = np.transpose(x, perm) if perm != list(range(len(perm))) else x
        shape = []
        for n in W:
            if n in present:
                wsizes[n] = x.shape[present.index(n)]
                shape.append(wsizes[n])
            else:
                shape.append(1)
        batched.append(x.reshape(shape + list(x.shape[len(present):])))
    outs = kind.impl(batched, core)
    results = []
    for arr, y in zip(box.cod.inside, outs):
        full = [wsizes[n] if n in wsizes else env.size(arr.axis(n).size, f"axis {n!r} of {box.name!r}")
                for n in W]
        y = np.broadcast_to(y, tuple(full) + y.shape[len(W):])
        order = W + [n for n in arr.names if n not in W]
        perm = [order.index(n) for n in arr.names]
        results.append(np.transpose(y, perm) if perm != list(range(len(perm))) else y)
    return results


def run_structural(kind: str, box, xs: list) -> list:
    if kind == "swap":
        n = len(box.left)
        return xs[n:] + xs[:n]
    if kind == "copy":
        return xs * len(box.cod)
    if kind == "discard":
        return []
    raise NapkinError("a merge has no meaning as a function of arrays; use an elementwise add")


def interpret(diagram: Diagram, xs: list, env: Env) -> list:
    """Run the layers of ``diagram`` on the list of input values."""
    values = list(xs)
    for offset, box in layers(diagram):
        k = len(box.dom)
        ins = values[offset:offset + k]
        kind = is_structural(box)
        if kind is not None:
            outs = run_structural(kind, box, ins)
        elif isinstance(box, Bubble):
            outs = box.run(ins, env)
        else:
            outs = run_primitive(box, ins, env)
        values[offset:offset + k] = outs
    return values


def evaluate(diagram: Diagram, *arrays, sizes: dict | None = None, counters: dict | None = None):
    """Evaluate ``diagram`` on numpy arrays; one output gives an array, several a tuple.

    ``sizes`` binds sizes the inputs do not show (tile sizes such as ``g_q``);
    ``counters``, a dict, receives the values moved per level by the Loads/Saves run.
    """
    if not isinstance(diagram, Diagram):
        raise NapkinError(f"evaluate takes a napkin_cat Diagram, got {type(diagram).__name__}")
    if len(arrays) != len(diagram.dom):
        raise ShapeError(f"the diagram takes {len(diagram.dom)} array(s) {[str(a) for a in diagram.dom.inside]}, "
                         f"got {len(arrays)}")
    env = Env()
    env.counters = counters
    from napkin_cat.axis import symbol
    for k, v in (sizes or {}).items():
        env[symbol(k) if isinstance(k, str) else k] = int(v)
    xs = []
    for i, (arr, x) in enumerate(zip(diagram.dom.inside, arrays)):
        x = np.asarray(x)
        if not np.issubdtype(x.dtype, np.number):
            raise ShapeError(f"input {i}: expected a numeric array, got dtype {x.dtype}")
        env.bind(arr, x, f"input {i} ({arr})")
        xs.append(x)
    out = interpret(diagram, xs, env)
    out = [np.asarray(o) for o in out]
    return out[0] if len(out) == 1 else tuple(out)


# --------------------------------------------------------------------------- equivalence
@dataclass
class Equivalence:
    """The verdict of :func:`equivalent`; truthy when the diagrams agree.

    On disagreement it says where: the first failing output, the max error, the sizes.
    """

    ok: bool
    message: str = ""
    output: int | None = None
    max_error: float = 0.0
    sizes: dict = field(default_factory=dict)
    trials: int = 0

    def __bool__(self):
        return self.ok

    def __repr__(self):
        return f"Equivalence({self.ok}{': ' + self.message if self.message else ''})"


def tile_sizes(diagram: Diagram):
    """``(tile size, full axis size)`` of every Grid and Stream, outermost first."""
    from napkin_cat.bubbles import Grid, Region, Stream
    for _, box in layers(diagram):
        if isinstance(box, (Grid, Stream)):
            yield box.size, box.full_size()
        if isinstance(box, Region):
            yield from tile_sizes(box.arg)


def free_sizes(diagram: Diagram) -> list:
    syms = set()
    for arr in diagram.dom.inside:
        for a in arr.axes:
            if not isinstance(a.size, int):
                syms |= a.size.free_symbols
    return sorted(syms, key=str)


def equivalent(d1: Diagram, d2: Diagram, *, seed: int = 0, trials: int = 3, sizes: dict | None = None,
               low: int = 1, high: int = 7, rtol: float = 1e-6, atol: float = 1e-8,
               scale: float = 1.0) -> Equivalence:
    """Compare two diagrams on random inputs (and random sizes for symbolic axes).

    >>> import napkin_cat as nc
    >>> bool(equivalent(nc.einsum("a b -> b a"), nc.einsum("a b -> b a")))
    True
    """
    if d1.dom != d2.dom or d1.cod != d2.cod:
        return Equivalence(False, f"types differ: {d1.dom} → {d1.cod} vs {d2.dom} → {d2.cod}")
    rng = np.random.default_rng(seed)
    fixed = {}
    from napkin_cat.axis import symbol
    for k, v in (sizes or {}).items():
        fixed[symbol(k) if isinstance(k, str) else k] = int(v)
    worst = 0.0
    for t in range(trials):
        env = dict(fixed)
        for s in free_sizes(d1):
            env.setdefault(s, int(rng.integers(low, high + 1)))
        for d in (d1, d2):
            for tile, full in tile_sizes(d):
                if not isinstance(tile, int) and tile not in env:
                    n = Env(env).size(full, f"the axis partitioned by {tile}")
                    env[tile] = int(rng.choice([g for g in range(1, n + 1) if n % g == 0]))
        xs = []
        for arr in d1.dom.inside:
            shape = tuple(Env(env).size(a.size, f"axis {a.name!r}") for a in arr.axes)
            xs.append(rng.normal(size=shape) * scale)
        named = {str(k): v for k, v in env.items()}
        with np.errstate(all="ignore"):
            y1 = evaluate(d1, *xs, sizes=named)
            y2 = evaluate(d2, *xs, sizes=named)
        y1 = y1 if isinstance(y1, tuple) else (y1,)
        y2 = y2 if isinstance(y2, tuple) else (y2,)
        for j, (a, b) in enumerate(zip(y1, y2)):
            a, b = np.asarray(a, float), np.asarray(b, float)
            # NaN and ±inf must sit in the same places; the error is taken over finite entries
            same_specials = (np.array_equal(np.isnan(a), np.isnan(b))
                             and np.array_equal(np.where(np.isinf(a), a, 0), np.where(np.isinf(b), b, 0)))
            finite = np.isfinite(a) & np.isfinite(b)
            err = float(np.max(np.abs(a - b)[finite])) if finite.any() else 0.0
            if not same_specials or not np.allclose(a, b, rtol=rtol, atol=atol, equal_nan=True):
                if not same_specials:
                    err = float("nan")
                what = "has NaN/inf in other places" if not same_specials else f"differs by up to {err:.3g}"
                return Equivalence(False, f"output {j} {what} at sizes {named} "
                                   f"(trial {t}, seed {seed})", j, err, named, t + 1)
            worst = max(worst, err)
    return Equivalence(True, "", None, worst, {}, trials)
