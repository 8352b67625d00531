"""Random function diagrams and random walks of rule applications, for the soundness fuzzer.

A walk applies a random legal (rule, match) of the rule book at each step (partition rules along a random
axis with a fresh tile name, the ring in a random order of its shards); the walk's end is compared with its
start by ``nc.equivalent``.  When they differ, :func:`first_unsound` bisects to the first step whose result
differs from the start, and :func:`reproducer` prints that one step as a self-contained script (the diagram
before it as JSON, the rule, its parameters and the match).
"""
from __future__ import annotations

import numpy as np

import napkin_cat as nc
from napkin_cat.rewriting.netlist import to_netlist
from napkin_cat.rewriting.trace import Step
from napkin_cat.testing.offers import in_every_order

NAMES = ["a", "b", "c", "i", "j", "k", "u", "v", "w", "t"]
UNARY = ["exp", "tanh", "relu", "neg", "square", "sigmoid"]


def random_function(rng, n_ops: int, concrete: bool):
    """A random function diagram: contractions, maps, reductions, softmaxes over random axis names."""
    names = [str(n) for n in rng.permutation(NAMES)[:5]]
    sizes = {n: int(rng.integers(2, 6)) for n in names} if concrete else {}

    def sig(axes):
        return " ".join(axes)

    def kw(axes):
        return {a: sizes[a] for a in axes} if concrete else {}

    def fresh(k):
        return [str(n) for n in rng.permutation(names)[:k]]
    inputs = [fresh(int(rng.integers(1, 4))) for _ in range(int(rng.integers(2, 4)))]
    b = nc.Builder(nc.types(", ".join(sig(a) for a in inputs), **kw(names)))
    wires = [(w, list(a)) for w, a in zip(b.inputs, inputs)]
    for _ in range(n_ops):
        kind = rng.choice(["unary", "binary", "contract", "contract", "reduce", "softmax"])
        w, axes = wires[int(rng.integers(len(wires)))]
        try:
            if kind == "unary":
                out = b(nc.elementwise(str(rng.choice(UNARY)), sig(axes), **kw(axes)), w)
                wires.append((out, axes))
            elif kind == "binary":
                same = [(v, ax) for v, ax in wires if ax == axes and v is not w]
                if not same:
                    continue
                v, _ = same[int(rng.integers(len(same)))]
                op = str(rng.choice(["add", "mul"]))
                out = b(nc.elementwise(op, f"{sig(axes)}, {sig(axes)} -> {sig(axes)}", **kw(axes)), w, v)
                wires.append((out, axes))
            elif kind == "contract":
                v, other = wires[int(rng.integers(len(wires)))]
                if v is w:
                    continue
                shared = [a for a in axes if a in other]
                if not shared:
                    continue
                summed = [a for a in shared if rng.random() < 0.7] or shared[:1]
                out_axes = [a for a in axes if a not in summed] + [a for a in other if a not in summed
                                                                   and a not in axes]
                if not out_axes:
                    continue
                out = b(nc.einsum(f"{sig(axes)}, {sig(other)} -> {sig(out_axes)}", **kw(set(axes) | set(other))),
                        w, v)
                wires.append((out, out_axes))
            elif kind == "reduce" and len(axes) >= 2:
                a = axes[int(rng.integers(len(axes)))]
                rest = [x for x in axes if x != a]
                out = b(nc.reduce(str(rng.choice(["sum", "max"])), f"{sig(axes)} -> {sig(rest)}", **kw(axes)), w)
                wires.append((out, rest))
            elif kind == "softmax" and len(axes) >= 2:
                a = axes[int(rng.integers(len(axes)))]
                out = b(nc.softmax(sig(axes), over=a, **kw(axes)), w)
                wires.append((out, axes))
        except nc.NapkinError:
            continue
    made = [w for w, _ in wires[len(inputs):]]
    if not made:
        return None
    return b.build(made[-1])


def axis_names(diagram) -> list:
    seen = []
    for arr in (*diagram.dom.inside, *diagram.cod.inside):
        seen += [n for n in arr.names if n not in seen]
    return seen


def walk(rng, start, rules, steps: int, roles: dict, counter):
    """Apply up to ``steps`` random legal rule applications; return the recorded :class:`Step` s."""
    net, out = to_netlist(start), []
    names = axis_names(start)
    partition = {roles.get("stream"), roles.get("group")}
    for _ in range(steps):
        order = [rules.rules[i] for i in rng.permutation(len(rules.rules))]
        for rule in order:
            r = rule
            ordered = in_every_order(rule, roles)
            if rule.name in partition:
                r = rule.using(axis=str(rng.choice(names)), size=f"t{next(counter)}")
            elif ordered:           # the ring in an order of its shards drawn at random
                r = ordered[int(rng.integers(len(ordered)))]
            ms = r.matches(net)
            if not ms:
                continue
            m = ms[int(rng.integers(len(ms)))]
            after = r.fill(m)
            out.append(Step.of(r, m, net, after))
            net = after
            break
        else:
            break
    return out


def first_unsound(start, steps, seed: int):
    """The index of the first step whose result is not equivalent to ``start`` (bisection), or None."""
    lo, hi = 0, len(steps) - 1
    if nc.equivalent(start, steps[hi].after, trials=2, seed=seed):
        return None
    while lo < hi:
        mid = (lo + hi) // 2
        if nc.equivalent(start, steps[mid].after, trials=2, seed=seed):
            lo = mid + 1
        else:
            hi = mid
    return lo


def reproducer(step, seed: int) -> str:
    """A self-contained script that replays the one unsound step and shows the counterexample."""
    return "\n".join([
        "import napkin_cat as nc",
        "from napkin_cat.rewriting.registry import rulebook",
        f"before = nc.loads({nc.dumps(step.before)!r})",
        f"rule = rulebook().rules[{step.rule!r}]",
        f"match = rule.relocate(before, {step.key!r}, {step.params!r})   # {step.description}",
        "after = rule.apply(before, match)",
        f"print(nc.equivalent(before, after, trials=2, seed={seed}))",
    ])


def random_walks(seed: int, total: int, rules, roles, max_steps: int = 30):
    """Yield ``(start, steps, walk seed)`` until ``total`` rule applications have been made."""
    import itertools
    counter = itertools.count()
    done, k = 0, 0
    while done < total:
        rng = np.random.default_rng([seed, k])
        k += 1
        start = random_function(rng, int(rng.integers(3, 9)), concrete=bool(rng.integers(2)))
        if start is None:
            continue
        steps = walk(rng, start, rules, int(rng.integers(5, max_steps)), roles, counter)
        if not steps:
            continue
        done += len(steps)
        yield start, steps, k
