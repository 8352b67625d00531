"""Row reductions as a CPU vectorises them: sums in lanes, and the online SoftMax's rows in three passes.

Two rewrites of what :mod:`napkin_cat.codegen.c.structures` prints, for the C printer only (the CUDA kernel spreads a
row over a thread block's threads instead):

* **sums in lanes.**  ``#pragma omp simd reduction(+:v)`` lets gcc keep one partial sum per vector lane, but
  without ``-ffast-math`` it adds the lanes in order after the loop: a chain of 16 dependent scalar adds per
  row, as long as the row's exponentials when rows are short (``s_x = 64``).  Instead the loop runs in
  strips of ``NC_LANES`` elements into ``v_l[NC_LANES]`` (one vector) and the lanes are added as a tree::

      for j:  v += f(j)        →    for j0 in strips:  for l < NC_LANES:  v_l[l] += f(j0 + l)
                                    for j in the tail: v += f(j);   v += nc_sum_lanes(v_l)

  (the sum is the same up to its order, as every vectorised sum is);
* **SoftMax rows in three passes.**  ``SoftMax₁`` / ``SoftMax₀`` per row find the maximum, then compute the
  per-row scalars (μ, the −∞-safe δ = exp(μ′ − μ), one ``nc_exp`` each), then the exponentials and their
  sum.  Printed row by row, each short row pays a scalar ``nc_exp`` and two horizontal reductions; in three
  passes over the rows, the middle one is an element loop over rows that vectorises::

      for rows: m = max βx; μ, δ; s = exp(βx − μ); z …     →    for rows: nc_rows[r] = max βx
                                                                for rows (simd): μ, δ; nc_rows[r] = μ
                                                                for rows: s = exp(βx − nc_rows[r]); z …

  The statement's outputs must not share bytes with what it reads (the C layout's default,
  ``layout(unstaged=True)``); a staged statement prints row by row as before.

>>> import napkin_cat as nc
>>> from napkin_cat.codegen.c import CPrinter
>>> flash = nc.group(nc.stream(nc.library.attention(), "x", "s_x"), "q", "g_q")
>>> src = CPrinter(nc.plan(flash, {"q": 64, "x": 64, "d": 8, "g_q": 32, "s_x": 32}), blas=False).doprint_plan()
>>> "nc_z += nc_sum_lanes(nc_z_l);" in src and "nc_rows[j_q] = nc_m;" in src
True
"""
from __future__ import annotations

import math

from napkin_cat.codegen.printer import ident

#: values per strip of a sum in lanes: one AVX-512 register of floats (two AVX2 ones)
LANES = 16

#: the C prelude of the row reductions, over ``{real}``: the C type of real values
PRELUDE = r"""#define NC_LANES {lanes}
/* the lanes of a sum added as a tree (a vectorised sum's order, as clang and -ffast-math add them) */
static inline {real} nc_sum_lanes({real} *l) {{
    for (int w = NC_LANES / 2; w > 0; w /= 2)
        for (int k = 0; k < w; ++k) l[k] += l[k + w];
    return l[0];
}}
"""


