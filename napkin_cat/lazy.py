"""A package's submodules imported on first use (PEP 562): the ``__getattr__`` and ``__dir__`` of ``nc.torch``,
``nc.distributed`` and ``nc.testing``.

The law: for a package whose ``PUBLIC`` maps each public name to the submodule that defines it,

* ``package.name`` for ``name`` in ``PUBLIC`` is ``package.<PUBLIC[name]>.name``, the submodule imported on that
  first use and the object then bound on the package (a second use finds it there; ``__getattr__`` is not asked);
* ``package.sub`` for a submodule ``sub`` not yet imported imports it and is ``sys.modules["package.sub"]``;
* any other name is an ``AttributeError`` (what ``hasattr`` and ``getattr(package, name, default)`` expect) that
  names the package and its public names;
* ``dir(package)`` is what the package holds now and every public name (``__all__``).

Why lazily: the package's import runs no submodule, so each submodule is executed once, by whoever imports it
first.  Imported eagerly by the package, a submodule that pytest collects by its path (``--import-mode=importlib``,
``--doctest-modules napkin_cat/torch/flex.py``) was executed twice (once by the package, whose import pytest runs
first, then again as the module pytest collects, which replaced the first in ``sys.modules``), and the two copies'
module-level state (registries, caches, exception classes) parted.  It also keeps ``import napkin_cat`` from
importing torch: ``nc.torch`` is a package whose submodules import torch only when one is asked for.

Layer 0 (beside :mod:`napkin_cat.errors`): it imports nothing of the package, so that every layer may use it.

>>> import json.decoder
>>> namespace = {"__name__": "json", "__all__": ["JSONDecoder"]}     # a package's globals(), here json's name
>>> __getattr__, __dir__ = on_first_use(namespace, {"JSONDecoder": "decoder"})
>>> __getattr__("JSONDecoder") is json.decoder.JSONDecoder and namespace["JSONDecoder"] is json.decoder.JSONDecoder
True
>>> __getattr__("scanner").__name__                                   # a submodule, imported
'json.scanner'
>>> __getattr__("nothing")
Traceback (most recent call last):
    ...
AttributeError: module 'json' has no attribute 'nothing' (its public names: JSONDecoder; or one of its submodules)
>>> "JSONDecoder" in __dir__() and "__name__" in __dir__()
True
"""
from __future__ import annotations

import importlib
import importlib.util
from typing import Callable


def on_first_use(namespace: dict, public: dict) -> tuple[Callable[[str], object], Callable[[], list]]:
    """``(__getattr__, __dir__)`` for the package whose ``globals()`` is ``namespace`` (its ``__name__`` and
    ``__all__`` are read from it) and whose public names ``public`` maps to their submodules (module docstring).

    A public name found is written into ``namespace`` directly (not by ``setattr`` on the package: a package whose
    class guards its attributes, as ``nc.testing``'s does, keeps its guard for what the import system sets)."""
    package = namespace["__name__"]

    def __getattr__(name: str):
        """A public name (``PUBLIC``) or a submodule, imported on first use."""
        if name in public:
            found = namespace[name] = getattr(importlib.import_module(f"{package}.{public[name]}"), name)
            return found
        if not name.startswith("__") and importlib.util.find_spec(f"{package}.{name}") is not None:
            return importlib.import_module(f"{package}.{name}")
        raise AttributeError(f"module {package!r} has no attribute {name!r} (its public names: "
                             f"{', '.join(sorted(public))}; or one of its submodules)", name=name, obj=package)

    def __dir__() -> list:
        return sorted({*namespace, *namespace.get("__all__", ())})

    return __getattr__, __dir__
