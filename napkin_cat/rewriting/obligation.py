"""Proof obligations: what proves a rewrite rule, and the evidence that it was discharged.

An :class:`Obligation` generates random left-hand sides, rewrites them at their matches and
compares both sides numerically (random sizes, random tile sizes, given or normal inputs), runs
sympy checks for algebraic laws, and checks the rule's cost claim.  A failure raises
:class:`ObligationError` with the counterexample (seed, sizes, output, max error, match).

Every obligation is also discharged on random *variants* of its instances (``varied=True``: the same
left-hand side with its axes renamed, some sizes made concrete and extra axes woven at random positions,
:mod:`napkin_cat.rewriting.variants`), one mechanism for every rule: a variant the rule does not match proves
nothing and is counted as such (``rewrites == 0``); one it matches must rewrite to the same function.

>>> import numpy as np, napkin_cat as nc
>>> sorted(random_sizes(np.random.default_rng(0), nc.einsum("q d, x d -> q x")))
['d', 'q', 'x']
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from napkin_cat.errors import NapkinError, ObligationError
from napkin_cat.semantics.env import Env
from napkin_cat.semantics.equivalent import free_sizes, tile_sizes
from napkin_cat.semantics.evaluate import evaluate
from napkin_cat.semantics.precision import agreements, axes_length, comparison_precision
from napkin_cat.rewriting.variants import vary
from napkin_cat.syntax.sizes import Sizes


def random_sizes(rng, diagram, low: int = 1, high: int = 6) -> dict:
    """Random ints for the free size symbols of a diagram's inputs (name → int)."""
    return {str(s): int(rng.integers(low, high + 1)) for s in free_sizes(diagram)}


def bind_tiles(rng, sizes: dict, *diagrams) -> dict:
    """``sizes`` plus a random divisor for every unbound Grid/Stream tile size of the diagrams."""
    env = Env(Sizes(sizes).env)
    out = dict(sizes)
    for d in diagrams:
        for tile, full in tile_sizes(d):
            if isinstance(tile, int) or tile in env:
                continue
            n = env.size(full, f"the axis partitioned by {tile}")
            env[tile] = int(rng.choice([g for g in range(1, n + 1) if n % g == 0]))
            out[str(tile)] = env[tile]
    return out


def shape_of(arr, sizes: dict) -> tuple:
    """The numpy shape of an array once its size symbols take the values ``sizes`` (name → int)."""
    env = Sizes(sizes).env
    return tuple(a.size if isinstance(a.size, int) else int(a.size.subs(env)) for a in arr.axes)


