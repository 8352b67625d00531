"""Collectives: the boxes that move values between the devices of a device region (issue 37).

Inside a device region (:class:`~napkin_cat.algorithms.devices.Shard`, a Grid over ``P`` devices) every device holds
its shard of the sharded axis.  A collective reads the values of every device at once (the region runs its devices
in lockstep where one appears) and gives each device its result.  With the shards of ``n`` values along an axis cut
as ``np.array_split`` (and ``torch.tensor_split``) cuts them, ``n_p = ⌊n/P⌋ + [p < n mod P]`` on device ``p``:

==================  ====================================  ==================================================
kind                law (device ``p``'s output)           values device ``p`` sends / receives (``n`` whole)
==================  ====================================  ==================================================
``all_gather``      ``x₀ ⧺ x₁ ⧺ … ⧺ x_{P−1}`` (whole)       ``(P−1)·n_p``  /  ``n − n_p``
``reducescatter``   shard ``p`` of ``x₀ ⊕ x₁ ⊕ … ⊕ x_{P−1}``  ``n − n_p``  /  ``(P−1)·n_p``
``all_reduce``      ``x₀ ⊕ x₁ ⊕ … ⊕ x_{P−1}`` (everywhere)  reduce-scatter then all-gather of the ``n`` values
                                                          cut in ``P`` chunks: ``n − n_p + (P−1)·n_p`` each way
``all_to_all``      sharded on ``scatter`` instead of     ``|x_p| − k_p``  /  ``|y_p| − k_p`` (``k_p``: the
                    ``gather``                            block ``(scatter_p, gather_p)`` it keeps)
==================  ====================================  ==================================================

(``reducescatter`` is built by :func:`reduce_scatter`: a kind called ``reduce_…`` would be a reduction of
``nc.reduce``.)  These are the counts of a runner that sends shards point to point, each value once to each device
that needs it (the owner of a shard sends it; a partial's chunk goes to the device that reduces it).  ``messages``
counts one message per peer and array (``2·(P−1)`` per array for an all-reduce).  An all-reduce whose merge couples
its arrays (a reducer's: the merged ``o`` of a query reads its ``μ``) is cut by rows of their first shared axis
(:func:`coupled_axis`), not each array's flat values: one device reduces every array of a row, as
``nc.distributed`` runs it.  Symbolically ``n_p = n/P``: an
all-gather of ``n`` values sends and receives ``(P−1)·n/P`` per device, an all-reduce ``2·(P−1)·n/P``, an all-to-all
``(P−1)·n/P²``.  ``⊕`` is the box's ``merge``: an elementwise kind of two operands (``add``, ``max``) for one array,
or the name of a stream reducer's merge (``softmax_contraction_to_unscaled``: online softmax's ``(μ, z, o)``,
:data:`napkin_cat.algorithms.splits.MERGES`) for a state of several arrays; the layer that runs it resolves it.

>>> import napkin_cat as nc
>>> g = all_gather("n h", axis="h", devices=4, h=10).boxes[0]
>>> g.dom, g.cod
(Ty(Array(n×h[3])), Ty(Array(n×h[10])))
>>> shard_bounds(10, 4)
[0, 3, 6, 8, 10]
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import sympy

from napkin_cat.errors import AxisError, DeviceError, SignatureError  # noqa: F401
from napkin_cat.syntax.array import Array
from napkin_cat.syntax.adapter import Diagram
from napkin_cat.syntax.axis import Axis, as_size, check_name
from napkin_cat.syntax.construct import axes_for, parse
from napkin_cat.syntax.dtype import FP32
from napkin_cat.syntax.primitive import KINDS, Weave, declare
from napkin_cat.syntax.weave import build_box


@dataclass(frozen=True)
class Collective:
    """How a kind runs across devices: ``run(box, xs, merge)`` maps ``xs[p]`` (device ``p``'s input arrays) to each
    device's outputs (``merge(a, b)``: two states merged, a list of arrays); ``moves(box, numel, p, P, weight)`` the
    values device ``p`` sends and receives and its messages, ``(sent, received, messages)``, with ``numel(array,
    side)`` the values an array of the box's ``side`` (``"dom"`` or ``"cod"``: :func:`whole_axes`) holds (a sympy
    expression, or an int at sizes), each array's values counted ``weight(array)`` times (its bytes per value for a
    count of bytes; None: once); ``p`` None: any device, shards of ``n/P``."""

    run: Callable
    moves: Callable


#: the most devices a region runs on: more than any cluster built (the largest hold about 2^17 accelerators); each
#: device's shard is cut, placed and run on its own (an idle one too), so a count past it asks for days of work
LARGEST_DEVICES = 2 ** 20


def as_devices(devices):
    """A number of devices: a positive int of at most :data:`LARGEST_DEVICES`, or a size symbol (a name or a sympy
    symbol), else AxisError; text that spells a number (``"2"``) is refused, naming the int to give.

    >>> as_devices(8), as_devices("P")
    (8, P)
    >>> as_devices(2 ** 40)
    Traceback (most recent call last):
    ...
    napkin_cat.errors.AxisError: a device region runs on at most 2^20 = 1048576 devices (LARGEST_DEVICES), got
    devices=1099511627776
    """
    if isinstance(devices, str) and devices.strip().lstrip("+-").isdigit():
        raise AxisError(f"devices={devices!r} is a number written as text: give the int {int(devices)}, or a size "
                        f"name such as 'P'")
    if isinstance(devices, sympy.Symbol) or isinstance(devices, str):
        return as_size("devices", devices)
    if isinstance(devices, bool) or not isinstance(devices, (int, sympy.Integer)) or int(devices) < 1:
        raise AxisError(f"a device region runs on a positive number of devices (an int, or a size name such as 'P'); "
                        f"got devices={devices!r}")
    return check_devices(int(devices), "devices")


def check_devices(P: int, what: str) -> int:
    """``P`` devices where at most :data:`LARGEST_DEVICES` are legal (``what``: where ``P`` was given, for the
    message), else AxisError.

    >>> check_devices(4, "P")
    4
    """
    if P > LARGEST_DEVICES:
        raise AxisError(f"a device region runs on at most 2^20 = {LARGEST_DEVICES} devices (LARGEST_DEVICES), got "
                        f"{what}={P}")
    return P


def shard_size(full, devices):
    """The largest shard of an axis of ``full`` values over ``devices``: ``⌈full/P⌉`` at concrete sizes, ``full/P``
    symbolically (where the symbolic cost assumes that ``P`` divides the axis, as ``a/g`` does for a Grid).

    >>> shard_size(10, 4), shard_size(sympy.Symbol("h", positive=True, integer=True), 4)
    (3, h/4)
    """
    if isinstance(full, int) and isinstance(devices, int):
        return -(-full // devices)
    return sympy.sympify(full) / sympy.sympify(devices)


def shard_bounds(total: int, devices: int) -> list:
    """Where device ``p``'s shard starts, for p = 0 … P: ``np.array_split``'s cut (the first ``total mod P`` shards one
    longer).  With more devices than values the last ``P − total`` devices hold nothing: they are idle (they compute
    nothing, hold nothing and take no part in a collective).

    >>> shard_bounds(7, 3), shard_bounds(6, 3), shard_bounds(2, 3)
    ([0, 3, 5, 7], [0, 2, 4, 6], [0, 1, 2, 2])
    """
    q, r = divmod(total, devices)
    return [p * q + min(p, r) for p in range(devices + 1)]


def whole_axes(box) -> dict:
    """Side (``"dom"``, ``"cod"``) → the axes a collective's arrays on that side hold whole, where the other side
    holds a device's shard of them: an all-gather's outputs along its axis, a reduce-scatter's inputs, an
    all-to-all's inputs along ``scatter`` and outputs along ``gather`` (an all-reduce: none).  A count at sizes takes
    a device's own extent for the other axes an array carries at a shard's size; the side tells a shard from the
    whole where the sizes cannot (an axis of one value over ``P`` devices: its shard is as large as the whole).

    >>> whole_axes(all_to_all("s h", gather="s", scatter="h", devices=2).boxes[0])
    {'dom': ('h',), 'cod': ('s',)}
    """
    kind, param = box.data.kind, box.data.param
    if kind == "all_gather":
        return {"dom": (), "cod": (param("axis"),)}
    if kind == "reducescatter":
        return {"dom": (param("axis"),), "cod": ()}
    if kind == "all_to_all":
        return {"dom": (param("scatter"),), "cod": (param("gather"),)}
    return {"dom": (), "cod": ()}


def chunk(n, p, devices):
    """Device ``p``'s chunk of ``n`` values cut over ``devices`` (``n/P`` for ``p`` None)."""
    if p is None:
        return sympy.sympify(n) / devices
    q, r = divmod(int(n), int(devices))
    return q + (1 if p < r else 0)


