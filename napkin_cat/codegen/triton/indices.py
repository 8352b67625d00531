"""Positions, gathers and log-sum-exp in Triton (block tensors; structure printers of the Triton dialect).

The structures of the index kinds' records (comparisons, logic, ``where`` and ``select`` are elementwise
templates of their records, :mod:`napkin_cat.syntax.indices`: ``tl.where(a <= b, 1.0, 0.0)``, … a mask is an
``int1`` tensor when stored):

=====================  ==========================================================================
structure              Triton
=====================  ==========================================================================
``position``           ``start + tl.arange(0, n)``: the loop's start on the whole axis (e.g.
                       ``i_x*64 + r_x_64``) plus the block's index vector
``gather``             ``tl.sum(tl.where(r_v == t − start, x, 0.0), axis=v)``: the one column of the
                       slice the index falls in (none: 0), a one-hot reduction on the block (over the
                       table's axes and the index's, where the table is not woven over the index's)
``logsumexp``          μ = max x (0 if not finite), ``μ + log Σ exp(x − μ)``, the input masked at −∞
``logsumexp_online``   μ = max(max x, μ′), δ = 0 where μ′ = −∞ else exp(μ′ − μ), z = δz′ + Σ exp(x − μ)
=====================  ==========================================================================
"""
from __future__ import annotations


from napkin_cat.codegen.errors import CodegenError

NEG_INF = 'float("-inf")'


class TritonIndexKindsMixin:
    """The printers of the index kinds and of log-sum-exp in Triton (see the module docstring)."""

    def _print_position(self, s, depth):
        out = s.outs[0]
        axis = s.box.cod.inside[0].axes[0].name       # the axis it numbers (its one weave)
        start = self.code(s.start(axis))
        have = [a for a in self.axes(out) if a == axis]
        index = self.arange(out.var, axis) if have else "tl.zeros([], tl.int32)"     # extent 1: a scalar
        return self._head(s, depth) + self._out(s, out, f"({start} + {index}).to(tl.float32)", have, depth)

    def _print_gather(self, s, depth):
        out, (x, t) = s.outs[0], s.ins
        X, T, O = self.axes(x), self.axes(t), self.axes(out)
        U = X + [a for a in T if a not in X]       # the table's block and the index's: a table read at positions
        (axis,) = [a for a in self.variables[x.var].axes if a not in self.variables[out.var].axes]
        local = self.temp("t")
        lines = [self.line(depth, f"{local} = {self.value(t)} - ({self.code(s.start(axis))})")]
        table = self.align(self.value(x), X, U)
        if axis not in X:         # a slice of one column: the value where the index is 0
            expr = f"tl.where({self.align(local, T, U)} == 0.0, {table}, 0.0)"
            have = U
        else:
            hit = f"{self.align(self.arange(x.var, axis), [axis], U)} == ({self.align(local, T, U)}).to(tl.int32)"
            expr = f"tl.sum(tl.where({hit}, {table}, 0.0), axis={U.index(axis)})"
            have = [a for a in U if a != axis]
        if any(a not in O for a in have):
            raise CodegenError(f"{s.box.name}: the gathered block has axes {have} outside the output's {O}")
        return self._head(s, depth) + lines + self._out(s, out, expr, have, depth)

    def _lse_scores(self, s, depth):
        x = s.ins[0]
        X = self.axes(x)
        rows = self.axes(s.outs[0])
        core = [a for a in X if a not in rows]
        tx = self.temp("x")
        m = self.mask(x.var)
        v = self.value(x)
        return [self.line(depth, f"{tx} = " + (f"tl.where({m}, {v}, {NEG_INF})" if m else v))], tx, X, core, \
            [a for a in X if a not in core]

    def _print_logsumexp(self, s, depth):
        lines, tx, X, core, rows = self._lse_scores(s, depth)
        tm, ts = self.temp("m"), self.temp("z")
        total = self._reduce_over(f"tl.exp({tx} - {self.align(tm, rows, X)})", X, core, "tl.sum")
        lines += [self.line(depth, f"{tm} = {self._finite(self._reduce_over(tx, X, core, 'tl.max'))}"),
                  self.line(depth, f"{ts} = {total}")]
        return self._head(s, depth) + lines + self._out(s, s.outs[0], f"{tm} + tl.log({ts})", rows, depth)

    def _print_logsumexp_online(self, s, depth):
        lines, tx, X, core, rows = self._lse_scores(s, depth)
        _, mu_prev, z_prev = s.ins
        mu, z = s.outs
        tmp, tzp, tm, tms, td, tz = (self.temp(w) for w in ("mp", "zp", "m", "ms", "d", "z"))
        total = self._reduce_over(f"tl.exp({tx} - {self.align(tms, rows, X)})", X, core, "tl.sum")
        lines += [
            self.line(depth, f"{tmp} = {self.align(self.value(mu_prev), self.axes(mu_prev), rows)}"),
            self.line(depth, f"{tzp} = {self.align(self.value(z_prev), self.axes(z_prev), rows)}"),
            self.line(depth, f"{tm} = tl.maximum({self._reduce_over(tx, X, core, 'tl.max')}, {tmp})"),
            self.line(depth, f"{tms} = {self._finite(tm)}"),
            self.line(depth, f"{td} = tl.where({tmp} == {NEG_INF}, 0.0, tl.exp({tmp} - {tms}))"),
            self.line(depth, f"{tz} = {td} * {tzp} + {total}")]
        return self._head(s, depth) + lines + self._out(s, mu, tm, rows, depth) + self._out(s, z, tz, rows, depth)


__all__ = ["TritonIndexKindsMixin"]
