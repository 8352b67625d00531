"""A function at the sizes of a call: its derived algorithm, its tiles, its plan and its kernel, each made once.

A compiled op runs two functions, its forward ``f`` and its backward ``nc.grad(f, ...)``; each is a
:class:`Derived`.  A call at sizes ``s`` (read off its tensors), real dtype ``t``, on device ``v``, runs::

    r      = nc.derive(function, sizes=s, hardware=cpu, threads=T)    on the CPU with a model that has rates
           = nc.derive(function, memory, sizes=reference or s)          otherwise (its variant and kernels)
    tiles  = r's own at its sizes, else nc.optimal(nc.cost(r.diagram), memory, sizes=s)
    kernel = nc.codegen.c(nc.plan(r.diagram, s | tiles), real=t)          on the CPU (C/OpenMP)
             nc.codegen.triton(nc.plan(r.diagram, s | tiles))             on CUDA (Triton)

On the CPU, a CPU model with measured rates (format 2: ``hardware=``, default ``"this-cpu"``, this machine's
caches from sysfs with the rates of the shipped model that has them) makes the derivation minimise the C
kernel's predicted time (:mod:`napkin_cat.hardware.cputime`) at each call's sizes, on the call's
``torch.get_num_threads()`` threads, in values of its real dtype: an op never runs at tiles that move the least
but compute slowly (a ``d × 1`` slice of keys).  ``reference``: the sizes the algorithm is derived at once
(``sizes=`` of ``nc.torch.compile``, or a given derivation's), retiled at each call's sizes by transfers; with it,
with ``memory=``, or with a model without rates, the memory is as given, else the CPU model's per-core L2 in values
of the real dtype (float64 values take twice the bytes, so half as many fit).  On CUDA a GPU model
(``hardware=``) makes the derivation minimise predicted time (``nc.derive(..., hardware=)``) at each call's
sizes.

What is cached (in the object, for the life of the op): the derivation per (reference sizes, memory); the tiles
and the kernel per (derivation, call sizes, real dtype, backend); and a call's sizes, real dtype, device and kernel
per *call key*, everything they depend on beside the op's own options::

    call key = ((shape, dtype, device) of each input tensor, torch.get_num_threads())

so that a call whose key was seen reads neither its sizes (:mod:`.binding`) nor the caches above again: its
checks are functions of the key and passed when it was first seen (:attr:`looked_up` counts the calls that were
not, :data:`CALLS` keys are kept).  On disk, under the user's cache folder, the
compiled C library by the hash of its source (:mod:`napkin_cat.codegen.kernel`) and the derivation by the hash
of everything it depends on, the library's code included (:mod:`.stored`; ``NAPKIN_DERIVATION_CACHE=off`` turns
it off), so a new process neither searches nor compiles what one before it did (``searched`` and ``recalled``
count the derivations searched and read back).

>>> import torch, napkin_cat as nc
>>> f = Derived(nc.library.matmul(), memory=64)
>>> A, B = torch.ones(8, 6, dtype=torch.float64), torch.ones(6, 4, dtype=torch.float64)
>>> (C,) = f([A, B])
>>> C.dtype, bool((C == 6).all()), f.tiles_at({"a": 8, "b": 6, "c": 4}, torch.float64, torch.device("cpu"))
(torch.float64, True, {'g_c': 4, 'g_a': 8, 's_b': 1})
"""
from __future__ import annotations

import functools
import importlib.util
import os
from types import MappingProxyType

import numpy as np
import torch

