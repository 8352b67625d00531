"""The packages that import their submodules on first use (:mod:`napkin_cat.lazy`): ``nc.torch``, ``nc.distributed``
and ``nc.testing``.  Each public name is the object its submodule defines (read there, a second route), bound on the
package after its first use; a submodule is ``sys.modules``'s; a miss is an ``AttributeError`` naming the public
names; ``dir`` lists ``__all__``.  That ``import napkin_cat`` leaves torch alone is tests/torch/test_compile.py's."""
from __future__ import annotations

import importlib
import importlib.util
import sys

import pytest

import napkin_cat.lazy as lazy

PACKAGES = ["napkin_cat.testing"] + (["napkin_cat.torch", "napkin_cat.distributed"]
                                     if importlib.util.find_spec("torch") is not None else [])


@pytest.mark.parametrize("name", PACKAGES)
def test_each_public_name_is_its_submodules_and_stays_bound(name):
    package = importlib.import_module(name)
    assert package.__getattr__.__module__ == lazy.__name__          # one helper, not a copy per package
    assert set(package.PUBLIC) == set(package.__all__)
    for public, sub in package.PUBLIC.items():
        got = getattr(package, public)
        assert got is getattr(importlib.import_module(f"{name}.{sub}"), public), public
        assert vars(package)[public] is got, public                # bound: the next use does not ask __getattr__
    assert set(package.__all__) <= set(dir(package))


@pytest.mark.parametrize("name", PACKAGES)
def test_a_submodule_is_imported_on_first_use_and_a_miss_names_the_public_names(name):
    package = importlib.import_module(name)
    sub = sorted(set(package.PUBLIC.values()))[0]
    assert package.__getattr__(sub) is sys.modules[f"{name}.{sub}"]
    with pytest.raises(AttributeError, match=rf"module '{name}' has no attribute 'no_such_name' \(its public "
                                             rf"names: {', '.join(sorted(package.PUBLIC))};"):
        package.no_such_name
    assert not hasattr(package, "__no_such_dunder__")


def test_the_testing_package_keeps_its_strategy_over_the_submodule_of_its_name():
    """``programs`` is both a public name (the hypothesis strategy) and a submodule: importing the submodule does not
    replace the name on the package."""
    import napkin_cat.testing as testing
    module = importlib.import_module("napkin_cat.testing.programs")
    assert sys.modules["napkin_cat.testing.programs"] is module and callable(module.programs)
    assert testing.programs is module.programs