# ------------------------------------------------------------------------------------------------ numpy meanings
def _pos(arr, axis):
    return arr.names.index(axis)


def _cut(x, pos, lo, hi):
    idx = [slice(None)] * x.ndim
    idx[pos] = slice(lo, hi)
    return x[tuple(idx)]


def _reduced(xs, merge):
    """``x₀ ⊕ x₁ ⊕ … ⊕ x_{P−1}``, folded in device order (what every device receives: one value)."""
    out = list(xs[0])
    for other in xs[1:]:
        out = list(merge(out, list(other)))
    return out


def in_cod_layout(box, ys: list) -> list:
    """A collective's outputs ``ys``, each computed in its input's layout (a collective moves values, it does not
    reorder axes), in the layout of the box's output arrays: a woven collective may carry the woven axis at another
    position in its outputs than in its inputs (:func:`~napkin_cat.syntax.weave.weave` places each port's own).

    >>> import numpy as np
    >>> from napkin_cat.syntax.weave import weave
    >>> g = weave(all_gather("n d", axis="n", devices=2), "b", inputs={0: 0}, position=-1, b=3).boxes[0]
    >>> [" ".join(a.names) for a in (*g.dom.inside, *g.cod.inside)], in_cod_layout(g, [np.zeros((3, 4, 5))])[0].shape
    (['b n d', 'n d b'], (4, 5, 3))
    """
    out = []
    for y, a, c in zip(ys, box.dom.inside, box.cod.inside):
        perm = [a.names.index(n) for n in c.names]
        out.append(y if perm == sorted(perm) else np.transpose(y, perm))
    return out