from napkin_cat.codegen.c import c as c_kernel
from napkin_cat.codegen.triton.kernel import triton as triton_kernel
from napkin_cat.cost.functor import cost
from napkin_cat.cost.optimum import optimal
from napkin_cat.errors import BlockMaskError, HardwareError, NapkinError, TensorError
from napkin_cat.hardware.cpu import CPU, THIS_CPU, cpus, load_cpu, this_cpu_model
from napkin_cat.hardware.cputime import derive_for_cpu_time
from napkin_cat.hardware.timed import derive_for_time
from napkin_cat.hardware.model import GPU, load as load_gpu, models
from napkin_cat.plan.program import plan as make_plan, sizes_needed
from napkin_cat.plan.recent import Recent
from napkin_cat.rewriting.registry import rulebook
from napkin_cat.search.derivation import Derivation, derive
from napkin_cat.torch import stored
from napkin_cat.torch.binding import Signature
from napkin_cat.torch.ranges import IndexRanges

#: the backends a function runs on: name → the device types it takes
BACKENDS = {"c": ("cpu",), "triton": ("cpu", "cuda")}
#: the C type of a call's real values, by its dtype (:mod:`napkin_cat.codegen.c.real`)
C_REAL = {torch.float32: "float", torch.float64: "double"}
#: the call keys a function keeps (sizes, dtype, device and kernel of each), the least recently used evicted
CALLS = 256


def hardware_model(hardware):
    """A CPU or GPU model from ``hardware`` (a model, or a shipped model's name, or a TOML file's path); None: this
    machine's CPU model (``"this-cpu"``: its caches from sysfs, with rates where a shipped model has the same
    caches), None where sysfs does not say."""
    if hardware is None:
        return this_cpu_model()
    if isinstance(hardware, (CPU, GPU)):
        return hardware
    if isinstance(hardware, str) and hardware.lower() in (*cpus(), THIS_CPU):
        return load_cpu(hardware)
    if isinstance(hardware, str) and (hardware.lower() in models() or hardware.endswith(".toml")):
        return load_gpu(hardware)
    raise HardwareError(f"hardware={hardware!r}: give a CPU model ({', '.join(cpus())}, nc.hardware.load_cpu) or "
                        f"a GPU model ({', '.join(models())}, nc.hardware.load), or None for this machine's caches")


def tiles_of(r: Derivation) -> dict:
    """The tile and stream sizes a derivation chose (names → ints), its axes left out."""
    chosen = r.optimum.exact_sizes if r.optimum.exact_sizes is not None else r.optimum.sizes
    axes = {str(k) for k in (r.sizes or {})}
    return {str(k): int(v) for k, v in chosen.items() if str(k) not in axes}


