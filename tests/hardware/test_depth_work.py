"""The time models' kernel forms grow with a kernel's depth no faster than their own size (issue 35, hwdepth-35).

``nc.derive(deep_mlp(k), hardware="epyc-zen3-dev")`` took 0.63 / 2.6 / 18.3 CPU s at k = 4 / 8 / 16: each of the k
contraction records of the one fused kernel built a sympy ``Min`` over the product dimensions of every same-named
box (3k arguments, compared pairwise), cubic in k.  The minima are now taken numerically at each env: the work the
form does symbolically is counted here (no timing), and its numbers checked against the dimensions by a second route.
On a GPU model the on-chip forms of every partition timed summed each column term by term (a Python ``sum``).
"""
from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import sympy

import napkin_cat as nc
from napkin_cat.hardware import load_cpu
from napkin_cat.hardware.cputime import CPUKernelForm, product_dims
from napkin_cat.hardware.on_chip import chip_forms
from napkin_cat.hardware.predict import environment, kernels_of
from napkin_cat.hardware.toy import primitive_boxes
from napkin_cat.testing.scaling import deep_mlp


def one_kernel(k):
    """deep_mlp(k) fused into one kernel, grouped along n (its only kernel box)."""
    (box,) = kernels_of(nc.group(nc.kernel(deep_mlp(k)), "n", "g_n"))
    return box


def min_max_arguments(exprs) -> int:
    """The arguments of every Min and Max node of the expressions (what sympy compares pairwise to build them)."""
    return sum(len(e.args) for x in exprs for e in sympy.preorder_traversal(sympy.sympify(x))
               if isinstance(e, (sympy.Min, sympy.Max)))


def test_the_forms_symbolic_minima_do_not_grow_with_the_square_of_the_depth():
    """Work count: the Min/Max arguments a kernel's form holds at depth 16 are at most about twice those at depth 8
    (the old form held k Mins of about 2k arguments each: 4× per doubling); the expressions it evaluates, too."""
    cpu = load_cpu("epyc-zen3-dev")
    f8, f16 = (CPUKernelForm(one_kernel(k), cpu) for k in (8, 16))
    args8, args16 = min_max_arguments(f8.expressions), min_max_arguments(f16.expressions)
    assert args16 <= 2.5 * max(args8, 1), (args8, args16)
    n8, n16 = len(f8.expressions), len(f16.expressions)
    assert n16 <= 2.5 * n8, (n8, n16)


def test_each_contraction_records_smallest_dimension_and_call_are_its_own_boxs():
    """Second route: at sizes where every width differs, each contraction record's smallest dimension is the least
    product dimension of its own box, and its FLOPs per call that box's 2·m·n·k (cpurec: not the least over the
    boxes of its name), both read by subs off the kernel's primitive boxes, in order."""
    k = 4
    box = one_kernel(k)
    form = CPUKernelForm(box, load_cpu("epyc-zen3-dev"))
    sizes = {"n": 96, "g_n": 32, **{f"c{i}": 8 * (i + 3) for i in range(k + 1)}}
    env = environment(sizes)
    dims = [tuple(int(sympy.sympify(d).subs(env)) for d in product_dims(b)) for b in primitive_boxes(box)
            if b.name == "·"]
    assert len(dims) == k
    assert len({min(d) for d in dims}) > 1 and len({2 * a * b * c for a, b, c in dims}) == k   # a name's least differs
    v = form.values(env)
    products = v[len(v) - 3 * k:]
    assert len(products) == 3 * k
    assert [int(products[i + 1]) for i in range(0, 3 * k, 3)] == [min(d) for d in dims]
    assert [int(products[i + 2]) for i in range(0, 3 * k, 3)] == [2 * a * b * c for a, b, c in dims]


def terms_flattened(build) -> int:
    """The terms of every sum sympy builds while ``build()`` runs (the arguments of each Add it makes, counted where
    it flattens them): a Python ``sum`` of n terms makes Adds of 2, 3, … n arguments, ``Add(*terms)`` one."""
    count = [0]
    flatten = sympy.Add.flatten.__func__

    def counted(cls, seq):
        out = flatten(cls, seq)
        count[0] += len(out[0])
        return out
    sympy.Add.flatten = classmethod(counted)
    try:
        build()
    finally:
        sympy.Add.flatten = classmethod(flatten)
    return count[0]


def chip_form_terms(k: int) -> int:
    """:func:`terms_flattened` building one fused deep_mlp kernel's on-chip forms at depth ``k`` from a cold sympy
    cache."""
    box = one_kernel(k)
    sample = environment({"n": 64, "g_n": 16, **{f"c{i}": 64 for i in range(k + 1)}})
    sympy.core.cache.clear_cache()
    return terms_flattened(lambda: chip_forms(box, 1, sample))


def test_a_kernels_chip_forms_sum_each_column_once():
    """Work count: the terms sympy flattens building a fused deep_mlp kernel's on-chip forms
    (:func:`~napkin_cat.hardware.on_chip.chip_forms`, read for every partition the GPU derive times) at depth 16
    are at most 4.5 times those at depth 8 (114 → 396: ~k columns, each summed once over its ~k variables);
    a Python sum per column, as before, flattens 2, 3, … terms per column (298 → 1722, 5.8 times).

    Counted in a fresh process under one hash seed: the count follows the process (the seed orders sympy's sets,
    101-114 at depth 8 under seeds 0-3, and earlier tests' kept work lowers it: 88 → 401 once in the suite)."""
    script = ("import sys; sys.path.insert(0, sys.argv[1]); import test_depth_work as t; "
              "print(t.chip_form_terms(8), t.chip_form_terms(16))")
    out = subprocess.run([sys.executable, "-c", script, str(pathlib.Path(__file__).parent)], check=True,
                         capture_output=True, text=True, env=dict(os.environ, PYTHONHASHSEED="0")).stdout
    t8, t16 = map(int, out.split())
    assert t16 <= 4.5 * t8, (t8, t16)