def _run_all_gather(box, xs, merge):
    axis = box.data.param("axis")
    whole = [np.concatenate([x[i] for x in xs], axis=_pos(a, axis)) for i, a in enumerate(box.dom.inside)]
    whole = in_cod_layout(box, whole)
    return [list(whole) for _ in xs]


def _run_reduce_scatter(box, xs, merge):
    axis = box.data.param("axis")
    reduced = _reduced(xs, merge)
    outs = []
    for p in range(len(xs)):
        mine = []
        for y, a in zip(reduced, box.dom.inside):
            pos = _pos(a, axis)
            b = shard_bounds(y.shape[pos], len(xs))
            mine.append(_cut(y, pos, b[p], b[p + 1]))
        outs.append(in_cod_layout(box, mine))
    return outs


def _run_all_reduce(box, xs, merge):
    reduced = in_cod_layout(box, _reduced(xs, merge))
    return [list(reduced) for _ in xs]


def _run_all_to_all(box, xs, merge):
    gather, scatter = box.data.param("gather"), box.data.param("scatter")
    outs = []
    for p in range(len(xs)):
        mine = []
        for i, a in enumerate(box.dom.inside):
            ps, pg = _pos(a, scatter), _pos(a, gather)
            b = shard_bounds(xs[0][i].shape[ps], len(xs))
            mine.append(np.concatenate([_cut(x[i], ps, b[p], b[p + 1]) for x in xs], axis=pg))
        outs.append(in_cod_layout(box, mine))
    return outs


# ------------------------------------------------------------------------------------------------ counts
def _moves_all_gather(box, numel, p, P, weight=None):
    w = weight or _one
    sent = sum(((P - 1) * numel(a, "dom") * w(a) for a in box.dom.inside), sympy.Integer(0))
    received = sum(((numel(c, "cod") - numel(a, "dom")) * w(a) for a, c in zip(box.dom.inside, box.cod.inside)),
                   sympy.Integer(0))
    return sent, received, (P - 1) * len(box.dom)


def _moves_reduce_scatter(box, numel, p, P, weight=None):
    w = weight or _one
    sent = sum(((numel(a, "dom") - numel(c, "cod")) * w(a) for a, c in zip(box.dom.inside, box.cod.inside)),
               sympy.Integer(0))
    received = sum(((P - 1) * numel(c, "cod") * w(c) for c in box.cod.inside), sympy.Integer(0))
    return sent, received, (P - 1) * len(box.dom)


