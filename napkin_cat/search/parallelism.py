"""A parallelism requirement in the search: every kernel launches at least ``B`` thread blocks.

``nc.derive(f, memory, sizes=..., min_blocks=B)`` minimises the same objective, ``H``, over a smaller set: the
algorithms whose narrowest kernel launches at least ``B`` blocks.  What a kernel launches is the one count of
:mod:`napkin_cat.algorithms.launches` (its groups ``Π ⌈a/g_a⌉`` times the parts ``P`` of a split stream that
is the whole kernel), so the requirement is a constraint on each kernel's tiles,

    B / blocks(K) ≤ 1,

added to the exact integer search beside the memory columns (a *cap*, :func:`napkin_cat.cost.optimum.optima`:
each trip count ``⌈a/g⌉`` a trip factor, exact on divisor tiles and counted ``⌈a/g⌉`` with a shorter last tile):
a kernel's ``H*(M)`` is then its optimum over the tilings that fit the memory **and** launch enough blocks, and
the shortest path over kernel splits is unchanged.  ``P`` is not a tile of the integer search: a split kernel is
costed at each candidate ``P`` (the divisors of its streamed axis up to the first that reaches ``B`` alone: more
parts only move more), the cheapest kept.  IO never prefers a split (the partial states are extra transfers), so
without a requirement no split variant is costed at all.

>>> import napkin_cat as nc
>>> r = nc.derive(nc.library.matmul(), 2 ** 12, sizes={"a": 16, "b": 4096, "c": 16}, min_blocks=8)
>>> r.blocks >= 8, str(r.variant)
(True, '[·] group c,a · stream b ×p_b')
"""
from __future__ import annotations

import sympy

from napkin_cat.algorithms.bubbles import Region, Stream
from napkin_cat.algorithms.launches import kernel_launches
from napkin_cat.cost.integer_search import divisors
from napkin_cat.errors import NapkinError
from napkin_cat.syntax.flat import layers
from napkin_cat.syntax.sizes import Sizes


def _int(expr, env) -> int:
    v = sympy.sympify(expr).subs(env)
    if not v.is_number:
        raise NapkinError(f"give sizes for {sorted(map(str, v.free_symbols))} (sizes={{'name': …}})")
    return int(v)


def parts_of(curve):
    """``(parts symbol, streamed axis's size)`` of a kernel with a split stream, else None: the ``P`` the search
    chooses (whether its parts run as blocks is the one count's to say, :mod:`napkin_cat.algorithms.launches`), read
    off the curve's bubbles (:attr:`~napkin_cat.search.curves.Curve.bubbles`: no partition is built to ask)."""
    def find(d):
        for _, box in layers(d):
            if isinstance(box, Stream) and box.params.get("parts") is not None:
                return box.params["parts"], box.full_size()
            if isinstance(box, Region):
                got = find(box.arg)
                if got is not None:
                    return got
        return None
    return find(curve.bubbles)


def most_blocks(kernel, sizes: dict) -> int | None:
    """The most thread blocks ``kernel`` (a :class:`~napkin_cat.algorithms.launches.KernelLaunch`) can launch at
    ``sizes`` (its axes and parts; its tiles free): every tile at 1, the least a tile can be, so each axis its
    Grids cut counts its full size ``n`` (``N(n, (g₁, …, 1)) = n`` ≥ ``N(n, (g₁, g₂, …))`` for every tiling:
    the distinct tiles of an axis are at most its indices), times its parts; None where ``sizes`` leave it a
    symbol.  A bound the search reads before it costs a kernel: where it is below the requirement, no tiling of
    the kernel meets it.

    >>> import napkin_cat as nc
    >>> from napkin_cat.algorithms.launches import kernel_launches
    >>> (k,) = kernel_launches(nc.group(nc.stream(nc.library.attention(), "x", "s_x", parts="P"), "q", "g_q"))
    >>> most_blocks(k, {"q": 5, "x": 64, "d": 8, "P": 8})            # 5 rows × 8 parts
    40
    """
    env = Sizes(sizes).env
    axes = {}
    for g in kernel.grids:              # outermost first: nested Grids along an axis count its full size once
        axes.setdefault(g.axis, g.full_size())
    most = sympy.Mul(*axes.values()) * (kernel.parts if kernel.parts is not None else 1)
    most = sympy.sympify(sympy.sympify(most).xreplace(env))
    return int(most) if most.is_Integer else None


