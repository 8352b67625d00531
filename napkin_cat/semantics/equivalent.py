"""Equivalence of two diagrams: same outputs on random sizes, tiles and data.

>>> import napkin_cat as nc
>>> bool(equivalent(nc.einsum("a b -> b a"), nc.einsum("a b -> b a")))
True
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from napkin_cat.algorithms.bubbles import Grid, Region, Stream
from napkin_cat.semantics.env import Env
from napkin_cat.semantics.evaluate import evaluate
from napkin_cat.syntax.adapter import Diagram, layers
from napkin_cat.syntax.axis import symbol


@dataclass
class Equivalence:
    """The verdict of :func:`equivalent`; truthy when the diagrams agree.

    On disagreement it says where: the first failing output, the max error, the sizes.
    """

    ok: bool
    message: str = ""
    output: int | None = None
    max_error: float = 0.0
    sizes: dict = field(default_factory=dict)
    trials: int = 0

    def __bool__(self):
        return self.ok

    def __repr__(self):
        return f"Equivalence({self.ok}{': ' + self.message if self.message else ''})"


def tile_sizes(diagram: Diagram):
    """``(tile size, full axis size)`` of every Grid and Stream, outermost first."""
    for _, box in layers(diagram):
        if isinstance(box, (Grid, Stream)):
            yield box.size, box.full_size()
        if isinstance(box, Region):
            yield from tile_sizes(box.arg)


def free_sizes(diagram: Diagram) -> list:
    syms = set()
    for arr in diagram.dom.inside:
        for a in arr.axes:
            if not isinstance(a.size, int):
                syms |= a.size.free_symbols
    return sorted(syms, key=str)


def equivalent(d1: Diagram, d2: Diagram, *, seed: int = 0, trials: int = 3, sizes: dict | None = None,
               low: int = 1, high: int = 7, rtol: float = 1e-6, atol: float = 1e-8,
               scale: float = 1.0) -> Equivalence:
    """Compare two diagrams on random inputs (and random sizes for symbolic axes).

    >>> import napkin_cat as nc
    >>> bool(equivalent(nc.einsum("a b -> b a"), nc.einsum("a b -> b a")))
    True
    """
    if d1.dom != d2.dom or d1.cod != d2.cod:
        return Equivalence(False, f"types differ: {d1.dom} → {d1.cod} vs {d2.dom} → {d2.cod}")
    rng = np.random.default_rng(seed)
    fixed = {}
    for k, v in (sizes or {}).items():
        fixed[symbol(k) if isinstance(k, str) else k] = int(v)
    worst = 0.0
    for t in range(trials):
        env = dict(fixed)
        for s in free_sizes(d1):
            env.setdefault(s, int(rng.integers(low, high + 1)))
        for d in (d1, d2):
            for tile, full in tile_sizes(d):
                if not isinstance(tile, int) and tile not in env:
                    n = Env(env).size(full, f"the axis partitioned by {tile}")
                    env[tile] = int(rng.choice([g for g in range(1, n + 1) if n % g == 0]))
        xs = []
        for arr in d1.dom.inside:
            shape = tuple(Env(env).size(a.size, f"axis {a.name!r}") for a in arr.axes)
            xs.append(rng.normal(size=shape) * scale)
        named = {str(k): v for k, v in env.items()}
        with np.errstate(all="ignore"):
            y1 = evaluate(d1, *xs, sizes=named)
            y2 = evaluate(d2, *xs, sizes=named)
        y1 = y1 if isinstance(y1, tuple) else (y1,)
        y2 = y2 if isinstance(y2, tuple) else (y2,)
        for j, (a, b) in enumerate(zip(y1, y2)):
            a, b = np.asarray(a, float), np.asarray(b, float)
            # NaN and ±inf must sit in the same places; the error is taken over finite entries
            same_specials = (np.array_equal(np.isnan(a), np.isnan(b))
                             and np.array_equal(np.where(np.isinf(a), a, 0), np.where(np.isinf(b), b, 0)))
            finite = np.isfinite(a) & np.isfinite(b)
            err = float(np.max(np.abs(a - b)[finite])) if finite.any() else 0.0
            if not same_specials or not np.allclose(a, b, rtol=rtol, atol=atol, equal_nan=True):
                if not same_specials:
                    err = float("nan")
                what = "has NaN/inf in other places" if not same_specials else f"differs by up to {err:.3g}"
                return Equivalence(False, f"output {j} {what} at sizes {named} "
                                   f"(trial {t}, seed {seed})", j, err, named, t + 1)
            worst = max(worst, err)
    return Equivalence(True, "", None, worst, {}, trials)
