"""Positions, gathers and log-sum-exp in C syntax (the C/OpenMP and CUDA C++ printers share them).

The structures of the index kinds' records (comparisons, logic, ``where`` and ``select`` are elementwise
templates of their records, :mod:`napkin_cat.syntax.indices`: ``(a <= b ? 1.0f : 0.0f)``, … a mask stored as
``unsigned char``):

=====================  ==========================================================================
structure              element code
=====================  ==========================================================================
``position``           ``start + j_a``: the loop's start on the whole axis plus the element's index
``gather``             ``t = (int)index − start``; ``0 ≤ t < extent ? x[…, t] : 0`` (a slice's part)
``logsumexp``          per row: μ = max x (0 if not finite), ``μ + log Σ exp(x − μ)``
``logsumexp_online``   per row: μ = max(max x, μ′), δ = 0 if μ′ = −∞ else exp(μ′ − μ), z = δz′ + Σ exp(x − μ)
=====================  ==========================================================================
"""
from __future__ import annotations

import sympy


class IndexKindsMixin:
    """The printers of the index structures and of log-sum-exp (see the module docstring)."""

    def _print_position(self, s, depth):
        out = s.outs[0]
        sp = self.space(out)
        idx = {a: sym for sym, _, a, _ in sp}
        axis = s.box.cod.inside[0].axes[0].name       # the axis it numbers (its one weave)
        value = self.real.cast(self.code(s.start(axis) + idx[axis]))
        return self._head(s, depth) + self.statement(s, depth, sp, lambda: [self._fold(s, out, idx, value)], [out])

    def _print_gather(self, s, depth):
        out, (x, t) = s.outs[0], s.ins
        sp = self.space(out)
        idx = {a: sym for sym, _, a, _ in sp}
        (axis,) = [a for a in self.variables[x.var].axes if a not in idx]
        local = sympy.Symbol("nc_t", integer=True)
        full = dict(idx)
        full[axis] = local
        extent = self.extent_code(self.ext(x, axis))

        def body():
            return [f"const int nc_t = (int)({self.read(t, idx)}) - ({self.code(s.start(axis))});",
                    f"const {self.real.ctype} nc_g = (nc_t >= 0 && nc_t < {extent}) ? {self.read(x, full)} : "
                    f"{self.real.zero};",
                    self._fold(s, out, idx, "nc_g")]
        return self._head(s, depth) + self.statement(s, depth, sp, body, [out])

    def _max_of(self, x, core, full):
        return [f"{self.real.ctype} nc_m = -INFINITY;"] + self._core_loops(
            core, [f"nc_m = {self.fold_max}(nc_m, {self.read(x, full)});"],
            self._reduction_pragma("max", "nc_m"))

    def _online_rescale(self, mu_prev, z_prev, idx) -> list[str]:
        """After the row's max ``nc_m``: the online step's μ = max(nc_m, μ′), its finite shift ``nc_ms``, the
        −∞-safe δ = exp(μ′ − μ) and the new sum ``nc_z`` from 0 (the online SoftMax's and log-sum-exp's)."""
        r, zero = self.real.ctype, self.real.zero
        return [f"const {r} nc_mp = {self.read(mu_prev, idx)};",
                f"const {r} nc_zp = {self.read(z_prev, idx)};",
                f"nc_m = {self.fmax}(nc_m, nc_mp);",
                f"const {r} nc_ms = (nc_m > -INFINITY && nc_m < INFINITY) ? nc_m : {zero};",
                f"const {r} nc_d = (nc_mp == -INFINITY) ? {zero} : nc_exp(nc_mp - nc_ms);   "
                f"{self.comment} δ, safe at μ′ = −∞",
                f"{r} nc_z = {zero};"]

    def _print_logsumexp(self, s, depth):
        x, rows, idx, core, full = self.reduction_space(s)
        r, zero = self.real.ctype, self.real.zero

        def body():
            return (self._max_of(x, core, full) +
                    [f"const {r} nc_ms = (nc_m > -INFINITY && nc_m < INFINITY) ? nc_m : {zero};",
                     f"{r} nc_z = {zero};"] +
                    self._core_loops(core, [f"nc_z += nc_exp({self.read(x, full)} - nc_ms);"],
                                     self._reduction_pragma("+", "nc_z")) +
                    [self._fold(s, s.outs[0], idx, f"nc_ms + {self.real.fn('log')}(nc_z)")])
        return self._head(s, depth) + self.statement(s, depth, rows, body, [s.outs[0]])

    def _print_logsumexp_online(self, s, depth):
        x, rows, idx, core, full = self.reduction_space(s)
        _, mu_prev, z_prev = s.ins
        mu, z = s.outs

        def body():
            return (self._max_of(x, core, full) + self._online_rescale(mu_prev, z_prev, idx) +
                    self._core_loops(core, [f"nc_z += nc_exp({self.read(x, full)} - nc_ms);"],
                                     self._reduction_pragma("+", "nc_z")) +
                    ["nc_z = nc_d * nc_zp + nc_z;", self.put(mu, idx, "nc_m"), self.put(z, idx, "nc_z")])
        return self._head(s, depth) + self.statement(s, depth, rows, body, [mu, z])


__all__ = ["IndexKindsMixin"]
