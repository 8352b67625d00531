"""Run by ``tests/test_lazy.py`` after pytest collected ``napkin_cat/distributed/launch.py``
for its doctests in the same process (not collected by the suite itself: its name is not ``test_*``).  Each public
name of ``nc.distributed`` must be the one the module ``sys.modules`` holds defines: one module object per submodule,
and ``nc.distributed.run`` the function, not the submodule of that name."""
import sys
import types

import napkin_cat as nc


def test_each_public_name_lives_in_the_module_sys_modules_holds():
    for name in nc.distributed.__all__:
        found = getattr(nc.distributed, name)
        assert not isinstance(found, types.ModuleType), name
        home = sys.modules[found.__module__]
        assert getattr(home, name) is found, (name, found.__module__)
        assert getattr(nc.distributed, found.__module__.rsplit(".", 1)[1]) is home


def test_run_is_callable_and_checks_the_world_class_the_package_shows():
    assert callable(nc.distributed.run)
    assert nc.distributed.run.__globals__["World"] is nc.distributed.World
