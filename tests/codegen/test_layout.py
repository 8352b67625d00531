"""The arena: values live in one column never share bytes, and the arena is the plan's peak; the printers
have a form for every built-in primitive kind."""
from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings, strategies as st

import napkin_cat as nc
from napkin_cat.codegen.layout import columns, layout
from napkin_cat.plan.ir import walk
from napkin_cat.syntax.printed import Template
from napkin_cat.syntax.ops import ELEMENTWISE, REDUCTIONS
from napkin_cat.syntax.primitive import KINDS, kind_of

from kernels_common import derived


@settings(max_examples=15, deadline=None)
@given(name=st.sampled_from(sorted(derived())), data=st.data())
def test_live_values_never_share_bytes_and_the_arena_is_the_peak(name, data):
    diagram, base = derived()[name]
    sizes = {k: data.draw(st.integers(1, 9), label=k) for k in base if not k.startswith(("g_", "s_"))}
    sizes.update({k: data.draw(st.integers(1, sizes[k[2:]]), label=k) for k in base if k.startswith(("g_", "s_"))})
    p = nc.plan(diagram, sizes)
    lay = layout(p)
    for col in columns(p):
        for u, v in itertools.combinations(sorted(col), 2):
            assert not lay.overlap(u, v), f"{u} and {v} are live together but share bytes"
    assert lay.bytes == lay.bound == p.smem_bytes


def test_an_output_over_bytes_it_reads_is_staged():
    """FlashAttention's scores take the bytes of the key tile they are computed from (the plan's columns
    allow it): that statement is staged, and the in-place fma is not."""
    from rewrites import flash_attention
    p = nc.plan(flash_attention(nc.library.attention()).diagram, {"q": 8, "x": 8, "d": 4, "g_q": 4, "s_x": 4})
    lay = layout(p)
    staged = {s.kind: lay.aliased(s) for s in walk(p.body) if hasattr(s, "kind") and lay.aliased(s)}
    assert "contract" in staged and "fma" not in staged
    fma = next(s for s in walk(p.body) if getattr(s, "kind", None) == "fma")
    assert lay.offsets[fma.outs[0].var] == lay.offsets[fma.ins[0].var]     # o ← o·δ + PV in place


BUILT_IN = set(ELEMENTWISE) | {f"reduce_{r}" for r in REDUCTIONS} | {"contract", "softmax", "softmax_aux",
                                                                    "softmax_unscaled", "cast", "rename"}


@pytest.mark.parametrize("printer", [nc.codegen.CPrinter, nc.codegen.CudaPrinter, nc.codegen.TritonPrinter])
def test_every_built_in_kind_has_a_printed_form(printer):
    """Every kind the library declares has a form in each dialect in its record: a template, or a structure the
    printer has a method for (but the transfers, which a plan runs as Load/Store, and the SoftMax's Initialize,
    whose state a plan fills)."""
    kinds = set(KINDS) - {"load", "save", "softmax_init"} - \
        ({"split", "join"} if printer is nc.codegen.TritonPrinter else set())
    assert BUILT_IN <= kinds
    for name in sorted(kinds):
        form = kind_of(name).part(printer.dialect)
        assert isinstance(form, Template) or form.structure in printer.structures(), (name, form)
    # split and join cut tensors at offsets: loops do it, Triton's block tensors cannot (refused by name)
    if printer is nc.codegen.TritonPrinter:
        with pytest.raises(nc.MissingPartError, match=r"kind 'split' has no Triton form"):
            kind_of("split").part(printer.dialect)