@dataclass(frozen=True)
class Obligation:
    """What proves a rule: random lhs ``instances(rng) -> Diagram`` rewritten at each match and
    compared on inputs ``inputs(rng, diagram, sizes) -> arrays`` (default: normal values);
    ``symbolic`` sympy checks (callables raising AssertionError); ``cost(lhs, rhs, match)``
    asserting the rule's cost claim; ``structural(lhs, rhs) -> bool`` (e.g. isomorphism).

    Both sides agree as :func:`~napkin_cat.semantics.equivalent.equivalent`'s outputs do, by one rule
    (:func:`~napkin_cat.semantics.precision.agreements`): the tolerance follows the precision the comparison evaluates
    in (the narrowest format either side casts to or declares, else float64) and the axes' lengths,
    ``rtol = min(C·(n + κ)·u, √u)`` (``κ``: the rounding errors' growth past ``n``, measured where float64 fails),
    ``atol = rtol·max|b|``; ``rtol`` or ``atol`` given (a rule exact by construction gives 0) replaces its default."""

    instances: Callable
    inputs: Callable | None = None
    symbolic: tuple = ()
    cost: Callable | None = None
    structural: Callable | None = None
    trials: int = 12
    rtol: float | None = None
    atol: float | None = None

    def check_instance(self, rule, seed: int, *, varied: bool = False) -> dict:
        """Rewrite one random instance (``varied``: a random variant of it) at each of its first three matches;
        return the evidence: ``rewrites``, ``max_error`` and ``variant`` (the steps that made it, or ``()``)."""
        rng = np.random.default_rng(seed)
        lhs, steps = self.instances(rng), ()
        if varied:
            v = vary(lhs, rng)
            lhs, steps = v.diagram, v.steps
        where = f"seed {seed}" + (f", varied: {'; '.join(steps)}" if varied else "")
        ms = rule.matches(lhs)
        if not ms and varied:
            return {"rewrites": 0, "max_error": 0.0, "variant": steps}
        if not ms:
            raise ObligationError(f"rule {rule.name!r}: its obligation's instance (seed {seed}) has no "
                                  f"legal match: the instance generator must produce the left-hand side",
                                  {"seed": seed, "diagram": lhs})
        worst, n = 0.0, 0
        for m in ms[:3]:
            rhs = rule.apply(lhs, m)
            n += 1
            sizes = random_sizes(rng, lhs)
            xs = (self.inputs(rng, lhs, sizes) if self.inputs is not None
                  else [rng.normal(size=shape_of(a, sizes)) for a in lhs.dom.inside])
            worst = max(worst, self._compare(rule, lhs, rhs, xs, sizes, seed, m, where))
            if self.structural is not None and not self.structural(lhs, rhs):
                raise ObligationError(f"rule {rule.name!r}: structural check failed at {m.describe()} "
                                      f"({where})", {"seed": seed, "match": m.describe(), "variant": steps})
            if self.cost is not None:
                try:
                    self.cost(lhs, rhs, m)
                except AssertionError as e:
                    raise ObligationError(f"rule {rule.name!r}: cost claim fails at {m.describe()} "
                                          f"({where}): {e}", {"seed": seed, "variant": steps}) from None
        return {"rewrites": n, "max_error": worst, "variant": steps}

    def _compare(self, rule, lhs, rhs, xs, sizes, seed, m, where: str) -> float:
        sizes = bind_tiles(np.random.default_rng(seed), sizes, lhs, rhs)
        with np.errstate(all="ignore"):
            y1 = evaluate(lhs, *xs, sizes=Sizes(sizes).restrict(lhs))
            try:
                y2 = evaluate(rhs, *xs, sizes=Sizes(sizes).restrict(rhs))
            except (NapkinError, ValueError, TypeError, IndexError, KeyError) as e:   # numpy's, on a bad rewrite
                raise ObligationError(
                    f"rule {rule.name!r} is unsound: counterexample ({where}) at {m.describe()}: the left-hand side "
                    f"runs at sizes {sizes}, its rewrite does not: {type(e).__name__}: {str(e).splitlines()[0]}",
                    {"seed": seed, "sizes": sizes, "match": m.describe(), "lhs": lhs}) from e
            y1 = y1 if isinstance(y1, tuple) else (y1,)
            y2 = y2 if isinstance(y2, tuple) else (y2,)
            worst = 0.0
            precision = comparison_precision(lhs, rhs, y1, y2)
            n = axes_length((lhs, rhs), Sizes(sizes).env)
            def rerun():        # both sides again, every value moved by δ
                return tuple(evaluate(d, *xs, sizes=Sizes(sizes).restrict(d), perturb=seed) for d in (lhs, rhs))
            got = agreements(y1, y2, precision, n, self.rtol, self.atol, rerun)
            for j, (a, b, agree) in enumerate(zip(y1, y2, got)):
                ok, err = bool(agree), agree.error
                if not ok:
                    shapes = [tuple(x.shape) for x in xs]
                    what = (f"differs by up to {err:.3g} (tolerance in {precision}: rtol {agree.rtol:.3g}, atol "
                            f"{agree.atol:.3g}{f', κ {agree.kappa:.3g}' if agree.kappa else ''})" if agree.specials else
                            f"has shape {np.shape(a)} where the other side has {np.shape(b)}"
                            if np.shape(a) != np.shape(b) else "has NaN/inf where the other side does not")
                    raise ObligationError(
                        f"rule {rule.name!r} is unsound: counterexample ({where}) at {m.describe()}: "
                        f"output {j} {what} at sizes {sizes} (input shapes {shapes})",
                        {"seed": seed, "sizes": sizes, "output": j, "max_error": err,
                         "match": m.describe(), "inputs": xs, "lhs": lhs})
                worst = max(worst, err)
        return worst

    def discharge(self, rule, *, seed: int = 0, trials: int | None = None, variants: int = 0) -> "Proof":
        """Run the symbolic checks, ``trials`` random instances and ``variants`` random variants of instances;
        raise ObligationError on failure."""
        for check in self.symbolic:
            try:
                check()
            except AssertionError as e:
                raise ObligationError(f"rule {rule.name!r}: symbolic check {check.__name__!r} fails: {e}")
        rewrites, varied, worst = 0, 0, 0.0
        for t in range(self.trials if trials is None else trials):
            ev = self.check_instance(rule, seed + t)
            rewrites += ev["rewrites"]
            worst = max(worst, ev["max_error"])
        for t in range(variants):
            ev = self.check_instance(rule, seed + t, varied=True)
            varied += ev["rewrites"]
            worst = max(worst, ev["max_error"])
        return Proof(rule.name, rewrites, worst, tuple(c.__name__ for c in self.symbolic),
                     self.cost is not None, varied)


@dataclass(frozen=True)
class Proof:
    """Evidence that an obligation was discharged."""

    rule: str
    rewrites: int
    max_error: float
    symbolic: tuple
    cost_checked: bool
    varied: int = 0          # rewrites made on random variants of the instances
