"""The inputs' arrival: a program run on one device whose inputs arrive sharded over the devices (issue 37).

``nc.derive(f, sizes=..., hardware=cluster, layout=...)`` says how the inputs arrive: input ``k`` cut along the axis
``layout[k]`` over the ``P`` devices (``np.array_split``'s shards), or whole on every device (None).  A form that
runs ``f`` on one device must first bring every shard of each sharded input to it.  That is a collective, and its
traffic is the cost functor's, counted on a device program made from ``f`` and the layout (:func:`gathered`)::

    gathered(f, layout, P) = Shard_{a,P}( all-gather_{layout[k]}(x_k) for each sharded x_k ; f )

``f`` run whole (replicated) after the all-gathers, its output whole on every device: the numpy run equals
``f``'s, the cost's link the gathers' alone.  The one device is charged that link (the busiest device's
``max(sent, received)`` at the link's bandwidth, plus its messages' latency,
:func:`~napkin_cat.hardware.programtime.program_phases`): a gather to the one device (it receives ``n − n_0`` of
each array, its peers send one shard each) moves as much through its port as the all-gather's busiest device
(``(P − 1)·n_0`` sent, ``n − n_0`` received, ``n_0 = ⌈n/P⌉``), equal where ``P`` divides ``n`` and at most ``P − 1``
values more at ragged shards; its messages, ``P − 1`` per array, are the all-gather's.

>>> import napkin_cat as nc
>>> g = gathered(nc.library.attention(), ("q", "x", "x"), 4)
>>> [b.name for b in g.boxes[0].arg.boxes if b.name == "all-gather"], g.boxes[0].sharded("dom")
(['all-gather', 'all-gather', 'all-gather'], ('q', 'x', 'x'))
>>> nc.cost(g, sizes={"q": 8, "x": 8, "d": 2}).link.received      # 3 arrays, 3 shards of 2 × 2 arrive
(36, 36, 36, 36)
"""
from __future__ import annotations

from napkin_cat.algorithms.devices import device_region
from napkin_cat.errors import AxisError
from napkin_cat.syntax.adapter import Diagram, Ty
from napkin_cat.syntax.builder import Builder
from napkin_cat.syntax.collectives import all_gather, as_devices, shard_size

__all__ = ["gathered", "sharded_inputs"]


def sharded_inputs(layout) -> bool:
    """Whether the ``layout`` (one entry per input, an axis or None) has an input arrive sharded."""
    return layout is not None and any(a is not None for a in layout)


def gathered(f: Diagram, layout, devices) -> Diagram:
    """``f`` on every device after the all-gathers of its inputs sharded by ``layout`` (see the module docstring):
    the device program whose link is a one-device form's arrival.  AxisError where ``layout`` has not one entry per
    input, an entry names an axis its input does not carry, or no input arrives sharded."""
    if layout is None or len(layout) != len(f.dom):
        raise AxisError(f"layout={layout!r}: one entry per input of the function ({len(f.dom)}), each the axis it "
                        f"arrives sharded along or None")
    arrays = f.dom.inside
    for k, (axis, a) in enumerate(zip(layout, arrays)):
        if axis is not None and axis not in a.names:
            raise AxisError(f"layout: input {k} ({a}) cannot arrive sharded along {axis!r}; it carries "
                            f"{list(a.names)}")
    cuts = [k for k, axis in enumerate(layout) if axis is not None]
    if not cuts:
        raise AxisError("layout: no input arrives sharded; there is nothing to gather (the program runs on one "
                        "device as it is)")
    P = as_devices(devices)
    fulls = {}
    for k in cuts:
        fulls.setdefault(layout[k], arrays[k].axis(layout[k]).size)

    def shard(a, axis):
        return a.replace(axes=tuple(x.relabel(shard_size(x.size, P)) if x.name == axis else x for x in a.axes))
    bld = Builder(Ty(*(shard(a, layout[k]) if k in cuts else a for k, a in enumerate(arrays))))
    wires = [bld(all_gather(" ".join(a.names), axis=layout[k], devices=P, level=a.level, dtype=a.dtype,
                            sizes={x.name: x.size for x in a.axes}), w) if k in cuts else w
             for k, (a, w) in enumerate(zip(arrays, bld.inputs))]
    made = bld(f, *wires)
    inside = bld.build(*(made if isinstance(made, tuple) else (made,)))
    axis = layout[cuts[0]]
    return device_region(inside, axis, P, fulls[axis], also={a: n for a, n in fulls.items() if a != axis},
                         sharded_in=tuple(layout), sharded_out=(None,) * len(f.cod))
