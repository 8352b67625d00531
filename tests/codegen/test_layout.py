"""The arena: values live in one column never share bytes, and the arena is the plan's peak; an output is
written over its input where its kind's record says it may be (``in_place``); the printers have a form for every
built-in primitive kind."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import napkin_cat as nc
from napkin_cat.codegen.layout import columns, layout
from napkin_cat.plan.ir import walk
from napkin_cat.syntax.printed import Template
from napkin_cat.syntax.ops import ELEMENTWISE, REDUCTIONS
from napkin_cat.syntax.primitive import KINDS, kind_of

from kernels_common import derived, needs_cc


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
    printer has a method for (but the transfers, which a plan runs as Load/Store).  The SoftMax's Initialize too: a
    derived plan may leave it outside a stream's head (issue 33), where it prints as the fill of its record."""
    # collectives move values between devices (issue 37): no kernel holds one (a plan refuses a device region by name)
    collectives = {name for name, kind in KINDS.items() if kind.collective is not None}
    assert {"all_gather", "all_reduce", "all_to_all"} <= collectives
    kinds = set(KINDS) - {"load", "save"} - collectives - ({"split", "join"} if printer is nc.codegen.TritonPrinter
                                                           else set())
    assert BUILT_IN | {"softmax_init"} <= kinds
    for name in sorted(kinds):
        form = kind_of(name).part(printer.dialect)
        assert isinstance(form, Template) or form.structure in printer.structures(), (name, form)
    with pytest.raises(nc.MissingPartError, match=r"kind 'all_gather' has no"):
        kind_of("all_gather").part(printer.dialect)
    # split and join cut tensors at offsets: loops do it, Triton's block tensors cannot (refused by name)
    if printer is nc.codegen.TritonPrinter:
        with pytest.raises(nc.MissingPartError, match=r"kind 'split' has no Triton form"):
            kind_of("split").part(printer.dialect)


def _negate_then_exp(kind):
    """``exp(kind(x))`` on row groups: the map's output is the only live value once it is made, so the plan's
    bound puts it on the bytes of the tile it reads."""
    return nc.group(nc.kernel(nc.apply(kind, "n m -> n m") >> nc.elementwise("exp", "n m")), "n", "g_n")


@needs_cc
def test_a_users_map_declared_in_place_is_written_in_place(scratch_kinds):
    """Its record says so (``in_place=True``): the output takes the input's bytes without staging, and its kernels
    are the built-in ``neg``'s letter for letter; a map declared without it is staged (never written over what
    it reads: the record does not say it reads element e alone)."""
    sizes = {"n": 6, "m": 5, "g_n": 2}
    for name, in_place in (("negated", True), ("negated_staged", False)):
        nc.declare(name, lambda xs, core: [-xs[0]], flops=lambda core: {"general": 1},
                   forms={"c": "(-{0})", "triton": "(-{0})"}, in_place=in_place)
    p = nc.plan(_negate_then_exp("negated"), sizes)
    lay = layout(p)
    (neg,) = [s for s in walk(p.body) if getattr(s, "kind", None) == "negated"]
    assert lay.offsets[neg.outs[0].var] == lay.offsets[neg.ins[0].var] and lay.aliased(neg) == set()
    builtin = nc.plan(_negate_then_exp("neg"), sizes)
    for printer in (nc.codegen.cuda, nc.codegen.triton):
        assert printer(p).source.replace("negated", "neg") == printer(builtin).source
    assert "staged" not in nc.codegen.cuda(p).source
    x = np.random.default_rng(0).standard_normal((6, 5)).astype(np.float32)
    np.testing.assert_allclose(nc.codegen.c(p, blas=False)(x), np.exp(-x), rtol=1e-6)
    q = nc.plan(_negate_then_exp("negated_staged"), sizes)
    (staged,) = [s for s in walk(q.body) if getattr(s, "kind", None) == "negated_staged"]
    assert layout(q).aliased(staged) == {staged.outs[0].var}
    assert "// staged: negated_staged" in nc.codegen.cuda(q).source


def test_in_place_and_renames_are_declared_as_flags(scratch_kinds):
    with pytest.raises(nc.SignatureError, match=r"kind 'swap_names': a kind that renames axes is written in place: "
                                                r"declare it with in_place=True, renames=True"):
        nc.declare("swap_names", lambda xs, core: [xs[0]], renames=True)
    with pytest.raises(nc.SignatureError, match=r"kind 'half': in_place is True or False, got 'yes'"):
        nc.declare("half", lambda xs, core: [xs[0] / 2], in_place="yes")
    assert not {"swap_names", "half"} & set(KINDS)
    assert {k for k in KINDS if kind_of(k).renames} == {"rename"}
