"""Hostile documents: a random program's JSON with one node replaced or removed, read and then used.

The law: a document is either refused by :func:`nc.loads <napkin_cat.io.serial.loads>` with a typed
:class:`~napkin_cat.errors.NapkinError`, or the diagram it gives is evaluated (at the program's sizes, on its
inputs) and costed to an answer or to a typed refusal: never a bare Python, numpy or sympy error, and never in
more than :data:`WITHIN_S` seconds.  Each mutation sets a node of the JSON tree (drawn with the program's seed)
to one of :data:`HOSTILE` (wrong types, out-of-range numbers, a name of another axis, expressions that are no
size) or deletes it.  Outside testing of issue 31 found by this route a box ``"type"`` that is an object (a bare
``TypeError: unhashable``), a SoftMax ``beta`` that is a list (numpy's ``UFuncTypeError`` at evaluation) and a
Grid whose tile is named as another axis (one symbol for two sizes).

>>> from napkin_cat.testing.programs import random_program
>>> check_hostile_json(random_program(3), seed=0, mutations=4)[0]
'mutated'
"""
from __future__ import annotations

import copy
import json
import time

import numpy as np

import napkin_cat as nc
from napkin_cat.errors import CheckFailed, NapkinError
from napkin_cat.testing.programs import Program

#: seconds one mutated document may take to be refused or used (the guard against stalls, generous for a loaded
#: two-core runner; a small document takes milliseconds)
WITHIN_S = 5.0
#: the values a node is set to
HOSTILE = (None, -1, 0, 1, 2 ** 64 + 1, 1.5, "", "zz", "q" * 300, [], {}, [[]], True, {"expr": "zz"},
           {"expr": "__import__('os')"}, {"expr": "-1"}, {"expr": "0"}, {"expr": "a+"}, ["a"], "fp64", 17,
           {"expr": "2**100"}, {"float": "nan"}, {"tuple": [1, 2]}, {"dict": {"a": 1}})


def _paths(node, prefix=()):
    yield prefix
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _paths(v, prefix + (i,))


def _mutated(doc, path, value, delete: bool):
    doc = copy.deepcopy(doc)
    node = doc
    for key in path[:-1]:
        node = node[key]
    if delete:
        del node[path[-1]]
    else:
        node[path[-1]] = copy.deepcopy(value)
    return doc


def _use(text: str, p: Program, xs: list) -> str:
    """``"refused"`` or ``"used"``: the document read, evaluated at the program's sizes and costed."""
    try:
        d = nc.loads(text)
        with np.errstate(all="ignore"):
            nc.evaluate(d, *xs, sizes={k: v for k, v in p.sizes.items()
                                       if k in {str(s) for s in nc.syntax.sizes.symbols_of(d, params=True)}})
        nc.cost(d)
        return "used"
    except NapkinError:
        return "refused"


def check_hostile_json(p: Program, seed: int = 0, mutations: int = 12):
    """Mutate ``p``'s JSON ``mutations`` times (see the module docstring); returns the outcomes seen."""
    base = json.loads(nc.dumps(p.diagram))
    paths = [q for q in _paths(base) if q]
    rng = np.random.default_rng([seed, 31])
    xs = p.arrays(np.random.default_rng(seed))
    seen = {"mutated"}
    for _ in range(mutations):
        path = paths[int(rng.integers(len(paths)))]
        delete = bool(rng.random() < 0.2)
        value = HOSTILE[int(rng.integers(len(HOSTILE)))]
        text = json.dumps(_mutated(base, path, value, delete))
        where = f"{'deleting' if delete else 'setting'} {'/'.join(map(str, path))}" + \
                ("" if delete else f" to {value!r}")
        lines = f"doc = json.loads(nc.dumps(diagram))  # then {where}\nnc.loads(json.dumps(doc))"
        start = time.perf_counter()
        try:
            seen.add(_use(text, p, xs))
        except Exception as e:
            raise CheckFailed(f"the document {where} escaped as {type(e).__name__}: {e}", lines) from e
        took = time.perf_counter() - start
        if took > WITHIN_S:
            raise CheckFailed(f"the document {where} took {took:.1f} s (more than {WITHIN_S} s)", lines)
    return tuple(sorted(seen))
