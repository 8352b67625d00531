"""Layer 7, distributed: programs with device regions run on ``torch.distributed`` (issue 37, item 4).

``nc.distributed.run(d, *inputs, world_size=P)`` (:mod:`~napkin_cat.distributed.launch`) starts one process per device
(:mod:`~napkin_cat.distributed.world`, ``torch.multiprocessing``: forked from a server that imported the packages
once; gloo over the loopback address), runs each device's part of every device region on its rank
(:mod:`~napkin_cat.distributed.device`: the local boxes by the numpy evaluator, the collectives by torch.distributed's
calls, :mod:`~napkin_cat.distributed.exchange`), and returns the outputs with the values each rank sent and received.
``nc.distributed.World(P)`` keeps the ranks up for many programs.  The how-to is ``docs/distributed.md``.

torch is an optional dependency (the ``kernels`` extra): ``import napkin_cat`` never imports this layer, and
``nc.distributed`` loads it on first use; without torch that use is a
:class:`~napkin_cat.errors.ToolNotFoundError` saying how to install it.

May import: every layer up to codegen and hardware, and torch.
"""
import importlib
import importlib.util

from napkin_cat.errors import ToolNotFoundError

if importlib.util.find_spec("torch") is None:
    raise ToolNotFoundError("torch is not installed; nc.distributed needs it (pip install 'napkin-cat[kernels]')")

#: each public name → the submodule that defines it, imported on first use (PEP 562), as ``nc.torch`` does: the
#: package's import runs no submodule, so that each is executed once, by whoever imports it first.  Imported here
#: eagerly, a submodule that pytest collects by its path (``--import-mode=importlib``) was executed twice, and the
#: second copy replaced the first in ``sys.modules`` and on the package.  The launcher's module is ``launch``, not
#: ``run``: a submodule named as the function ``nc.distributed.run`` replaced the function on the package whenever
#: it was imported (``nc.distributed.run`` was then a module).
PUBLIC = {"run": "launch", "run_on": "launch", "Run": "launch", "World": "world", "Ranks": "world"}

__all__ = ["run", "run_on", "Run", "World", "Ranks"]


def __getattr__(name: str):
    """A public name (:data:`PUBLIC`) or a submodule, imported on first use."""
    if name in PUBLIC:
        found = globals()[name] = getattr(importlib.import_module(f"{__name__}.{PUBLIC[name]}"), name)
        return found
    if not name.startswith("__") and importlib.util.find_spec(f"{__name__}.{name}") is not None:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list:
    return sorted({*globals(), *__all__})
