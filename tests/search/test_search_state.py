"""The search's state is a value (issue 32, item 4): a derivation answers as it would alone, whatever the kernel
cache holds, whichever thread runs it beside another, and whichever rule book the call before it used.

Every answer is also checked by a second route: its ``H`` is what the cost functor reads off the derived algorithm
at the tiles it reports (``nc.cost(r.diagram, sizes=r.optimum.sizes)``)."""
from concurrent.futures import ThreadPoolExecutor

import pytest

import napkin_cat as nc
from napkin_cat.rewriting.registry import Rulebook, rulebook
from napkin_cat.search import derivation, segments
from napkin_cat.search.context import KERNELS, KernelCache

ATT = {"q": 100, "x": 100, "d": 16}       # 100 has few divisors: a shorter last tile ("any") moves less


def answer(r) -> tuple:
    """What a derivation answers, per memory: H, variant, tiles and trace."""
    return tuple((g.memory, g.H, str(g.variant), dict(g.optimum.exact_sizes), tuple(s.rule for s in g.trace))
                 for g in r.regimes)


def checked(r, level: int = 1):
    """``r``, each memory's H read again off its derived algorithm by the cost functor at the tiles it reports."""
    for g in r.regimes:
        assert nc.cost(g.diagram, sizes=g.optimum.sizes).H[level] == g.H
    return r


@pytest.fixture
def small_segments(monkeypatch):
    """Small functions searched segment by segment, as a model's are (so that solved segments are in play)."""
    monkeypatch.setattr(segments, "SEGMENT_AT", 4)
    monkeypatch.setattr(segments, "MIN_SEGMENT", 2)


def without(role: str) -> Rulebook:
    full = rulebook()
    return Rulebook(f"no {role}", full.rules, dict(full.derivations),
                    roles={k: v for k, v in full.roles.items() if k != role})


def test_the_same_answer_with_the_caches_cleared():
    """Warm (the shared cache, after a derivation of the same kernels over every tile size), cold (a new cache)
    and starved (a cache of one kernel: every other costed again) give one answer; the curves a warm cache keeps
    for ``tiles="any"`` are not read for divisor tiles."""
    att = nc.library.attention()
    ragged = checked(nc.derive(att, 2 ** 9, sizes=ATT, tiles="any"))
    warm = checked(nc.derive(att, 2 ** 9, sizes=ATT))
    assert len(KERNELS) > 0
    cold = checked(nc.derive(att, 2 ** 9, sizes=ATT, cache=KernelCache()))
    starved = checked(nc.derive(att, 2 ** 9, sizes=ATT, cache=KernelCache(limit=1)))
    assert answer(warm) == answer(cold) == answer(starved)
    assert ragged.H < cold.H          # the two tile grids do differ here: the warm curves had another answer


def test_two_threads_answer_as_each_alone(small_segments, helpers):
    """Two derivations at once, in two threads sharing one new kernel cache (each kernel costed by whichever
    thread gets there first), answer what each answers alone with a cache of its own: one with the full book,
    one with a book that cannot sweep, over the same segments."""
    stack = helpers.residual_stack()
    jobs = [dict(book=None, memory=[2 ** 8, 2 ** 10]), dict(book=without("sweep"), memory=[2 ** 10, 2 ** 12])]
    alone = [answer(checked(nc.derive(stack, sizes={}, cache=KernelCache(), **job))) for job in jobs]
    shared = KernelCache()
    for _ in range(2):
        with ThreadPoolExecutor(max_workers=2) as pool:
            both = list(pool.map(lambda job: nc.derive(stack, sizes={}, cache=shared, **job), jobs))
        assert [answer(checked(r)) for r in both] == alone
    assert alone[0][1][1] != alone[1][0][1]    # the two questions differ at the memory they share (2^10)


def test_two_rule_books_in_one_process(small_segments, helpers):
    """A book without the sweep rule, after the full book on the same function, is not answered with the full
    book's segments: its H is larger (no sweep in its trace), and the full book after it answers as before."""
    stack = helpers.residual_stack()
    full = checked(nc.derive(stack, 2 ** 10, sizes={}))
    assert "sliced_stream" in answer(full)[0][4]
    narrow = checked(nc.derive(stack, 2 ** 10, sizes={}, book=without("sweep")))
    assert narrow.H > full.H and "sliced_stream" not in answer(narrow)[0][4]
    assert answer(checked(nc.derive(stack, 2 ** 10, sizes={}, cache=KernelCache(), book=without("sweep")))) \
        == answer(narrow)
    assert answer(checked(nc.derive(stack, 2 ** 10, sizes={}))) == answer(full)


def test_a_cache_is_refused_by_name():
    with pytest.raises(nc.ArgumentError, match="cache= takes a KernelCache .* got dict"):
        nc.derive(nc.library.matmul(), 2 ** 10, sizes={"a": 64, "b": 64, "c": 64}, cache={})
    with pytest.raises(nc.ArgumentError, match="limit is a positive int .* got -3"):
        KernelCache(limit=-3)


def test_the_time_objective_is_passed_in_not_registered():
    """``nc.derive(..., hardware=)`` is the hardware layer's derive; the search keeps no registry of objectives,
    and each option goes to the objective that reads it or is refused by name."""
    assert not any(isinstance(v, dict) and "time" in v for v in vars(derivation).values())
    mm, sizes = nc.library.matmul(), {"a": 64, "b": 64, "c": 64}
    with pytest.raises(nc.NapkinError, match=r"\['overlap'\]: these options are the time model's"):
        nc.derive(mm, 2 ** 10, sizes=sizes, overlap="inter")
    with pytest.raises(nc.NapkinError, match=r"got \['tiles'\]: these options are the transfer search's"):
        nc.derive(mm, sizes=sizes, hardware="h100-sxm5", tiles="any")
    with pytest.raises(nc.NapkinError, match="drop memory=1024"):
        nc.derive(mm, 2 ** 10, sizes=sizes, hardware="h100-sxm5")