def coupled_axis(box):
    """The axis an all-reduce's chunks are cut along where its merge couples its arrays (a reducer's merge, such as
    online softmax's ``(μ, z, o)``: the merged ``o`` of a query reads the ``μ`` of that query): the first axis of the
    state's first array that every array carries, so that one device reduces every array at a position of it (``''``
    where none is shared: the state goes whole to device 0); None for an elementwise merge (``add``, ``max``), whose
    arrays are cut apart, each in its flat values.

    >>> coupled_axis(all_reduce("q, q, q d", devices=2, merge="softmax_contraction_to_unscaled").boxes[0])
    'q'
    >>> coupled_axis(all_reduce("q d", devices=2, merge="add").boxes[0]) is None
    True
    """
    kind = KINDS.get(box.data.param("merge"))
    if kind is not None and kind.arity == 2:
        return None
    arrays = box.dom.inside
    return next((n for n in arrays[0].names if all(n in a.names for a in arrays)), "")


def all_reduce_chunk(box, array, numel, p, P):
    """The values of ``array`` device ``p`` of ``P`` reduces in an all-reduce (``numel``: an array's values, an int):
    its chunk of the flat values (an elementwise merge), or of the rows along :func:`coupled_axis` times a row's
    values (a coupled merge)."""
    axis, n = coupled_axis(box), numel(array)
    if axis is None:
        return chunk(n, p, P)
    rows = numel(Array((array.axis(axis),))) if axis else 1
    return chunk(rows, p, P) * (n // rows if rows else 0)


def _moves_all_reduce(box, numel, p, P, weight=None):
    w = weight or _one
    total = sympy.Integer(0)
    for a in box.dom.inside:
        n = numel(a)
        if p is None:
            total += 2 * (P - 1) * n / P * w(a)
            continue
        mine = all_reduce_chunk(box, a, numel, p, P)
        total += ((n - mine) + (P - 1) * mine) * w(a)   # its other chunks out; its reduced chunk to the others
    return total, total, 2 * (P - 1) * len(box.dom)


def _moves_all_to_all(box, numel, p, P, weight=None):
    w = weight or _one
    scatter = box.data.param("scatter")
    sent = received = sympy.Integer(0)
    for a, c in zip(box.dom.inside, box.cod.inside):
        part, whole = numel(Array((c.axis(scatter),)), "cod"), numel(Array((a.axis(scatter),)), "dom")
        mine = numel(a, "dom")
        kept = mine * part / whole if isinstance(whole, sympy.Basic) else mine * part // whole if whole else 0
        sent += (mine - kept) * w(a)                                                       # its block kept
        received += (numel(c, "cod") - kept) * w(a)
    return sent, received, (P - 1) * len(box.dom)


def _one(a):
    return 1


def _outside(xs, core):
    raise DeviceError("a collective moves values between devices: it runs inside a device region (nc.shard), whose "
                      "devices run in lockstep, not on one device's values")


for _name, _run, _moves, _axes, _doc in (
        ("all_gather", _run_all_gather, _moves_all_gather, ("axis",),
         "Every device's shard joined along the axis, on every device."),
        ("reducescatter", _run_reduce_scatter, _moves_reduce_scatter, ("axis",),
         "The devices' partials merged, device p keeping shard p of the axis."),
        ("all_reduce", _run_all_reduce, _moves_all_reduce, (), "The devices' partials merged, on every device."),
        ("all_to_all", _run_all_to_all, _moves_all_to_all, ("gather", "scatter"),
         "Sharded along one axis (gather) to sharded along another (scatter).")):
    declare(_name, _outside, doc=_doc, collective=Collective(_run, _moves), axis_params=_axes,
            label=_name.replace("_", "-") if _name != "reducescatter" else "reduce-scatter")


# ------------------------------------------------------------------------------------------------ constructors
def _check_merge(merge):
    if not (isinstance(merge, str) and merge.isidentifier()):
        raise SignatureError(f"a reducing collective names its merge ⊕: an elementwise kind of two operands (such as "
                             f"'add', 'max') or a stream reducer's merge (such as 'softmax_contraction_to_unscaled'); "
                             f"got {merge!r}")
    return merge


def _arrays(where, signature, level, dtype, sizes):
    ins, outs = parse(signature, arrow=False)
    if outs is not None:
        raise SignatureError(f"{where}: give the arrays it moves, such as 'n h' or 'q, q, q d', not {signature!r}")
    return ins, axes_for(ins, sizes or {})


def _box(kind, ins, dom, cod, params):
    common = [n for n in ins[0] if all(n in names for names in ins) and all(
        d.axis(n) == c.axis(n) for d, c in zip(dom, cod))]
    weaves = [Weave(n, tuple(range(len(ins)))) for n in reversed(common)]
    return build_box(kind, dom, cod, weaves, params)


def _sharded(ins, axis, where):
    for names in ins:
        if axis not in names:
            raise AxisError(f"{where}: the array {' '.join(names) or '()'} has no axis {axis!r} to shard")


def all_gather(signature: str, *, axis: str, devices, level: int = 0, dtype=FP32, sizes: dict | None = None,
               **more) -> Diagram:
    """Each array, sharded along ``axis`` over ``devices`` (its shard ``⌈n/P⌉`` or ``n/P``), whole on every device."""
    ins, axes = _arrays("all_gather", signature, level, dtype, {**(sizes or {}), **more})
    check_name(axis)
    _sharded(ins, axis, "all_gather")
    P = as_devices(devices)
    part = Axis(axis, shard_size(axes[axis].size, P))
    cod = [Array(tuple(axes[n] for n in names), level, dtype) for names in ins]
    dom = [Array(tuple(part if n == axis else axes[n] for n in names), level, dtype) for names in ins]
    return _box("all_gather", ins, dom, cod, {"axis": axis, "devices": P})


def reduce_scatter(signature: str, *, axis: str, devices, merge: str = "add", level: int = 0, dtype=FP32,
                   sizes: dict | None = None, **more) -> Diagram:
    """The devices' partial arrays merged by ``merge``; device ``p`` keeps shard ``p`` of ``axis``."""
    d = all_gather(signature, axis=axis, devices=devices, level=level, dtype=dtype, sizes=sizes, **more).boxes[0]
    ins, _ = _arrays("reduce_scatter", signature, level, dtype, {**(sizes or {}), **more})
    return _box("reducescatter", ins, list(d.cod.inside), list(d.dom.inside),
                {"axis": axis, "devices": d.data.param("devices"), "merge": _check_merge(merge)})


def all_reduce(signature: str, *, devices, merge: str = "add", level: int = 0, dtype=FP32, sizes: dict | None = None,
               **more) -> Diagram:
    """The devices' partial arrays (one state: ``'q, q, q d'`` for online softmax's ``(μ, z, o)``) merged by
    ``merge``, on every device."""
    ins, axes = _arrays("all_reduce", signature, level, dtype, {**(sizes or {}), **more})
    arrays = [Array(tuple(axes[n] for n in names), level, dtype) for names in ins]
    return _box("all_reduce", ins, arrays, list(arrays), {"devices": as_devices(devices),
                                                          "merge": _check_merge(merge)})


def all_to_all(signature: str, *, gather: str, scatter: str, devices, level: int = 0, dtype=FP32,
               sizes: dict | None = None, **more) -> Diagram:
    """Each array, sharded along ``gather``, becomes sharded along ``scatter`` (whole along ``gather``)."""
    ins, axes = _arrays("all_to_all", signature, level, dtype, {**(sizes or {}), **more})
    check_name(gather), check_name(scatter)
    if gather == scatter:
        raise AxisError(f"all_to_all: gather and scatter are two axes, got {gather!r} twice")
    _sharded(ins, gather, "all_to_all")
    _sharded(ins, scatter, "all_to_all")
    P = as_devices(devices)
    g, s = Axis(gather, shard_size(axes[gather].size, P)), Axis(scatter, shard_size(axes[scatter].size, P))
    dom = [Array(tuple(g if n == gather else axes[n] for n in names), level, dtype) for names in ins]
    cod = [Array(tuple(s if n == scatter else axes[n] for n in names), level, dtype) for names in ins]
    return _box("all_to_all", ins, dom, cod, {"gather": gather, "scatter": scatter, "devices": P})


__all__ = ["Collective", "as_devices", "shard_size", "shard_bounds", "whole_axes", "chunk", "coupled_axis",
           "all_reduce_chunk", "all_gather", "reduce_scatter", "all_reduce", "all_to_all", "in_cod_layout"]
