"""The device forms of a program: what the rule book's device rules reach from one device's program (issue 37).

For a function ``f`` and ``P`` devices, the candidates a search over a cluster times
(``nc.derive(f, sizes=..., hardware=cluster)``, :mod:`napkin_cat.hardware.clustered`), each made by the rules
playing the book's device roles (:data:`~napkin_cat.rewriting.registry.ROLES`) and kept with its trace, which
replays from ``f``::

    one device           f itself: no link (the baseline every form is weighed against)
    shard a              for each axis a that f carries: every node woven over a run on the devices' shards of a
                         (``shard``), every node that reduces a run on shards and merged by an all-reduce
                         (``shard_reduce``), then the regions fused (``shard_fuse``: a value made sharded and read
                         whole is all-gathered); an input without a arrives whole on every device (replicated)
    shard a, gather b    for each axis b of such a replicated input: the inputs carrying b arrive sharded along b
                         and are all-gathered (``shard_gather``)
    shard a, scatter b   that gather form with the book's ``scatter`` rules at b to a fixpoint: an all-reduce made a
                         reduce-scatter and an all-gather along b, each all-gather moved past the boxes local to b
                         (and out at an output, left sharded), each box before the region that it reads sharded
                         along b moved inside on the shards (sequence parallelism, where b is the tokens)
    ring of a gathered   that partition (or a scatter form) with each all-gather of a value computed on the shards,
    value                read by a part that streams its axis, made a ring (``ring_gathered``: K and V a block
                         projects from its own tokens; labelled ``… ring m (computed)``, m the axis the part streams)
    shard a, ring b      the partition with each box of no input that feeds a region alone moved inside it
                         (``shard_generate``: positions each device computes, so a mask of them is decided per device
                         and step), its replicated inputs carrying b made a ring (``ring``): the shards of b travel
                         round the devices, the inside streamed along b; one form per order the ring's ``order``
                         parameter takes (every :data:`~napkin_cat.algorithms.orders.ORDERS`, the contiguous one
                         first: both axes cut in it; labelled ``shard a (order): ring b`` past the contiguous one)
    reshard h            f as one kernel (``kernel``, ``fuse``) run on shards of an axis h that every input and
                         output carries, between two all-to-alls from each array's sequence axis (``reshard``)

Nothing here names an algorithm: the forms are the rules' answers for each axis of ``f``.  A form the rules cannot
make is kept with its reason (the rule's first failing condition), so the caller can say why it was not timed.

>>> import napkin_cat as nc
>>> forms = device_forms(nc.library.attention(), 4)
>>> [f.label for f in forms if f.refused is None][:6]
['one device', 'shard q', 'shard q: all-gather d ×2', 'shard q: all-gather x ×2', 'shard q: ring x', \
'shard q (zigzag): ring x']
>>> ring = next(f for f in forms if f.label == 'shard q: ring x')
>>> ring.trace.replay(nc.library.attention()) == ring.diagram
True
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from napkin_cat.algorithms.bubbles import Region
from napkin_cat.algorithms.devices import Shard
from napkin_cat.algorithms.orders import CONTIGUOUS, ORDERS
from napkin_cat.algorithms.ring import Ring
from napkin_cat.errors import NapkinError, RewriteError
from napkin_cat.rewriting.registry import rulebook
from napkin_cat.rewriting.trace import Trace
from napkin_cat.search.construct import Maker
from napkin_cat.syntax.adapter import Diagram
from napkin_cat.syntax.flat import is_structural, layers
from napkin_cat.syntax.collectives import as_devices
from napkin_cat.syntax.primitive import kind_of
from napkin_cat.syntax.wiring import trace_values

#: the most rewrites one form takes (a partition and its fusions are a few per node of the function)
MAX_STEPS = 400


@dataclass(frozen=True)
class DeviceForm:
    """One candidate: its ``label`` (what its device regions shard and which collectives they run), the
    ``diagram`` and the ``trace`` that makes it from the function (``trace.replay(f) == diagram``), or, where the
    rules could not make it, ``refused``: why (``diagram`` and ``trace`` then None)."""

    label: str
    diagram: Diagram | None = None
    trace: Trace | None = None
    refused: str | None = None


def is_collective(box) -> bool:
    """Whether ``box`` is a collective (all-gather, all-reduce, reduce-scatter, all-to-all): a primitive whose kind
    moves values between devices."""
    return is_structural(box) is None and not isinstance(box, Region) and hasattr(box, "data") \
        and kind_of(box.data.kind).collective is not None


def _collective_label(box) -> str:
    kind = kind_of(box.data.kind).label or box.data.kind.replace("_", "-")
    if box.data.kind == "all_to_all":
        return f"{kind} {box.data.param('gather')}→{box.data.param('scatter')}"
    axis = box.data.param("axis") if box.data.kind != "all_reduce" else None
    return f"{kind} {axis}" if axis else kind


def _inside_labels(d: Diagram) -> list:
    out = []
    ops, dom, _ = trace_values(d)
    computed = {id(box) for box, ins, _ in ops if isinstance(box, Ring)
                and any(ins[i] not in dom for i in box.streamed())}
    for _, box in layers(d):
        if isinstance(box, Ring):
            out.append(f"ring {box.axis}" + (" (computed)" if id(box) in computed else ""))
        elif is_collective(box):
            out.append(_collective_label(box))
        elif isinstance(box, Region):
            out += _inside_labels(box.arg)
    return out


def describe(d: Diagram) -> str:
    """A device program in a few words: per device region, the axis it shards (and its order, past the contiguous
    one) and the collectives and rings it runs (``shard q: ring x``); ``one device`` for a program without one.

    >>> import napkin_cat as nc
    >>> describe(nc.shard(nc.library.attention(), "q", devices=2)), describe(nc.library.attention())
    ('shard q', 'one device')
    >>> describe(nc.shard(nc.library.attention(), "q", devices=2, order="zigzag"))
    'shard q (zigzag)'
    """
    parts = []
    for _, box in layers(d):
        if isinstance(box, Shard):
            counts = Counter(_inside_labels(box.arg))
            inner = ", ".join(k + (f" ×{n}" if n > 1 else "") for k, n in counts.items())
            parts.append(_region_label(box.axis, box.order) + (f": {inner}" if inner else ""))
    return " ; ".join(parts) if parts else "one device"


def _region_label(axis: str, order: str) -> str:
    return f"shard {axis}" + ("" if order == CONTIGUOUS else f" ({order})")


def axes_of(f: Diagram) -> list:
    """The axes ``f``'s inputs and outputs carry, in order of first appearance."""
    return list(dict.fromkeys(n for a in (*f.dom.inside, *f.cod.inside) for n in a.names))


