"""Every check of a program, each failure with a standalone reproducer.

A check takes a :class:`~napkin_cat.testing.programs.Program` and raises on failure; :func:`run_checks`
runs the asked ones and returns :class:`Failure` s, each naming the check, what went wrong and a script
that reproduces it alone (the program's source, its sizes and the check's own lines).  A check that holds
returns its *outcomes*: what it actually did (``"run"``, ``"compiled"``, ``"derived"``, ``"replayed"``, …) or
which typed error refused the program (``"refused: PlanError"``), so that a fuzz can count its coverage
(``run_checks(..., tally=Counter())``) and fail when a library refuses everything:

==============  ==========================================================================================
``evaluate``    ``nc.evaluate`` equals the program's numpy reference (same shapes, NaN in the same places)
``json``        ``nc.loads(nc.dumps(d))`` is ``d`` and computes the same
``cost``        ``nc.cost(d)``: every H, M and FLOP count at the program's sizes is a finite integer ≥ 0
``mutant``      ``nc.equivalent`` tells the program from itself with its outputs made ``1.5·y + 1``
``rules``       every match a rule of the rule book offers rewrites, to an equivalent program, and is found
                again by its identity; the trace of the walk (random legal steps, partitions along random axes
                with random tile names, rings in each order of their shards) replays; :mod:`.offers` replays
                every rule's steps on its instances, woven
``plan``        one fused kernel streamed, grouped and partitioned up to twice more where legal (streams plain,
                sliced or in parts, groups, nested along one axis) at ragged tiles: the plan's run and its
                fast run equal ``nc.evaluate`` and the run's counters equal the cost functor at those sizes
``c``           the C kernel of that plan computes what the plan computes (float32 tolerances)
``derive``      ``nc.derive`` at the program's sizes: equivalent to the program, its trace replays, its ``H`` is what
                its algorithm moves; a choice the rule book cannot make is a failure; the C printer prints its plan
                (a box the search leaves where no hand-made partition puts it, such as an Initialize outside a
                stream, still has a printed form)
``reformulate`` the program written another way by the laws read backwards (:mod:`.reformulate`: SoftMax by
                hand, a square as a product, a mean as a scaled sum, a contraction in pairs, …) computes what it
                computes, and ``nc.derive`` reaches the same ``H`` from it as from the program, its result
                equivalent to the program (or refuses both with one typed error)
==============  ==========================================================================================

>>> from napkin_cat.testing.programs import random_program
>>> from collections import Counter
>>> tally = Counter()
>>> [f.check for f in run_checks(random_program(2), checks=("evaluate", "json", "cost", "plan"), tally=tally)]
[]
>>> sorted(tally)          # (check, outcome): one count per program, refusals by the error that refused
[('cost', 'whole'), ('evaluate', 'compared'), ('json', 'round trip'), ('plan', 'counted'), ('plan', 'grouped'), \
('plan', 'planned'), ('plan', 'ragged'), ('plan', 'run')]
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np
import sympy

import napkin_cat as nc
from napkin_cat.algorithms.bubbles import Grid, Region, Stream
from napkin_cat.errors import CheckFailed, ConstructionError, MemoryLimitError, NapkinError
from napkin_cat.semantics.equivalent import tile_sizes
from napkin_cat.testing.assertions import assert_equivalent
from napkin_cat.syntax.adapter import Diagram
from napkin_cat.syntax.flat import layers
from napkin_cat.syntax.construct import spell
from napkin_cat.testing.programs import Program
from napkin_cat.testing.hostile import check_hostile_json
from napkin_cat.testing.reformulate import reformulate
from napkin_cat.testing.rule_walk import axis_names, check_rules
from napkin_cat.cost import numeric
from napkin_cat.plan.ir import StreamLoop, walk
from napkin_cat.syntax.axis import symbol

#: the checks, cheapest first
CHECKS = ("evaluate", "json", "cost", "mutant", "rules", "plan", "c", "derive", "reformulate")


@dataclass(frozen=True)
class Failure:
    """A failed check: its name, the program, what happened and a standalone reproducer."""

    check: str
    program: Program
    message: str
    reproducer: str

    def __str__(self):
        return (f"check {self.check!r} failed on program {self.program.seed}: {self.message}\n"
                f"--- reproducer ---\n{self.reproducer}")


def _outputs(y) -> tuple:
    return y if isinstance(y, tuple) else (y,)


def _close(got, want, rtol: float, atol: float) -> str | None:
    """None when ``got`` matches ``want`` (shapes, NaN/inf places, values), else what differs."""
    got, want = _outputs(got), _outputs(want)
    if len(got) != len(want):
        return f"{len(got)} outputs, want {len(want)}"
    for j, (a, b) in enumerate(zip(got, want)):
        a, b = np.asarray(a, float), np.asarray(b, float)
        if a.shape != b.shape:
            return f"output {j} has shape {a.shape}, want {b.shape}"
        if not (np.array_equal(np.isnan(a), np.isnan(b)) and
                np.array_equal(np.where(np.isinf(a), a, 0), np.where(np.isinf(b), b, 0))):
            return f"output {j} has NaN/inf in other places"
        fin = np.isfinite(a) & np.isfinite(b)
        scale = max(1.0, float(np.max(np.abs(b[fin]))) if fin.any() else 1.0)
        if fin.any() and not np.allclose(a[fin], b[fin], rtol=rtol, atol=atol * scale):
            return f"output {j} differs by up to {float(np.max(np.abs(a[fin] - b[fin]))):.3g}"
    return None


def _finite_somewhere(y) -> bool:
    """Some output entry of ``y`` is finite (else agreement certifies nothing)."""
    return any(np.isfinite(np.asarray(v, float)).any() for v in _outputs(y))


def refused(e: Exception) -> str:
    """The outcome of a typed refusal: ``"refused: <its error type>"``."""
    return f"refused: {type(e).__name__}"


def _inputs_line(seed: int) -> str:
    """The reproducer's line drawing the check's inputs: :meth:`Program.arrays` of one generator (every input
    from the same stream of draws, as the check drew them)."""
    return (f"rng = np.random.default_rng({seed})\n"
            "xs = [rng.normal(size=tuple(a.size if isinstance(a.size, int) else "
            "sizes[str(a.size)] for a in arr.axes)) for arr in diagram.dom.inside]")


# ---------------------------------------------------------------------- the cheap checks
def check_evaluate(p: Program, seed: int = 0):
    """The program's ``nc.evaluate`` against its numpy reference on seeded inputs; a CheckFailed with a reproducer where
    they differ.
    """
    xs = p.arrays(np.random.default_rng(seed))
    got = p.evaluated(seed)         # nc.evaluate on xs (the json and plan checks compare with the same outputs)
    want = p.reference(*xs)
    why = _close(got, want, 1e-7, 1e-9)
    if why:
        raise CheckFailed(f"nc.evaluate vs the numpy reference: {why}", "\n".join([
            "from napkin_cat.testing.programs import random_program", _inputs_line(seed),
            f"want = {p.call}.reference(*xs)   # numpy, written apart from the library",
            "print(nc.evaluate(diagram, *xs, sizes=sizes), want)"]))
    return ("compared",) if _finite_somewhere(want) else ("nothing finite",)


def check_json(p: Program, seed: int = 0):
    """``nc.loads(nc.dumps(d)) == d``, and the read-back diagram evaluates to the same outputs, bit for bit."""
    text = nc.dumps(p.diagram)
    back = nc.loads(text)
    lines = "back = nc.loads(nc.dumps(diagram))\nprint(back == diagram)"
    if back != p.diagram:
        raise CheckFailed("nc.loads(nc.dumps(d)) != d", lines)
    xs = p.arrays(np.random.default_rng(seed))
    with np.errstate(all="ignore"):
        why = _close(nc.evaluate(back, *xs, sizes=p.sizes), p.evaluated(seed), 0, 0)
    if why:
        raise CheckFailed(f"the JSON round trip computes otherwise: {why}", lines)
    return ("round trip",)


def size_env(sizes: dict) -> dict:
    """The substitution a cost's symbols take at a program's sizes: ``{symbol(name): value}``.

    >>> size_env({"q": 4})
    {q: 4}
    """
    return {symbol(k): v for k, v in sizes.items()}


def check_cost(p: Program, seed: int = 0):
    """Every entry of the program's cost (H, M, FLOPs) is a finite non-negative whole number at its sizes."""
    c = nc.cost(p.diagram)
    env = size_env(p.sizes)
    for what, table in (("H", c.H), ("M", c.M), ("FLOPs", c.flops)):
        for key, expr in table.items():
            v = sympy.sympify(expr).subs(env)
            if not (v.is_number and v.is_finite and v >= 0 and v == int(v)):
                raise CheckFailed(f"cost {what}[{key}] = {expr} is {v} at the program's sizes",
                                  f"c = nc.cost(diagram)\nprint(c.{'flops' if what == 'FLOPs' else what})")
    return ("whole",)


