"""Every module of the package that ``import napkin_cat`` loads can be imported under another name
(``import napkin_cat.cost.iocost as io``), also in the folders whose name a function of the vocabulary takes.

Before, ``import napkin_cat.cost.X as Y`` and ``import napkin_cat.plan.X as Y`` failed for every X ("cannot import
name 'X' from 'cost' (unknown location)"): the statement reads ``napkin_cat.cost.X`` attribute by attribute, and
``napkin_cat.cost`` on the package is the function ``nc.cost`` (the folder's name taken by the cost functor;
likewise ``nc.plan``).  Each module of such a folder is now an attribute of the function as well
(``napkin_cat._folders_under_functions``); the functions stay functions.

Second route: the modules are named from the files on disk (paths, not the package's attributes), and each import
is a fresh ``exec`` of the statement, compared with the module object ``sys.modules`` holds.

Mutation caught: the call ``_folders_under_functions()`` removed from ``napkin_cat/__init__.py``: every module
of those folders fails (``napkin_cat.cost.*``, ``napkin_cat.plan.*``, ``napkin_cat.codegen.c.*``, ...)."""
from __future__ import annotations

import sys
import types
from pathlib import Path

import napkin_cat as nc

ROOT = Path(nc.__file__).resolve().parent


#: modules named as a function their package defines (``from napkin_cat.autodiff import grad`` is the function, and so
#: is ``import napkin_cat.autodiff.grad as g``; ``import napkin_cat.cost as c`` is ``nc.cost``): a name clash no
#: attribute can settle; listed so that a new one is seen.
FOLDERS_UNDER_FUNCTIONS = ("cost", "plan", "codegen/c", "codegen/cuda", "codegen/triton")
SHADOWED_BY_A_FUNCTION = {"napkin_cat.library.attention", "napkin_cat.autodiff.grad", "napkin_cat.hardware.predict",
                          "napkin_cat.plan.lowering.hoist", "napkin_cat.plan.lowering.recolour",
                          "napkin_cat.cli.gallery.build", "napkin_cat.cli.gallery.examples",
                          "napkin_cat.cli.gallery.page", "napkin_cat.testing.programs",
                          *(f"napkin_cat.{f.replace('/', '.')}" for f in FOLDERS_UNDER_FUNCTIONS)}


#: loaded here so that the set checked does not depend on which tests ran before (the command line's gallery has
#: a module named as its function ``build``)
import napkin_cat.cli.gallery  # noqa: E402,F401


def loaded_modules() -> list[str]:
    """The dotted names of the package's files that ``import napkin_cat`` and the command line loaded (the optional
    torch layers not)."""
    names = []
    for path in sorted(ROOT.rglob("*.py")):
        parts = ("napkin_cat", *path.relative_to(ROOT).with_suffix("").parts)
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        if name in sys.modules:
            names.append(name)
    return names


def test_every_loaded_module_imports_under_another_name():
    names = loaded_modules()
    assert {"napkin_cat.cost.iocost", "napkin_cat.plan.ir", "napkin_cat.plan.lowering.views"} <= set(names)
    failed = []
    for name in names:
        scope: dict = {}
        try:
            exec(f"import {name} as found", scope)
        except ImportError as e:
            failed.append(f"{name}: {e}")
            continue
        if scope["found"] is not sys.modules[name]:     # a module named as a function of its package: see below
            assert name in SHADOWED_BY_A_FUNCTION, name
    assert not failed, "\n".join(failed)


def test_the_shadowing_functions_stay_functions_and_reach_their_folders():
    for name in FOLDERS_UNDER_FUNCTIONS:
        parent, _, last = f"napkin_cat/{name}".replace("/", ".").rpartition(".")
        function = getattr(sys.modules[parent], last)
        assert isinstance(function, types.FunctionType)
        for path in (ROOT / name).iterdir():
            if path.suffix == ".py" and path.stem != "__init__" or (path / "__init__.py").exists():
                assert getattr(function, path.stem) is sys.modules[f"{parent}.{last}.{path.stem}"]
