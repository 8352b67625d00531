"""The numpy meaning of the primitive boxes (the wiring moves arrays as it moves any values: ``syntax.wiring``).

A primitive box is item-level: its kind acts on the trailing core axes, so the box
moves its weave axes to the front, calls the kind once on the batched arrays, and
moves them back.

>>> import numpy as np, napkin_cat as nc
>>> from napkin_cat.semantics.env import Env
>>> box = nc.einsum("a b, b c -> a c").boxes[0]
>>> run_primitive(box, [np.ones((2, 3)), np.ones((3, 4))], Env())[0].shape
(2, 4)
"""
from __future__ import annotations

import numpy as np

from napkin_cat.semantics.env import Env
from napkin_cat.syntax.primitive import Core, kind_of
from napkin_cat.syntax.weave import core_of


def run_primitive(box, xs: list, env: Env) -> list:
    """Apply one primitive box: transpose weaves to the front, call the kind, transpose back."""
    spec = box.data
    kind = kind_of(spec.kind)
    if env.counters is not None and spec.kind in ("load", "save"):
        lvl = max(box.dom.inside[0].level, box.cod.inside[0].level)
        env.counters[lvl] = env.counters.get(lvl, 0) + int(np.asarray(xs[0]).size)
    if kind.labelled is not None:
        return kind.labelled(xs, [a.names for a in box.dom.inside], [a.names for a in box.cod.inside])
    ins, outs, weaves, inputs, outputs = _layout(box)
    core = Core(ins, outs, dict(spec.params), env or {}, weaves, getattr(env, "offsets", None) or {},
                getattr(env, "maps", None) or {})
    wsizes = {}
    batched = []
    for (perm, present, at), x in zip(inputs, xs):
        x = x.transpose(perm) if perm is not None else x
        for n, j in present:
            wsizes[n] = x.shape[j]
        batched.append(x.reshape([x.shape[j] if j is not None else 1 for j in at] + list(x.shape[len(present):])))
    results = []
    for (perm, axes), y in zip(outputs, kind.impl(batched, core)):
        full = [wsizes[n] if n in wsizes else env.size(size if size is not None else arr.axis(n).size,
                                                         f"axis {n!r} of {box.name!r}") for n, size, arr in axes]
        shape = (*full, *y.shape[len(axes):])
        y = _readonly(y) if isinstance(y, np.ndarray) and y.shape == shape else np.broadcast_to(y, shape)
        results.append(y.transpose(perm) if perm is not None else y)
    return results


def _readonly(y: np.ndarray) -> np.ndarray:
    """A read-only view of ``y``: what ``np.broadcast_to(y, y.shape)`` returns, without its argument checks (a
    result already at its full shape, the common case)."""
    v = y.view(np.ndarray)
    v.flags.writeable = False
    return v


def _layout(box) -> tuple:
    """What :func:`run_primitive` reads of a box's types, worked out once and remembered on the box (immutable):
    its core axes per port and weave axes (:func:`~napkin_cat.syntax.weave.core_of`), and per input the
    permutation bringing its weave axes to the front (None: none needed), its weave axes present with their
    positions there, and per weave axis (outermost first) its position or None (a broadcast 1); per output the
    permutation back from weaves-first order and each weave axis with its size."""
    memo = box.__dict__
    got = memo.get("_layout")
    if got is None:
        spec = box.data
        base = core_of(spec, box.dom, box.cod)
        W = [w.name for w in reversed(spec.weaves)]  # outermost first
        inputs = []
        for arr in box.dom.inside:
            names = arr.names
            present = [n for n in W if n in names]
            core_names = [n for n in names if n not in W]
            perm = [names.index(n) for n in present + core_names]
            inputs.append((perm if perm != list(range(len(perm))) else None,
                           tuple((n, present.index(n)) for n in present),
                           tuple(present.index(n) if n in present else None for n in W)))
        outputs = []
        for arr in box.cod.inside:
            order = W + [n for n in arr.names if n not in W]
            perm = [order.index(n) for n in arr.names]
            outputs.append((perm if perm != list(range(len(perm))) else None,
                            tuple((n, arr.axis(n).size if n in arr.names else None, arr) for n in W)))
        got = memo["_layout"] = (base.inputs, base.outputs, base.weaves, tuple(inputs), tuple(outputs))
    return got