def check_mutant(p: Program, seed: int = 0):
    """``1.5·y + 1`` on every output must be told apart: it moves every finite value (large ones too), and
    where no output is finite nothing is certified."""
    change = Diagram.id(p.diagram.cod[:0])
    for out in p.diagram.cod.inside:
        kw = dict(sizes={a.name: a.size for a in out.axes}, dtype=out.dtype, level=out.level)
        change = change @ (nc.elementwise("scale", spell(out.names), const=1.5, **kw) >>
                           nc.elementwise("shift", spell(out.names), const=1.0, **kw))
    verdict = nc.equivalent(p.diagram, p.diagram >> change, seed=seed)
    if verdict:
        raise CheckFailed(f"nc.equivalent says the program equals 1.5 times itself plus 1: {verdict}", "\n".join([
            "change = nc.Diagram.id(nc.Ty())",
            "for out in diagram.cod.inside:",
            "    s, kw = ' '.join(out.names) or '()', dict(sizes={a.name: a.size for a in out.axes})",
            "    change = change @ (nc.elementwise('scale', s, const=1.5, **kw) >> "
            "nc.elementwise('shift', s, const=1.0, **kw))",
            f"print(nc.equivalent(diagram, diagram >> change, seed={seed}))"]))
    return ("told apart",) if verdict.output is not None else ("nothing finite",)


