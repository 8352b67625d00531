"""``nc.derive(f, sizes=..., hardware=cluster)``: the device form of least predicted step time on a cluster.

The candidates are the forms the book's device rules make from ``f`` (:func:`napkin_cat.search.devices.
device_forms`: ``f`` on one device, its partition over each axis, the all-gathers, rings and all-to-alls the rules
reach).  Each is timed as one device of the cluster runs it, every number from a model:

    local(form)   the program one device computes: each device region's inside on the largest shard (device 0's,
                  ⌈a/P⌉), its collectives left out (what they make is an input, what they take an output), a ring
                  run whole (its P trips: the inside at the ring axis's full size); a region whose computing boxes
                  are rings on the busiest device's shard instead (:func:`busiest`: the most work over the steps,
                  the cost's ``Link.work``), its positions that device's (under the zigzag order its two pieces one
                  program, each at its positions: :func:`~napkin_cat.hardware.local_programs.local_parts`'s
                  ``device``)
    compute       Σ over those programs of the GPU time model's best algorithm for them
                  (:func:`~napkin_cat.hardware.timed.derive_for_time` at the shard sizes): the timed device's
    rate          for the programs that are rings: the busiest device's work (``Link.work``, in the form's order)
                  over their seconds (:func:`ring_rate`)
    T(form)       :func:`~napkin_cat.hardware.programtime.predict_program`'s phases: the link traffic read off
                  ``nc.cost(form, sizes=).link``, a ring's exchanges overlapped with its trips, each trip charged
                  its slowest device's FLOPs (``Link.work``) at ``rate`` (a causal mask's contiguous ring waits for
                  its last device; the zigzag order balances the steps), every other collective after the compute
                  (the rest of ``compute``, a region without a ring charged as device 0 runs it)
    memory(form)  (held − the local programs' intermediates + what their algorithms keep in global memory) ·
                  bytes per value:  ``held`` is the cost's level-0 memory of the device program as the rules wrote
                  it (shards, whole replicated and gathered arrays, a ring's incoming slot and state, and every
                  intermediate of its function boxes; a ring's trip counted as one kernel); the derived algorithm
                  keeps those intermediates on chip except what its own cost holds at level 0 beyond one kernel's
                  inputs and outputs (a split stream's partials); a form that cannot fit is refused before its
                  algorithm is derived; where the fastest algorithm would not fit the room left, the fastest that
                  does (``derive_for_time(global_memory=)``)
    chosen        argmin T over the forms whose memory fits the device's global memory (ties: the earlier form:
                  one device first, then the axes in the order f carries them, a ring's orders as
                  :data:`~napkin_cat.algorithms.orders.ORDERS` lists them, the contiguous one first)

A form the rules could not make, whose memory does not fit, or whose local program has no algorithm on the GPU
is kept with its reason (:attr:`ClusterDerivation.candidates`); where no form fits, a
:class:`~napkin_cat.errors.CapacityError` names the smallest need and the capacity.  Inputs are taken in the layout
each form reads them (a replicated input is whole on every device, handed out as ``nc.distributed.run`` hands it:
not over the link), as the cost functor counts them.  Given ``layout=`` (the axis each input arrives sharded along),
a form with device regions that reads an input otherwise is refused (the rules make the forms that gather it), and
the one-device form is charged the gather of its sharded inputs to the device that runs it
(:func:`~napkin_cat.hardware.arrival.gathered`: the all-gathers' link, counted by the cost functor, before its
compute).

>>> import napkin_cat as nc
>>> c = nc.hardware.cluster("h100-sxm5", devices=4, link="nvlink4")
>>> mm = nc.einsum("n k, k m -> n m", dtype="bf16", out_dtype="fp32")
>>> r = derive_for_cluster(mm, c, {"n": 4096, "k": 4096, "m": 4096})
>>> r.label, r.prediction.bound
('shard n', 'compute')
>>> r.trace.replay(mm) == r.diagram
True
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import sympy

from napkin_cat.algorithms.devices import Shard
from napkin_cat.cost.at_sizes import counts_kept
from napkin_cat.cost.numeric import at
from napkin_cat.errors import AxisError, CapacityError, HardwareError, NapkinError
from napkin_cat.hardware.arrival import gathered, sharded_inputs
from napkin_cat.hardware.devices import Cluster
from napkin_cat.hardware.local_programs import (boundary, concrete, kept_on_chip, local_parts, local_programs,
                                              rings_as_kernels)
from napkin_cat.hardware.linktime import ClusterPrediction, Phase, predict_cluster
from napkin_cat.hardware.model import GPU
from napkin_cat.hardware.predict import predict
from napkin_cat.hardware.programtime import program_phases, rings_of
from napkin_cat.hardware.ringcharge import SLOWEST, algorithm_tiles, busiest, cost_at, ring_rate
from napkin_cat.hardware.timed import derive_for_time
from napkin_cat.rewriting.trace import Derivation as RuleDerivation, Trace
from napkin_cat.search.derivation import derive as derive_transfers
from napkin_cat.search.devices import device_forms
from napkin_cat.syntax.adapter import Diagram
from napkin_cat.syntax.flat import layers
from napkin_cat.syntax.sizes import as_sizes
from napkin_cat.syntax.wiring import trace_values

#: what the time of the one-device form assumes where its inputs arrive sharded (:mod:`~.arrival`)
GATHERED = ("the inputs arrive sharded (layout=): the device that runs the program gathers them first, charged the "
            "link of the all-gathers of arrival.gathered(f, layout, P) as the cost functor counts them (the busiest "
            "device's max(sent, received): a gather to one device's, up to P − 1 values at ragged shards), not "
            "overlapped with its compute")

#: the time model's keywords that reach each local program's derivation (:func:`derive_for_time`'s)
TIME_OPTIONS = ("overlap", "ceilings", "largest", "launch")


@dataclass(frozen=True)
class ClusterCandidate:
    """One form timed: its ``label``, ``diagram`` and ``trace`` (from the function), predicted ``time`` (seconds)
    and ``prediction`` (:class:`~napkin_cat.hardware.linktime.ClusterPrediction`), the bytes each device holds
    (``memory``), the timed device's ``compute`` seconds (its programs' algorithms, ``local``), where it runs a ring
    the ``rate`` (FLOPs per second, exact, :func:`ring_rate`) its steps are charged at, and ``refused``: why it
    cannot be chosen (None if it can)."""

    label: str
    diagram: Diagram | None
    trace: Trace | None
    time: float | None = None
    memory: int | None = None
    compute: float | None = None
    rate: object = None
    prediction: ClusterPrediction | None = None
    refused: str | None = None
    local: tuple = field(default=(), repr=False)


@dataclass(frozen=True)
class ClusterDerivation(RuleDerivation):
    """The chosen device program (``start`` → ``diagram`` by ``trace``) on ``cluster`` at ``sizes``: its ``label``,
    ``prediction`` (phases, bound), ``memory`` (bytes per device), ``compute`` (one device's seconds), the
    per-device algorithms (``local``: the derivations the GPU time model chose for the programs timed, a ring's
    on its busiest device) and every ``candidates`` row."""

    label: str = ""
    prediction: ClusterPrediction | None = None
    memory: int | None = None
    compute: float | None = None
    local: tuple = field(default=(), repr=False)
    candidates: tuple = field(default=(), repr=False)
    cluster: str = ""
    sizes: dict | None = None

    @property
    def time(self) -> float:
        """The predicted step time (seconds)."""
        return self.prediction.time

    def table(self) -> list:
        """Rows ``(label, time s or None, memory B or None, refused or None)``, one per candidate."""
        return [(c.label, c.time, c.memory, c.refused) for c in self.candidates]


def _global_extra(r) -> int:
    """What a derived algorithm holds at level 0 beyond one kernel of its function (a split stream's partials,
    an intermediate between two kernels)."""
    m = at(r.diagram, r.optimum.sizes).M.get(0, 0)
    return max(int(m) - boundary(r.start), 0)


# ------------------------------------------------------------------------------------------ timing
def _timing_model(gpu: GPU):
    """The GPU's fields the time model reads (all but its global memory, the cluster's capacity): a cache key."""
    return repr(dataclasses.replace(gpu, gmem=0))


def by_transfers(program: Diagram, gpu: GPU, **options):
    """The cheaper per-device algorithm: the one of fewest transfers with the GPU's shared memory per block
    (:func:`napkin_cat.search.derive` at that many values), timed by :func:`~napkin_cat.hardware.predict.predict`
    at its tiles; a Derivation with its ``prediction``."""
    per_value = max([a.dtype.bytes for a in (*program.dom.inside, *program.cod.inside)] + [1])
    r = derive_transfers(program, memory=gpu.smem_per_block // per_value, sizes={})
    options = {k: v for k, v in options.items() if k != "largest"}      # a tile search's bound: no search here
    return dataclasses.replace(r, prediction=predict(r.diagram, gpu, r.optimum.sizes, **options))


#: how one device's program is given an algorithm and a time: ``"time"`` (the least predicted time,
#: :func:`~napkin_cat.hardware.timed.derive_for_time`: every structure and tile assignment timed) or
#: ``"transfers"`` (:func:`by_transfers`: one structure, its tiles by transfers; faster, a cruder time)
COMPUTE = {"time": lambda program, gpu, **options: derive_for_time(program, gpu, {}, **options),
           "transfers": by_transfers}


def _derived(program, gpu, cache, options, compute="time"):
    if compute not in COMPUTE:
        raise HardwareError(f"compute={compute!r}: one of {sorted(COMPUTE)}")
    key = (program, _timing_model(gpu), compute, tuple(sorted(options.items())))
    try:
        hit = cache.get(key)
    except TypeError:               # an unhashable parameter: no cache
        key, hit = None, None
    if hit is None:
        hit = COMPUTE[compute](program, gpu, **options)
        if key is not None:
            cache[key] = hit
    return hit


def time_form(form, c: Cluster, sizes, *, cache: dict | None = None, compute: str = "time", layout=None,
              **options) -> ClusterCandidate:
    """One :class:`~napkin_cat.search.devices.DeviceForm` timed on the cluster ``c`` at ``sizes`` (see the module
    docstring): a :class:`ClusterCandidate`, refused with the reason where it cannot run."""
    row = dict(label=form.label, diagram=form.diagram, trace=form.trace)
    if form.refused is not None:
        return ClusterCandidate(**row, refused=f"no legal match: {form.refused}")
    cache = {} if cache is None else cache
    d = form.diagram
    env = as_sizes(sizes).env
    if layout is not None and any(isinstance(b, Shard) for _, b in layers(d)):
        got = input_layout(d)
        wrong = [k for k, (a, b) in enumerate(zip(got, layout)) if a != b]
        if wrong:
            k = wrong[0]
            how = lambda axis: "whole" if axis is None else f"sharded along {axis!r}"  # noqa: E731
            return ClusterCandidate(**row, refused=f"layout: it reads input {k} ({d.dom.inside[k]}) {how(got[k])}; "
                                                   f"the layout gives it {how(layout[k])}")
        fewer = cut_fewer(d, env, c.devices)
        if fewer:
            return ClusterCandidate(**row, refused=f"layout: {fewer}")
    one = not any(isinstance(b, Shard) for _, b in layers(d))
    if one:            # what the device holds before its algorithm's own global memory: refused before it is derived
        held = max(boundary(p) for p in local_programs(d, env)) * _bytes_per_value(d)
        if held > c.capacity:
            return ClusterCandidate(**row, memory=held, refused=_too_big(held, c))
    else:
        try:
            link = cost_at(d, sizes, cache).link
            phases, _, held = program_phases(c, d, sizes, 0.0, link=link)
            per_value = _bytes_per_value(d)
            mine = rings_as_kernels(d) if rings_of(d) else d       # a ring's trip keeps its intermediates on chip
            if mine is not d:
                held = max(cost_at(mine, sizes, cache).link.held) * per_value
        except (NapkinError, ValueError) as e:      # a ring whose trip is no kernel the stream can run: refused
            return ClusterCandidate(**row, refused=str(e).splitlines()[0])
        held -= kept_on_chip(mine, env) * per_value
        if held > c.capacity:
            return ClusterCandidate(**row, memory=held, refused=_too_big(held, c))
    parts = local_parts(d, env)
    timed = None                # the device whose ring programs are timed: the busiest by the cost's work
    if not one and any(ring for _, ring in parts):
        timed = busiest(link)
        parts = [(p, False) for p, ring in parts if not ring] + [
            (p, True) for p, ring in local_parts(d, env, device=timed) if ring]
    per_value = _bytes_per_value(d)
    room = (c.capacity - held) // per_value         # what each program's algorithm may add at level 0 (values)

    def fitted(p):      # the time model's algorithm, within the device's memory where the fastest is not
        r = _derived(p, c.gpu, cache, options, compute)
        if compute != "time" or _global_extra(r) <= room:
            return r
        return _derived(p, c.gpu, cache, {**options, "global_memory": boundary(p) + room}, compute)
    try:
        derived = [fitted(p) for p, _ in parts]
    except NapkinError as e:
        return ClusterCandidate(**row, refused=f"no per-device algorithm: {str(e).splitlines()[0]}")
    seconds = sum(r.prediction.time for r in derived)
    try:
        extra = sum(_global_extra(r) for r in derived)
    except NapkinError as e:
        return ClusterCandidate(**row, refused=f"no per-device memory: {str(e).splitlines()[0]}")
    rate = None
    if one:
        phases = [Phase("compute", compute=seconds)]
        if sharded_inputs(layout):      # its inputs arrive sharded: the one device is charged their gather
            g = gathered(d, layout, c.devices, sizes)
            phases, _, _ = program_phases(c, g, sizes, seconds, link=cost_at(g, sizes, cache).link)
        nbytes = held + extra * _bytes_per_value(d)
    else:
        ringed = sum(r.prediction.time for r, (_, ring) in zip(derived, parts) if ring)
        if ringed:      # each fold charged by the blocks of the algorithm's tiles it runs, as the algorithm skips
            tiles = algorithm_tiles([r for r, (_, ring) in zip(derived, parts) if ring])
            link = cost_at(d, sizes, cache, tiles).link if tiles else link
            rate = ring_rate(link, ringed, timed)
        else:
            rate = None
        outside = seconds - ringed if rate is not None else seconds
        phases, _, _ = program_phases(c, d, sizes, outside, rate=rate, link=link)
        nbytes = held + extra * per_value
    if nbytes > c.capacity:
        return ClusterCandidate(**row, memory=nbytes, compute=seconds, refused=_too_big(nbytes, c))
    p = predict_cluster(c, phases, sizes={str(k): v for k, v in env.items()}, memory=nbytes)
    if rate is not None:
        p = dataclasses.replace(p, assumptions=p.assumptions + (SLOWEST,))
    if one and sharded_inputs(layout):
        p = dataclasses.replace(p, assumptions=p.assumptions + (GATHERED,))
    return ClusterCandidate(**row, time=p.time, memory=nbytes, compute=seconds, rate=rate, prediction=p,
                            local=tuple(derived))


def input_layout(d: Diagram) -> tuple:
    """For each input of the device program ``d``, the axis it arrives sharded along, or None (whole on every
    device, or read outside every device region): what its first reader, a device region, reads it as."""
    ops, dom, _ = trace_values(d)
    out = []
    for v in dom:
        cut = None
        for box, ins, _ in ops:
            if v in ins and isinstance(box, Shard):
                cut = box.sharded("dom")[ins.index(v)]
                break
        out.append(cut)
    return tuple(out)


def cut_fewer(d: Diagram, env: dict, P: int) -> str | None:
    """Why a device region of ``d`` reads an input co-sharded otherwise than a layout cuts it at ``env``, or None: a
    region whose axis has ``k < P`` values runs on ``k`` devices and cuts its co-sharded axes among them
    (:func:`~napkin_cat.algorithms.device_shards.device_shards`), where a layout cuts each over all ``P``
    (``np.array_split``); the two differ where such an axis has more than ``k`` values.

    >>> import napkin_cat as nc
    >>> g = nc.shard(nc.library.attention(), "q", devices=4)
    >>> from napkin_cat.rewriting.registry import rulebook
    >>> d = rulebook().role("shard_gather").using(axis="x").apply(g)
    >>> cut_fewer(d, nc.Sizes({"q": 3, "x": 9, "d": 2}).env, 4)[:60]
    "the region along 'q' (3 values) runs on 3 of the 4 devices a"
    >>> cut_fewer(d, nc.Sizes({"q": 8, "x": 9, "d": 2}).env, 4) is None
    True
    """
    for _, box in layers(d):
        if not isinstance(box, Shard):
            continue
        axes = {a: int(sympy.sympify(full).subs(env)) for a, (_, full) in box.sharded_axes().items()}
        k = min(axes[box.axis], P)
        wrong = [a for a in box.sharded("dom") if a is not None and a != box.axis and axes[a] > k]
        if k < P and wrong:
            return (f"the region along {box.axis!r} ({axes[box.axis]} values) runs on {k} of the {P} devices and cuts "
                    f"{wrong[0]!r} ({axes[wrong[0]]} values) among them; the layout cuts it over all {P}")
    return None


def check_layout(f: Diagram, layout) -> tuple | None:
    """``layout`` (one entry per input of ``f``: the axis it arrives sharded along, or None for whole on every
    device) as a tuple; AxisError naming the input and the axes it carries where an entry is not one of them."""
    if layout is None:
        return None
    if isinstance(layout, str) or not hasattr(layout, "__len__") or len(layout) != len(f.dom):
        raise AxisError(f"layout={layout!r}: one entry per input of the function ({len(f.dom)}: "
                        f"{[str(a) for a in f.dom.inside]}), each the axis it arrives sharded along or None")
    for k, (axis, a) in enumerate(zip(layout, f.dom.inside)):
        if axis is not None and axis not in a.names:
            raise AxisError(f"layout: input {k} ({a}) cannot arrive sharded along {axis!r}; it carries "
                            f"{list(a.names)} (or None: whole on every device)")
    return tuple(layout)


def _too_big(nbytes: int, c: Cluster) -> str:
    return f"memory: each device holds {nbytes} B, more than the {c.gpu.name}'s {c.capacity} B"


def _bytes_per_value(d) -> int:
    return max([a.dtype.bytes for a in (*d.dom.inside, *d.cod.inside)] + [1])


def check_cluster(c) -> Cluster:
    """``c`` if it is a cluster of GPUs with a whole number of devices; HardwareError naming what is wrong."""
    if not isinstance(c, Cluster):
        raise HardwareError(f"derive on a cluster takes nc.hardware.cluster(gpu, devices=P, link=...), got "
                            f"{type(c).__name__}")
    if not isinstance(c.gpu, GPU):
        raise HardwareError(f"a cluster's devices are GPU models; {c.gpu!r} is a {type(c.gpu).__name__} (a CPU "
                            "model has no time model for a device region's kernels)")
    if not isinstance(c.devices, int):
        raise HardwareError(f"derive times each device's program at concrete sizes: the cluster has devices="
                            f"{c.devices} (a symbol); build it with an int, e.g. devices=8")
    return c


@counts_kept()     # one call's running counts of masked streams, whichever entry it came by
def derive_for_cluster(f: Diagram, c: Cluster, sizes, *, book=None, forms=None, cache: dict | None = None,
                       compute: str = "time", layout=None, **options) -> ClusterDerivation:
    """The device form of ``f`` of least predicted step time on the cluster ``c`` at ``sizes`` (every axis of
    ``f``), whose memory fits each device (see the module docstring).  ``forms``: the candidates, if already made
    (:func:`~napkin_cat.search.devices.device_forms`; a sweep makes them once); ``cache``: local programs → their
    derivations, shared across calls; ``compute``: how each device's program is given an algorithm and a time
    (:data:`COMPUTE`); ``layout``: one entry per input of ``f``, the axis it arrives sharded along or None (whole on
    every device): a form that reads an input otherwise is refused (default: each form reads its inputs as it
    needs them); ``options``: the GPU time model's (``overlap``, ``ceilings``, ``largest``, ``launch``)."""
    check_cluster(c)
    wrong = sorted(set(options) - set(TIME_OPTIONS))
    if wrong:
        raise HardwareError(f"derive(hardware=<cluster>) got {wrong}: the cluster's time model takes "
                            f"{list(TIME_OPTIONS) + ['book']}")
    if not isinstance(f, Diagram):
        raise HardwareError(f"derive on a cluster takes a function diagram, got {type(f).__name__}")
    sizes = as_sizes(sizes).of(f).require(f, "a cluster's predicted time")
    layout = check_layout(f, layout)
    if compute not in COMPUTE:
        raise HardwareError(f"compute={compute!r}: one of {sorted(COMPUTE)}")
    forms = device_forms(f, c.devices, book=book) if forms is None else forms
    cache = {} if cache is None else cache
    rows = tuple(time_form(form, c, sizes, cache=cache, compute=compute, layout=layout, **options) for form in forms)
    fit = [r for r in rows if r.refused is None]
    if not fit:
        needs = [r for r in rows if r.memory is not None]
        if needs:
            least = min(needs, key=lambda r: r.memory)
            raise CapacityError(f"no device form of the program fits a device of {c.name} at {dict(sizes)}: the "
                                f"smallest, {least.label!r}, holds {least.memory} B per device; each holds "
                                f"{c.capacity} B: use more devices or a larger GPU")
        reasons = "; ".join(f"{r.label}: {r.refused}" for r in rows[:4])
        raise HardwareError(f"no device form of the program can be timed on {c.name}: {reasons}")
    best = min(fit, key=lambda r: r.time)          # min keeps the first of equal times: the earlier form
    return ClusterDerivation(f, best.diagram, best.trace, label=best.label, prediction=best.prediction,
                             memory=best.memory, compute=best.compute, local=best.local, candidates=rows,
                             cluster=c.name,
                             sizes=dict(sizes))


__all__ = ["ClusterCandidate", "ClusterDerivation", "derive_for_cluster", "time_form", "local_programs", "local_parts",
           "ring_rate", "busiest", "GATHERED", "SLOWEST", "algorithm_tiles", "cost_at",
           "concrete", "check_cluster", "check_layout", "cut_fewer", "input_layout", "rings_as_kernels", "by_transfers",
           "COMPUTE", "TIME_OPTIONS"]
