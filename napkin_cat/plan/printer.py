"""Pseudocode: a printer over the plan IR, one ``_print_<Node>`` per node (paper §5.1-5.2, steps 1-2).

Loops read as in the paper's expansions: a parallel loop over the groups of an axis, a kernel at
its level, a stream's head (loads of what every slice reuses, the state set to its empty value),
its loop over slices and its tail.  A tile of a ragged axis prints its extent as ``≤tile``
(masked).  Subclass and override ``_print_<Node>`` for another dialect.

>>> import napkin_cat as nc
>>> p = nc.plan(nc.stream(nc.library.matmul(), "b", "s_b"), {"a": 4, "b": 6, "c": 5, "s_b": 3})
>>> print(Printer(p.variable_map).block(p.body))  # doctest: +NORMALIZE_WHITESPACE
kernel @1:
  head:
    sum0[a×c] ← 0
  for i_b in 0 … ⌈b/s_b⌉ − 1:   # stream b
    x0_1[a×s_b] ← load x0[:, i_b·s_b : +s_b]
    x1_1[s_b×c] ← load x1[i_b·s_b : +s_b, :]
    sum0 += ·(x0_1, x1_1)
    free x0_1, x1_1
  tail:
    free x0, x1
    y0[a×c] ← store sum0
    free sum0
"""
from __future__ import annotations

import sympy

from napkin_cat.plan.ir import Compute, Free

INDENT = "  "


def expr(e) -> str:
    """A size or index expression the way the paper writes it (``i_q·g_q``)."""
    return str(sympy.sympify(e)).replace("*", "·")


