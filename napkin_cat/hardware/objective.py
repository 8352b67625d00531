"""``nc.derive``: the objective a derivation minimises, chosen by what it is given.

* a memory (no ``hardware=``): transfers ``H`` at that memory (:func:`napkin_cat.search.derive`);
* a GPU model: predicted time on it (:func:`~napkin_cat.hardware.timed.derive_for_time`, §5.7);
* a CPU model (format 2, or ``"this-cpu"``): predicted time of the C kernel on it
  (:func:`~napkin_cat.hardware.cputime.derive_for_cpu_time`: cache traffic and the rate of each contraction's
  tile shape);
* a cluster (``nc.hardware.cluster``): the device form of least predicted step time whose memory fits each device
  (:func:`~napkin_cat.hardware.clustered.derive_for_cluster`: the forms the device rules make, each device's program
  timed by the GPU model, the link by the cluster's).

The objective is passed in here, by the layer that knows the time models; the search minimises transfers and
never imports the hardware layer.

>>> import napkin_cat as nc
>>> mm, sizes = nc.library.matmul(), {"a": 256, "b": 256, "c": 256}
>>> derive(mm, 2 ** 12, sizes=sizes).H
851968
>>> derive(mm, sizes=sizes, hardware="epyc-zen3-dev").prediction.hardware
'epyc-zen3-dev'
>>> derive(mm, 2 ** 12, sizes=sizes, overlap="inter")
Traceback (most recent call last):
...
napkin_cat.errors.NapkinError: derive got ['overlap']: these options are the time model's; give hardware=
>>> derive(mm, 2 ** 12, sizes=sizes, hardware="h100-sxm5")
Traceback (most recent call last):
...
napkin_cat.errors.NapkinError: derive(hardware=...) derives at the memories the model's shared memory holds: ...
>>> derive(mm, sizes=sizes, hardware="epyc-zen3-dev", overlap="inter")
Traceback (most recent call last):
...
napkin_cat.errors.NapkinError: derive(hardware=epyc-zen3-dev) got ['overlap']: a CPU model's time model takes ...
>>> derive(mm, sizes=sizes, hardware="epyc-zen5")
Traceback (most recent call last):
...
napkin_cat.errors.HardwareError: no hardware model called 'epyc-zen5'; shipped GPU models are a100, ..., CPU models ...
"""
from __future__ import annotations

from pathlib import Path

from napkin_cat.cost.at_sizes import counts_kept
from napkin_cat.cost.collector import collector_paused
from napkin_cat.errors import ArgumentError, AxisError, HardwareError, NapkinError
from napkin_cat.hardware.clustered import TIME_OPTIONS as CLUSTER_TIME_OPTIONS, derive_for_cluster
from napkin_cat.hardware.devices import Cluster
from napkin_cat.hardware.model import models
from napkin_cat.hardware.cpu import CPU, THIS_CPU, cpus, load_cpu
from napkin_cat.hardware.cputime import derive_for_cpu_time
from napkin_cat.hardware.timed import derive_for_time
from napkin_cat.search.derivation import derive as derive_transfers
from napkin_cat.syntax.sizes import as_sizes

#: the GPU time model's keywords (:func:`~napkin_cat.hardware.timed.derive_for_time`'s own)
TIME_OPTIONS = ("overlap", "ceilings", "largest", "launch")
#: the CPU time model's keywords (:func:`~napkin_cat.hardware.cputime.derive_for_cpu_time`'s own)
CPU_OPTIONS = ("threads", "value_bytes")
#: the cluster search's own keywords (:func:`~napkin_cat.hardware.clustered.derive_for_cluster`)
CLUSTER_OPTIONS = ("book", "compute", "layout", "forms", "cache")
#: the search's keywords that also steer a derivation by time (the others are the transfer search's alone)
SHARED_OPTIONS = ("book", "min_blocks", "cache", "density")


def is_cpu(hardware) -> bool:
    """Whether ``hardware`` names a CPU model: a :class:`~napkin_cat.hardware.cpu.CPU`, a shipped CPU model's name
    or ``"this-cpu"``."""
    return isinstance(hardware, CPU) or (isinstance(hardware, str) and hardware.lower() in (*cpus(), THIS_CPU))


