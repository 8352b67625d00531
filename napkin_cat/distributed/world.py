"""A world of ``P`` ranks on this machine: one process per device, started by ``torch.multiprocessing``
(:func:`start_method`), joined by ``torch.distributed`` over the loopback address only (``MASTER_ADDR=127.0.0.1``, a
free port).

A rank needs torch and napkin_cat imported (about 5 s of CPU in a fresh interpreter).  Where the platform has
multiprocessing's ``forkserver`` (Linux, macOS), one server process imports this module once and every rank of every
world this process starts is forked from it, already imported; elsewhere each rank is spawned and imports them
itself (measured, a world of 4 ranks then one of 2, each running a program: 31.2 s of CPU spawned, 4.9 s forked from
the server, its own imports included; closing the world of 4 took 4.1 s and 0.2 s).  The ranks stay up between
programs (a :class:`World` runs many programs), each waiting for a task: a device region, the rank's shard of it and
its inputs.  The launcher hands each rank its inputs and takes its outputs through multiprocessing queues: the
placement of a program's inputs and the collection of its outputs are the launcher's, not the link's (the cost
functor counts neither).  Between the ranks, values move by torch.distributed only
(:mod:`napkin_cat.distributed.exchange`).  Ranks that hold no shard of a region (more devices than values) sit it
out: the others run in a process group of their own.
"""
from __future__ import annotations

import datetime
import os
import pickle
import queue
import socket
import traceback

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from napkin_cat.distributed.device import run_device
from napkin_cat.distributed.exchange import Exchange
from napkin_cat.errors import DeviceError, ToolNotFoundError

LOOPBACK = "127.0.0.1"


