"""The GPU time model counts a mask read from data as the cost functor does: at a density ``rho`` (the trips its
positions allow, a fraction of them run) or given the data's block mask (exactly what a run skips).

Second routes: the cost functor's bytes and FLOPs at that density put through the rates in the test (measured
ceilings given as round numbers, so every term is one division), and the plan's runner's counts on a concrete block
mask.
"""
import numpy as np
import pytest
import sympy

import napkin_cat as nc
from napkin_cat.errors import ArgumentError, NapkinError, ShapeError
from napkin_cat.hardware import predict

#: round rates (B/s, FLOP/s) for every term the document attention uses (fp32, and the ids' comparison's bool out,
#: at the general pipeline's one rate)
CEILINGS = {"hbm": 1e12, "l2": 1e13, "tensor:fp32": 1e14, "special:fp32": 1e12, "general:fp32": 1e13,
            "general:bool": 1e13}
N, D, G, S = 256, 16, 64, 64
SIZES = {"q": N, "x": N, "d": D, "g_q": G, "s_x": S}


def _flash(function=None):
    return nc.group(nc.stream(nc.kernel(function or nc.library.document_attention()), "x", "s_x"), "q", "g_q")


def _terms_from(counts):
    """The terms of the one kernel from the cost functor's (or a run's) bytes and FLOPs, by the model's formulas."""
    compulsory = (3 * N * D + N * D) * 4 + 2 * N * 4     # Q, K, V, O in fp32, two int32 id vectors
    terms = {"hbm": compulsory / CEILINGS["hbm"], "l2": float(counts.bytes[1]) / CEILINGS["l2"]}
    terms.update({p: float(counts.flops.get(p, 0)) / CEILINGS[f"{p}:fp32"] for p in ("tensor", "special", "general")})
    return terms