class RowsMixin:
    """The C printer's row reductions (see the module docstring); needs ``self.row_values`` reset per launch."""

    row_values = 0

    # ------------------------------------------------------------------ sums in lanes
    def _core_loops(self, space, body, pragma=None) -> list[str]:
        var = _summed(pragma)
        lane_body = [_in_lanes(b, var) for b in body] if var and space else None
        if not lane_body or lane_body == body:
            return super()._core_loops(space, body, pragma)
        *outer, (sym, extent, *_) = space
        j, e = ident(sym.name), self.extent_code(extent)
        strips = ["int nc_j0 = 0;",
                  f"for (; nc_j0 + NC_LANES <= {e}; nc_j0 += NC_LANES) {{",
                  self.indent + "#pragma omp simd",
                  self.indent + "for (int nc_l = 0; nc_l < NC_LANES; ++nc_l) {",
                  2 * self.indent + f"const int {j} = nc_j0 + nc_l;"] + \
                 [2 * self.indent + b for b in lane_body] + [self.indent + "}", "}",
                                                             f"for (int {j} = nc_j0; {j} < {e}; ++{j}) {{"] + \
                 [self.indent + b for b in body] + ["}"]
        for osym, oext, *_ in reversed(outer):
            strips = self.for_lines(osym, oext, strips, 0)
        return ["{", self.indent + f"{self.real.ctype} {var}_l[NC_LANES] = {{{self.real.zero}}};"] + \
            [self.indent + s for s in strips] + [self.indent + f"{var} += nc_sum_lanes({var}_l);", "}"]

    # ------------------------------------------------------------------ contractions along contiguous rows
    def _print_contract(self, s, depth):
        """A contraction ``out[…, n] (+)= Σ_k A[…, k] B[k, n]`` whose output row ``n`` is contiguous in ``out`` and
        in ``B`` but ``k`` is not (so the dot form would read ``B`` with a stride): the row is the vector::

            for …: for n: acc = Σ_k A[k] B[k, n]   →   for …: out[…, :] = 0;  for k: out[…, :] += A[k]·B[k, :]

        (the same products, added in the same order per element); other contractions print as dot products."""
        form = self._axpy_form(s)
        if form is None:
            return super()._print_contract(s, depth)
        (a, b), n, k = form
        out = s.outs[0]
        sp = self.space(out)
        idx = {ax: sym for sym, _, ax, _ in sp}
        (k_entry,) = self.space(b, [k])
        idx[k] = k_entry[0]
        row, rest = [e for e in sp if e[2] == n], [e for e in sp if e[2] != n]
        elem = self.elem(out, idx)
        body = [] if s.accumulate else self._row_loops(row, [f"{elem} = {self.real.zero};"], 0, simd=True)
        body += self.for_lines(k_entry[0], k_entry[1], [f"const {self.real.ctype} nc_a = {self.read(a, idx)};"] +
                               self._row_loops(row, [f"{elem} += nc_a * {self.read(b, idx)};"], 0, simd=True), 0)
        out_lines = body
        for sym, extent, *_ in reversed(rest):
            out_lines = self.for_lines(sym, extent, out_lines, 0)
        return self._head(s, depth) + [self.line(depth, line) for line in out_lines]

    def _axpy_form(self, s):
        """``((A, B), n, k)`` when :meth:`_print_contract` prints ``s`` along rows, else None."""
        if len(s.ins) != 2 or len(s.outs) != 1 or s.accumulate not in (None, "sum"):
            return None
        out = s.outs[0]
        if out.var in self.layout.dead or out.var in self.aliased(s) or \
                any(self.ctype(r.var) != self.real.ctype for r in (*s.ins, out)):
            return None
        axes = [self.variables[r.var].axes for r in s.ins]
        o = self.variables[out.var].axes
        summed = {x for ax in axes for x in ax if x not in o}
        if len(summed) != 1 or not o:
            return None
        (k,), n = summed, o[-1]
        if not all(k in ax for ax in axes) or [n in ax for ax in axes].count(True) != 1:
            return None
        a, b = s.ins if n in axes[1] else s.ins[::-1]
        sb = self.strides(b.var)
        if self.strides(out.var)[n] != 1 or sb[n] != 1 or sb[k] == 1:
            return None
        return (a, b), n, k

    # ------------------------------------------------------------------ SoftMax rows in three passes
    def _print_online_softmax(self, s, depth):
        if self.aliased(s) or self.simd_reduction == "":
            return super()._print_online_softmax(s, depth)
        x, core, rows, idx = self._rows(s)
        _, mu_prev, z_prev = s.ins
        y, mu, d, z = s.outs
        beta = self.number(self.param(s, "beta", 1))
        aux = self.option(s, "normalised", False)
        flat = self._flat(rows)
        values = math.prod(b for *_, b in rows)
        self.row_values = max(self.row_values, values)
        e = f"nc_exp({beta} * {self.read(x, idx)} - nc_ms)"
        r, zero = self.real.ctype, self.real.zero
        maxima = self._max_pass(s, x, core, idx, beta) + [f"nc_rows[{flat}] = nc_m;"]
        scalars = [f"const {r} nc_mp = {self.read(mu_prev, idx)};",
                   f"const {r} nc_m = {self.fmax}(nc_rows[{flat}], nc_mp);",
                   f"const {r} nc_ms = (nc_m > -INFINITY && nc_m < INFINITY) ? nc_m : {zero};",
                   f"const {r} nc_d = (nc_mp == -INFINITY) ? {zero} : nc_exp(nc_mp - nc_ms);   "
                   f"{self.comment} δ, safe at μ′ = −∞",
                   self.put(mu, idx, "nc_m"),
                   self.put(d, idx, f"nc_d * {self.read(z_prev, idx)}" if aux else "nc_d"),
                   f"nc_rows[{flat}] = nc_ms;", f"nc_rows[{values} + {flat}] = nc_d;"]
        exps = [f"const {r} nc_ms = nc_rows[{flat}];", f"{r} nc_z = {zero};"]
        if aux:
            exps += self._core_loops(core, [f"nc_z += {e};"], self._reduction_pragma("+", "nc_z"))
            exps += [f"nc_z = nc_rows[{values} + {flat}] * {self.read(z_prev, idx)} + nc_z;",
                     f"const {r} nc_rz = {self.real.one} / nc_z;"]
            exps += self._core_loops(core, [self.put(y, idx, f"{e} * nc_rz")])
        else:
            exps += self._core_loops(core, [f"const {r} nc_s = " + e + ";", self.put(y, idx, "nc_s"), "nc_z += nc_s;"],
                                     self._reduction_pragma("+", "nc_z"))
            exps += [f"nc_z = nc_rows[{values} + {flat}] * {self.read(z_prev, idx)} + nc_z;"]
        exps += [self.put(z, idx, "nc_z")]
        return self._head(s, depth) + [
            self.line(depth, f"{{   {self.comment} rows in three passes: maxima; μ and δ (vectorised over rows); "
                             "exponentials and sums")] + \
            self._row_loops(rows, maxima, depth + 1) + self._row_loops(rows, scalars, depth + 1, simd=True) + \
            self._row_loops(rows, exps, depth + 1) + [self.line(depth, "}")]

    def _row_loops(self, rows, body, depth, *, simd=False) -> list[str]:
        """``body`` in loops over ``rows`` (the innermost ``omp simd`` if asked); in a block of its own where there
        are no rows, so that the passes' names do not meet."""
        out = body if rows else ["{"] + [self.indent + b for b in body] + ["}"]
        for k, (sym, extent, *_) in enumerate(reversed(rows)):
            out = self.for_lines(sym, extent, out, 0, "#pragma omp simd" if simd and k == 0 else None)
        return [self.line(depth, line) for line in out]

    @staticmethod
    def _flat(rows) -> str:
        """The row's index in a row-major array over the rows' full (tile) extents."""
        terms, stride = [], 1
        for sym, _, _, bound in reversed(rows):
            terms.append(ident(sym.name) if stride == 1 else f"{stride}*{ident(sym.name)}")
            stride *= bound
        return " + ".join(reversed(terms)) or "0"


def _summed(pragma) -> str | None:
    """The variable a ``reduction(+:v)`` pragma sums, or None."""
    if not pragma or "reduction(+:" not in pragma:
        return None
    return pragma.split("reduction(+:", 1)[1].split(")", 1)[0]


def _in_lanes(line: str, var: str) -> str:
    """``line`` with its fold into ``var`` made a fold into lane ``nc_l`` of ``var_l``."""
    if line.startswith(f"{var} += "):
        return f"{var}_l[nc_l] += " + line[len(f"{var} += "):]
    if line.startswith(f"{var} = {var} + "):
        return f"{var}_l[nc_l] = {var}_l[nc_l] + " + line[len(f"{var} = {var} + "):]
    return line
