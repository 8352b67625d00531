"""Axes, arrays (Ob), tuples of arrays (Ty) and number formats."""
from __future__ import annotations

import numpy as np
import pytest
import sympy

import napkin_cat as nc
from napkin_cat.syntax.axis import as_size, parse_names, resolve


def test_one_symbol_per_name():
    assert nc.symbol("q") is nc.symbol("q")
    assert nc.symbol("q") == sympy.Symbol("q", positive=True, integer=True)
    assert nc.symbol("q") != sympy.Symbol("q")
    assert nc.symbol("q").is_positive and nc.symbol("q").is_integer


def test_axes_symbolic_and_concrete():
    q, x, d = nc.axes("q x d", d=64)
    assert (q.name, q.size) == ("q", nc.symbol("q"))
    assert d.size == 64 and d.is_concrete and not q.is_concrete
    assert nc.axes("d", d=64) == nc.Axis("d", 64)          # one name: one Axis, not a tuple
    assert nc.axes("q, x") == (nc.Axis("q"), nc.Axis("x"))   # commas work too
    assert nc.axes(["q", nc.Axis("x")]) == (nc.Axis("q"), nc.Axis("x"))


def test_axis_equality_includes_size():
    assert nc.Axis("q") == nc.Axis("q", "q")
    assert nc.Axis("q", 4) != nc.Axis("q")
    assert nc.Axis("q", 4) != nc.Axis("q", 5)
    assert nc.Axis("q", 4) != nc.Axis("k", 4)
    assert len({nc.Axis("q"), nc.Axis("q", "q"), nc.Axis("q", 4)}) == 2


def test_axis_relabel_keeps_the_name():
    a = nc.Axis("q").relabel("g_q")
    assert a.name == "q" and a.size == nc.symbol("g_q")
    assert str(a) == "q=g_q" and str(nc.Axis("q")) == "q"
    assert repr(a) == "Axis('q', g_q)"


@pytest.mark.parametrize("size, expected", [
    (None, nc.symbol("q")), (4, 4), (np.int64(4), 4), ("s", nc.symbol("s")), (sympy.Integer(8), 8),
    (2 * nc.symbol("k"), 2 * nc.symbol("k"))])
def test_as_size(size, expected):
    got = as_size("q", size)
    assert got == expected
    if isinstance(expected, int):
        assert type(got) is int


def test_parse_names_and_resolve():
    assert parse_names("q x  d") == ("q", "x", "d")
    assert parse_names("q,x") == ("q", "x")
    assert resolve("q d", {"d": 4}) == (nc.Axis("q"), nc.Axis("d", 4))
    assert resolve(["q"], known={"q": 3}) == (nc.Axis("q", 3),)
    assert resolve(nc.Axis("q", 2)) == (nc.Axis("q", 2),)


# --------------------------------------------------------------------------- arrays
def test_array_equality_includes_axes_level_and_dtype():
    q, d = nc.axes("q d")
    A = nc.Array((q, d))
    assert A == nc.Array((q, d))
    assert A.name == nc.Array((q, d), level=1).name          # discopy's Ob compares names only ...
    assert A != nc.Array((q, d), level=1)                    # ... napkin_cat does not
    assert A != nc.Array((q, d), dtype="fp16")
    assert A != nc.Array((d, q))
    assert A != nc.Array((q, nc.Axis("d", 4)))
    assert len({A, nc.Array((q, d)), nc.Array((q, d), level=1), nc.Array((q, d), dtype=nc.BF16)}) == 3


def test_array_properties():
    q, d = nc.axes("q d", d=4)
    A = nc.Array((q, d), level=2, dtype="fp8")
    assert A.names == ("q", "d")
    assert A.shape == (nc.symbol("q"), 4)
    assert A.numel == 4 * nc.symbol("q")
    assert A.axis("d") == d
    with pytest.raises(KeyError):
        A.axis("x")
    assert A.replace(level=0) == nc.Array((q, d), dtype="fp8")
    assert repr(A) == "Array(q×d[4]@2:fp8)"
    assert nc.Array(()).name == "R" and nc.Array(()).numel == 1


def test_ty_concatenates_arrays():
    A, B = nc.types("q d").inside[0], nc.types("x d").inside[0]
    t = nc.Ty(A) @ nc.Ty(B)
    assert isinstance(t, nc.Ty)
    assert t.arrays == (A, B) and len(t) == 2
    assert t == nc.types("q d, x d")
    assert nc.Ty() @ t == t == t @ nc.Ty()
    assert repr(t) == "Ty(Array(q×d), Array(x×d))"


def test_ty_equality_sees_levels():
    assert nc.types("q d") != nc.types("q d", level=1)
    assert nc.types("q d") != nc.types("q d", dtype="bf16")


# --------------------------------------------------------------------------- dtypes
@pytest.mark.parametrize("dtype, nbytes", [(nc.FP32, 4), (nc.FP16, 2), (nc.BF16, 2), (nc.FP8, 1)])
def test_dtype_bytes(dtype, nbytes):
    assert dtype.bytes == nbytes
    assert nc.DTYPES[dtype.name] is dtype


def test_dtype_largest_finite_values():
    assert nc.FP16.largest == float(np.finfo(np.float16).max)
    assert nc.FP8.largest == 448.0
    assert nc.BF16.largest == pytest.approx(3.3895313892515355e38)
    assert nc.FP32.largest == pytest.approx(float(np.finfo(np.float32).max))
