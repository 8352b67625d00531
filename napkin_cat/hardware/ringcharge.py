"""A ring's steps charged on a cluster: the work per step of its slowest device, at the rate of the timed program.

:func:`~napkin_cat.hardware.clustered.time_form` times the program of the busiest device (:func:`busiest`: the
most work over the ring's steps, ``Link.work``; its shard at its own positions, a ring run whole) by the GPU time
model; a ring step waits for its slowest device, whose work per step the cost counts (``Link.work``, per device and
step).  The rate that turns work into seconds is the timed program's::

    rate         = Σ_t work[b][t] / seconds,  b = argmax_p Σ_t work[p][t]       (:func:`ring_rate`)
    ring compute = Σ_t max_p work[p][t] / rate                                  (:func:`~.programtime.ring_compute`)

Device 0 would be the wrong one to time: under a causal mask its shard sees the fewest keys, and where a device holds
a few thousand queries its program is small enough for launch and wave quantisation to set its time, so its rate is
not the busiest device's.  Where the busiest is the slowest at every step (a causal contiguous ring's last device;
every device of a balanced zigzag ring) the ring is charged exactly its program's seconds.

Both works are counted as the per-device algorithm runs the folds: in the blocks of its tiles
(:func:`algorithm_tiles`; ``nc.cost``'s ``ring_tiles``), a fold a mask allows in part charged by the blocks that
run (:func:`~napkin_cat.cost.at_sizes.running_area`), as that algorithm skips them.  Counted whole, a causal mask's
diagonal folds would be charged as if every block ran while the timed algorithm skips half of them: the rate
overstated, every ring under-charged (by 0.53× at P = 8: docs/distributed.md, section 8).

>>> import napkin_cat as nc
>>> d = nc.ring(nc.shard(nc.library.causal_attention(), "q", devices=2), "x")
>>> s = {"q": 8, "x": 8, "d": 2}
>>> cost_at(d, s, {}).link.work, cost_at(d, s, {}, {"q": 2, "x": 2}).link.work   # the diagonal: 3 of 4 blocks of 2 × 2
(((268, 0), (268, 268)), ((201, 0), (201, 268)))
"""
from __future__ import annotations

import sympy

from napkin_cat.algorithms.bubbles import Grid, Stream
from napkin_cat.cost.functor import cost as cost_of
from napkin_cat.cost.numeric import at
from napkin_cat.syntax.adapter import Bubble, Diagram
from napkin_cat.syntax.flat import from_layers, layers
from napkin_cat.syntax.sizes import as_sizes

__all__ = ["SLOWEST", "algorithm_tiles", "busiest", "cost_at", "each_box", "ring_rate"]


def each_box(d: Diagram, fn) -> Diagram:
    """``d`` with each box ``b`` of its top level replaced by ``fn(b)``."""
    items = []
    for layer in d.inside:
        left, box, right = layer.boxes_or_types[:3]
        items.append((left, fn(box), right))
    return from_layers(d.dom, d.cod, items)


def cost_at(d: Diagram, sizes, cache: dict, ring_tiles=None):
    """``nc.cost(d, sizes=sizes)``, kept in ``cache`` under ``("cost", d, sizes)``: a form's cost at sizes does not
    depend on the cluster, so derives at the same sizes (other capacities, links, a sweep's repeated point) count
    each form once.  The same value as ``cost_of(d, sizes=sizes)``; an unhashable key is not kept.  ``ring_tiles``
    (axis → tile): the rings' folds charged in ``Link.work`` by the blocks of those tiles they run
    (:func:`~napkin_cat.cost.numeric.at`'s).

    >>> import napkin_cat as nc
    >>> f, s, kept = nc.library.attention(), {"q": 8, "x": 8, "d": 4}, {}
    >>> cost_at(f, s, kept) is cost_at(f, s, kept) and cost_at(f, s, kept).H == nc.cost(f, sizes=s).H
    True
    """
    def count():
        return cost_of(d, sizes=sizes) if not ring_tiles else at(d, sizes, strict=True, ring_tiles=ring_tiles)
    try:
        key = ("cost", d, frozenset(as_sizes(sizes).env.items()), frozenset((ring_tiles or {}).items()))
        hit = cache.get(key)
    except TypeError:
        return count()
    if hit is None:
        hit = cache[key] = count()
    return hit