def _time_from(terms, kt):
    """``max(T_hbm, T_l2, Σ_p T_p) / u + waves · λ + launch`` with ``u = B / (waves · SMs · r)``, ``B`` the query
    tiles, ``λ`` the model's wave (1.75 µs) and launch 4 µs, written here as numbers."""
    blocks, sms = N // G, nc.hardware.load("h100-sxm5").sm_count
    waves = -(-blocks // (sms * kt.resident))
    u = blocks / (waves * sms * kt.resident)
    assert kt.waves == waves and kt.terms["wave"] == pytest.approx(waves * 1.75e-6)
    return (max(terms["hbm"], terms["l2"], terms["tensor"] + terms["special"] + terms["general"]) / u
            + waves * 1.75e-6 + 4e-6)


@pytest.mark.parametrize("rho", [1, sympy.Rational(1, 4), sympy.Rational(3, 5)])
def test_the_terms_are_the_cost_functors_counts_at_the_density_through_the_rates(rho):
    p = predict(_flash(), "h100-sxm5", SIZES, density=rho, ceilings=CEILINGS)
    (kt,) = p.kernels
    assert set(kt.products.values()) == {"tensor cores"}       # unpadded: every product's FLOPs on the tensor cores
    c = nc.cost(_flash(), sizes=SIZES, density=rho)
    expected = _terms_from(c)
    for name, value in expected.items():
        assert kt.terms[name] == pytest.approx(value, rel=1e-12), name
    assert kt.time == pytest.approx(_time_from(expected, kt), rel=1e-12)
    (stated,) = [a for a in p.assumptions if a.startswith("rho[")]
    assert stated.startswith(f"rho[d(q)=d(x)] = {rho}")


def test_the_density_scales_the_masked_trips_and_1_is_the_dense_prediction():
    dense, default, quarter = (predict(_flash(), "h100-sxm5", SIZES, density=r, ceilings=CEILINGS)
                               for r in (1, None, 0.25))
    assert dense == default
    assert "(dense)" in dense.assumptions[-1]
    # every trip of the stream is masked by the data: the products and the streamed loads scale by ρ exactly
    assert quarter.terms["tensor"] == pytest.approx(dense.terms["tensor"] / 4, rel=1e-12)
    streamed = N // G * (2 * N * D * 4 + N * 4)            # K, V and the keys' ids read once per query tile
    assert (dense.kernels[0].bytes["moved"] - quarter.kernels[0].bytes["moved"]) == 3 * streamed // 4
    assert quarter.terms["hbm"] == dense.terms["hbm"]      # the compulsory bytes do not depend on the mask
    # an algorithm without a mask read from data predicts the same at any density and states none
    plain = _flash(nc.library.attention())
    assert predict(plain, "h100-sxm5", {k: v for k, v in SIZES.items()}, density=0.25) == \
        predict(plain, "h100-sxm5", SIZES)


def test_given_the_block_mask_the_terms_are_what_the_run_counts():
    rng = np.random.default_rng(7)
    ids = np.repeat(np.arange(6), [40, 9, 70, 17, 80, 40]).astype(np.int32)
    bm = nc.block_mask(nc.library.document_mask(q=N, x=N), ids, ids)
    p = predict(_flash(), "h100-sxm5", SIZES, block_mask=bm, ceilings=CEILINGS)
    (kt,) = p.kernels
    Q, K, V = (rng.normal(size=(N, D)) for _ in range(3))
    _, run = nc.plan(_flash(), SIZES).run(Q, K, V, ids, ids, block_mask=bm)
    expected = _terms_from(run)
    for name, value in expected.items():
        assert kt.terms[name] == pytest.approx(value, rel=1e-12), name
    assert kt.time == pytest.approx(_time_from(expected, kt), rel=1e-12)
    live = sum(bool((ids[i:i + G, None] == ids[None, j:j + S]).any()) for i in range(0, N, G) for j in range(0, N, S))
    assert live < (N // G) * (N // S)
    assert f"{live / ((N // G) * (N // S)):.4g} of its blocks at tiles {{'q': {G}, 'x': {S}}} run" in p.assumptions[-1]


def test_a_bad_density_is_refused_by_name():
    with pytest.raises(ArgumentError, match=r"density=: a density is the fraction of a stream's trips that run"):
        predict(_flash(), "h100-sxm5", SIZES, density=1.5)
    with pytest.raises(ArgumentError, match=r"density=: a density is the fraction"):
        predict(_flash(nc.library.attention()), "h100-sxm5", SIZES, density=-0.5)   # checked without a mask too
    with pytest.raises(ArgumentError, match=r"rho\[d\(q\)=d\(x\)\]: a density is the fraction"):
        predict(_flash(), "h100-sxm5", SIZES, density={"rho[d(q)=d(x)]": 2})
    with pytest.raises(ArgumentError, match=r"density names \['rho\[d\(q\)<d\(x\)\]'\], no mask read from data of "
                                            r"this cost: its densities are \['rho\[d\(q\)=d\(x\)\]'\]"):
        predict(_flash(), "h100-sxm5", SIZES, density={"rho[d(q)<d(x)]": 0.5})
    with pytest.raises(ArgumentError, match=r"density names \['rho\[d\(q\)<d\(x\)\]'\]"):
        nc.cost(_flash(), sizes=SIZES, density={"rho[d(q)<d(x)]": 0.5})          # the cost functor's too
    ids = np.zeros(N, np.int32)
    bm = nc.block_mask(nc.library.document_mask(q=N, x=N), ids, ids)
    with pytest.raises(ArgumentError, match="give block_mask= or density=, not both"):
        predict(_flash(), "h100-sxm5", SIZES, block_mask=bm, density=0.5)
    with pytest.raises(ShapeError, match="no stream of this algorithm skips by a mask read from data"):
        predict(_flash(nc.library.attention()), "h100-sxm5", SIZES, block_mask=bm)


def test_derive_for_time_ranks_at_the_density_and_states_it():
    f, sizes = nc.library.document_attention(), {"q": N, "x": N, "d": D}
    r = nc.derive(f, sizes=sizes, hardware="h100-sxm5", density=0.25)
    assert [(str(a.symbol), a.value) for a in r.assumptions] == [("rho[d(q)=d(x)]", sympy.Rational(1, 4))]
    assert "rho[d(q)=d(x)] = 1/4" in r.prediction.assumptions[-1]
    at_tiles = dict(r.optimum.sizes)
    again = predict(r.diagram, "h100-sxm5", at_tiles, density=0.25)
    assert again.time == pytest.approx(r.prediction.time, rel=1e-12)
    assert r.H == nc.cost(r.diagram, sizes=at_tiles, density=0.25).H[1]
    dense = predict(r.diagram, "h100-sxm5", at_tiles)
    assert again.terms["l2"] < dense.terms["l2"] and again.terms["tensor"] < dense.terms["tensor"]
    with pytest.raises(ArgumentError, match=r"density=: a density"):
        nc.derive(f, sizes=sizes, hardware="h100-sxm5", density=4)
    with pytest.raises(NapkinError, match="the CPU time model counts a mask read from data dense"):
        nc.derive(f, sizes=sizes, hardware="epyc-zen3-dev", density=0.25)


@pytest.mark.parametrize("rho", [sympy.Rational(1, 4), 0.28125])
def test_a_prediction_at_a_density_is_plain_json_numbers(rho):
    """What a results file and a stored derivation write (``Prediction.to_dict``, "JSON-ready numbers"): every term,
    FLOP count and time a float or int, not sympy's number (json refused those; a writer that fell back on ``int()``
    wrote a term of 6e-10 s as 0).  Second route: the same terms from the cost functor's counts through the rates."""
    import json
    from napkin_cat.hardware.prediction import Prediction
    p = predict(_flash(), "h100-sxm5", SIZES, density=rho, ceilings=CEILINGS)
    d = p.to_dict()

    def numbers(o):
        if isinstance(o, dict):
            return [x for v in o.values() for x in numbers(v)]
        if isinstance(o, (list, tuple)):
            return [x for v in o for x in numbers(v)]
        return [o] if not isinstance(o, (str, bool)) and o is not None else []
    assert all(type(x) in (int, float) for x in numbers(d)), [type(x) for x in numbers(d)]
    assert Prediction.from_dict(json.loads(json.dumps(d))) == p
    (kt,) = p.kernels
    for name, value in _terms_from(nc.cost(_flash(), sizes=SIZES, density=rho)).items():
        assert kt.terms[name] == pytest.approx(value, rel=1e-12) and kt.terms[name] > 0, name
