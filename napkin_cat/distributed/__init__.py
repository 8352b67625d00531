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
import importlib.util

from napkin_cat.errors import ToolNotFoundError
from napkin_cat.lazy import on_first_use

if importlib.util.find_spec("torch") is None:
    raise ToolNotFoundError("torch is not installed; nc.distributed needs it (pip install 'napkin-cat[kernels]')")

#: each public name → the submodule that defines it, imported on first use (:mod:`napkin_cat.lazy`, as ``nc.torch``
#: does).  The launcher's module is ``launch``, not ``run``: a submodule named as the function ``nc.distributed.run``
#: replaced the function on the package whenever it was imported (``nc.distributed.run`` was then a module).
PUBLIC = {"run": "launch", "run_on": "launch", "Run": "launch", "World": "world", "Ranks": "world"}

__all__ = ["run", "run_on", "Run", "World", "Ranks"]


#: the public name or submodule asked for, imported on first use (:func:`napkin_cat.lazy.on_first_use`)
__getattr__, __dir__ = on_first_use(globals(), PUBLIC)
