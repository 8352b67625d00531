"""``nc.distributed.run``: a program with device regions run on ``torch.distributed``, one process per device.

The launcher walks the program's top level as ``nc.evaluate`` does (:func:`~napkin_cat.syntax.wiring.traverse`):
a box or region outside every device region runs here, on whole values (as the cost counts it: one device's work,
nothing over the link); a device region (:class:`~napkin_cat.algorithms.devices.Shard`) runs on the world, device
``p`` on rank ``p`` (:mod:`~napkin_cat.distributed.device`), its shard of each sharded input handed to it and its
outputs taken back (a sharded output joined, a replicated one checked equal on every rank); a ring in it passes
its slices from rank to rank trip by trip (:func:`~napkin_cat.distributed.device.run_ring`).  The law::

    run(d, xs, world_size=P).outputs == evaluate(d, xs)
    run(d, xs, world_size=P).link.sent == cost(d, sizes=...).link.sent       (and received, messages; per rank)

the counts read off the arrays each rank handed to torch.distributed (logical: padding and shape metadata not
counted, :mod:`~napkin_cat.distributed.exchange`).  A device region's devices must be the world's ranks
(``devices=P`` or a symbol bound to ``world_size``).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import sympy

from napkin_cat.algorithms.devices import Shard

from napkin_cat.algorithms.device_shards import collectives_within, device_shards
from napkin_cat.algorithms.schedule import schedule_of
from napkin_cat.cost.record import Link, join_links
from napkin_cat.distributed.world import World
from napkin_cat.errors import DeviceError, NapkinError, ShapeError
from napkin_cat.semantics.devices import join_outputs, place_inputs
from napkin_cat.semantics.env import Env
from napkin_cat.semantics.evaluate import check_run, interpret
from napkin_cat.semantics.primitives import run_primitive
from napkin_cat.semantics.regions import run_region
from napkin_cat.syntax.adapter import Bubble, Diagram
from napkin_cat.syntax.flat import layers
from napkin_cat.syntax.sizes import as_sizes
from napkin_cat.syntax.wiring import traverse


@dataclass(frozen=True)
class Run:
    """What a distributed run gave: ``outputs`` (a tuple of numpy arrays, the program's outputs) and ``link``
    (:class:`~napkin_cat.cost.record.Link`: per rank, the values it ``sent`` and ``received`` through
    torch.distributed and its ``messages``, tuples indexed by rank; ``held`` None: not measured)."""

    outputs: tuple
    link: Link


def program_of(program) -> Diagram:
    """The diagram of a diagram or a derivation (anything with a ``diagram``: ``nc.derive``'s, a rule's)."""
    d = program if isinstance(program, Diagram) else getattr(program, "diagram", None)
    if not isinstance(d, Diagram):
        raise NapkinError(f"nc.distributed.run takes a diagram or a derivation of one, got {type(program).__name__}")
    return d


def device_regions(d: Diagram, world_size: int) -> list:
    """The device regions at ``d``'s top level, each on ``world_size`` devices (an int or a symbol), else
    DeviceError: none (a program for one device: nc.evaluate runs it), one nested in another region, one with a
    collective nested in a region inside it, or one on another number of devices."""
    top, nested = [], []
    for _, box in layers(d):
        if isinstance(box, Shard):
            top.append(box)
        elif isinstance(box, Bubble):
            nested += [b for _, b in layers(box.arg) if isinstance(b, Shard)]
    if nested:
        raise DeviceError(f"{nested[0].name} is a device region nested in another region; nc.distributed.run runs "
                          f"device regions at the program's top level")
    if not top:
        raise DeviceError("the program has no device region (nc.shard, or a rule of rewrites.devices): it runs on "
                          "one device; nc.evaluate runs it")
    for box in top:
        inner = collectives_within(box.arg)
        if inner:
            raise DeviceError(f"{box.name}: the collective {inner[0].name!r} sits in a region nested in the device "
                              f"region; a rank runs the device region's own collectives only: place it there")
        if isinstance(box.devices, int) and box.devices != world_size:
            raise DeviceError(f"{box.name} runs on {box.devices} devices (its axis {box.axis!r}), the world has "
                              f"world_size={world_size} ranks: one rank per device; pass world_size={box.devices}")
    return top


def bound_devices(d: Diagram, world_size: int, sizes: dict | None) -> dict:
    """``sizes`` with each symbolic number of devices of ``d``'s device regions bound to ``world_size``, else
    DeviceError (a region on other devices, none, or sizes binding the devices otherwise)."""
    regions = device_regions(d, world_size)
    symbols = {str(b.devices): world_size for b in regions if isinstance(b.devices, sympy.Symbol)}
    given = {str(k): v for k, v in (sizes or {}).items()}
    for name in symbols:
        if name in given and given[name] != world_size:
            raise DeviceError(f"sizes binds the devices {name} = {given[name]}, the world has "
                              f"world_size={world_size} ranks")
    return {**symbols, **given}


def _env(d: Diagram, arrays, sizes) -> tuple:
    """The sizes the inputs bind, and the inputs; refused first (as ``nc.evaluate`` refuses) where a tile passes its
    axis or an array this machine's memory, the device regions' insides at their shards' sizes included."""
    if len(arrays) != len(d.dom):
        raise ShapeError(f"the program takes {len(d.dom)} array(s) {[str(a) for a in d.dom.inside]}, got "
                         f"{len(arrays)}")
    env = Env(as_sizes(sizes).of(d).env)
    xs = []
    for i, (arr, x) in enumerate(zip(d.dom.inside, arrays)):
        x = np.asarray(x)
        env.bind(arr, x, f"input {i} ({arr})")
        xs.append(x)
    check_run(d, env)
    return env, xs


def run_on(world: World, program, *inputs, sizes: dict | None = None) -> Run:
    """``program`` on the ranks of ``world`` (see :func:`run`)."""
    d = program_of(program)
    P = world.size
    env, xs = _env(d, inputs, bound_devices(d, P, sizes))
    links = []

    def region(box, ins):
        node = schedule_of(box)
        shards = device_shards(node, lambda e: env.size(e, f"a size of {box.name}"))
        ranks = [p for p, mine in enumerate(shards) if mine is not None]
        ring = next((b for _, b in layers(box.arg) if getattr(b, "region", None) == "ring"), None)
        if ring is not None and len(ranks) != P:         # refused here: a rank's error would close the world
            raise DeviceError(f"{box.name}: the ring {ring.name} passes shards through every device, but only "
                              f"{len(ranks)} of {P} hold a shard of {box.axis!r}; shard an axis of at least as many "
                              f"values as devices")
        tasks = [(mine, ranks, env, None if mine is None else place_inputs(node, ins, mine)) for mine in shards]
        got = world.run_region(node, tasks)
        links.append(Link(P, tuple(g[1] for g in got), tuple(g[2] for g in got), tuple(g[3] for g in got)))
        return join_outputs(node, [got[p][0] for p in ranks], shards)

    def on_box(step):
        b = step.box
        if isinstance(b, Shard):
            return region(b, step.ins)
        if isinstance(b, Bubble):
            return run_region(b, step.ins, env, interpret)
        return run_primitive(b, step.ins, env)
    outs = traverse(d, xs, on_box)
    link = None
    for part in links:
        link = join_links(link, part)
    return Run(tuple(np.asarray(o) for o in outs), link)


def run(program, *inputs, world_size: int, backend: str = "gloo", sizes: dict | None = None,
        world: World | None = None) -> Run:
    """``program`` (a diagram with device regions, or a derivation of one) run on ``world_size`` processes, one per
    device, joined by torch.distributed's ``backend`` over the loopback address; the outputs (equal to
    ``nc.evaluate(program, *inputs)``) and per rank the values sent and received (equal to
    ``nc.cost(program, sizes=...).link``).  ``sizes`` binds sizes the inputs do not show; a symbolic number of
    devices is bound to ``world_size``.  ``world``: a started :class:`~napkin_cat.distributed.world.World` to run on
    (its size must be ``world_size``), else one is started and closed.

    >>> import numpy as np, napkin_cat as nc                             # doctest: +SKIP
    >>> d = nc.shard(nc.library.attention(), "q", devices=2)              # doctest: +SKIP
    >>> Q, K, V = (np.random.rand(5, 4) for _ in range(3))                # doctest: +SKIP
    >>> r = nc.distributed.run(d, Q, K, V, world_size=2)                  # doctest: +SKIP
    >>> np.array_equal(r.outputs[0], nc.evaluate(d, Q, K, V)), r.link.sent   # doctest: +SKIP
    (True, (0, 0))
    """
    d = program_of(program)
    if isinstance(world_size, bool) or not isinstance(world_size, int) or world_size < 1:
        raise DeviceError(f"world_size={world_size!r}: the number of ranks (devices), a positive int")
    _env(d, inputs, bound_devices(d, world_size, sizes))       # refused before a process starts
    if world is not None:
        if world.size != world_size or world.backend != backend:
            raise DeviceError(f"the world given has {world.size} ranks of {world.backend}; asked: world_size="
                              f"{world_size}, backend={backend!r}")
        return run_on(world, d, *inputs, sizes=sizes)
    with World(world_size, backend) as w:
        return run_on(w, d, *inputs, sizes=sizes)


__all__ = ["run", "run_on", "Run", "program_of", "device_regions", "bound_devices"]
