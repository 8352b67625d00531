"""``assert_equivalent``: ``nc.equivalent`` as a test assertion that says what it tried and where it failed.

>>> import napkin_cat as nc
>>> v = assert_equivalent(nc.library.attention(), nc.stream(nc.library.attention(), "x", "s_x"))
>>> v.tried[0]["tiles"]
'ragged'
>>> assert_equivalent(nc.reduce("sum", "a -> "), nc.reduce("mean", "a -> "), seed=34)
Traceback (most recent call last):
...
AssertionError: the diagrams differ: output 0 differs by up to ...
  sizes: {'a': ...}
  tiles: sizes ≥ 2 (trial 0)
  seed: 34
  output: 0
  largest difference: ...
"""
from __future__ import annotations

from napkin_cat.errors import NapkinError
from napkin_cat.semantics.equivalent import equivalent
from napkin_cat.syntax.adapter import Diagram


def assert_equivalent(d1: Diagram, d2: Diagram, *, seed: int = 0, trials: int = 3, sizes: dict | None = None,
                      rtol: float | None = None, atol: float | None = None, **options):
    """Assert that ``d1`` and ``d2`` compute the same function (:func:`napkin_cat.equivalent` with the same
    keywords: the tolerance follows the precision the diagrams evaluate in unless ``rtol``/``atol`` are given); on
    failure the message names the sizes, the kind of tiles, the seed, the output and the largest difference, and
    lists every trial made.  Returns the :class:`~napkin_cat.Equivalence`."""
    for name, d in (("first", d1), ("second", d2)):
        if not isinstance(d, Diagram):
            raise NapkinError(f"assert_equivalent: the {name} argument is a {type(d).__name__}, not a diagram")
    v = equivalent(d1, d2, seed=seed, trials=trials, sizes=sizes, rtol=rtol, atol=atol, **options)
    if v:
        return v
    last = v.tried[-1] if v.tried else {}
    lines = [f"the diagrams differ: {v.message}",
             f"  sizes: {v.sizes or last.get('sizes', {})}",
             f"  tiles: {last.get('tiles', 'none')} (trial {last.get('trial', 0)})",
             f"  seed: {seed}",
             f"  output: {v.output}",
             f"  largest difference: {v.max_error:.6g}"]
    if len(v.tried) > 1:
        lines.append("  trials: " + "; ".join(f"{t['trial']} ({t['tiles']}) {t['sizes']}" for t in v.tried))
    raise AssertionError("\n".join(lines))
