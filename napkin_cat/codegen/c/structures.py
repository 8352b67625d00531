"""The structures kinds print by in C syntax, shared by the C/OpenMP and CUDA C++ printers (paper Table 4).

A kind's record names how it prints (:mod:`napkin_cat.syntax.printed`): an elementwise map by its template, the
others by a structure, printed here by ``_print_<structure>``:

===============================  ================================================================
form                             element code (per element of the output, or per row)
===============================  ================================================================
a template (exp, add, fma, …)    ``out = f(in₀, in₁, …)``, inputs broadcast by axis name
``contract``                     ``acc = Σ_summed Π inᵢ`` (an inner loop per summed axis)
``reduce`` (fold ⊕, mean)        ``acc = ⊕_core in`` from ⊕'s identity, with ⊕'s printed fold; a mean divides
                                 by the count
``count``                        the count: the product of the core axes' current extents
``fill`` (values)                each output its value, whatever the inputs hold (an initialiser: Initialize's
                                 ``(μ′, z′) = (−∞, 0)``)
``softmax``                      per row: μ = max βx (0 if not finite), y = exp(βx − μ) / Σ exp(βx − μ)
``online_softmax`` (SoftMax₁)    per row: μ = max(max βx, μ′), s = exp(βx − μ), δ = 0 if μ′ = −∞ else
                                 exp(μ′ − μ) (the −∞-safe δ), z = δz′ + Σ s
… ``normalised`` (SoftMax₀)      as SoftMax₁, returning y = s/z and δz′ in place of s and δ
``rename``, ``split``, ``join``  element copies
positions, gathers, LSE          :mod:`napkin_cat.codegen.c.indices`
===============================  ================================================================

A statement with ``accumulate`` folds its value into its output with its accumulator's printed fold.  The
dialect fills the forms' helpers: ``{max}``/``{min}`` propagate NaN as numpy's ``maximum``/``max`` do (C99's
``fmaxf`` drops a NaN operand); here, the selects :data:`MAX_C`, :data:`MIN_C` (the C printer's are functions).

Real values are of one C type, the printer's :class:`~napkin_cat.codegen.c.real.Real` (``float``; the C printer's
``real="double"``): the structures declare their locals in it, and a form, its helpers filled in float's spelling
(libm's ``{sqrt}``, ``{log}``, …: ``sqrtf``, ``logf``), is respelled in it by its record
(:meth:`~napkin_cat.codegen.c.real.Real.spell`: literals and libm calls)::

    fill(Template("{sqrt}({0} + 1.0f)"))  ==  "sqrtf({0} + 1.0f)"  (float)     "sqrt({0} + 1.0)"  (double)
"""
from __future__ import annotations

import sympy

from napkin_cat.codegen.c.indices import IndexKindsMixin
from napkin_cat.codegen.c.real import FLOAT
from napkin_cat.plan.ir import Compute

#: max and min that propagate NaN as numpy's ``maximum``/``max`` do (C99's ``fmaxf`` drops a NaN operand)
MAX_C = "(({0}) != ({0}) || ({0}) > ({1}) ? ({0}) : ({1}))"
MIN_C = "(({0}) != ({0}) || ({0}) < ({1}) ? ({0}) : ({1}))"


