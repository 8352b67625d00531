"""The search as a fuzzer: random walks of rule applications over random diagrams keep the function (2,500
applications with a fixed seed in CI; ``pytest --fuzz N`` for longer runs), and derivations the search returns
for random diagrams are equivalent to them and replay.  A failure prints a minimal reproducer: the first
unsound step alone, as a script."""
import collections

import numpy as np
import pytest

import napkin_cat as nc
from napkin_cat.rewriting.registry import rulebook

from fuzzing import first_unsound, random_function, random_walks, reproducer

SEED = 20240611


def test_rule_applications_keep_the_function(request):
    total = request.config.getoption("--fuzz")
    book = rulebook()
    made, fired, rings = 0, collections.Counter(), collections.Counter()
    for start, steps, k in random_walks(SEED, total, book.rules, book.roles):
        bad = first_unsound(start, steps, seed=k)
        if bad is not None:
            pytest.fail(f"walk {k} (seed {SEED}): step {bad} ({steps[bad].rule} at {steps[bad].description}) "
                        f"changed the function; reproducer:\n{reproducer(steps[bad], k)}")
        made += len(steps)
        fired.update(s.rule for s in steps)
        rings.update(dict(s.params).get("order") for s in steps if s.rule == book.roles["ring"])
    print(f"\nsoundness fuzz: {made} rule applications, none unsound; per rule: {dict(sorted(fired.items()))}; "
          f"rings per order: {dict(rings)}")
    assert made >= total
    assert {book.roles[r] for r in ("kernel", "fuse", "stream", "sweep", "group")} <= set(fired)


def test_the_search_on_random_diagrams():
    """Random functions at random sizes and memories: the derived algorithm is equivalent and replays."""
    rng = np.random.default_rng(SEED)
    derived = 0
    while derived < 8:
        f = random_function(rng, int(rng.integers(3, 8)), concrete=False)
        if f is None:
            continue
        names = sorted({n for arr in (*f.dom.inside, *f.cod.inside) for n in arr.names})
        sizes = {n: int(2 ** rng.integers(2, 7)) for n in names}
        try:
            r = nc.derive(f, memory=int(2 ** rng.integers(4, 12)), sizes=sizes)
        except nc.MemoryLimitError as e:
            assert e.smallest > 0
            continue
        assert nc.isomorphic(r.trace.replay(f), r.diagram)
        assert nc.equivalent(f, r.diagram, trials=2, seed=derived), (nc.dumps(f), str(r.variant))
        derived += 1


def test_a_broken_rule_is_caught_with_a_reproducer():
    """The fuzzer's own check can fail: a rule that turns exp into tanh is found, bisected and printed."""
    from napkin_cat.rewriting.match import Pattern, kind
    bad = nc.Rule("exp_is_tanh", Pattern({"f": kind("exp")}),
                  lambda m: nc.elementwise("tanh", " ".join(m.dom.inside[0].names)))
    f = nc.elementwise("exp", "a b") >> nc.elementwise("neg", "a b")
    steps = []
    from fuzzing import walk
    import itertools
    steps = walk(np.random.default_rng(0), f, nc.RuleSet((bad,)), 3, {}, itertools.count())
    assert [s.rule for s in steps] == ["exp_is_tanh"]
    assert first_unsound(f, steps, seed=0) == 0
    script = reproducer(steps[0], 0)
    assert "nc.loads(" in script and "exp_is_tanh" in script
