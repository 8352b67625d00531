"""Layer 8, testing: what a user's tests (and ours) need to check diagrams.

* :func:`assert_equivalent` — ``nc.equivalent`` as a pytest-friendly assertion whose failure names the
  sizes, the tiles, the seed, the output and the largest difference;
* :func:`random_program` and :func:`programs` (a hypothesis strategy) — random straight-line programs with
  an independent numpy reference (:mod:`.programs`);
* :func:`run_checks` — every check of the library on a program (evaluate, JSON, cost, equivalence of a
  mutant, rule applications, plans and their counts, the C kernel, derive), each failure with a
  standalone reproducer (:mod:`.checks`; the walk of rule applications, :mod:`.rule_walk`);
* :func:`napkin_cat.testing.offers.offers` — every rule of a rule book on its own instances, woven at every
  position: each offered match rewrites, keeps the function and replays; the coverage per rule (:mod:`.offers`).

May import: every layer (it runs them all, as the CLI does); hypothesis is imported only by :func:`programs`.

The package imports its submodules on first use (PEP 562), as ``nc.torch`` and ``nc.distributed`` do: each is
executed once per process, by whoever imports it first.  Imported here eagerly, a submodule that pytest collects
by its path (``--import-mode=importlib``: ``pytest napkin_cat/testing/checks.py tests/testing/test_programs.py``)
was executed twice, once by this package (which pytest imports first) and again as the module it collects, which
replaced the first in ``sys.modules``: ``run_checks`` (the first copy's) raised the first copy's ``Failure`` and
read the first copy's ``RUNNERS``, while the tests caught and patched the second's.

>>> import napkin_cat as nc
>>> from napkin_cat.testing import assert_equivalent, random_program
>>> p = random_program(1)
>>> _ = assert_equivalent(p.diagram, nc.kernel(p.diagram), sizes=p.sizes)
"""
import sys
import types

from napkin_cat.lazy import on_first_use

#: each public name → the submodule that defines it, imported on first use (:mod:`napkin_cat.lazy`)
PUBLIC = {"assert_equivalent": "assertions", "run_checks": "checks", "Failure": "checks", "CHECKS": "checks",
          "random_program": "programs", "programs": "programs", "Program": "programs", "eval_source": "programs",
          "LIBRARY_FUNCTIONS": "programs"}

__all__ = ["assert_equivalent", "random_program", "programs", "Program", "eval_source", "run_checks", "Failure",
           "CHECKS", "LIBRARY_FUNCTIONS"]


#: the public name or submodule asked for, imported on first use (:func:`napkin_cat.lazy.on_first_use`)
__getattr__, __dir__ = on_first_use(globals(), PUBLIC)


class _Package(types.ModuleType):
    """This package, whose public name ``programs`` (the hypothesis strategy) is also a submodule's name: the import
    system binds each submodule it loads on its package (``setattr(package, "programs", module)``), which would
    replace the strategy by the module whenever ``napkin_cat.testing.programs`` is imported before the name is
    asked for.  The package keeps its public names: a submodule named as one stays in ``sys.modules`` only (as it
    did when this package imported its submodules eagerly and rebound the name to the function)."""

    def __setattr__(self, name, value):
        if name in PUBLIC and isinstance(value, types.ModuleType) and value.__name__ == f"{__name__}.{name}":
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