# ---------------------------------------------------------------------- plans, kernels, derive
def _ragged_tile(rng, n: int) -> int:
    """A tile for an axis of ``n``: one that does not divide it where there is one, else any up to ``n``."""
    ragged = [t for t in range(2, n) if n % t]
    return int(rng.choice(ragged)) if ragged and rng.random() < 0.8 else int(rng.integers(1, n + 1))


def algorithm(p: Program, seed: int = 0):
    """``(algorithm, sizes)``: the program as one level-1 kernel streamed, then grouped, then partitioned up to
    twice more, each where legal: a stream (plain, ``sliced`` or in 2-3 ``parts``) or a group along a random
    axis, half the time along one partitioned already (nested groups, a stream inside a group of its axis,
    sub-loops); every tile ragged where its axis allows, drawn outermost first (an inner tile cuts its outer
    one).  Its sizes are the program's plus the tiles' (``tile_0``, ``tile_1``, …)."""
    rng = np.random.default_rng([seed, p.seed, 1])
    alg = nc.kernel(p.diagram, level=1)
    names, done = axis_names(p.diagram), []
    steps = ["stream", "group"] + [str(rng.choice(["stream", "group"])) for _ in range(int(rng.integers(0, 3)))]
    for k, how in enumerate(steps):
        options = {}
        if how == "stream" and rng.random() < 0.6:
            options = {"parts": int(rng.integers(2, 4))} if rng.random() < 0.7 else {"sliced": True}
        order = [str(a) for a in rng.permutation(names)]
        if done and rng.random() < 0.5:
            order.insert(0, done[int(rng.integers(len(done)))])
        for axis in order:
            try:
                alg = (nc.stream(alg, axis, f"tile_{k}", **options) if how == "stream" else
                       nc.group(alg, axis, f"tile_{k}"))
            except NapkinError:
                continue
            done.append(axis)
            break
    sizes, env = dict(p.sizes), size_env(p.sizes)
    for tile, full in tile_sizes(alg):
        if str(tile) not in sizes:
            sizes[str(tile)] = _ragged_tile(rng, int(sympy.sympify(full).subs(env)))
            env[tile] = sizes[str(tile)]
    return alg, sizes


