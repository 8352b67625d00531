"""Random variants of a rule's instance: the same left-hand side under other names, sizes and weaves.

A rule is stated for a pattern, not for the few diagrams its obligation's generator draws, so its proof is
also discharged on variants of them (:meth:`~napkin_cat.rewriting.obligation.Obligation.check_instance` with
``varied=True``).  :func:`vary` draws one from a seeded generator, in three steps that keep the function a
legitimate left-hand side:

* **names**: every axis gets a fresh name (from names that are also sympy or Python names: ``E``, ``N``,
  ``pi``, ``lambda``, ``k'``), its size symbol with it (:func:`~napkin_cat.syntax.relabel.rename_axis`);
* **sizes**: each free size symbol becomes an integer from 1 to 6 with probability one half
  (:func:`~napkin_cat.syntax.relabel.substitute`);
* **weaves**: the diagram is woven over one or two new axes (:func:`~napkin_cat.syntax.weave.weave`), each in
  one of three ways, equally likely: every input at the outputs' position (the default weave), every input at
  a position of its own, or a random subset of the inputs (none: every input is copied along it) at positions
  of their own; the outputs' position is random (legal in every array), the size concrete or symbolic.
  Weaving is functorial, so a match of the rule inside the woven diagram is a match of the woven pattern.

>>> import numpy as np, napkin_cat as nc
>>> v = vary(nc.library.attention(), np.random.default_rng(3))
>>> len(v.steps) >= 2 and v.steps[0].startswith("renamed"), len(v.diagram.dom)
(True, 3)
"""
from __future__ import annotations

from dataclasses import dataclass

from napkin_cat.semantics.equivalent import free_sizes
from napkin_cat.syntax.relabel import axis_names, rename_axis, substitute
from napkin_cat.syntax.sizes import names_of
from napkin_cat.syntax.weave import all_arrays, weave

#: fresh axis names: plain ones and ones that are sympy or Python names (functions, constants, keywords, primes)
NAMES = ("a", "b", "c", "i", "j", "k", "u", "v", "E", "N", "pi", "lambda", "k'", "Q", "sum", "beta", "I", "S",
         "gamma", "n_")
#: names of the woven axes (drawn among those the diagram does not use)
WOVEN = ("h", "t", "layer", "w'", "Z")
#: the largest integer a free size becomes
LARGEST = 6


@dataclass(frozen=True)
class Variant:
    """A varied instance: ``diagram`` and the ``steps`` that made it from the generator's (in words)."""

    diagram: object
    steps: tuple


def _taken(diagram) -> set:
    return set(axis_names(diagram)) | set(names_of(diagram))


def renamed(diagram, rng):
    """Every axis renamed to a fresh name (through temporary names, so that no two meet on the way)."""
    names = sorted(axis_names(diagram))
    fresh = [str(n) for n in rng.permutation(NAMES) if str(n) not in _taken(diagram)][:len(names)]
    if len(fresh) < len(names):
        return diagram, {}
    mapping = dict(zip(names, fresh))
    for k, n in enumerate(names):
        diagram = rename_axis(diagram, n, f"renaming_{k}")
    for k, n in enumerate(names):
        diagram = rename_axis(diagram, f"renaming_{k}", mapping[n])
    return diagram, mapping


def sized(diagram, rng):
    """Each free size symbol of the inputs an integer in ``1..LARGEST`` with probability one half."""
    chosen = {str(s): int(rng.integers(1, LARGEST + 1)) for s in free_sizes(diagram) if rng.random() < 0.5}
    return (substitute(diagram, chosen) if chosen else diagram), chosen


def woven(diagram, rng):
    """The diagram woven over a new axis: a random subset of its inputs, random positions, any size."""
    name = next(str(n) for n in rng.permutation(WOVEN) if str(n) not in _taken(diagram))
    lowest = min(len(a.axes) for a in all_arrays(diagram))    # the output position is legal in every array
    position = int(rng.integers(-lowest - 1, lowest + 1))
    way = int(rng.integers(3))          # 0: the default weave; 1: every input, own positions; 2: some inputs
    inputs = {}
    for i, arr in enumerate(diagram.dom.inside):
        if way < 2 or rng.random() < 0.6:
            n = len(arr.axes)
            inputs[i] = position if way == 0 and -n - 1 <= position <= n else int(rng.integers(-n - 1, n + 1))
    size = int(rng.integers(1, 4)) if not inputs or rng.random() < 0.5 else None
    out = weave(diagram, name, inputs=inputs, position=position, **({name: size} if size else {}))
    return out, f"woven over {name!r}{f' (size {size})' if size else ''}: inputs {inputs}, outputs at {position}"


def vary(diagram, rng) -> Variant:
    """A random variant of ``diagram`` (see the module docstring), drawn from ``rng``."""
    steps = []
    diagram, mapping = renamed(diagram, rng)
    if mapping:
        steps.append(f"renamed {mapping}")
    diagram, chosen = sized(diagram, rng)
    if chosen:
        steps.append(f"sizes {chosen}")
    for _ in range(1 + int(rng.random() < 0.25)):
        diagram, how = woven(diagram, rng)
        steps.append(how)
    return Variant(diagram, tuple(steps))