def algorithm_tiles(derivations) -> dict:
    """Axis → the smallest tile any region of the derived algorithms cuts it in, at their optimum sizes: the tiles
    a device runs its ring's folds in (a mask skips block by block in them).

    >>> import napkin_cat as nc
    >>> r = nc.derive(nc.library.attention(), memory=2048, sizes={"q": 64, "x": 64, "d": 8})
    >>> [(b.axis, str(b.size)) for b in _regions_in(r.diagram)], algorithm_tiles([r]) == {
    ...     "q": r.optimum.sizes["g_q"], "x": r.optimum.sizes["s_x"]}
    ([('q', 'g_q'), ('x', 's_x')], True)
    """
    out = {}
    for r in derivations:
        env = {sympy.Symbol(str(k), positive=True, integer=True): v for k, v in dict(r.optimum.sizes).items()}
        for region in _regions_in(r.diagram):
            t = sympy.sympify(region.size).subs(env)
            if t.is_Integer:
                out[region.axis] = min(int(t), out.get(region.axis, int(t)))
    return out


def _regions_in(d: Diagram) -> list:
    """The partitions (Grids and Streams) of ``d``, nested ones too."""
    out = []
    for _, box in layers(d):
        if isinstance(box, (Grid, Stream)):
            out.append(box)
        if isinstance(box, Bubble):
            out += _regions_in(box.arg)
    return out


#: what the time of a form with a ring assumes (:func:`ring_rate`)
SLOWEST = ("a ring step waits for its slowest device: each step is charged the most work any device does at it (the "
           "cost's Link.work: the FLOPs of the folds it runs, a fold its mask allows in part charged by the blocks of "
           "the per-device algorithm's tiles that run, as that algorithm skips them), at the rate of the busiest "
           "device's program (the most work over the steps; its shard at its own positions, under a non-contiguous "
           "order one program of its pieces joined where they are of one size and evenly spaced, else one per "
           "piece, the ring run whole: its work over its predicted seconds); the inputs "
           "arrive in the form's order")


def busiest(link) -> int:
    """The device that does the most work over a ring's steps (``Σ_t link.work[p][t]``; the first of equal ones, 0
    without rings): the one whose program :func:`ring_rate` is read from.

    >>> from napkin_cat.cost.record import Link
    >>> busiest(Link(3, (0,) * 3, (0,) * 3, (0,) * 3, work=((4, 0, 0), (4, 4, 0), (4, 4, 4))))
    2
    """
    if link is None or not link.work:
        return 0
    totals = [sum(w) for w in link.work]
    return max(range(len(totals)), key=lambda p: (totals[p], -p))


def ring_rate(link, seconds: float, device: int):
    """The work per second of the timed program: ``device``'s work over the ring's steps (``link.work[device]``,
    ``link`` the form's ``nc.cost(d, sizes=).link``, counted in the blocks of the timed algorithm's tiles,
    :func:`cost_at`'s ``ring_tiles``) over ``seconds``, the predicted seconds of that device's ring programs; None
    where it does no work.  :func:`~napkin_cat.hardware.programtime.predict_program` charges each step its slowest
    device's work at it::

        ring compute = Σ_t max_p work[p][t] · seconds / Σ_t work[device][t]

    so where the busiest device is the slowest at every step (a causal mask's contiguous ring: the last device; a
    balanced zigzag ring: any) the ring is charged its seconds.

    >>> from napkin_cat.cost.record import Link
    >>> ring_rate(Link(2, (0, 0), (0, 0), (0, 0), work=((4, 0), (4, 4))), 2.0, 1)
    4
    """
    work = sum(link.work[device]) if link is not None and link.work else 0
    if not work or not seconds:
        return None
    return sympy.Rational(work) / sympy.Rational(seconds)       # exact: the busiest device is charged its seconds
