"""What a prediction assumes of the masks from positions in an algorithm: the cost at sizes and the counting runner
charge a mask's maps only on the trips it does not allow whole (:meth:`napkin_cat.algorithms.skipping.Skip.whole`),
as the C and Triton kernels run them (their whole trips in loops of their own where they are ranges of the loop's
index, :mod:`napkin_cat.codegen.trips`, a ragged last tile included, else under a per-trip test:
``tests/codegen/test_triton_whole_trips.py`` counts the masks it makes against numpy's partial tile pairs and the
runner's, at sizes the tiles divide and at primes).  Of a mask read from data a prediction states the density it was
given (:func:`bound_densities`: ``rho[…]`` → a number in 0 … 1, 1 where none is given) or the block mask's measured
density at the kernel's tiles (:func:`density_assumptions`).

>>> import napkin_cat as nc
>>> masked_by_positions(nc.stream(nc.library.causal_attention(), "x", "s_x"))
True
>>> masked_by_positions(nc.stream(nc.library.attention(), "x", "s_x"))
False
"""
from __future__ import annotations

import sympy

from napkin_cat.algorithms.bubbles import Grid, Region, Stream
from napkin_cat.algorithms.schedule import schedule_of
from napkin_cat.cost.numeric import densities
from napkin_cat.cost.record import Cost, Density, fraction
from napkin_cat.syntax.flat import layers

#: what a GPU prediction of an algorithm with a mask from positions assumes besides (:func:`density_assumptions`)
MASK_LEFT_OUT_ON_WHOLE_TRIPS = (
    "a mask from positions is made only on the trips that run and that it does not allow whole, as the plan's "
    "counting runner and the Triton kernel run it (the trips it allows whole in loops of their own, the ragged last "
    "tile included, where they are ranges of the loop's index, else under a per-trip test); on those trips the "
    "select that applies it is still charged, which the kernel folds away")


def masked_by_positions(algorithm) -> bool:
    """Whether a stream of ``algorithm`` has a mask from positions that may allow some of its trips whole."""
    for _, b in layers(algorithm):
        if isinstance(b, Stream) and (skip := schedule_of(b).skip) is not None and skip.masks:
            return True
        if isinstance(b, Region) and masked_by_positions(b.arg):
            return True
    return False


def bound_densities(algorithm, density=None) -> dict:
    """Each density ``rho[…]`` of a mask read from data in ``algorithm`` → the value ``density`` gives it: a number
    for every one, or ``{symbol or its name: number}`` (one not named: 1); None: 1, dense.  An ArgumentError for a
    value outside 0 … 1 or a name the algorithm has no mask for.

    >>> import napkin_cat as nc
    >>> d = nc.stream(nc.kernel(nc.library.document_attention()), "x", "s_x")
    >>> bound_densities(d, 0.25), bound_densities(d)
    ({rho[d(q)=d(x)]: 1/4}, {rho[d(q)=d(x)]: 1})
    >>> bound_densities(d, {"rho[d(q)<d(x)]": 0.5})
    Traceback (most recent call last):
    ...
    napkin_cat.errors.ArgumentError: density names ['rho[d(q)<d(x)]'], no mask read from data of this cost: ...
    """
    if density is None:
        density = 1
    if not isinstance(density, dict):
        fraction(density, "density=")           # checked even where no mask reads data
    bound = Cost(assumptions=tuple(Density(s) for s in densities(algorithm))).at_density(density)
    return {a.symbol: 1 if a.value is None else a.value for a in bound.assumptions}


def tiles_over(algorithm, axes, env: dict) -> dict:
    """Each of ``axes`` that a Grid or Stream of ``algorithm`` partitions → its tile at ``env`` (the innermost)."""
    out = {}
    for _, b in layers(algorithm):
        if isinstance(b, (Grid, Stream)) and b.axis in axes:
            out[b.axis] = int(sympy.sympify(b.size).subs(env))
        if isinstance(b, Region):
            out.update(tiles_over(b.arg, axes, env))
    return out


def density_assumptions(algorithm, env: dict, density: dict, block_mask=None, *, printer: str = "triton") -> tuple:
    """The sentences a prediction states of its masks: each density of a mask read from data and its value, or
    the block mask's measured density at the algorithm's tiles; for the Triton kernels (``printer``), where a mask
    from positions may allow trips whole, :data:`MASK_LEFT_OUT_ON_WHOLE_TRIPS`."""
    if printer == "triton" and masked_by_positions(algorithm):
        return (MASK_LEFT_OUT_ON_WHOLE_TRIPS,) + density_assumptions(algorithm, env, density, block_mask, printer="")
    if block_mask is None:
        return tuple(str(Density(s, v)) for s, v in density.items())
    tiles = tiles_over(algorithm, block_mask.axes, env)
    return (f"the trips of the masks read from data are the given block mask's, counted exactly (trips where it "
            f"allows no pair skipped): {block_mask.density(tiles):.4g} of its blocks at tiles {tiles} run",)


__all__ = ["MASK_LEFT_OUT_ON_WHOLE_TRIPS", "bound_densities", "density_assumptions", "masked_by_positions",
           "tiles_over"]
