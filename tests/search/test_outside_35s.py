"""Issue 35's symbolic mode from outside (``benchmarks/bench_outside_35s.py`` runs these and more, timed): two wrong
answers of ``nc.derive(f, memory="M")`` found there, kept as strict xfails until fixed.

* A symbolic derive answers or raises a typed error: the library's transformer block at ``n 12 e 20 h 4 d 5``
  raises an untyped ``TypeError`` (``search/envelope.py`` ``clamped_candidates`` evaluates the next form,
  ``… + 84000/(M − 480)``, at its own start ``M = 480``: ``zoo``, and ``float(zoo)`` raises).
* The symbolic answer is ``nan`` ("nothing fits") only below the least memory, the one a numeric derive's refusal
  names: self-attention with its projections ``(X W_q, X W_k, X W_v) → MHA → · W_o`` at ``n 10 e 24 h 2 d 12``
  derives numerically from ``M = 26`` (H 77,736 there, the runner's count = the cost functor's, the plan computes
  f), but its symbolic answer is one piece from ``M = 916``: ``nan`` on [26, 916).
"""
import pytest
import sympy

import napkin_cat as nc

L = nc.library


def projected_attention():
    """Q, K, V = X W_q, X W_k, X W_v (h heads of size d, keys on a second token axis m), then MHA, then · W_o."""
    mha = nc.rename_axis(nc.rename_axis(L.multi_head_attention(), "q", "n"), "x", "m", nc.symbol("n"))
    b = nc.Builder(nc.types("n e, e h d, e h d, e h d, h d e"))
    X, Wq, Wk, Wv, Wo = b.inputs
    Q = b(nc.einsum("n e, e h d -> h n d"), X, Wq)
    K = b(nc.renaming("h n d -> h m d"), b(nc.einsum("n e, e h d -> h n d"), X, Wk))
    V = b(nc.renaming("h n d -> h m d"), b(nc.einsum("n e, e h d -> h n d"), X, Wv))
    return b.build(b(nc.einsum("h n d, h d e -> n e"), b(mha, Q, K, V), Wo))


def least_memory(f, sizes) -> int:
    """The least memory a numeric derive names when refusing memory 1."""
    with pytest.raises(nc.MemoryLimitError) as e:
        nc.derive(f, memory=1, sizes=sizes)
    return int(str(e.value).split("smallest memory that works is ")[1].split()[0])


@pytest.mark.xfail(strict=True, raises=TypeError, reason="envelope.clamped_candidates: float(zoo) at a form's pole")
def test_symbolic_block_answers_at_n12_e20_h4_d5():
    r = nc.derive(L.transformer_block(), memory="M", reference={"n": 12, "e": 20, "h": 4, "d": 5, "f": 44})
    assert r.regimes


@pytest.mark.xfail(strict=True, reason="symbolic answer nan on [26, 916) where numeric derives")
def test_symbolic_first_piece_starts_at_the_least_memory():
    f, sizes = projected_attention(), {"n": 10, "e": 24, "h": 2, "d": 12}
    least = least_memory(f, sizes)
    d, at = nc.derive(f, memory=least, sizes=sizes).planned()     # the second route: an algorithm runs there
    assert nc.cost(d, sizes=at).M[1] <= least and nc.equivalent(f, d, sizes=at)
    r = nc.derive(f, memory="M", reference=sizes)
    first = sympy.sympify(r.regimes[0].lower).subs({nc.symbol(k): v for k, v in sizes.items()})
    assert first <= least, f"symbolic answer nan below M = {first}, numeric derives from {least}"