def _partitions(diagram):
    """Every Grid and Stream of ``diagram``, outermost first."""
    for _, box in layers(diagram):
        if isinstance(box, (Grid, Stream)):
            yield box
        if isinstance(box, Region):
            yield from _partitions(box.arg)


_ALGORITHM_LINES = ("from napkin_cat.testing.checks import algorithm\n"
                    "from napkin_cat.testing.programs import random_program\n"
                    "alg, tiled = algorithm({call}, {check_seed})   # the kernel, its tiles\n")


def partitioned(alg, sizes: dict) -> tuple:
    """What :func:`algorithm` made of a program: ``"streamed"``, ``"grouped"``, ``"in parts"`` (a split stream),
    ``"sliced"`` (a sliced stream), ``"nested"`` (two partitions along one axis) and ``"ragged"`` (some tile does
    not divide its axis at ``sizes``)."""
    boxes = list(_partitions(alg))
    axes = [b.axis for b in boxes]
    env = size_env(sizes)
    tags = {"streamed": any(isinstance(b, Stream) for b in boxes), "grouped": any(isinstance(b, Grid) for b in boxes),
            "in parts": any(b.params.get("parts") is not None for b in boxes),
            "sliced": any(b.params.get("sliced") for b in boxes), "nested": len(set(axes)) < len(axes),
            "ragged": any(int(sympy.sympify(full).subs(env)) % int(sympy.sympify(tile).subs(env))
                          for tile, full in tile_sizes(alg))}
    return tuple(name for name, made in tags.items() if made)


def check_plan(p: Program, seed: int = 0):
    """Outcomes: ``"planned"``, ``"run"``, ``"counted"`` and what :func:`partitioned` says, or the typed
    refusal of ``nc.plan``."""
    try:
        alg, sizes = algorithm(p, seed)
    except NapkinError as e:
        return (refused(e),)
    head = _ALGORITHM_LINES.format(call=p.call, check_seed=seed) + _inputs_line(seed) + "\n"
    try:
        plan = nc.plan(alg, sizes)
    except NapkinError as e:
        return (refused(e),)    # a documented refusal (a split inside a ragged stream); its message is tested apart
    except Exception as e:
        raise CheckFailed(f"nc.plan raised {type(e).__name__}: {e}", head + "print(nc.plan(alg, tiled))") from e
    xs = p.arrays(np.random.default_rng(seed))
    want = p.evaluated(seed)
    results = {}
    for how, run, line in (("run", plan.run, ".run(*xs)[0]"), ("fast run", plan, "(*xs)")):
        try:
            with np.errstate(all="ignore"):
                results[how] = run(*xs)
        except Exception as e:
            raise CheckFailed(f"the plan's {how} raised {type(e).__name__}: {e}",
                              head + f"print(nc.plan(alg, tiled){line})") from e
        why = _close(results[how][0] if how == "run" else results[how], want, 1e-7, 1e-9)
        if why:
            raise CheckFailed(f"the plan's {how} vs nc.evaluate: {why}",
                              head + f"print(nc.plan(alg, tiled){line}, nc.evaluate(diagram, *xs, sizes=sizes))")
    counted = results["run"][1]
    c = numeric.at(alg, sizes)
    for what, ran, costed in (("transfers", counted.transfers, c.H), ("flops", counted.flops, c.flops),
                              ("peak", counted.peak, {l: m for l, m in c.M.items() if l > 0})):
        if ran != costed:
            raise CheckFailed(f"the plan's run counts {what} {ran}, the cost functor says {costed}",
                              head + "from napkin_cat.cost.numeric import at\n"
                              "print(nc.plan(alg, tiled).run(*xs)[1], at(alg, tiled))")
    skips = any(isinstance(s, StreamLoop) and s.skips for s in walk(plan.body))
    return ("planned", "run", "counted") + partitioned(alg, sizes) + (("skips",) if skips else ())


