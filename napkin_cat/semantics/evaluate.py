"""The numpy functor: what a diagram computes.

A flat layer interpreter (discopy's nested ``python.Function`` overflows the
stack past ~300 boxes).  Sizes are inferred from the input arrays; a shape that
contradicts an axis already bound is an error naming the axis and both sizes.
It is a functor::

    evaluate(f >> g, x) == evaluate(g, evaluate(f, x))
    evaluate(f @ g, x, y) == (*evaluate(f, x), *evaluate(g, y))

>>> import numpy as np, napkin_cat as nc
>>> mm = nc.einsum("a b, b c -> a c")
>>> A, B = np.ones((2, 3)), np.ones((3, 4))
>>> evaluate(mm, A, B).tolist()[0]
[3.0, 3.0, 3.0, 3.0]
"""
from __future__ import annotations

import numpy as np
import sympy

from napkin_cat.errors import NapkinError, ShapeError
from napkin_cat.semantics.devices import first_device_insides
from napkin_cat.semantics.env import Env
from napkin_cat.semantics.footprint import check_diagrams
from napkin_cat.semantics.precision import perturbed
from napkin_cat.semantics.primitives import run_primitive
from napkin_cat.semantics.regions import run_region
from napkin_cat.syntax.adapter import Bubble, Diagram
from napkin_cat.syntax.flat import layers
from napkin_cat.syntax.sizes import as_sizes
from napkin_cat.syntax.wiring import traverse


def interpret(diagram: Diagram, xs: list, env: Env) -> list:
    """Run the layers of ``diagram`` on the list of input values (the wiring moves arrays as any values)."""
    def on_box(step):
        if isinstance(step.box, Bubble):
            return run_region(step.box, step.ins, env, interpret)
        outs = run_primitive(step.box, step.ins, env)
        noise = getattr(env, "noise", None)
        return outs if noise is None else perturbed(outs, noise)
    return traverse(diagram, xs, on_box)


def evaluate(diagram: Diagram, *arrays, sizes: dict | None = None, counters: dict | None = None,
             skip: bool = True, perturb: int | None = None):
    """Evaluate ``diagram`` on numpy arrays; one output gives an array, several a tuple.

    ``sizes`` binds sizes the inputs do not show (tile sizes such as ``g_q``; a
    :class:`~napkin_cat.syntax.sizes.Sizes` or names → positive ints, each one of the diagram's);
    ``counters``, a dict, receives the values moved per level by the Loads/Saves run;
    ``skip=False`` runs every trip of a masked stream, those its mask skips included (they change nothing:
    :mod:`napkin_cat.algorithms.skipping`); ``perturb``, a seed, moves every primitive's floating-point result by a
    random relative ``δ`` (:func:`~napkin_cat.semantics.precision.perturbed`: what a tolerance measures its rounding
    error's growth with).  An intermediate array larger than this machine's memory is refused
    before anything runs (:mod:`napkin_cat.semantics.footprint`).
    """
    if not isinstance(diagram, Diagram):
        raise NapkinError(f"evaluate takes a napkin_cat Diagram, got {type(diagram).__name__}")
    if len(arrays) != len(diagram.dom):
        raise ShapeError(f"the diagram takes {len(diagram.dom)} array(s) {[str(a) for a in diagram.dom.inside]}, "
                         f"got {len(arrays)}")
    env = Env(as_sizes(sizes).of(diagram).env)
    env.counters, env.skip = counters, bool(skip)
    if perturb is not None:
        env.noise = np.random.default_rng(perturb)
    xs = []
    for i, (arr, x) in enumerate(zip(diagram.dom.inside, arrays)):
        x = np.asarray(x)
        if not (np.issubdtype(x.dtype, np.number) or np.issubdtype(x.dtype, np.bool_)):
            raise ShapeError(f"input {i}: expected a numeric array, got dtype {x.dtype}")
        env.bind(arr, x, f"input {i} ({arr})")
        xs.append(x)
    check_run(diagram, env)                # a tile past its axis, an array past memory: refused before anything runs
    out = interpret(diagram, xs, env)
    out = [np.asarray(o) for o in out]
    return out[0] if len(out) == 1 else tuple(out)


def check_run(diagram: Diagram, env) -> None:
    """Refuse, before anything runs, a tile larger than its axis (:func:`check_tiles`, ShapeError) and an array
    larger than this machine's memory (:func:`~napkin_cat.semantics.footprint.check_diagrams`, MemoryLimitError), in
    ``diagram`` and in each device region's inside as its first device runs it, at its shards' sizes (the largest:
    :func:`~napkin_cat.semantics.devices.first_device_insides`), where a shard ``a/P`` need not be an integer.

    >>> import numpy as np, napkin_cat as nc
    >>> d = nc.shard(nc.group(nc.kernel(nc.library.attention()), "q", "g_q"), "q", devices=2)
    >>> nc.evaluate(d, np.ones((7, 2)), np.ones((3, 2)), np.ones((3, 2)), sizes={"g_q": 5})
    Traceback (most recent call last):
    ...
    napkin_cat.errors.ShapeError: the group size of 'q' (g_q = 5) exceeds the axis (q = 4); legal sizes are 1 … 4
    """
    insides = first_device_insides(diagram, env)
    for d in (diagram, *insides):
        check_tiles(d, env)
    check_diagrams(env, [diagram, *insides])


def check_tiles(diagram: Diagram, env) -> None:
    """Every Grid's and Stream's tile, where the sizes bind it, fits its axis (as ``nc.plan`` requires); a
    partition is any bubble with an ``axis``, a tile ``size`` and a ``full_size()`` (the bubbles are not imported)."""
    for _, box in layers(diagram):
        if isinstance(box, Bubble) and getattr(box, "axis", None) is not None and hasattr(box, "full_size"):
            tile, full = sympy.sympify(box.size).subs(env), sympy.sympify(box.full_size()).subs(env)
            if tile.is_Integer and full.is_Integer and int(tile) > int(full):
                what = {"grid": "group"}.get(getattr(box, "region", ""), getattr(box, "region", "tile"))
                raise ShapeError(f"the {what} size of {box.axis!r} ({box.size} = {tile}) exceeds the axis "
                                 f"({box.axis} = {full}); legal sizes are 1 … {full}")
        if isinstance(box, Bubble):
            check_tiles(box.arg, env)
