"""The inputs' arrival: a program run on one device whose inputs arrive sharded over the devices (issue 37).

``nc.derive(f, sizes=..., hardware=cluster, layout=...)`` says how the inputs arrive: input ``k`` cut along the axis
``layout[k]`` over the ``P`` devices (``np.array_split``'s shards), or whole on every device (None).  A form that
runs ``f`` on one device must first bring every shard of each sharded input to it.  That is a collective, and its
traffic is the cost functor's, counted on a device program made from ``f`` and the layout (:func:`gathered`)::

    gathered(f, layout, P) = Shard_{a,P}( all-gather_{layout[k]}(x_k) for each sharded x_k ; f )

``f`` run whole (replicated) after the all-gathers, its output whole on every device: the numpy run equals
``f``'s, the cost's link the gathers' alone.  The device region ``Shard_{a,P}`` is on the cut axis ``a`` of the most
values: a region whose axis has fewer values than ``P`` runs on that many devices and cuts its other sharded
axes among them alone, where the layout cuts every axis over all ``P``; on the largest axis the two agree (every
other cut axis is then no longer than the devices that hold a shard of ``a``, and ``np.array_split`` of ``n ≤ k``
values over ``k`` or over ``P ≥ k`` devices gives the first ``n`` one value each).  Which axis that is depends on
the sizes: given where the function's own do not decide it (AxisError otherwise).

The one device is charged the gathers' link (the busiest device's ``max(sent, received)`` at the link's
bandwidth, plus its messages' latency, :func:`~napkin_cat.hardware.programtime.program_phases`): a gather to the
one device (it receives ``n − n_0`` of each array, its peers send one shard each) moves as much through its port as
the all-gather's busiest device (``(P − 1)·n_0`` sent, ``n − n_0`` received, ``n_0 = ⌈n/P⌉``), equal where ``P``
divides ``n`` and at most ``P − 1`` values more at ragged shards; its messages, ``P − 1`` per array, are the
all-gather's.  (Where every cut axis has fewer values than ``P``, the ``k < P`` devices that hold a shard gather
among themselves: ``P`` is ``k`` above.)

>>> import napkin_cat as nc
>>> g = gathered(nc.library.attention(), ("q", "x", "x"), 4, sizes={"q": 8, "x": 8, "d": 2})
>>> [b.name for b in g.boxes[0].arg.boxes if b.name == "all-gather"], g.boxes[0].sharded("dom")
(['all-gather', 'all-gather', 'all-gather'], ('q', 'x', 'x'))
>>> nc.cost(g, sizes={"q": 8, "x": 8, "d": 2}).link.received      # 3 arrays, 3 shards of 2 × 2 arrive
(36, 36, 36, 36)
>>> gathered(nc.library.attention(), ("q", "x", "x"), 4, sizes={"q": 3, "x": 9, "d": 2}).boxes[0].axis
'x'
"""
from __future__ import annotations

import sympy

from napkin_cat.algorithms.devices import device_region
from napkin_cat.errors import AxisError
from napkin_cat.syntax.adapter import Diagram, Ty
from napkin_cat.syntax.builder import Builder
from napkin_cat.syntax.collectives import all_gather, as_devices, shard_size
from napkin_cat.syntax.sizes import as_sizes

__all__ = ["gathered", "sharded_inputs", "region_axis"]


def sharded_inputs(layout) -> bool:
    """Whether the ``layout`` (one entry per input, an axis or None) has an input arrive sharded."""
    return layout is not None and any(a is not None for a in layout)


def region_axis(fulls: dict, devices, sizes=None) -> str:
    """The axis of ``fulls`` (cut axis → its size, in the layout's order) the region of :func:`gathered` cuts: the
    one of the most values at ``sizes`` (the first of equal ones), so that every axis is cut over the devices as the
    layout says.  AxisError naming the axes, their sizes and ``P`` where the sizes do not decide it.

    >>> import napkin_cat as nc
    >>> region_axis({"q": 3, "x": 9}, 4), region_axis({"q": 9, "x": 9}, 4), region_axis({"q": nc.symbol("q")}, 4)
    ('x', 'q', 'q')
    """
    names = list(fulls)
    if len(names) == 1:
        return names[0]
    env = as_sizes(sizes).env if sizes is not None else {}
    values = [sympy.sympify(n).subs(env) for n in fulls.values()]
    if not all(v.is_number for v in values):
        raise AxisError(f"gathered: the layout cuts {names} (sizes {[str(n) for n in fulls.values()]}) over {devices} "
                        f"devices; the device region is on the one of the most values (a region on an axis of fewer "
                        f"values than {devices} would cut the others over fewer devices than the layout says): give "
                        f"sizes= that decide it")
    return names[max(range(len(names)), key=lambda k: (values[k], -k))]


def gathered(f: Diagram, layout, devices, sizes=None) -> Diagram:
    """``f`` on every device after the all-gathers of its inputs sharded by ``layout`` (see the module docstring):
    the device program whose link is a one-device form's arrival, its region on the cut axis of the most values
    (:func:`region_axis`; ``sizes``: where the function's own sizes do not decide it).  AxisError where ``layout``
    has not one entry per input, an entry names an axis its input does not carry, no input arrives sharded, or the
    sizes do not say which cut axis is the largest."""
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
    axis = region_axis(fulls, P, sizes)
    return device_region(inside, axis, P, fulls[axis], also={a: n for a, n in fulls.items() if a != axis},
                         sharded_in=tuple(layout), sharded_out=(None,) * len(f.cod))