def _first_reason(rules, net) -> str | None:
    for rule in rules:
        for m in rule.candidates(net):
            failed = rule.failure(m)
            if failed is not None:
                return f"{rule.name}: {failed[1]}"
    return None


def _apply_all(mk: Maker, rules, *, once: bool = False) -> int:
    """Apply the first legal match of the first rule that has one, until none has (``once``: one step)."""
    done = 0
    while done < MAX_STEPS:
        found = next(((r, m) for r in rules for m in r.candidates(mk.net) if r.failure(m) is None), None)
        if found is None:
            break
        mk.apply(*found)
        done += 1
        if once:
            break
    return done


def _regions(d: Diagram) -> list:
    return [b for _, b in layers(d) if isinstance(b, Shard)]


def _made(mk: Maker, book, steps: tuple = ()) -> DeviceForm:
    d = mk.net.diagram
    return DeviceForm(describe(d), d, Trace(tuple(steps) + tuple(mk.steps), book.rules))


def _partitions(f, book, P, axis) -> list:
    """The partition of ``f`` over ``axis`` (closed by fusion), then each gather and ring it allows."""
    shard, reduce_, fuse = (book.role(r) for r in ("shard", "shard_reduce", "shard_fuse"))
    part = [shard.using(axis=axis, devices=P), reduce_.using(axis=axis, devices=P)]
    mk = Maker(f)
    try:
        _apply_all(mk, part)
        if not _regions(mk.net.diagram):
            why = _first_reason(part, mk.net) or "no node carries it"
            return [DeviceForm(f"shard {axis}", refused=f"no node is woven over {axis!r} or reduces it: {why}")]
        _apply_all(mk, [fuse])
    except NapkinError as e:
        return [DeviceForm(f"shard {axis}", refused=str(e).splitlines()[0])]
    base = _made(mk, book)
    out = [base]
    roles = book.roles
    ringed = _generated(base, book)
    out += _rung(ringed, book)
    for other in axes_of(f):
        if other == axis or "shard_gather" not in roles:
            continue
        gather = book.role("shard_gather").using(axis=other)
        g = Maker(base.diagram)
        try:
            if not _apply_all(g, [gather]):
                continue           # no replicated input carries it: nothing to gather
        except NapkinError as e:
            out.append(DeviceForm(f"shard {axis}: all-gather {other}", refused=str(e).splitlines()[0]))
            continue
        gathered = _made(g, book, base.trace.steps)
        out.append(gathered)
        if "scatter" in roles:
            for scattered in _scattered(gathered, book, other):
                out.append(scattered)
                if scattered.diagram is not None:
                    out += _rung(_generated(scattered, book), book)
        if "ring" not in roles:
            continue
        for order in ORDERS:          # one ring per order its rule takes: each its own form, trace and label
            out.append(_ring(ringed, book, axis, other, order))
    return out