def check_c(p: Program, seed: int = 0):
    """Outcomes: ``"compiled"`` and ``"run"`` (in float, then in double at tolerances near double's), or the typed
    refusal of ``nc.plan`` or of the C backend (no compiler: ``"refused: ToolNotFoundError"``)."""
    try:
        alg, sizes = algorithm(p, seed)
        plan = nc.plan(alg, sizes)
    except NapkinError as e:
        return (refused(e),)
    for real, dtype, rtol, atol in (("float", "f4", 2e-3, 2e-4), ("double", "f8", 1e-9, 1e-11)):
        xs = [x.astype(dtype) for x in p.arrays(np.random.default_rng(seed))]
        head = _ALGORITHM_LINES.format(call=p.call, check_seed=seed) + _inputs_line(seed) + \
            f"\nxs = [x.astype({dtype!r}) for x in xs]\n"
        kernel = f"nc.codegen.c(nc.plan(alg, tiled), real={real!r})"
        try:
            got = nc.codegen.c(plan, real=real)(*xs)
        except NapkinError as e:
            return (refused(e),)
        except Exception as e:
            raise CheckFailed(f"the C kernel ({real}) raised {type(e).__name__}: {e}",
                              head + f"print({kernel}(*xs))") from e
        with np.errstate(all="ignore"):
            want = nc.evaluate(p.diagram, *[x.astype(float) for x in xs], sizes=p.sizes)
        why = _close(got, want, rtol, atol)
        if why:
            raise CheckFailed(f"the C kernel ({real}) vs nc.evaluate: {why}",
                              head + f"print({kernel}(*xs), nc.evaluate(diagram, *xs, sizes=sizes))")
    return ("compiled", "run")


