"""What a diagram remembers of itself (issue 31: the suite's time): ``symbols_of`` (with and without the boxes'
parameters), ``tile_sizes`` and the shapes ``largest_array`` reads are scanned once and kept on the diagram, which
is immutable.  Asked in either order, each answer is the one written down here from how the diagram was built."""
from __future__ import annotations

import math

import napkin_cat as nc
from napkin_cat.semantics.equivalent import tile_sizes
from napkin_cat.semantics.footprint import largest_array
from napkin_cat.syntax.sizes import names_of, symbols_of

q, x, t, a, b, c, g_a, s_b = (nc.symbol(n) for n in ("q", "x", "t", "a", "b", "c", "g_a", "s_b"))


def scaled_softmax():
    """A SoftMax whose β is a symbol only its parameter reads."""
    return nc.softmax("q x", over="x", beta=t)


def tiled():
    return nc.group(nc.stream(nc.library.matmul(), "b", "s_b"), "a", "g_a")


def test_the_symbols_with_and_without_parameters_are_told_apart_in_either_order():
    first, second = scaled_softmax(), scaled_softmax()
    assert symbols_of(first) == {q, x} and symbols_of(first, params=True) == {q, x, t}
    assert symbols_of(second, params=True) == {q, x, t} and symbols_of(second) == {q, x}
    assert names_of(first) == names_of(second) == {"q", "x", "t"}
    assert symbols_of(first) == {q, x}                  # asked again, after the other


def test_tiles_and_the_largest_array_are_the_diagrams_whatever_was_asked_before():
    env = {a: 6, b: 4, c: 5, g_a: 3, s_b: 2}
    biggest = max(math.prod(env[s] for s in pair) for pair in ((a, b), (b, c), (a, c)))     # a × c = 30
    for d in (tiled(), tiled()):
        assert list(tile_sizes(d)) == [(g_a, a), (s_b, b)] == list(tile_sizes(d))     # outermost first, twice
        assert largest_array(env, [d])[0] == biggest
        assert largest_array({**env, a: 10}, [d])[0] == 10 * env[c]       # the sizes are read at each call
    plain = nc.library.matmul()
    assert list(tile_sizes(plain)) == [] and symbols_of(plain) == {a, b, c}
    assert largest_array(env, [plain, tiled()])[0] == biggest
