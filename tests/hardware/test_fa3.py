"""Appendix A.5: FlashAttention-3's configurations from its plans: the fragments hierarchy (threads manipulate the
tensor cores' data, so nothing is piped through SMEM), the iterations an overlap strategy keeps in flight, the
FP16 intra-warpgroup spill and FP8's room (§6)."""
from __future__ import annotations

import numpy as np
import pytest

import napkin_cat as nc
from napkin_cat.hardware import HardwareError
from napkin_cat.hardware.overlap import Task, sequential
from napkin_cat.paper.configuration import (FA3, configuration, fa3_configuration, fa3_program, flash,
                                            largest_stream_tile, per_thread)


def test_on_the_fragments_hierarchy_every_computation_stays_in_the_warpgroups_registers():
    c = fa3_configuration("fp16-intra", pipelined=False)
    assert {a.level for a in c.assignments} == {"fragments"}
    assert not [p for p in c.pipes if p.var in c.steady]         # no SMEM pipes: fewer variables than Table 1
    assert len(c.steady) == 10 < len(configuration().steady) == 14
    small = nc.hardware.configure(flash("fa3-fp16"), "hopper-fragments", {"w_q": 8, "g_q": 16, "s_x": 8, "x": 24,
                                                                            "d": 16})
    rng = np.random.default_rng(5)
    Q, K, V = rng.normal(size=(16, 16)), rng.normal(size=(24, 16)), rng.normal(size=(24, 16))
    out = small.plan(Q, K, V)
    np.testing.assert_allclose(out, small.base(Q, K, V), atol=1e-12)        # the same rounding as the 2-level plan
    np.testing.assert_allclose(out, nc.evaluate(nc.library.attention(), Q, K, V), atol=2e-3)   # P rounded to FP16


def test_an_overlap_program_buffers_the_values_it_keeps_in_flight():
    plain = fa3_configuration("fp16-intra", pipelined=False)
    piped = plain.pipelined(fa3_program("fp16-intra"))
    grown = {n: piped.variable(n).buffers for n in piped.steady
             if piped.variable(n).buffers != plain.variable(n).buffers}
    # intra: QK_j, PV_{j−1} issued, then SoftMax_j: P (converted to FP16) and P·V live two slots, δ three
    kinds = {piped.variable(n).origin.rsplit("/", 1)[-1]: b for n, b in grown.items()}
    assert kinds == {"cast": 2, "·": 2, "SoftMax₁": 3}
    # one warpgroup at a time (the inter strategy's warpgroups each run sequentially): nothing extra
    assert fa3_configuration("fp8-inter").variable("x1_1").buffers == 2
    inter8 = fa3_configuration("fp8-inter")
    assert all(inter8.variable(n).buffers == 1 for n in inter8.steady if inter8.variable(n).role != "tile")
    with pytest.raises(HardwareError, match=r"the program's tasks \['a', 'b'\] are not the stream body's"):
        plain.pipelined(sequential([Task("a", "tensor", 1), Task("b", "special", 1)]))


def test_fp16_intra_warpgroup_spills_fp8_does_not():
    limit = nc.hardware.load("h100-sxm5").register_bytes_per_thread
    fp16 = per_thread(fa3_configuration("fp16-intra"))
    assert (fp16, per_thread(fa3_configuration("fp16-intra", pipelined=False))) == (1290, 902)
    assert fp16 > limit
    with pytest.raises(nc.hardware.CapacityError, match=r"registers: 1290 B per thread exceeds"):
        fa3_configuration("fp16-intra").table("h100-sxm5", n=1)
    assert {n: per_thread(fa3_configuration(n)) for n in ("fp8-inter", "fp8-intra")} == {"fp8-inter": 583,
                                                                                       "fp8-intra": 777}
    assert (largest_stream_tile("fp8-intra"), largest_stream_tile("fp16-intra")) == (192, 32)


def test_unknown_configuration_is_named():
    with pytest.raises(HardwareError, match=r"no FlashAttention-3 configuration 'fp4-intra'; they are "):
        fa3_configuration("fp4-intra")
    assert set(FA3) == {"fp16-intra", "fp8-inter", "fp8-intra"}