def check_derive(p: Program, seed: int = 0, memory: int | None = None):
    """Outcomes: ``"derived"``, ``"equivalent"`` (or ``"nothing finite"``: the program's outputs are never finite,
    so nothing is certified), ``"replayed"``, ``"counted"`` (its ``H`` is what the cost functor counts on its
    algorithm at its tiles), ``"ran"`` and ``"printed"`` (the C source of its plan; a printer's refusal of a
    derived algorithm is a failure), or the typed refusal of ``nc.derive``.  ``memory``: the memory to derive at
    (default one drawn from ``2^3 … 2^11``).  A :class:`~napkin_cat.errors.ConstructionError` is a failure, not a
    refusal: the rule book could not make what the search chose."""
    rng = np.random.default_rng([seed, p.seed, 2])
    drawn = int(2 ** rng.integers(3, 12))
    memory = drawn if memory is None else memory
    sizes = {**p.sizes}
    lines = f"r = nc.derive(diagram, memory={memory}, sizes=sizes)\n"
    try:
        r = nc.derive(p.diagram, memory=memory, sizes=sizes)
    except ConstructionError as e:
        raise CheckFailed(f"nc.derive chose an algorithm its rule book could not make: {e}", lines) from e
    except (MemoryLimitError, nc.RewriteError) as e:
        return (refused(e),)
    except Exception as e:
        raise CheckFailed(f"nc.derive raised {type(e).__name__}: {e}", lines) from e
    try:
        assert_equivalent(p.diagram, r.diagram, sizes=sizes, seed=seed)
    except AssertionError as e:
        if not nc.equivalent(p.diagram, p.diagram, sizes=sizes, seed=seed):
            return ("derived", "nothing finite")   # the outputs are never finite at these sizes: nothing certified
        raise CheckFailed(f"nc.derive's algorithm ({r.variant}) is not the program: {e}",
                          lines + f"print(nc.equivalent(diagram, r.diagram, sizes=sizes, seed={seed}))") from e
    if not nc.isomorphic(r.trace.replay(p.diagram), r.diagram):
        raise CheckFailed("nc.derive's trace does not replay to its algorithm",
                          lines + "print(nc.isomorphic(r.trace.replay(diagram), r.diagram))")
    tiles = {**sizes, **{str(k): int(v) for k, v in dict(r.optimum.sizes).items()}}
    counted = nc.cost(r.diagram, sizes=tiles).H.get(r.level, 0)
    if counted != r.H:
        raise CheckFailed(f"nc.derive reports H = {r.H} but its algorithm ({r.variant}) moves {counted} at its tiles "
                          f"{tiles}", lines + "print(r.H, nc.cost(r.diagram, sizes={**sizes, **dict(r.optimum.sizes)})"
                          f".H[{r.level}])")
    try:
        plan = nc.plan(r.diagram, tiles)
        with np.errstate(all="ignore"):
            _, ran = plan.run(*p.arrays(np.random.default_rng(seed)))
    except NapkinError as e:
        return ("derived", "equivalent", "replayed", "counted", refused(e))
    if ran.transfers.get(r.level, 0) != r.H:
        raise CheckFailed(f"nc.derive reports H = {r.H} but the run of its algorithm ({r.variant}) at its tiles "
                          f"{tiles} moves {ran.transfers.get(r.level, 0)}", lines + _inputs_line(seed) +
                          "\ntiles = {**sizes, **{str(k): int(v) for k, v in dict(r.optimum.sizes).items()}}\n"
                          f"print(r.H, nc.plan(r.diagram, tiles).run(*xs)[1].transfers[{r.level}])")
    try:
        nc.codegen.c(plan)       # printed only: compiling every derived algorithm is the "c" check's cost
    except Exception as e:
        raise CheckFailed(f"the C printer refused nc.derive's algorithm ({r.variant}): {type(e).__name__}: {e}",
                          lines + "tiles = {**sizes, **{str(k): int(v) for k, v in dict(r.optimum.sizes).items()}}\n"
                          "print(nc.codegen.c(nc.plan(r.diagram, tiles)).source)") from e
    return ("derived", "equivalent", "replayed", "counted", "ran", "printed")


def _derived_or_refused(diagram, memory: int, sizes: dict):
    """``nc.derive``'s result, or the typed error it refused with."""
    try:
        return nc.derive(diagram, memory=memory, sizes=dict(sizes))
    except (MemoryLimitError, nc.RewriteError) as e:
        return e


