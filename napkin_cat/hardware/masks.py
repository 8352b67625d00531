"""What a prediction assumes of the masks from positions in an algorithm: the cost at sizes and the counting runner
charge a mask's maps only on the trips it does not allow whole (:meth:`napkin_cat.algorithms.skipping.Skip.whole`),
as the C and Triton kernels run them (the Triton kernel's whole trips in a loop of their own where they are one range
of the loop's index, else under a per-trip test: ``tests/codegen/test_triton_whole_trips.py`` counts the masks it
makes against the runner's).

>>> import napkin_cat as nc
>>> masked_by_positions(nc.stream(nc.library.causal_attention(), "x", "s_x"))
True
>>> masked_by_positions(nc.stream(nc.library.attention(), "x", "s_x"))
False
"""
from __future__ import annotations

from napkin_cat.algorithms.bubbles import Region, Stream
from napkin_cat.algorithms.schedule import schedule_of
from napkin_cat.syntax.flat import layers

#: what a GPU prediction of an algorithm with a mask from positions assumes besides (:func:`density_assumptions`)
MASK_LEFT_OUT_ON_WHOLE_TRIPS = (
    "a mask from positions is made only on the trips that run and that it does not allow whole, as the plan's "
    "counting runner and the Triton kernel run it (the trips it allows whole in a loop of their own, or under a "
    "per-trip test where the tiles are ragged); on those trips the select that applies it is still charged, which "
    "the kernel folds away")


def masked_by_positions(algorithm) -> bool:
    """Whether a stream of ``algorithm`` has a mask from positions that may allow some of its trips whole."""
    for _, b in layers(algorithm):
        if isinstance(b, Stream) and (skip := schedule_of(b).skip) is not None and skip.masks:
            return True
        if isinstance(b, Region) and masked_by_positions(b.arg):
            return True
    return False


__all__ = ["MASK_LEFT_OUT_ON_WHOLE_TRIPS", "masked_by_positions"]