class Requirement:
    """At least ``blocks`` thread blocks per kernel; ``at(curve, k)`` is ``(H*, tiles)`` under it at the
    ``k``-th memory (``(None, {})`` where no tiling both fits and launches enough blocks).  Made per derivation, so
    its answers per curve are that call's (a curve shared between calls keeps a requirement's answers only under
    the caps that express it, :meth:`~napkin_cat.search.curves.Curve.at_all`).  ``count``: the curves' (a masked
    stream's tilings ranked by their counted transfers, or by the estimate)."""

    def __init__(self, blocks, sizes: dict, memories: list, tiles: str = "divisors", count: bool = True):
        if not isinstance(blocks, int) or isinstance(blocks, bool) or blocks < 1:
            raise NapkinError(f"min_blocks must be a positive int (thread blocks per kernel), got {blocks!r}")
        self.blocks, self.sizes, self.memories, self.tiles = blocks, dict(sizes), list(memories), tiles
        self.count = count
        self._memo = {}

    def _one(self, curve, sizes):
        """Per memory ``(H, tiles)`` at ``sizes`` (the parts fixed): every kernel's blocks at least the
        requirement, a cap on the tiles where they depend on them."""
        env = Sizes(sizes).env
        kernels = kernel_launches(curve.bubbles)
        if any(m is not None and m < self.blocks for m in (most_blocks(k, sizes) for k in kernels)):
            return [(None, {})] * len(self.memories)    # no tiling launches enough: not costed at all
        launched = [sympy.sympify(k.blocks).xreplace(env) for k in kernels]
        if not curve.grouped:          # no tiles: the blocks are numbers
            ok = all(_int(b, {}) >= self.blocks for b in launched) if launched else self.blocks <= 1
            return [curve.at(sizes, m, self.tiles, self.count) if ok else (None, {}) for m in self.memories]
        caps = tuple(sympy.Integer(self.blocks) / b for b in launched)
        return curve.at_all(sizes, self.memories, self.tiles, caps=caps, count=self.count)

    def all(self, curve) -> list:
        """Per memory ``(H*, tiles)`` of ``curve`` under the requirement, computed once per curve."""
        got = self._memo.get(id(curve))
        return got[1] if got is not None else self._table(curve)[1]

    def column(self, curve) -> list:
        """Per memory ``H*`` of ``curve`` under the requirement (None where no tiling fits and launches enough):
        the table the search reads, ``[h for h, _ in self.all(curve)]``, built once per curve (one look-up per
        curve, not one per curve and memory)."""
        got = self._memo.get(id(curve))
        return got[2] if got is not None else self._table(curve)[2]

    def _table(self, curve) -> tuple:
        split = parts_of(curve)
        if split is None:
            out = self._one(curve, self.sizes)
        else:
            name, full = split
            n = _int(full, Sizes(self.sizes).env)
            candidates = []
            for p in divisors(n)[1:]:
                candidates.append(p)
                if p >= self.blocks:
                    break
            out = [(None, {})] * len(self.memories)
            for p in candidates:
                for k, (h, t) in enumerate(self._one(curve, {**self.sizes, str(name): p})):
                    if h is not None and (out[k][0] is None or h < out[k][0]):
                        out[k] = (h, {**t, name: sympy.Integer(p)})
        got = self._memo[id(curve)] = (curve, out, [h for h, _ in out])   # (the curve kept: its id stays its own)
        return got

    def at(self, curve, k: int):
        return self.all(curve)[k]


__all__ = ["Requirement", "parts_of", "most_blocks"]