def free_port() -> int:
    """A TCP port free on the loopback address now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((LOOPBACK, 0))
        return s.getsockname()[1]


def check_backend(backend: str) -> None:
    """ToolNotFoundError where torch.distributed or ``backend`` is not in this torch (gloo: CPU; nccl: GPUs)."""
    if not dist.is_available():
        raise ToolNotFoundError("this torch was built without torch.distributed; nc.distributed needs it")
    known = {"gloo": dist.is_gloo_available, "nccl": dist.is_nccl_available, "mpi": dist.is_mpi_available}
    if backend not in known:
        raise DeviceError(f"backend={backend!r}: a torch.distributed backend, one of {sorted(known)}")
    if not known[backend]():
        raise ToolNotFoundError(f"torch.distributed's {backend} backend is not available in this torch "
                                f"({torch.__version__}); gloo runs on CPUs")


def start_method() -> str:
    """How ranks are started: ``"forkserver"`` where this platform has it, else ``"spawn"`` (never ``fork``: a
    copy of a launcher that may hold threads, torch's among them).

    >>> start_method() in ("forkserver", "spawn")
    True
    """
    return "forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn"


def context():
    """The multiprocessing context ranks start in (:func:`start_method`); a forkserver is asked to import this
    module (and with it torch and napkin_cat) before it forks, beside the launcher's ``__main__`` as multiprocessing
    does by default (a server already running keeps what it imported: a rank then imports the rest itself)."""
    ctx = mp.get_context(start_method())
    if start_method() == "forkserver":
        ctx.set_forkserver_preload(["__main__", __name__])
    return ctx


def _serve(rank: int, size: int, backend: str, port: int, timeout: float, tasks, results) -> None:
    os.environ.update(MASTER_ADDR=LOOPBACK, MASTER_PORT=str(port))
    torch.set_num_threads(1)
    try:
        dist.init_process_group(backend, rank=rank, world_size=size,
                                timeout=datetime.timedelta(seconds=timeout))
    except Exception:            # noqa: BLE001  (the launcher raises it, named)
        results.put((rank, False, traceback.format_exc()))
        return
    groups = {}
    while True:
        try:
            task = tasks.get()
        except Exception:       # noqa: BLE001  (a task this process cannot read: said, and the rank stops)
            results.put((rank, False, traceback.format_exc()))
            break
        if task is None:
            break
        try:
            node, mine, ranks, env, xs = pickle.loads(task)
            key = tuple(ranks)
            if key not in groups:               # every rank creates every group, in the same order
                groups[key] = None if len(ranks) == size else dist.new_group(list(ranks))
            if rank not in ranks:
                results.put((rank, True, ([], 0, 0, 0)))
                continue
            ex = Exchange(ranks, ranks.index(rank), groups[key])
            ys = run_device(node, mine, xs, env, ex)
            results.put((rank, True, (ys, ex.sent, ex.received, ex.messages)))
        except Exception:       # noqa: BLE001
            results.put((rank, False, traceback.format_exc()))
    dist.destroy_process_group()


class World:
    """``size`` ranks of ``backend`` on this machine, up until :meth:`close` (or the end of a ``with`` block)."""

    def __init__(self, size: int, backend: str = "gloo", *, timeout: float = 120.0):
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise DeviceError(f"world_size={size!r}: the number of ranks (devices), a positive int")
        check_backend(backend)
        self.size, self.backend, self.timeout = size, backend, timeout
        ctx = context()
        port = free_port()
        self._tasks = [ctx.Queue() for _ in range(size)]
        self._results = ctx.Queue()
        self._procs = [ctx.Process(target=_serve, args=(r, size, backend, port, timeout, self._tasks[r],
                                                         self._results), daemon=True) for r in range(size)]
        for p in self._procs:
            p.start()

    def run_region(self, node, tasks: list) -> list:
        """Each rank's ``(outputs, sent, received, messages)`` for ``tasks[r] = (mine, ranks, env, xs)``."""
        if not self._procs:
            raise DeviceError("this world is closed: start another (nc.distributed.World(P))")
        try:            # pickled here: a task that cannot be is said now (a queue's feeder thread would drop it)
            data = [pickle.dumps((node, mine, ranks, env, xs)) for mine, ranks, env, xs in tasks]
        except (pickle.PicklingError, TypeError, AttributeError) as e:
            raise DeviceError(f"{node.region.name}: its task cannot be sent to the ranks ({e}); every box, plan and "
                              f"input of a device region must pickle (module-level functions, no lambdas)") from None
        for q, task in zip(self._tasks, data):
            q.put(task)
        got, waited = {}, 0.0
        while len(got) < self.size:
            try:
                rank, ok, value = self._results.get(timeout=1.0)
            except queue.Empty:
                waited += 1.0
                dead = [r for r, p in enumerate(self._procs) if not p.is_alive() and r not in got]
                if dead or waited >= self.timeout:
                    self.close()
                    why = f"ranks {dead} stopped" if dead else f"no result in {self.timeout} s"
                    raise DeviceError(f"{node.region.name}: {why}; the world is closed") from None
                continue
            if not ok:                          # its peers may wait on it in a collective: stop them
                self.close()
                raise DeviceError(f"{node.region.name}: rank {rank} failed (the world is closed):\n{value}")
            got[rank] = value
        return [got[r] for r in range(self.size)]

    @property
    def pids(self) -> tuple:
        """The ranks' process ids, rank by rank (empty once closed)."""
        return tuple(p.pid for p in self._procs)

    def first(self, size: int) -> "Ranks":
        """The world's first ``size`` ranks, as a world of their own (one start serves programs on fewer devices: the
        other ranks sit each region out)."""
        if isinstance(size, bool) or not isinstance(size, int) or not 1 <= size <= self.size:
            raise DeviceError(f"first({size!r}): a number of ranks 1 … {self.size}")
        return Ranks(self, size)

    def close(self) -> None:
        """Stop the ranks (those that do not stop in a few seconds are terminated)."""
        for q in self._tasks:
            try:
                q.put(None)
            except (ValueError, OSError):
                pass
        for p in self._procs:
            p.join(timeout=5)
            if p.is_alive():
                p.terminate()
                p.join(timeout=5)
        self._procs = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        if getattr(self, "_procs", None):
            self.close()


class Ranks:
    """The first ``size`` ranks of a :class:`World` (:meth:`World.first`), run as a world of ``size`` ranks."""

    def __init__(self, world: World, size: int):
        self.world, self.size, self.backend = world, size, world.backend

    def run_region(self, node, tasks: list) -> list:
        ranks = next((t[1] for t in tasks), list(range(self.size)))
        rest = [(None, ranks, tasks[0][2], None)] * (self.world.size - self.size)
        return self.world.run_region(node, list(tasks) + rest)[:self.size]


__all__ = ["World", "Ranks", "free_port", "check_backend", "start_method", "context", "LOOPBACK"]
