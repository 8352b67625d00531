"""The structures kinds print by in Triton: block-tensor expressions (the printers of the Triton dialect).

A kind's record names how it prints (:mod:`napkin_cat.syntax.printed`): an elementwise map by its Triton template,
the others by a structure, printed here by ``_print_<structure>``:

=================================  ===========================================================
form                               Triton
=================================  ===========================================================
a template (exp, add, fma, cast …) the template on the inputs aligned to the output's axes (a
                                   cast converts on assignment)
``contract``                       ``tl.dot`` for a matrix product, else ``tl.sum`` of the
                                   broadcast product over the contracted axes
``count``                          the product of the core axes' current extents, broadcast (``tl.full``)
``fill`` (values)                  each output its value over its block (``tl.full``): an initialiser
``reduce`` (fold ⊕, mean)          ⊕'s block reduction (``tl.sum`` / ``tl.max`` / ``tl.min``) over the core
                                   axes, the input masked with ⊕'s identity; a mean divides by the count
``softmax``                        μ = max βx (0 if not finite), y = exp(βx − μ) / Σ exp(βx − μ);
                                   for β > 0: β·max x and exp2(x·β·log₂e − μ·log₂e)
``online_softmax`` (``normalised``)  μ = max(max βx, μ′), s = exp(βx − μ), δ = 0 where μ′ = −∞ else
                                   exp(μ′ − μ), z = δz′ + Σ s (SoftMax₀: y = s/z, δz′)
``rename``                         the same tensor
=================================  ===========================================================
"""
from __future__ import annotations

import sympy

from napkin_cat.codegen.errors import CodegenError, UnknownKindError

NEG_INF = 'float("-inf")'
LOG2E = 1.4426950408889634
POS_INF = 'float("inf")'