def _scattered(source: DeviceForm, book, other: str) -> list:
    """``source`` with the book's ``scatter`` rules at ``axis=other`` applied to a fixpoint (an all-reduce made a
    reduce-scatter and an all-gather along ``other``, the gathers moved past the boxes local to it, the boxes before
    the region that it reads sharded moved inside): one form where they apply, none where they do not."""
    rules = [rule.using(axis=other) for rule in book.role("scatter")]
    mk = Maker(source.diagram)
    try:
        if not _apply_all(mk, rules):
            return []
    except NapkinError as e:
        return [DeviceForm(f"{source.label}: scattered along {other}", refused=str(e).splitlines()[0])]
    return [_made(mk, book, source.trace.steps)]


def _generated(base: DeviceForm, book) -> DeviceForm:
    """``base`` with every box of no input that feeds a region alone computed inside it (the book's
    ``shard_generate``; ``base`` itself without that role or such a box)."""
    if "shard_generate" not in book.roles:
        return base
    mk = Maker(base.diagram)
    try:
        if not _apply_all(mk, [book.role("shard_generate")]):
            return base
    except NapkinError:
        return base
    return _made(mk, book, base.trace.steps)


def _rung(source: DeviceForm, book) -> list:
    """``source`` with each all-gather of a value computed on the shards, read by a part that streams its axis, made
    a ring (the book's ``ring_gathered``, to a fixpoint): one form where it applies, none where it does not (nor
    without the role)."""
    if "ring_gathered" not in book.roles:
        return []
    mk = Maker(source.diagram)
    try:
        if not _apply_all(mk, [book.role("ring_gathered")]):
            return []
    except NapkinError as e:
        return [DeviceForm(f"{source.label}: ring of a gathered value", refused=str(e).splitlines()[0])]
    return [_made(mk, book, source.trace.steps)]


def _ring(source: DeviceForm, book, axis: str, other: str, order: str) -> DeviceForm:
    """``source``'s replicated inputs carrying ``other`` made a ring with its shards in ``order`` (the book's
    ``ring`` rule at ``axis=other, order=order``), or refused with the rule's reason."""
    rule = book.role("ring").using(axis=other, order=order)
    label = f"{_region_label(axis, order)}: ring {other}"
    r = Maker(source.diagram)
    try:
        if _apply_all(r, [rule], once=True):
            return _made(r, book, source.trace.steps)
        why = _first_reason([rule], r.net) or "no device region matches"
    except NapkinError as e:
        why = str(e).splitlines()[0]
    return DeviceForm(label, refused=why)


def _reshards(f, book, P) -> list:
    """``f`` as one kernel, then run on shards of each axis every input and output carries between all-to-alls."""
    if "reshard" not in book.roles:
        return []
    carried = [a for a in axes_of(f) if all(a in x.names for x in (*f.dom.inside, *f.cod.inside))]
    if not carried:
        return [DeviceForm("reshard", refused="no axis is carried by every input and output (the heads a part is "
                                              "run on between two all-to-alls)")]
    mk = Maker(f)
    try:
        _apply_all(mk, [book.role("kernel").using(level=1)])
        _apply_all(mk, [book.role("fuse")])
    except NapkinError as e:
        return [DeviceForm("reshard", refused=f"the function is not one kernel: {str(e).splitlines()[0]}")]
    kernels = [b for _, b in layers(mk.net.diagram) if is_structural(b) is None]
    if len(kernels) != 1:
        return [DeviceForm("reshard", refused=f"kernel fusion leaves {len(kernels)} kernels; an all-to-all part is "
                                              "one")]
    out = []
    for h in carried:
        rule = book.role("reshard").using(heads=h, devices=P)
        r = Maker(mk.net.diagram)
        try:
            if _apply_all(r, [rule], once=True):
                out.append(_made(r, book, mk.steps))
                continue
            why = _first_reason([rule], r.net) or "no node matches"
        except NapkinError as e:
            why = str(e).splitlines()[0]
        out.append(DeviceForm(f"reshard {h}", refused=why))
    return out


def device_forms(f: Diagram, devices, *, book=None) -> list:
    """The :class:`DeviceForm` s the book's device rules make from the function ``f`` on ``devices`` devices (see
    the module docstring): the function itself first, then per axis its partition, gathers and rings, then the
    all-to-all forms; refused ones with their reasons.  RewriteError where ``f`` is not a diagram."""
    if not isinstance(f, Diagram):
        raise RewriteError(f"device_forms takes a function diagram, got {type(f).__name__}")
    P = as_devices(devices)
    book = rulebook(book) if not hasattr(book, "roles") else book
    out = [DeviceForm("one device", f, Trace((), book.rules))]
    if "shard" in book.roles:
        for axis in axes_of(f):
            out += _partitions(f, book, P, axis)
    out += _reshards(f, book, P)
    seen, unique = set(), []
    for form in out:           # two routes to one diagram (a gather along an axis two rules reach) are one form
        key = (form.label, form.refused) if form.diagram is None else form.diagram
        if key not in seen:
            seen.add(key)
            unique.append(form)
    return unique


__all__ = ["DeviceForm", "device_forms", "describe", "axes_of", "is_collective", "MAX_STEPS"]