def _known(hardware) -> None:
    """A name that is neither a shipped GPU model, a shipped CPU model nor a file is a HardwareError listing both
    (``derive`` takes either kind; the GPU loader alone would name only its own)."""
    if not isinstance(hardware, str) or hardware.endswith(".toml") or "/" in hardware or is_cpu(hardware):
        return
    if hardware.lower() not in models() and not Path(hardware).exists():
        raise HardwareError(f"no hardware model called {hardware.lower()!r}; shipped GPU models are "
                            f"{', '.join(models())}, CPU models {', '.join(cpus())} and {THIS_CPU!r} (or give the "
                            f"path of a .toml file)")


@collector_paused
@counts_kept()
def derive(diagram, memory="M", level: int = 1, sizes: dict | None = None, *, hardware=None, **options):
    """``nc.derive``: the algorithm of fewest transfers at ``level`` with ``memory`` values there
    (:func:`napkin_cat.search.derive`: every keyword but ``hardware`` is its), or, given ``hardware`` and ``sizes``,
    the algorithm of least predicted time on it: a GPU model (or its name; ``overlap``, ``ceilings``, ``largest``
    and ``launch`` go to its time model) or a CPU model (``"epyc-zen3-dev"``, ``"this-cpu"``,
    ``nc.hardware.load_cpu(path)``; ``threads`` and ``value_bytes`` go to its time model); ``memory`` is then the
    model's.
    See the module docstring.  One call owns what its searches and time models keep of masked streams' running
    counts (:func:`~napkin_cat.cost.at_sizes.counts_kept`), and pauses the cyclic collector
    (:data:`~napkin_cat.cost.collector.collector_paused`)."""
    if hardware is None:
        time = sorted(set(options) & set(TIME_OPTIONS + CPU_OPTIONS))
        if time:
            raise NapkinError(f"derive got {time}: these options are the time model's; give hardware=")
        return derive_transfers(diagram, memory, level, sizes, **options)
    if isinstance(hardware, Cluster):
        return _on_cluster(diagram, memory, level, sizes, hardware, options)
    if sizes is None:
        raise NapkinError("derive(hardware=...) times kernels at concrete sizes: give sizes= for every axis")
    if not (isinstance(memory, str) and memory == "M"):
        raise NapkinError(f"derive(hardware=...) derives at the memories the model's shared memory holds: drop "
                          f"memory={memory!r} (memory is the model's)")
    _known(hardware)
    cpu = is_cpu(hardware)
    own, alien = (CPU_OPTIONS, TIME_OPTIONS) if cpu else (TIME_OPTIONS, CPU_OPTIONS)
    model = load_cpu(hardware) if cpu else hardware
    wrong = sorted(set(options) & set(alien))
    if wrong:
        name = model.name if cpu else getattr(hardware, "name", hardware)
        raise NapkinError(f"derive(hardware={name}) got {wrong}: a {'CPU' if cpu else 'GPU'} model's time model "
                          f"takes {list(own + SHARED_OPTIONS)}")
    other = sorted(set(options) - set(own) - set(SHARED_OPTIONS))
    if other:
        raise NapkinError(f"derive(hardware=...) got {other}: these options are the transfer search's; the time model "
                          f"takes {list(own + SHARED_OPTIONS)}")
    at = dict(as_sizes(sizes).of(diagram))
    if cpu and options.get("density") is not None:
        raise ArgumentError(f"derive(hardware={model.name}) got density=: the CPU time model counts a mask read from "
                          "data dense; give density= with a GPU model or a memory")
    if cpu:
        options.pop("density", None)
        return derive_for_cpu_time(diagram, model, at, level=level, **options)
    return derive_for_time(diagram, hardware, at, level=level, **options)


def _on_cluster(diagram, memory, level, sizes, cluster, options):
    """``nc.derive(f, sizes=..., hardware=cluster)``: checks, then :func:`derive_for_cluster`."""
    if sizes is None:
        names = sorted({n for a in (*diagram.dom.inside, *diagram.cod.inside) for n in a.names})
        raise AxisError(f"derive(hardware=<cluster>) times each device's program at concrete sizes: give sizes= "
                        f"for every axis ({', '.join(names)})")
    if not (isinstance(memory, str) and memory == "M") or level != 1:
        raise NapkinError(f"derive(hardware=<cluster>) reads each device's memory off the cluster: drop "
                          f"memory={memory!r} and level={level!r}")
    legal = CLUSTER_OPTIONS + CLUSTER_TIME_OPTIONS
    wrong = sorted(set(options) - set(legal))
    if wrong:
        raise NapkinError(f"derive(hardware=<cluster>) got {wrong}: it takes {list(legal)}")
    return derive_for_cluster(diagram, cluster, sizes, **options)
