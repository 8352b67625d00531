"""The one world of ranks the distributed tests share: four gloo ranks on the loopback address, started once per
session (the root conftest keeps ``tests/distributed/`` in one worker), a program on P = 2 run on its first two ranks
(:meth:`napkin_cat.distributed.world.World.first`).  Starting a world (four processes forked from the forkserver, a
gloo group joined) is what a run costs most; each file started its own before."""
from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def four():
    torch = pytest.importorskip("torch", reason="torch is the `kernels` extra (pip install 'napkin-cat[kernels]')")
    if not torch.distributed.is_available() or not torch.distributed.is_gloo_available():
        pytest.skip("torch.distributed with gloo is needed")
    import napkin_cat as nc
    with nc.distributed.World(4) as w:
        yield w


@pytest.fixture(params=[2, 4])
def world(request, four):
    """The shared world at P = 2 (its first two ranks) and P = 4."""
    return four if request.param == 4 else four.first(2)
