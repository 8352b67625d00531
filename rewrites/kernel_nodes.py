"""The nodes the partition rules match (:mod:`rewrites.kernels`, :mod:`rewrites.partition`, and the rules that
fuse kernels), and the two helpers their right-hand sides and side conditions share.

=====================  ======================================================================
``FUNCTION_BOX``       a primitive (not a Load or a Save) whose arrays are all at level 0
``KERNEL``             a Kernel region;  ``PLAIN_KERNEL``: one whose inside holds no region yet
``PARTITIONABLE``      a Kernel or a Grid region
=====================  ======================================================================

>>> import napkin_cat as nc
>>> from napkin_cat.rewriting.netlist import to_netlist
>>> net = to_netlist(nc.kernel(nc.library.matmul()))
>>> [is_plain_kernel(net, n) for n in net.nodes.values() if n.kind == "region"]
[True]
>>> refusal(lambda: None), refusal(lambda: nc.stream(nc.library.matmul(), "z", "s")).startswith("cannot stream")
(True, True)
"""
from __future__ import annotations

import weakref

import napkin_cat as nc
from napkin_cat.errors import RewriteError
from napkin_cat.rewriting.match import where


def is_function_box(net, n) -> bool:
    return (n.kind == "box" and n.spec.kind not in ("load", "save")
            and all(a.level == 0 for a in (*n.dom, *n.cod)))


def is_kernel(net, n) -> bool:
    return n.kind == "region" and isinstance(n.box, nc.Kernel)


#: per netlist node (immutable, kept by identity when a rewrite splices its netlist): whether it is a plain kernel
_PLAIN = weakref.WeakKeyDictionary()


def is_plain_kernel(net, n) -> bool:
    """A kernel whose inside is Loads ; primitives ; Saves (not yet partitioned).  Read once per node: fusing the
    kernels of a block asks it of every pair at every step, and each answer lists the kernel's boxes (400 maps in a
    row: 160,001 asks, 320,000 lists built)."""
    if not is_kernel(net, n):
        return False
    plain = _PLAIN.get(n)
    if plain is None:
        plain = _PLAIN[n] = not any(isinstance(b, nc.Region) for b in n.box.arg.boxes)
    return plain


def is_partitionable(net, n) -> bool:
    return n.kind == "region" and isinstance(n.box, (nc.Kernel, nc.Grid))


FUNCTION_BOX = where("primitive at level 0", is_function_box, nodes=("box",))
PLAIN_KERNEL = where("unpartitioned Kernel", is_plain_kernel, nodes=("region",))
KERNEL = where("Kernel", is_kernel, nodes=("region",))
PARTITIONABLE = where("Kernel or Grid", is_partitionable, nodes=("region",))


def one_box(m, var):
    """The matched node as a one-box diagram."""
    box = m.box(var)
    return nc.Diagram.id(box.dom).then(box)


def refusal(attempt):
    """A side condition that asks the constructor: True when ``attempt()`` succeeds, else its reason."""
    try:
        attempt()
    except RewriteError as e:
        return str(e)
    return True


__all__ = ["FUNCTION_BOX", "PLAIN_KERNEL", "KERNEL", "PARTITIONABLE", "is_function_box", "is_kernel",
           "is_plain_kernel", "is_partitionable", "one_box", "refusal"]
