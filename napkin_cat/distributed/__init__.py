"""Layer 7, distributed: programs with device regions run on ``torch.distributed`` (issue 37, item 4).

``nc.distributed.run(d, *inputs, world_size=P)`` (:mod:`~napkin_cat.distributed.run`) starts one process per device
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

if importlib.util.find_spec("torch") is None:
    raise ToolNotFoundError("torch is not installed; nc.distributed needs it (pip install 'napkin-cat[kernels]')")

from napkin_cat.distributed.world import Ranks, World  # noqa: E402  (after the check that torch is there)
from napkin_cat.distributed.run import Run, run, run_on  # noqa: E402

__all__ = ["run", "run_on", "Run", "World", "Ranks"]
