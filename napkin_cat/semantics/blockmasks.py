"""``nc.block_mask``: the block mask of a mask diagram on its data (FlexAttention's ``create_block_mask``).

The mask is evaluated once on the data (numpy, :func:`~napkin_cat.semantics.evaluate.evaluate`), before any run
of the attention that applies it; its summed-area table then answers for any tiling
(:class:`~napkin_cat.algorithms.blockmask.BlockMask`)::

    block_mask(m, *xs).truth(box).possibly  ⟺  evaluate(m, *xs)[box].any()

>>> import numpy as np, napkin_cat as nc
>>> seg = np.array([0, 0, 1, 1], dtype=np.int32)
>>> block_mask(nc.library.document_mask(q=4, x=4), seg, seg).states({"q": 2, "x": 2}).tolist()
[[2, 0], [0, 2]]
"""
from __future__ import annotations

import numpy as np

from napkin_cat.algorithms.blockmask import BlockMask
from napkin_cat.errors import IndexingError
from napkin_cat.semantics.evaluate import evaluate
from napkin_cat.syntax.adapter import Diagram


def block_mask(mask: Diagram, *inputs) -> BlockMask:
    """The block mask of ``mask`` (a diagram with one bool output, e.g. ``nc.library.document_mask()``) on
    ``inputs``, over the output's axes."""
    if len(mask.cod) != 1 or mask.cod.inside[0].dtype.family != "bool":
        raise IndexingError(f"a block mask is read off a mask: a diagram with one bool output; this one has outputs "
                            f"{[str(a) for a in mask.cod.inside]}")
    return BlockMask.of(np.asarray(evaluate(mask, *inputs), dtype=bool), mask.cod.inside[0].names)


__all__ = ["block_mask"]
