"""``paths.Choice.compulsory_at``: a block's compulsory transfers at sizes, summed array by array in exact
arithmetic, against the symbolic sum (``Choice.compulsory``, sympy) evaluated at the same sizes, on the library's
functions (one reading positions: only its outputs are compulsory) and random programs; and by hand."""
import pytest

import napkin_cat as nc
from napkin_cat.cost.exact_arithmetic import value
from napkin_cat.errors import NapkinError
from napkin_cat.search.paths import Choice
from napkin_cat.testing.programs import LIBRARY_FUNCTIONS, random_program


def sized(function, seed):
    """Sizes for every size symbol of ``function``: 2 … 9, drawn from ``seed``."""
    names = sorted({str(s) for a in (*function.dom.inside, *function.cod.inside) for ax in a.axes
                    for s in nc.symbol(ax.name).free_symbols | getattr(ax.size, "free_symbols", set())})
    return nc.Sizes({n: 2 + (seed * 7 + 3 * k) % 8 for k, n in enumerate(names)})


def cases():
    for k, name in enumerate(sorted(LIBRARY_FUNCTIONS)):
        f = LIBRARY_FUNCTIONS[name]()
        yield name, f, sized(f, k)
    for seed in range(16):
        p = random_program(seed, n_ops=1 + seed % 5)
        yield p.call, p.diagram, nc.Sizes({**{str(k): v for k, v in p.sizes.items()},
                                           **{n: v for n, v in sized(p.diagram, seed).items()
                                              if n not in map(str, p.sizes)}})


@pytest.mark.parametrize("what,function,sizes", list(cases()), ids=lambda c: c if isinstance(c, str) else "")
def test_summed_by_array_is_the_symbolic_sum_at_the_sizes(what, function, sizes):
    got = Choice(function, 1).compulsory_at(sizes)
    assert got == value(Choice(function, 1).compulsory, sizes.env), what


def test_by_hand():
    sizes = nc.Sizes({"q": 64, "x": 32, "d": 16})
    assert Choice(nc.library.attention(), 1).compulsory_at(sizes) == 64 * 16 + 2 * 32 * 16 + 64 * 16
    masked = nc.library.causal_attention() if hasattr(nc.library, "causal_attention") else None
    if masked is not None:       # a mask from positions: only the output is compulsory
        assert Choice(masked, 1).compulsory_at(sizes) == 64 * 16


def test_a_missing_size_is_named():
    with pytest.raises(NapkinError, match="give sizes for"):
        Choice(nc.library.attention(), 1).compulsory_at(nc.Sizes({"q": 64, "d": 16}))
