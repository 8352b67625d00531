"""Run by ``tests/test_lazy.py`` after pytest collected ``napkin_cat/torch/flex.py`` for its
doctests in the same process (not collected by the suite itself: its name is not ``test_*``).  What a call of
``nc.torch.flex_attention`` stores must be seen through the package: one module object per submodule, the one
``sys.modules`` holds."""
import sys

import napkin_cat as nc


def test_each_public_name_lives_in_the_module_sys_modules_holds():
    for name in nc.torch.__all__:
        found = getattr(nc.torch, name)
        home = sys.modules[found.__module__]
        assert getattr(home, name) is found, (name, found.__module__)
        assert getattr(nc.torch, found.__module__.rsplit(".", 1)[1]) is home


def test_flex_attention_stores_its_traces_in_the_cache_the_package_shows():
    assert nc.torch.flex_attention.__globals__ is vars(nc.torch.flex)
    assert nc.torch.flex_attention.__globals__["TRACES"] is nc.torch.flex.TRACES is sys.modules[
        "napkin_cat.torch.flex"].TRACES