class Derived:
    """One function of a compiled op, run on tensors at the sizes of each call (see the module docstring).

    ``derivation``: a :class:`~napkin_cat.search.Derivation` at one memory, whose algorithm is run (at other
    sizes, retiled at its memory); else the function is derived at ``memory`` or for ``hardware``, at
    ``sizes`` (the reference) or at each call's.  ``backend``: ``"c"`` or ``"triton"`` (Triton's interpreter
    on CPU tensors: float32 only, slow, the check of the CUDA path); None: C on the CPU, Triton on CUDA.
    ``depth``: the ``prepare`` rewrites each search chains (``nc.derive``'s ``depth``; fewer search faster).
    """

    def __init__(self, function, *, derivation: Derivation | None = None, memory: int | None = None,
                 hardware=None, sizes: dict | None = None, backend: str | None = None, depth: int = 2,
                 what: str = "the op"):
        self.function, self.given, self.what, self.depth = function, derivation, what, depth
        self.signature = Signature(function, what)
        #: the index inputs its gathers read a table at, checked at each call (:mod:`.ranges`)
        self.ranges = IndexRanges(function)
        #: the sizes a derivation and a plan take: the function's symbolic axes (a fixed one is in the diagram)
        self.symbolic = frozenset(str(s) for s in sizes_needed(function)[0])
        if memory is not None and hardware is not None:
            raise NapkinError(f"{what}: give memory= (values at level 1) or hardware= (a CPU or GPU model), not both")
        self.memory, self.hardware = memory, None if memory is not None else hardware_model(hardware)
        self.reference = None if sizes is None else {str(k): int(v) for k, v in sizes.items()}
        if backend is not None and backend not in BACKENDS:
            raise NapkinError(f"backend={backend!r}: a torch op runs on {', '.join(map(repr, BACKENDS))} (None: C on "
                              "the CPU, Triton on CUDA)")
        self.backend = backend
        self._derivations: dict = {}
        #: derivations this function searched, and read back from the store (:mod:`.stored`), in this process
        self.searched, self.recalled = 0, 0
        self._tiles: dict = {}
        self._kernels: dict = {}
        self._calls = Recent(CALLS)
        #: the calls whose key (shapes, dtypes, devices, threads) was not seen before: read and looked up in full
        self.looked_up = 0

    def __repr__(self):
        return f"Derived({self.signature}, derivations={len(self._derivations)}, kernels={len(self._kernels)})"

    @property
    def derivations(self) -> MappingProxyType:
        """The derivations made so far: (reference sizes, memory) → :class:`~napkin_cat.search.Derivation`."""
        return MappingProxyType(self._derivations)

    @property
    def kernels(self) -> MappingProxyType:
        """The kernels made so far: (derivation, sizes and tiles, dtype, backend, device) → kernel object."""
        return MappingProxyType(self._kernels)

    # ------------------------------------------------------------------ the algorithm
    def free(self, sizes: dict) -> dict:
        """The call's sizes of the function's symbolic axes (names → ints): what a derivation and a plan take."""
        return {k: int(v) for k, v in sizes.items() if k in self.symbolic}

    def memory_for(self, real: torch.dtype, device: torch.device):
        """The level-1 memory (values) the function is derived at for a call, or the CPU or GPU model it is timed
        on (a CPU model with rates, without reference sizes)."""
        if self.memory is not None:
            return self.memory
        model = self.hardware
        if isinstance(model, CPU) and device.type == "cpu" and model.timed and self.reference is None:
            return model
        if isinstance(model, CPU) and device.type == "cpu":
            return model.l2 // torch.empty((), dtype=real).element_size()
        if isinstance(model, GPU) and device.type == "cuda":
            return model
        have = "no CPU model (sysfs does not give this machine's caches)" if model is None else f"{model.name}"
        raise HardwareError(f"{self.what} on {device.type} needs memory= (values at level 1) or a "
                            f"{'CPU' if device.type == 'cpu' else 'GPU'} model for hardware=; it has {have}")

    def derivation(self, sizes: dict, real: torch.dtype, device: torch.device) -> Derivation:
        """The derived algorithm a call at ``sizes`` runs (made once per reference sizes and memory)."""
        if self.given is not None:
            return self.given
        memory = self.memory_for(real, device)
        if isinstance(memory, GPU) and self.reference is not None:
            raise NapkinError(f"{self.what}: a GPU model's derivation times each call's sizes; sizes= (a reference "
                              "to derive at once) goes with memory=")
        at = self.reference or self.free(sizes)
        threads = torch.get_num_threads()
        key = (tuple(sorted(at.items())), memory.name if isinstance(memory, GPU) else
               (memory.name, threads, real) if isinstance(memory, CPU) else memory)
        found = self._derivations.get(key)
        if found is None:
            value_bytes = torch.empty((), dtype=real).element_size()
            disk = stored.store()
            book = None if disk is None else rulebook()     # (read once: each reading lists the entry points)
            where = None if disk is None else disk.key(self.function, at, memory, depth=self.depth,
                                                        threads=threads, value_bytes=value_bytes, book=book)
            found = None if disk is None else disk.load(where, self.function, book=book)
            if found is not None:
                self.recalled += 1
            else:
                found = self.search(at, memory, threads, value_bytes)
                if disk is not None:
                    disk.save(where, found)
            self._derivations[key] = found
        return found

    def search(self, at: dict, memory, threads: int, value_bytes: int) -> Derivation:
        """The search itself (``nc.derive``, by transfers at ``memory`` or by a CPU or GPU model's predicted time),
        at sizes ``at``; counted in :attr:`searched`."""
        self.searched += 1
        if isinstance(memory, GPU):
            return derive_for_time(self.function, memory, at, depth=self.depth)
        if isinstance(memory, CPU):
            return derive_for_cpu_time(self.function, memory, at, threads=threads, value_bytes=value_bytes,
                                       depth=self.depth)
        return derive(self.function, memory=memory, sizes=at, depth=self.depth)

    def tiles_at(self, sizes: dict, real: torch.dtype, device: torch.device) -> dict:
        """The tiles of the call's algorithm at ``sizes``: the derivation's own at its sizes, else the exact
        integer optimum of its cost at ``sizes`` and its memory (made once per derivation and sizes)."""
        r = self.derivation(sizes, real, device)
        at = self.free(sizes)
        key = (id(r), tuple(sorted(at.items())))
        found = self._tiles.get(key)
        if found is None:
            symbols, _ = sizes_needed(r.diagram)
            if not {str(s) for s in symbols} - set(at):
                found = {}
            elif {str(k): int(v) for k, v in (r.sizes or {}).items()} == at:
                found = tiles_of(r)
            elif isinstance(r.memory, int):
                o = optimal(cost(r.diagram), memory=r.memory, level=r.level, sizes=at)
                found = {str(k): int(v) for k, v in o.sizes.items() if str(k) not in at}
            else:
                raise NapkinError(f"{self.what}: its derivation was made at sizes {r.sizes} without a memory to "
                                  f"retile at; this call is at {at}: derive at one memory (nc.derive(f, M, sizes=))")
            self._tiles[key] = found
        return found

    # ------------------------------------------------------------------ the kernel
    def backend_for(self, device: torch.device) -> str:
        name = self.backend or ("c" if device.type == "cpu" else "triton")
        if device.type not in BACKENDS[name]:
            raise TensorError(f"{self.what}: backend {name!r} runs on {', '.join(BACKENDS[name])}, not on {device}")
        return name

    def kernel(self, sizes: dict, real: torch.dtype, device: torch.device):
        """The kernel of the call (made and compiled once per algorithm, sizes, tiles, real dtype and backend)."""
        backend = self.backend_for(device)
        if backend == "triton" and real != torch.float32:
            raise TensorError(f"{self.what}: the Triton kernel computes real values in float32; this call is "
                              f"{real} (float64 runs on the CPU, in C)")
        tiles = self.tiles_at(sizes, real, device)
        r = self.derivation(sizes, real, device)
        at = {**self.free(sizes), **tiles}
        key = (id(r), tuple(sorted(at.items())), real, backend, device.type)
        found = self._kernels.get(key)
        if found is None:
            p = make_plan(r.diagram, at)
            if backend == "c":
                found = c_kernel(p, real=C_REAL[real])
            else:
                found = triton_kernel(p)
            self._kernels[key] = found
        return found

    def call(self, tensors) -> tuple:
        """``(sizes, real dtype, device, kernel)`` of a call on ``tensors`` (its inputs): read off them and checked
        (:class:`~napkin_cat.torch.binding.Signature`) and looked up (:meth:`kernel`) once per call key (the
        module docstring); a call with a key seen before reads the four from :data:`CALLS` kept ones."""
        key = call_key(tensors)
        found = None if key is None else self._calls.get(key)
        if found is None:
            self.looked_up += 1
            sizes, real, device = self.signature.sizes(tensors), self.signature.real(tensors), \
                self.signature.device(tensors)
            found = (sizes, real, device, self.kernel(sizes, real, device))
            if key is not None:
                self._calls.put(key, found)
        return found

    def tables(self, tensors) -> list[torch.Tensor]:
        """The block tables the call's kernel reads on ``tensors`` (its inputs): one int8 tensor per stream loop of
        its plan that skips by a mask from data (:data:`~napkin_cat.algorithms.blockmask.NONE` skipped,
        ``PARTIAL``, ``FULL`` run without the mask), derived from the data by the plan's own statements at the
        kernel's tiles (:meth:`~napkin_cat.codegen.kernel.GeneratedKernel.block_arguments` with ``"data"``);
        none where the kernel reads none.  What a compiled op takes as its ``blocks`` argument: the tiles are chosen
        here, at the call's sizes."""
        _, _, device, k = self.call(tensors)
        if not k.printer.block_tables:
            return []
        tensors = self.signature.exact(tensors)
        found = k.block_arguments([t.detach().contiguous().cpu().numpy() for t in tensors], "data")
        return [torch.from_numpy(np.array(t, dtype=np.int8)).to(device) for t in found]

    def __call__(self, tensors, blocks=None) -> list[torch.Tensor]:
        """The function's outputs on ``tensors`` (its inputs, checked: :mod:`~napkin_cat.torch.binding`).
        ``blocks``: the kernel's block tables (:meth:`tables`; checked against the data, which costs a digest of
        the ids where they are the tables derived for these data); None or empty: derived here where the kernel
        reads tables."""
        sizes, real, device, k = self.call(tensors)
        tensors = self.signature.exact(tensors)
        self.ranges.check(tensors, sizes, self.what)
        blocks = list(blocks or ())
        if blocks and len(blocks) != len(k.printer.block_tables):
            raise BlockMaskError(f"{self.what}: its {k.backend} kernel at these sizes reads "
                                 f"{len(k.printer.block_tables)} block table(s), got {len(blocks)}: pass what "
                                 "tables() gives for these inputs")
        xs = [t.detach().contiguous() for t in tensors]
        mask = {"blocks": [b.detach().cpu().numpy() for b in blocks]} if blocks else \
            {"block_mask": "data"} if k.printer.block_tables else {}
        if k.backend == "c":
            outs = self.signature.empty(sizes, real, device)
            k(*[x.numpy() for x in xs], threads=torch.get_num_threads(), out=[y.numpy() for y in outs], **mask)
            return outs
        if device.type == "cuda" or interpreted():      # nc_run in this process: on the GPU, or Triton's interpreter
            tables = k.block_arguments([x.cpu().numpy() for x in xs], **mask) if mask else []
            ys = launcher(k.path())(*xs, *[torch.from_numpy(t).to(device) for t in tables])
        else:                                           # the interpreter in a worker process (codegen.triton.kernel)
            ys = k(*xs, **mask)
        ys = list(ys) if isinstance(ys, (tuple, list)) else [ys]
        return [y.to(t) for y, t in zip(ys, self.signature.dtypes(real))]


