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

>>> import napkin_cat as nc
>>> from napkin_cat.testing import assert_equivalent, random_program
>>> p = random_program(1)
>>> _ = assert_equivalent(p.diagram, nc.kernel(p.diagram), sizes=p.sizes)
"""
from napkin_cat.testing.assertions import assert_equivalent
from napkin_cat.testing.checks import CHECKS, Failure, run_checks
from napkin_cat.testing.programs import LIBRARY_FUNCTIONS, Program, eval_source, programs, random_program

__all__ = ["assert_equivalent", "random_program", "programs", "Program", "eval_source", "run_checks", "Failure",
           "CHECKS", "LIBRARY_FUNCTIONS"]