class Printer:
    """Pseudocode of a plan: ``variables`` give the shapes, ``masked`` the loops whose last tile is partial."""

    def __init__(self, variables: dict | None = None, masked: set | None = None):
        self.variables = variables or {}
        self.masked = set(masked or ())   # loop indices whose last tile is partial

    def doprint(self, node, depth: int = 0) -> list:
        method = getattr(self, f"_print_{type(node).__name__}", None)
        if method is None:
            raise TypeError(f"{type(self).__name__} cannot print a {type(node).__name__}")
        return method(node, depth)

    def block(self, stmts, depth: int = 0) -> str:
        return "\n".join(self._lines(stmts, depth))

    def _lines(self, stmts, depth):
        out, frees = [], []
        for s in stmts:
            if isinstance(s, Free):
                frees.append(s.var)
                continue
            if frees:
                out.append(INDENT * depth + "free " + ", ".join(frees))
                frees = []
            out += self.doprint(s, depth)
        if frees:
            out.append(INDENT * depth + "free " + ", ".join(frees))
        return out

    # ------------------------------------------------------------------ pieces
    def shape(self, var: str) -> str:
        v = self.variables.get(var)
        return "" if v is None else "[" + "×".join(expr(e) for _, e in v.shape) + "]"

    def extent(self, rng) -> str:
        masked = bool(sympy.sympify(rng.start).free_symbols & self.masked)
        return f"+≤{expr(rng.tile)}" if masked else f"+{expr(rng.tile)}"

    def ref(self, r) -> str:
        if r.whole:
            return r.var
        v = self.variables.get(r.var)
        axes = v.axes if v is not None else tuple(a for a, _ in r.index)
        parts = []
        for a in axes:
            rng = r.range(a)
            parts.append(":" if rng is None else f"{expr(rng.start)} : {self.extent(rng)}")
        return f"{r.var}[{', '.join(parts)}]"

    def _def(self, r) -> str:
        return self.ref(r) + (self.shape(r.var) if r.whole else "")

    # ------------------------------------------------------------------ nodes
    def _print_Alloc(self, s, depth):
        v = self.variables.get(s.var)
        what = f" {v.dtype} @{v.level}" if v is not None else ""
        return [f"{INDENT * depth}alloc {s.var}{self.shape(s.var)}{what}"]

    def _print_Load(self, s, depth):
        return [f"{INDENT * depth}{self._def(s.dst)} ← load {self.ref(s.src)}"]

    def _print_Store(self, s, depth):
        return [f"{INDENT * depth}{self._def(s.dst)} ← store {self.ref(s.src)}"]

    def _print_Copy(self, s, depth):
        return [f"{INDENT * depth}{self._def(s.dst)} ← {self.ref(s.src)}"]

    def _print_Combine(self, s, depth):
        op = "+=" if s.monoid == "sum" else f"{s.monoid}="
        return [f"{INDENT * depth}{self.ref(s.dst)} {op} {self.ref(s.src)}"]

    def _print_Fill(self, s, depth):
        value = {float("-inf"): "−∞", float("inf"): "∞"}.get(s.value, f"{s.value:g}")
        return [f"{INDENT * depth}{s.var}{self.shape(s.var)} ← {value}"]

    def call(self, s) -> str:
        """``box(args)``; an inlined operand prints as its own call."""
        args = ", ".join(self.call(r) if isinstance(r, Compute) else self.ref(r) for r in s.ins)
        return f"{s.box.name}({args})"

    def _print_Compute(self, s, depth):
        call = self.call(s)
        if s.accumulate:
            op = "+=" if s.accumulate == "sum" else f"{s.accumulate}="
            return [f"{INDENT * depth}{self.ref(s.outs[0])} {op} {call}"]
        outs = ", ".join(self._def(r) for r in s.outs)
        return [f"{INDENT * depth}{outs} ← {call}"]

    def _print_Kernel(self, s, depth):
        return [f"{INDENT * depth}kernel @{s.level}:"] + self._lines(s.body, depth + 1)

    def _last(self, s):
        """The loop's last index: ``⌈full/tile⌉ − 1`` (``full − 1`` for a loop by 1: a split's parts)."""
        if s.tile == 1:
            return expr(sympy.sympify(s.full) - 1)
        return f"⌈{expr(s.full)}/{expr(s.tile)}⌉ − 1"

    def _print_GridLoop(self, s, depth):
        head = f"{INDENT * depth}parallel for {s.index} in 0 … {self._last(s)}:   # group {s.axis}"
        return [head] + self._lines(s.body, depth + 1)

    def _print_StreamLoop(self, s, depth):
        out = []
        if s.head:
            out += [f"{INDENT * depth}head:"] + self._lines(s.head, depth + 1)
        out.append(f"{INDENT * depth}for {s.index} in 0 … {self._last(s)}:   # stream {s.axis}")
        if getattr(s, "skips", False):
            out.append(f"{INDENT * (depth + 1)}skip unless {expr(s.when)}   # the mask is never true elsewhere")
        full = getattr(s, "full_trips", None)
        if full is not None:
            out.append(f"{INDENT * (depth + 1)}where {expr(full.when)}: {', '.join(sorted(full.conditions))} true, "
                       f"{', '.join(sorted(full.made))} not made   # the mask is true on every pair")
        if getattr(s, "data", None) is not None:
            box = ", ".join(f"{a}[{expr(start)} : +{expr(extent)}]" for a, start, extent in s.data.box)
            out.append(f"{INDENT * (depth + 1)}skip unless block_mask allows a pair in {box}   # a mask from data")
            if s.data.condition is not None:
                true = ", ".join(sorted(s.data.conditions))
                out.append(f"{INDENT * (depth + 1)}where it allows every pair: {true} true, "
                           f"{', '.join(sorted(s.data.made))} not made")
        out += self._lines(s.body, depth + 1)
        if s.tail:
            out += [f"{INDENT * depth}tail:"] + self._lines(s.tail, depth + 1)
        return out


def variable_table(variables, sizes: dict) -> str:
    """The variables: name, shape, dtype, level, role, buffers, bytes (symbolic and at ``sizes``)."""
    rows = [("variable", "size", "dtype", "level", "role", "buffers", "bytes", "at sizes", "from")]
    for v in variables:
        shape = "×".join(expr(e) for _, e in v.shape) or "1"
        at = sympy.sympify(v.bytes).subs(sizes)
        rows.append((v.name, shape, v.dtype, str(v.level), v.role, str(v.buffers), expr(v.bytes),
                     str(at), v.origin))
    widths = [max(len(r[k]) for r in rows) for k in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows)
