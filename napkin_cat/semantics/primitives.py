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
from napkin_cat.syntax.primitive import kind_of
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
    core = core_of(spec, box.dom, box.cod, env)
    W = [w.name for w in reversed(spec.weaves)]  # outermost first
    wsizes = {}
    batched = []
    for arr, x in zip(box.dom.inside, xs):
        names = arr.names
        present = [n for n in W if n in names]
        core_names = [n for n in names if n not in W]
        perm = [names.index(n) for n in present + core_names]
        x = np.transpose(x, perm) if perm != list(range(len(perm))) else x
        shape = []
        for n in W:
            if n in present:
                wsizes[n] = x.shape[present.index(n)]
                shape.append(wsizes[n])
            else:
                shape.append(1)
        batched.append(x.reshape(shape + list(x.shape[len(present):])))
    outs = kind.impl(batched, core)
    results = []
    for arr, y in zip(box.cod.inside, outs):
        full = [wsizes[n] if n in wsizes else env.size(arr.axis(n).size, f"axis {n!r} of {box.name!r}")
                for n in W]
        y = np.broadcast_to(y, tuple(full) + y.shape[len(W):])
        order = W + [n for n in arr.names if n not in W]
        perm = [order.index(n) for n in arr.names]
        results.append(np.transpose(y, perm) if perm != list(range(len(perm))) else y)
    return results

