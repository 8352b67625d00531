"""Random masks for random programs: positions, integer arithmetic on them, comparisons, logic, and the
operations that apply a mask to numbers, each with its numpy meaning written apart from the library.

A mask is built from the positions of one or two axes ``a``, ``b`` (``nc.position``), terms computed from them
(``a + c``, ``a // c``, ``a % c``, ``a − b``, ``a // (b + 1)``, ``a % (b + 1)``: :mod:`napkin_cat.syntax.division`),
a comparison of two terms (``nc.compare``), and the patterns attention uses: causal ``b ≤ a``, a band
``a − w ≤ b ≤ a + w``, a prefix ``b < P`` (written ``b < a % 1 + P``: a comparison takes two arrays), a
block-causal ``b // c ≤ a // c``; joined by ``and`` / ``or`` and negated by ``not`` (``nc.logical``).  A mask
from data compares two arrays of numbers the program reads (its inputs: a comparison of computed numbers turns on
their last bit) (``nc.compare(..., dtype="fp32")``).  A mask is applied by

===================  ===========================================================================
``where``            ``m ? v : other`` (``other`` ∈ {0, −1.5}; −∞ only as a SoftMax's scores)
``select``           ``m ? v : u``
``masked softmax``   ``SoftMax(where(m, v, −∞))`` over axes the mask varies along, where it can
``masked attend``    a masked SoftMax contracted with a second value (masked attention)
===================  ===========================================================================

Every operation is applied at once through the ``apply(op, args) -> outputs`` a program gives (so that a
mask's values are wires of the program, read by several operations where the program reuses the mask), and
each is an :class:`~napkin_cat.testing.operation.Op` whose meaning takes float64 arrays (a mask as 0/1).

>>> import numpy as np, napkin_cat as nc
>>> from napkin_cat.syntax.builder import Builder
>>> from napkin_cat.syntax.adapter import Ty
>>> b, steps = Builder(Ty()), []
>>> def apply(op, args):
...     got = b(op.diagram, *(v.wire for v in args))
...     got = got if isinstance(got, tuple) else (got,)
...     steps.append(op)
...     return [Value(w, ax, len(steps), op.dtype) for w, ax in zip(got, op.outs)]
>>> masks = MaskOps(np.random.default_rng(0), apply)
>>> m = masks.pattern("causal", ("q", 3, 3), ("x", 3, 3))
>>> m.names, nc.evaluate(b.build(m.wire)).astype(int).tolist()     # x ≤ q, its axes in a drawn order
(['x', 'q'], [[1, 1, 1], [0, 1, 1], [0, 0, 1]])
>>> [op.source.split("(")[0] for op in steps]
['nc.position', 'nc.position', 'nc.compare']
"""
from __future__ import annotations

import numpy as np

import napkin_cat as nc
from napkin_cat.syntax.construct import spell
from napkin_cat.testing.operation import INTEGERS, MASKS, NUMBERS, SCORES, Op, Value, align, call_source, sizes_of

#: comparison kind → its numpy meaning
COMPARE = {"le": np.less_equal, "lt": np.less, "ge": np.greater_equal, "gt": np.greater, "eq": np.equal,
           "ne": np.not_equal}
#: the patterns of attention's masks, and a random comparison of two terms
PATTERNS = ("causal", "causal", "band", "prefix", "block causal", "compare")
#: how a mask is applied to numbers
APPLIED = ("where", "select", "masked softmax", "masked attend", "masked attend")


def _run(axes) -> dict:
    return {a[0]: a[2] for a in axes}


def _union(*axes_lists):
    """The axes of several operands, each name once; None where two disagree on a name's sizes."""
    by = {}
    for ax in axes_lists:
        for a in ax:
            if by.setdefault(a[0], a) != a:
                return None
    return tuple(by.values())


def _within(m: Value, v: Value) -> bool:
    """Whether ``m``'s axes are axes of ``v`` (same sizes)."""
    return _union(m.axes, v.axes) is not None and set(m.names) <= set(v.names)