class KindsMixin(IndexKindsMixin):
    """The structure printers of :class:`~napkin_cat.codegen.c.family.CFamilyPrinter`."""

    #: ``{max}(a, b)``, ``{min}(a, b)`` in a form: the NaN-propagating selects; ``{exp}(x)``: the prelude's;
    #: ``{sqrt}(x)``, ``{log}(x)``, …: libm's, in float's spelling (``fill`` respells them in the real type)
    helpers = {**FLOAT.helpers, "max": MAX_C, "min": MIN_C, "exp": "nc_exp"}
    #: the C type of real values (:class:`~napkin_cat.codegen.c.real.Real`)
    real = FLOAT
    #: the dialect's two-argument max of reals that ignores a NaN (C99's ``fmaxf``)
    fmax = "fmaxf"
    #: the dialect's max folding a value into an accumulator that starts at −∞ (so is never NaN): a row's max
    fold_max = "fmaxf"
    #: pragma before a reduction loop (``{op}``, ``{var}``); empty where the loop is not vectorised
    simd_reduction = ""

    def fill(self, template, what: str) -> str:
        """The form's text with its helpers filled, in the real type (float literals respelled by the record)."""
        return self.real.spell(super().fill(template, what))

    def _reduction_pragma(self, op, var):
        return self.simd_reduction.format(op=op, var=var) if self.simd_reduction and not self._staged else None

    def _core_loops(self, space, body, pragma=None) -> list[str]:
        """``body`` in loops over ``space`` (sequential, inside one element); the innermost gets ``pragma``."""
        for k, (sym, extent, *_) in enumerate(reversed(space)):
            body = self.for_lines(sym, extent, body, 0, pragma if k == 0 else None)
        return body

    def element(self, s, idx) -> tuple[list, str]:
        """``(lines, value)``: an elementwise statement's value at element ``idx`` (its form on its operands)."""
        lines, args = self.bound([self.read(r, idx) for r in s.ins])
        return lines, self.apply(s, args)

    def accessed(self, s):
        """The statement whose reads and writes ``s`` makes (a dialect that fuses maps: the fused one)."""
        return s

    def _head(self, s, depth):
        s = self.accessed(s)
        args = ", ".join(self.call(r) if isinstance(r, Compute) else self.ref(r) for r in s.ins)
        outs = ", ".join(self.ref(r) for r in s.outs)
        op = (" +=" if s.accumulate == "sum" else f" {s.accumulate}=") if s.accumulate else " ←"
        return [self.line(depth, f"{self.comment} {outs}{op} {s.box.name}({args})")]

    def _fold(self, s, out, idx, value):
        if s.accumulate:
            value = self.combine(s.accumulate, self.read(out, idx), value, s.kind)
        return self.put(out, idx, value)

    # ------------------------------------------------------------------ elementwise
    def _print_elementwise(self, s, depth):
        out = s.outs[0]
        sp = self.space(out)
        idx = {a: sym for sym, _, a, _ in sp}

        def body():
            lines, value = self.element(s, idx)
            return [*lines, self._fold(s, out, idx, value)]

        return self._head(s, depth) + self.statement(s, depth, sp, body, [out])

    def bound(self, reads: list) -> tuple[list, list]:
        """``(lines, arguments)``: what an element's operand reads become before its form (here, the reads
        themselves, no lines; a dialect may read each into a local first)."""
        return [], reads

    def _print_rename(self, s, depth):
        out, src = s.outs[0], s.ins[0]
        sp = self.space(out)
        idx = {a: sym for sym, _, a, _ in sp}
        src_idx = {a: idx[b] for a, b in zip(self.variables[src.var].axes, self.variables[out.var].axes)}
        return self._head(s, depth) + self.statement(
            s, depth, sp, lambda: [self.put(out, idx, self.read(src, src_idx))], [out])

    # ------------------------------------------------------------------ contraction and reductions
    def _print_contract(self, s, depth):
        out = s.outs[0]
        sp = self.space(out)
        idx = {a: sym for sym, _, a, _ in sp}
        summed = []
        for r in s.ins:
            summed += [(r, a) for a in self.variables[r.var].axes if a not in idx and a not in [b for _, b in summed]]
        inner = []
        for r, a in summed:
            (entry,) = self.space(r, [a])
            inner.append(entry)
        full = dict(idx)
        full.update({a: sym for sym, _, a, _ in inner})
        product = " * ".join(self.read(r, full) for r in s.ins) or self.real.one

        def body():
            if not inner:
                return [self._fold(s, out, idx, product)]
            pragma = self._reduction_pragma("+", "nc_acc")
            return ([f"{self.real.ctype} nc_acc = {self.real.zero};"] +
                    self._core_loops(inner, [f"nc_acc += {product};"], pragma) +
                    [self._fold(s, out, idx, "nc_acc")])
        return self._head(s, depth) + self.statement(s, depth, sp, body, [out])

    def _print_reduce(self, s, depth):
        """``acc = ⊕_core x`` from ⊕'s identity (``⊕``: the form's ``fold``, else the kind's accumulator); a
        ``mean`` divides by the count."""
        out = s.outs[0]
        x, sp, idx, core, full = self.reduction_space(s)
        acc, fold = self.reduction(s)
        identity = self.number(float(acc.identity(())))
        step = self.fill(fold.combine, f"accumulator {acc.name!r}'s {self.dialect} fold")

        def body():
            # only a fold whose OpenMP reduction agrees with it vectorises (a max/min would drop NaN in the lanes)
            pragma = self._reduction_pragma(fold.reduce, "nc_acc") if fold.reduce else None
            lines = [f"{self.real.ctype} nc_acc = {identity};"] + self._core_loops(
                core, [f"nc_acc = {step.format('nc_acc', self.read(x, full))};"], pragma)
            value = "nc_acc"
            if self.option(s, "mean", False):
                count = sympy.Mul(*[e for _, e, _, _ in core])
                value = f"nc_acc / {self.real.cast(self.extent_code(count))}"
            return lines + [self._fold(s, out, idx, value)]
        return self._head(s, depth) + self.statement(s, depth, sp, body, [out])

    def _print_count(self, s, depth):
        """``out = Π_core e``: how many values the current tile's core axes hold (no value is read)."""
        out, x = s.outs[0], s.ins[0]
        sp = self.space(out)
        idx = {a: sym for sym, _, a, _ in sp}
        count = sympy.Mul(*[e for _, e, a, _ in self.space(x) if a not in idx])
        return self._head(s, depth) + self.statement(
            s, depth, sp, lambda: [self._fold(s, out, idx, self.real.cast(self.extent_code(count)))], [out])

    def _print_fill(self, s, depth):
        """``outₖ = valueₖ`` at every element: an initialiser, whose inputs give only its outputs' shape."""
        parts = []
        for out, value in self.filled(s):
            sp = self.space(out)
            idx = {a: sym for sym, _, a, _ in sp}
            parts.append((sp, lambda out=out, idx=idx, v=self.number(value): [self._fold(s, out, idx, v)], [out]))
        return self._head(s, depth) + self.statement_parts(s, depth, parts)

    # ------------------------------------------------------------------ the SoftMax family
    def _rows(self, s):
        """``(x, core entries, row space, index)``: the scores, their softmax axes, the rows (weave axes)."""
        x, y = s.ins[0], s.outs[0]
        woven = set(s.box.data.weave_names)
        core = [e for e in self.space(x) if e[2] not in woven]
        core_axes = {e[2] for e in core}
        rows = self.space(y, [a for a in self.variables[y.var].axes if a not in core_axes])
        idx = {a: sym for sym, _, a, _ in rows}
        idx.update({a: sym for sym, _, a, _ in core})
        return x, core, rows, idx

    def _max_pass(self, s, x, core, idx, beta):
        fold = f"nc_m = {self.fold_max}(nc_m, {beta} * {self.read(x, idx)});"
        return [f"{self.real.ctype} nc_m = -INFINITY;"] + self._core_loops(core, [fold],
                                                                          self._reduction_pragma("max", "nc_m"))

    def _print_softmax(self, s, depth):
        x, core, rows, idx = self._rows(s)
        y = s.outs[0]
        beta = self.number(self.param(s, "beta", 1))
        e = f"nc_exp({beta} * {self.read(x, idx)} - nc_m)"
        r, zero = self.real.ctype, self.real.zero

        def body():
            return (self._max_pass(s, x, core, idx, beta) +
                    [f"nc_m = (nc_m > -INFINITY && nc_m < INFINITY) ? nc_m : {zero};", f"{r} nc_z = {zero};"] +
                    self._core_loops(core, [f"nc_z += {e};"], self._reduction_pragma("+", "nc_z")) +
                    [f"const {r} nc_rz = {self.real.one} / nc_z;"] +
                    self._core_loops(core, [self.put(y, idx, f"{e} * nc_rz")]))
        return self._head(s, depth) + self.statement(s, depth, rows, body, [y])

    def _print_online_softmax(self, s, depth):
        x, core, rows, idx = self._rows(s)
        _, mu_prev, z_prev = s.ins
        y, mu, d, z = s.outs
        beta = self.number(self.param(s, "beta", 1))
        e = f"nc_exp({beta} * {self.read(x, idx)} - nc_ms)"
        aux = self.option(s, "normalised", False)
        r = self.real.ctype

        def body():
            lines = self._max_pass(s, x, core, idx, beta) + self._online_rescale(mu_prev, z_prev, idx)
            if aux:
                lines += self._core_loops(core, [f"nc_z += {e};"], self._reduction_pragma("+", "nc_z"))
                lines += ["nc_z = nc_d * nc_zp + nc_z;", f"const {r} nc_rz = {self.real.one} / nc_z;"]
                lines += self._core_loops(core, [self.put(y, idx, f"{e} * nc_rz")])
            else:
                lines += self._core_loops(core, [f"const {r} nc_s = " + e + ";", self.put(y, idx, "nc_s"),
                                                 "nc_z += nc_s;"], self._reduction_pragma("+", "nc_z"))
                lines += ["nc_z = nc_d * nc_zp + nc_z;"]
            return lines + [self.put(mu, idx, "nc_m"), self.put(d, idx, "nc_d * nc_zp" if aux else "nc_d"),
                            self.put(z, idx, "nc_z")]
        return self._head(s, depth) + self.statement(s, depth, rows, body, [y, mu, d, z])

    # ------------------------------------------------------------------ split and join
    def _cut_axis(self, s, arr):
        woven = set(s.box.data.weave_names)
        (axis,) = [a for a in self.variables[arr.var].axes if a not in woven]
        return axis

    def _print_split(self, s, depth):
        x = s.ins[0]
        axis = self._cut_axis(s, x)
        parts, at = [], 0
        for part in s.outs:
            sp = self.space(part)
            idx = {a: sym for sym, _, a, _ in sp}
            src = dict(idx)
            src[axis] = idx[axis] + at
            parts.append((sp, lambda part=part, idx=idx, src=src: [self.put(part, idx, self.read(x, src))], [part]))
            at += int(self.nominal(dict(self.variables[part.var].shape)[axis]))
        return self._head(s, depth) + self.statement_parts(s, depth, parts)

    def _print_join(self, s, depth):
        out = s.outs[0]
        axis = self._cut_axis(s, out)
        parts, at = [], 0
        for part in s.ins:
            sp = [e if e[2] != axis else self.space(part, [axis])[0] for e in self.space(out)]
            idx = {a: sym for sym, _, a, _ in sp}
            dst = dict(idx)
            dst[axis] = idx[axis] + at
            parts.append((sp, lambda part=part, idx=idx, dst=dst: [self.put(out, dst, self.read(part, idx))], [out]))
            at += int(self.nominal(dict(self.variables[part.var].shape)[axis]))
        return self._head(s, depth) + self.statement_parts(s, depth, parts)