class TritonKindsMixin:
    """Kind printers of :class:`~napkin_cat.codegen.triton.printer.TritonPrinter`."""

    def _head(self, s, depth):
        args = ", ".join(self.ref(r) for r in s.ins)
        outs = ", ".join(self.ref(r) for r in s.outs)
        op = (" +=" if s.accumulate == "sum" else f" {s.accumulate}=") if s.accumulate else " ←"
        return [self.line(depth, f"# {outs}{op} {s.box.name}({args})")]

    def _out(self, s, ref, expr, have, depth):
        """Assign ``expr`` (over axes ``have``) to the output ``ref``, folding it in if ``s`` accumulates."""
        want = self.axes(ref)
        full = ref.var if any(a not in have for a in want) else None
        expr = self.align(expr, list(have), want, full_var=full)
        if s.accumulate:
            expr = self.combine(s.accumulate, self.value(ref), expr, s.kind)
        return self.assign(ref, expr, depth)

    def _print_elementwise(self, s, depth):
        out = s.outs[0]
        want = self.axes(out)
        args = [self.align(self.value(r), self.axes(r), want) for r in s.ins]
        have = [a for a in want if any(a in self.axes(r) for r in s.ins)]
        if have != want:      # an output axis no input carries: the value is the same along it
            args = [self.align(self.value(r), self.axes(r), have) for r in s.ins]
        return self._head(s, depth) + self._out(s, out, self.apply(s, args), have, depth)

    def _print_rename(self, s, depth):
        return self._head(s, depth) + self.assign(s.outs[0], self.value(s.ins[0]), depth)

    # ------------------------------------------------------------------ contraction and reductions
    def _summed(self, s, out_axes):
        summed = []
        for r in s.ins:
            summed += [a for a in self.axes(r) if a not in out_axes and a not in summed]
        return summed

    def _dot(self, s, O, summed, acc=None):
        """``tl.dot`` for a product of two matrices (one contracted axis, one free axis each), else None.

        Operands of one 16-bit (or fp8) format go to the tensor cores as they are (fp32 sums); others in
        fp32 at the printer's precision.  ``acc``: an fp32 tensor the product is added to."""
        if len(s.ins) != 2 or len(O) != 2 or len(summed) != 1:
            return None
        (k,), (A, B) = summed, s.ins
        a, b = self.axes(A), self.axes(B)
        if len(a) != 2 or len(b) != 2 or k not in a or k not in b:
            return None
        m, n = O
        if m in b and n in a:
            A, B, a, b = B, A, b, a
        if not (m in a and n in b):
            return None
        fa, fb = self.fmt(A.var), self.fmt(B.var)
        tail = f", acc={acc}" if acc else ""
        if fa == fb and fa in self.dot_formats:
            if not (A.whole and B.whole):
                return None
            lhs, rhs = self.align(self.ident(A.var), a, [m, k]), self.align(self.ident(B.var), b, [k, n])
            return f"tl.dot({lhs}, {rhs}{tail})"
        return (f"tl.dot({self.align(self.value(A), a, [m, k])}, {self.align(self.value(B), b, [k, n])}{tail}, "
                f"input_precision=\"{self.precision}\")")

    def _print_contract(self, s, depth):
        out = s.outs[0]
        O = self.axes(out)
        summed = self._summed(s, O)
        if (s.accumulate == "sum" and self.fmt(out.var) == "fp32" and out.whole and self.mask(out.var) is None):
            expr = self._dot(s, O, summed, acc=self.ident(out.var))
            if expr is not None:      # the product summed into the state by the tensor cores (an mma with C)
                return self._head(s, depth) + self.assign(out, expr, depth)
        expr = self._dot(s, O, summed)
        have = O
        if expr is None:
            union = O + summed
            expr = " * ".join(self.align(self.value(r), self.axes(r), union) for r in s.ins) or "1.0"
            for k in reversed(range(len(O), len(union))):
                expr = f"tl.sum({expr}, axis={k})"
            have = [a for a in O if any(a in self.axes(r) for r in s.ins)]
            if have != O:
                union = have + summed
                expr = " * ".join(self.align(self.value(r), self.axes(r), union) for r in s.ins)
                for k in reversed(range(len(have), len(union))):
                    expr = f"tl.sum({expr}, axis={k})"
        return self._head(s, depth) + self._out(s, out, expr, have, depth)

    def _reduce_over(self, expr, X, core, how):
        for k in sorted((X.index(a) for a in core), reverse=True):
            expr = f"{how}({expr}, axis={k})"
        return expr

    def _print_reduce(self, s, depth):
        x, out = s.ins[0], s.outs[0]
        X, O = self.axes(x), self.axes(out)
        core = [a for a in X if a not in O]
        acc, fold = self.reduction(s)
        if fold.reduce is None:
            raise UnknownKindError(s.kind, self.backend, f"its accumulator {acc.name!r} has no Triton block "
                                   f"reduction: give it forms={{'triton': Fold(…, reduce='tl.…')}} to reduce a block")
        identity, how = self.number(float(acc.identity(()))), fold.reduce
        v = self.value(x)
        m = self.mask(x.var)
        if m:
            v = f"tl.where({m}, {v}, {identity})"
        v = self._reduce_over(v, X, core, how)
        if self.option(s, "mean", False):
            count = sympy.Mul(*[self.ext(x, a) for a in core])
            v = f"{v} / ({self.code(count)})"
        return self._head(s, depth) + self._out(s, out, v, [a for a in X if a not in core], depth)

    def _print_count(self, s, depth):
        """The count of the core axes' current extents, broadcast over the output's block (no value is read)."""
        x, out = s.ins[0], s.outs[0]
        O = self.axes(out)
        count = sympy.Mul(*[self.ext(x, a) for a in self.variables[x.var].axes if a not in O])
        v = f"tl.full(({', '.join(map(str, self.shape(out.var)))},), {self.code(count)}, tl.float32)" if O \
            else f"({self.code(count)}) * 1.0"
        return self._head(s, depth) + self._out(s, out, v, O, depth)

    def _print_fill(self, s, depth):
        """Each output its value over its block (``tl.full``): an initialiser, whose inputs give only the shape."""
        lines = self._head(s, depth)
        for out, value in self.filled(s):
            O = self.axes(out)
            v = f"tl.full(({', '.join(map(str, self.shape(out.var)))},), {self.number(value)}, tl.float32)" if O \
                else f"tl.full((), {self.number(value)}, tl.float32)"
            lines += self._out(s, out, v, O, depth)
        return lines

    # ------------------------------------------------------------------ the SoftMax family
    def _scores(self, s, depth):
        """Lines defining the scores ``t_x`` (−∞ outside the mask); returns (lines, name, X, core, rows, β).

        With a positive number β the scores stay unscaled: ``max βx = β·max x`` and ``exp(βx − μ) =
        exp2(x·β·log₂e − μ·log₂e)`` (one multiply-add and the exp2 unit per score, as FlashAttention
        folds its softmax scale); otherwise ``t_x`` is ``βx``."""
        x = s.ins[0]
        X = self.axes(x)
        woven = set(s.box.data.weave_names)
        core = [a for a in X if a not in woven]
        rows = [a for a in X if a not in core]
        t = self.temp("x")
        beta = float(self.param(s, "beta", 1))
        v = self.value(x) if beta > 0 else f"{self.number(beta)} * {self.value(x)}"
        m = self.mask(x.var)
        return ([self.line(depth, f"{t} = " + (f"tl.where({m}, {v}, {NEG_INF})" if m else v))], t, X, core, rows,
                beta if beta > 0 else 1.0)

    def _row_max(self, tx, X, core, beta):
        m = self._reduce_over(tx, X, core, "tl.max")
        return m if beta == 1.0 else f"{self.number(beta)} * {m}"

    def _shifted_exp(self, tx, mu, X, rows, beta):
        """``exp(β·x − μ)`` per score (μ per row)."""
        return (f"tl.exp2({tx} * {self.number(beta * LOG2E)} - {self.align(mu, rows, X)} * "
                f"{self.number(LOG2E)})")

    def _finite(self, name):
        return f"tl.where(({name} > {NEG_INF}) & ({name} < {POS_INF}), {name}, 0.0)"

    def _print_softmax(self, s, depth):
        lines, tx, X, core, rows, beta = self._scores(s, depth)
        tm, ts, tz = self.temp("m"), self.temp("s"), self.temp("z")
        lines += [self.line(depth, f"{tm} = {self._row_max(tx, X, core, beta)}"),
                  self.line(depth, f"{tm} = {self._finite(tm)}"),
                  self.line(depth, f"{ts} = {self._shifted_exp(tx, tm, X, rows, beta)}"),
                  self.line(depth, f"{tz} = {self._reduce_over(ts, X, core, 'tl.sum')}")]
        y = f"{ts} / {self.align(tz, rows, X)}"
        return self._head(s, depth) + lines + self._out(s, s.outs[0], y, X, depth)

    def _print_online_softmax(self, s, depth):
        lines, tx, X, core, rows, beta = self._scores(s, depth)
        _, mu_prev, z_prev = s.ins
        y, mu, d, z = s.outs
        for r in (mu_prev, z_prev):
            if any(a not in rows for a in self.axes(r)):
                raise CodegenError(f"{s.box.name}: the auxiliary {r.var} has axes {self.axes(r)} outside the rows "
                                   f"of the scores {rows}")
        tmp, tzp, tm, tms, ts, td, tz = (self.temp(w) for w in ("mp", "zp", "m", "ms", "s", "d", "z"))
        lines += [
            self.line(depth, f"{tmp} = {self.align(self.value(mu_prev), self.axes(mu_prev), rows)}"),
            self.line(depth, f"{tzp} = {self.align(self.value(z_prev), self.axes(z_prev), rows)}"),
            self.line(depth, f"{tm} = tl.maximum({self._row_max(tx, X, core, beta)}, {tmp})"),
            self.line(depth, f"{tms} = {self._finite(tm)}"),
            self.line(depth, f"{ts} = {self._shifted_exp(tx, tms, X, rows, beta)}"),
            self.line(depth, f"{td} = tl.where({tmp} == {NEG_INF}, 0.0, tl.exp({tmp} - {tms}))   # δ, safe at μ′ = −∞"),
            self.line(depth, f"{tz} = {td} * {tzp} + {self._reduce_over(ts, X, core, 'tl.sum')}")]
        if self.option(s, "normalised", False):
            first, third = f"{ts} / {self.align(tz, rows, X)}", f"{td} * {tzp}"
        else:
            first, third = ts, td
        return (self._head(s, depth) + lines + self._out(s, y, first, X, depth) + self._out(s, mu, tm, rows, depth) +
                self._out(s, d, third, rows, depth) + self._out(s, z, tz, rows, depth))