def call_key(tensors) -> tuple | None:
    """What a call's sizes, real dtype, device and kernel depend on beside its op's options: each tensor's shape,
    dtype and device, and torch's thread count (a CPU model derives for it); None where an input is not a tensor
    of int sizes (the call is read in full, and refused there by name).

    >>> call_key([torch.ones(2, 3), torch.ones(3, dtype=torch.float64)])[0]
    (((2, 3), torch.float32, device(type='cpu')), ((3,), torch.float64, device(type='cpu')))
    """
    if not all(isinstance(t, torch.Tensor) for t in tensors):
        return None
    shapes = [tuple(t.shape) for t in tensors]
    if not all(type(n) is int for shape in shapes for n in shape):
        return None
    return tuple((s, t.dtype, t.device) for s, t in zip(shapes, tensors)), torch.get_num_threads()


def interpreted() -> bool:
    """Whether this process runs Triton kernels in Triton's interpreter (``TRITON_INTERPRET=1``, which must be set
    before triton is imported): then CPU tensors run ``nc_run`` here, as CUDA tensors do on a GPU."""
    return os.environ.get("TRITON_INTERPRET") == "1"


@functools.lru_cache(maxsize=256)
def launcher(path):
    """The Triton kernel's ``nc_run`` (CUDA tensors in, outputs out) from its source at ``path`` (a Triton kernel's
    ``k.path()``: named by its source's hash, so the path is all it depends on), imported once."""
    spec = importlib.util.spec_from_file_location(f"napkin_torch_{path.stem.replace('-', '_')}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.nc_run