def check_reformulated(p: Program, seed: int = 0, memory: int | None = None):
    """Outcomes: ``"rewritten"`` (some law applied; else ``"not rewritten"``), ``"derived"``, ``"same H"``,
    ``"equivalent"`` (or ``"nothing finite"``) and ``"law <name>"`` for each law applied, or the typed refusal that
    ``nc.derive`` gave both forms.  Derived at ``memory`` (default one drawn from ``2^3 … 2^11``)."""
    rng = np.random.default_rng([seed, p.seed, 3])
    memory = int(2 ** rng.integers(3, 12)) if memory is None else memory
    written = reformulate(p.diagram, rng)
    if not written.laws:
        return ("not rewritten",)
    lines = ("from napkin_cat.testing.reformulate import reformulate\n"
             f"written = reformulate(diagram, np.random.default_rng([{seed}, {p.seed}, 3]))   # {list(written.laws)}\n"
             f"r0 = nc.derive(diagram, memory={memory}, sizes=sizes)\n"
             f"r1 = nc.derive(written.diagram, memory={memory}, sizes=sizes)\n")
    finite = nc.equivalent(p.diagram, p.diagram, sizes=p.sizes, seed=seed)
    verdict = nc.equivalent(p.diagram, written.diagram, sizes=p.sizes, seed=seed)
    if finite and not verdict:
        raise CheckFailed(f"the program written by {list(written.laws)} computes otherwise: {verdict}",
                          lines.split("r0 =")[0] + "print(nc.equivalent(diagram, written.diagram, sizes=sizes))")
    laws = tuple(f"law {name}" for name in sorted(set(written.laws)))
    r0, r1 = (_derived_or_refused(d, memory, p.sizes) for d in (p.diagram, written.diagram))
    if isinstance(r0, Exception) or isinstance(r1, Exception):
        if type(r0) is type(r1):
            return ("rewritten", refused(r0)) + laws
        said = [f"{type(r).__name__}: {r}" if isinstance(r, Exception) else f"H = {r.H}" for r in (r0, r1)]
        raise CheckFailed(f"nc.derive of the program: {said[0]}; of it written by {list(written.laws)}: {said[1]}",
                          lines + "print(r0.H, r1.H)")
    if r1.H != r0.H:
        raise CheckFailed(f"nc.derive reaches H = {r0.H} ({r0.variant}) from the program and {r1.H} ({r1.variant}) "
                          f"from it written by {list(written.laws)}", lines + "print(r0.H, r1.H)")
    if not finite:
        return ("rewritten", "derived", "same H", "nothing finite") + laws
    try:
        assert_equivalent(p.diagram, r1.diagram, sizes=p.sizes, seed=seed)
    except AssertionError as e:
        raise CheckFailed(f"nc.derive's algorithm from the program written by {list(written.laws)} is not the "
                          f"program: {e}", lines + "print(nc.equivalent(diagram, r1.diagram, sizes=sizes))") from e
    return ("rewritten", "derived", "same H", "equivalent") + laws


#: every check by name; ``hostile_json`` (:mod:`napkin_cat.testing.hostile`) is run by its own test, not among
#: :data:`CHECKS`
RUNNERS = {"evaluate": check_evaluate, "json": check_json, "cost": check_cost, "mutant": check_mutant,
           "rules": check_rules, "plan": check_plan, "c": check_c, "derive": check_derive,
           "reformulate": check_reformulated, "hostile_json": check_hostile_json}


def run_checks(p: Program, *, checks=CHECKS, seed: int = 0, tally: Counter | None = None) -> list:
    """Run ``checks`` on ``p``; a :class:`Failure` per check that failed (a check that raised counts too).

    ``tally`` (a ``Counter``), when given, counts ``(check, outcome)`` for every outcome a check that held
    returned and ``(check, "failed")`` for one that failed: a fuzz asserts its coverage on it."""
    out = []
    tally = Counter() if tally is None else tally
    for name in checks:
        try:
            tally.update((name, outcome) for outcome in RUNNERS[name](p, seed))
            continue
        except CheckFailed as e:
            out.append(Failure(name, p, str(e), p.reproducer(e.lines)))
        except Exception as e:
            out.append(Failure(name, p, f"{type(e).__name__}: {e}",
                               p.reproducer(f"# check {name!r} raised; run it alone:\n"
                                            f"from napkin_cat.testing.checks import RUNNERS\n"
                                            f"from napkin_cat.testing.programs import random_program\n"
                                            f"RUNNERS[{name!r}]({p.call}, {seed})")))
        tally[(name, "failed")] += 1
    return out
