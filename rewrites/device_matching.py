"""What the device rules (:mod:`rewrites.devices`, :mod:`rewrites.collectives`, ...) match and how they build.

The nodes they match: a device region (:data:`DEVICES`, a :class:`~napkin_cat.algorithms.devices.Shard`) and a box or
region whose boundary is in global memory (:data:`LEVEL0`, not a collective).  A rule's right-hand side is built once
per match (:func:`attempt`, kept on the match): its condition is that build's success (:func:`legal_when`, else the
build's error's message) and its rhs the build (:func:`built_by`), so that::

    legal_when(build)(m) is True   ⇔   built_by(build)(m) == build(m)      (else RewriteError, the same message)

A box sharded along an axis is worked out once per box (:func:`sharded`).

>>> import napkin_cat as nc
>>> as_diagram(nc.softmax("b s", over="s", b=4, s=6).boxes[0]).dom
Ty(Array(b[4]×s[6]))
"""
from __future__ import annotations

import copy

import napkin_cat as nc
from napkin_cat.algorithms.devices import Shard
from napkin_cat.errors import NapkinError, RewriteError
from napkin_cat.rewriting.match import where
from napkin_cat.syntax.primitive import kind_of


def as_diagram(box):
    """A box as a one-box diagram."""
    return nc.Diagram.id(box.dom).then(box)


def sharded(box, axis: str, devices):
    """``nc.shard`` of ``box`` (as a one-box diagram) along ``axis`` on ``devices`` devices, or the NapkinError it
    raises, worked out once per box and remembered on it (a box is immutable): the device rules try a box along its
    axes in their conditions and again in their right-hand sides, and a walk of rewrites meets the same box at each
    step.

    >>> box = nc.softmax("b s", over="s", b=4, s=6).boxes[0]
    >>> sharded(box, "b", 2) is sharded(box, "b", 2), isinstance(sharded(box, "b", 2), nc.Diagram)
    (True, True)
    >>> sharded(box, "s", 2)
    Traceback (most recent call last):
    ...
    napkin_cat.errors.RewriteError: cannot shard along 's' over 2 devices: ...
    """
    memo = box.__dict__.setdefault("_sharded", {})
    key = (axis, devices)
    if key not in memo:
        try:
            memo[key] = nc.shard(as_diagram(box), axis, devices)
        except NapkinError as e:
            memo[key] = e.with_traceback(None)      # kept without the frames it was raised in
    got = memo[key]
    if isinstance(got, NapkinError):
        raise copy.copy(got)                        # each raise its own traceback
    return got


def is_collective(box) -> bool:
    return not isinstance(box, nc.Region) and kind_of(box.data.kind).collective is not None


def level0_node(net, n) -> bool:
    """A box or region (not a device region, not a collective) whose boundary is in global memory."""
    return n.kind in ("box", "region") and not isinstance(n.box, Shard) and not is_collective(n.box) \
        and all(a.level == 0 for a in (*n.dom, *n.cod)) and bool(n.cod)


def device_node(net, n) -> bool:
    return n.kind == "region" and isinstance(n.box, Shard)


LEVEL0 = where("box or region at level 0", level0_node)
DEVICES = where("device region", device_node)


#: the devices a rule shards over where its user names none (``rule.using(devices=P)``)
DEVICES_BY_DEFAULT = 2


def devices_of(m):
    return m.params.get("devices", DEVICES_BY_DEFAULT)


def attempt(m, build):
    key = f"_built_{build.__name__}"
    if key not in m.vars:
        try:
            m.vars[key] = build(m)
        except NapkinError as e:
            m.vars[key] = e
    return m.vars[key]


def legal_when(build):
    """A rule's condition: True where ``build(m)`` makes the right-hand side, else the reason it could not (its error's
    message); the result is kept on the match for the rule's rhs (:func:`built_by`)."""
    def check(m):
        made = attempt(m, build)
        return str(made) if isinstance(made, NapkinError) else True
    check.__name__ = f"legal_{build.__name__}"
    return check


def same_type(made, dom, cod, what: str):
    """``made`` (a device region) when its boundary is ``dom → cod``; else RewriteError: a replicated array inside
    carries a sharded axis at the size of a shard (a split's part, say), so the region would read it as sharded."""
    if made.dom != dom or made.cod != cod:
        raise RewriteError(f"{what}: an array inside carries the sharded axis at a shard's size without being a shard "
                           f"of it ({made.dom} → {made.cod} read, {dom} → {cod} meant)")
    return made


def built_by(build):
    """A rule's right-hand side: what ``build(m)`` made (kept on the match by :func:`legal_when`), or RewriteError."""
    def rhs(m):
        made = attempt(m, build)
        if isinstance(made, NapkinError):
            raise RewriteError(str(made))
        return made
    return rhs


__all__ = ["as_diagram", "sharded", "is_collective", "level0_node", "device_node", "LEVEL0", "DEVICES",
           "DEVICES_BY_DEFAULT", "devices_of", "attempt", "legal_when", "same_type", "built_by"]