class MaskOps:
    """Makers of masks and of their application: ``rng`` draws, ``apply(op, args)`` adds an operation to the
    program and returns its output :class:`Value` s.  ``shapes`` collects what was made (for coverage counts)."""

    def __init__(self, rng, apply):
        self.rng, self.apply, self.shapes, self.made = rng, apply, set(), []

    def pick(self, seq):
        return seq[int(self.rng.integers(len(seq)))]

    def _perm(self, names):
        return [names[i] for i in self.rng.permutation(len(names))] if self.rng.random() < 0.4 else list(names)

    # ------------------------------------------------------------------ integers from positions
    def position(self, axis) -> Value:
        """The positions ``0 … n−1`` of ``axis`` (``(name, size, run)``)."""
        name, size, run = axis
        op = Op(nc.position(name, **{name: size}), lambda: [np.arange(run)],
                call_source("position", name, axes=(axis,), keywords=False), ((axis,),), INTEGERS)
        self.shapes.add("position")
        return self.apply(op, [])[0]

    def by_constant(self, kind: str, v: Value, c: int) -> Value:
        """``v + c`` (``shift``), ``v // c``, ``v % c`` (Python's floor division, on negative ``c`` too)."""
        meaning = {"shift": lambda x: x + c, "floordiv_by": lambda x: np.floor_divide(x, c),
                   "mod_by": lambda x: np.mod(x, c)}[kind]
        sig = spell(v.names)
        op = Op(nc.elementwise(kind, sig, const=c, dtype="int32", sizes=sizes_of(v.axes)), lambda x: [meaning(x)],
                call_source("elementwise", kind, sig, const=repr(c), dtype="'int32'", axes=v.axes),
                (v.axes,), INTEGERS)
        self.shapes.add(kind)
        return self.apply(op, [v])[0]

    def broadcast(self, *values: Value):
        """``(axes, out, by, run, sig)`` of an operation on ``values`` broadcast by names (``out``: the result's
        names, permuted; ``sig``: the einsum-style signature), or None where two disagree on a name's sizes."""
        axes = _union(*(v.axes for v in values))
        if axes is None:
            return None
        out = self._perm([a[0] for a in axes])
        sig = ", ".join(spell(v.names) for v in values) + f" -> {spell(out)}"
        return axes, out, {a[0]: a for a in axes}, _run(axes), sig

    def of_two(self, kind: str, u: Value, v: Value) -> Value:
        """``u − v``, ``u // v``, ``u % v`` of two integer values, broadcast by names."""
        axes, out, by, run, sig = self.broadcast(u, v)
        meaning = {"sub": np.subtract, "floordiv": np.floor_divide, "mod": np.mod}[kind]

        def fn(x, y):
            return [meaning(align(x, u.names, out, run), align(y, v.names, out, run))]
        op = Op(nc.elementwise(kind, sig, dtype="int32", sizes=sizes_of(axes)), fn,
                call_source("elementwise", kind, sig, dtype="'int32'", axes=axes), (tuple(by[n] for n in out),),
                INTEGERS)
        self.shapes.add(kind)
        return self.apply(op, [u, v])[0]

    def term(self, a, b) -> Value:
        """A random integer term of the position of ``a`` (and perhaps of ``b``)."""
        pa = self.position(a)
        how = self.pick(["position", "shift", "floordiv_by", "mod_by", "sub", "floordiv", "mod"])
        if how == "position":
            return pa
        if how in ("shift", "floordiv_by", "mod_by"):
            c = self.pick([-2, 2, 3, 5]) if how != "shift" else self.pick([-3, -1, 1, 2, 4])
            return self.by_constant(how, pa, c)
        pb = self.position(b)
        if how == "sub":
            return self.of_two("sub", pa, pb)
        return self.of_two(how, pa, self.by_constant("shift", pb, 1))     # a divisor ≥ 1: never 0

    # ------------------------------------------------------------------ masks
    def compare(self, kind: str, u: Value, v: Value) -> Value | None:
        """The mask ``u ⋈ v`` (integers or numbers, both of one dtype), broadcast by names."""
        found = self.broadcast(u, v)
        if found is None:
            return None
        axes, out, by, run, sig = found
        fn = COMPARE[kind]
        dtype = "int32" if u.dtype == INTEGERS else "fp32"
        op = Op(nc.compare(kind, sig, dtype=dtype, **sizes_of(axes)),
                lambda x, y: [fn(align(x, u.names, out, run), align(y, v.names, out, run))],
                call_source("compare", kind, sig, dtype=repr(dtype), axes=axes, keywords=False),
                (tuple(by[n] for n in out),), MASKS)
        self.shapes.add("compare" if u.dtype == INTEGERS else "data mask")
        return self.apply(op, [u, v])[0]

    def logical(self, kind: str, *ms: Value) -> Value:
        """``m₁ ∧ m₂``, ``m₁ ∨ m₂`` or ``¬m``."""
        axes, out, by, run, sig = self.broadcast(*ms)
        meaning = {"and": lambda x, y: (x != 0) & (y != 0), "or": lambda x, y: (x != 0) | (y != 0),
                   "not": lambda x: x == 0}[kind]
        op = Op(nc.logical(kind, sig, **sizes_of(axes)),
                lambda *xs: [meaning(*(align(x, m.names, out, run) for x, m in zip(xs, ms)))],
                call_source("logical", kind, sig, axes=axes, keywords=False), (tuple(by[n] for n in out),), MASKS)
        self.shapes.add(kind)
        return self.apply(op, list(ms))[0]

    def pattern(self, name: str, a, b) -> Value:
        """The mask ``name`` (one of :data:`PATTERNS`) over the axes ``a`` (queries) and ``b`` (keys)."""
        self.shapes.add(name)
        if name == "causal":
            return self.compare("le", self.position(b), self.position(a))
        if name == "band":
            w = int(self.rng.integers(0, 3))
            pa = self.position(a)
            after = self.compare("le", self.by_constant("shift", pa, -w), self.position(b))
            before = self.compare("le", self.position(b), self.by_constant("shift", pa, w))
            return self.logical("and", after, before)
        if name == "prefix":
            zero = self.by_constant("mod_by", self.position(a), 1)
            return self.compare("lt", self.position(b), self.by_constant("shift", zero, int(self.rng.integers(1, 4))))
        if name == "block causal":
            c = int(self.rng.integers(2, 4))
            return self.compare("le", self.by_constant("floordiv_by", self.position(b), c),
                                self.by_constant("floordiv_by", self.position(a), c))
        return self.compare(self.pick(sorted(COMPARE)), self.term(a, b), self.term(b, a))

    def mask(self, axes, numbers=(), depth: int = 0) -> Value | None:
        """A random mask over (some of) ``axes``: a pattern, a union or intersection of two, a negation, or
        (given ``numbers``, values of numbers over those axes) a comparison of data."""
        if not axes:
            return None
        a = self.pick(axes)
        b = self.pick([x for x in axes if x != a] or [a])
        r = self.rng.random()
        if numbers and r < 0.12:
            u, v = self.pick(numbers), self.pick(numbers)
            return self.compare(self.pick(sorted(COMPARE)), u, v)
        if depth == 0 and r < 0.35:
            how = self.pick(["or", "or", "and", "not"])
            first = self.mask(axes, numbers, depth + 1)
            if how == "not":
                return self.logical("not", first)
            second = self.mask(axes, numbers, depth + 1)
            if first is None or second is None or _union(first.axes, second.axes) is None:
                return first
            if how == "or":
                self.shapes.add("union")
            return self.logical(how, first, second)
        return self.pattern(self.pick(PATTERNS), a, b)

    # ------------------------------------------------------------------ masks applied to numbers
    def applied(self, how: str, v: Value, u: Value, numbers=()) -> tuple:
        """``(op, args)``: a mask over ``v``'s axes applied to ``v`` as ``how`` says (one of :data:`APPLIED`; a
        masked attend's SoftMax, which the program contracts), ``u`` the other operand of a ``select``; the mask
        is a new one, or one made before whose axes ``v`` has (one mask read twice).  ``(None, [])`` where it
        cannot be."""
        inside = [m for m in self.made if _within(m, v)]
        m = self.pick(inside) if inside and self.rng.random() < 0.3 else \
            self.mask(list(v.axes), [n for n in numbers if _within(n, v)])
        if m is None:
            return None, []
        self.made.append(m)
        self.shapes.add(how)
        if how == "where":
            return self.where(m, v, float(self.pick([0.0, -1.5]))), [m, v]
        if how == "select":
            return self.select(m, v, u), [m, v, u]
        masked = self.where(m, v, -np.inf)
        (s,) = self.apply(masked, [m, v])
        along = [n for n in m.names if self.rng.random() < 0.7] or m.names[:1]
        over = [n for n in s.names if n in along or self.rng.random() < 0.2] or [self.pick(s.names)]
        return self.softmax(s, over), [s]

    def where(self, m: Value, v: Value, other: float) -> Op | None:
        """``m ? v : other``."""
        found = self.broadcast(m, v)
        if found is None:
            return None
        axes, out, by, run, sig = found
        d = nc.where(sig, other=other, **sizes_of(axes))

        def fn(c, x):
            return [np.where(align(c, m.names, out, run) != 0, align(x, v.names, out, run), other)]
        src = call_source("where", sig, other=f"float({str(other)!r})", axes=axes, keywords=False)
        return Op(d, fn, src, (tuple(by[n] for n in out),), SCORES if other == -np.inf else NUMBERS)

    def select(self, m: Value, v: Value, u: Value) -> Op | None:
        """``m ? v : u``."""
        found = self.broadcast(m, v, u)
        if found is None:
            return None
        axes, out, by, run, sig = found

        def fn(c, x, y):
            return [np.where(align(c, m.names, out, run) != 0, align(x, v.names, out, run),
                             align(y, u.names, out, run))]
        return Op(nc.select(sig, **sizes_of(axes)), fn, call_source("select", sig, axes=axes, keywords=False),
                  (tuple(by[n] for n in out),))

    def softmax(self, s: Value, over) -> Op:
        """``SoftMax`` of ``s`` over ``over`` (a masked score of −∞ weighs 0; a row with no score is NaN)."""
        names = s.names
        axis = tuple(k for k, n in enumerate(names) if n in over)

        def fn(x):
            z = x - np.max(x, axis=axis, keepdims=True)
            e = np.exp(z)
            return [e / np.sum(e, axis=axis, keepdims=True)]
        return Op(nc.softmax(spell(names), over=spell(over), sizes=sizes_of(s.axes)), fn,
                  call_source("softmax", spell(names), over=repr(spell(over)), axes=s.axes), (s.axes,))


__all__ = ["MaskOps", "PATTERNS", "APPLIED", "COMPARE"]
