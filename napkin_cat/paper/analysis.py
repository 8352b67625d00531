"""§4 and Appendices A.1-A.2, A.4 reproduced: H* as power terms, multi-level, quantization, caching,
cross-transfer levels, Table 4's SoftMax forms, the fusion theorem, matmul's transfers per FLOP.

>>> from napkin_cat.paper.ledger import Ledger
>>> from napkin_cat.paper.context import Context
>>> book = Ledger(); section_4_1(book, Context(out=None))
>>> book.ok
True
"""
from __future__ import annotations

import numpy as np
import sympy

from napkin_cat.algorithms.partitions import kernel, stream
from napkin_cat.cost.hierarchy import Hierarchy, Level, cross_transfer_gain, quantization_factors
from napkin_cat.cost.iocost import cost
from napkin_cat.cost.optimum import optimal
from napkin_cat.errors import NapkinError, RewriteError
from napkin_cat.paper.context import M, S
from napkin_cat.semantics.evaluate import evaluate
from napkin_cat.syntax.construct import Id, einsum, softmax
from napkin_cat.syntax.weave import weave

a, b, c, q, x, d = S(*"abcqxd")


def _terms(opt) -> dict:
    return {beta: alpha for alpha, beta in opt.terms}


def section_4_1(book, ctx):
    """§4.1: H*(a, M) = Σ_t α_t(a) M^-β_t, with β_t ≥ 0 (errata D-07)."""
    sec = "§4.1"
    att, mm = ctx.optimum_of(ctx.flash), ctx.optimum_of(ctx.tiled_matmul)
    half = sympy.Rational(1, 2)
    book.expr("S4.1-attention-terms", sec, "attention: H* = 2qd M^0 + 4xqd² M^-1",
              paper={0: 2 * q * d, 1: 4 * x * q * d ** 2}, library=_terms(att))
    book.expr("S4.1-matmul-terms", sec, "matmul: H* = ac M^0 + 2abc M^-0.5",
              paper={0: a * c, half: 2 * a * b * c}, library=_terms(mm))
    book.fact("S4.1-exponents", sec, "the exponent says how data is distributed: M^-1 (attention: broadcast to all "
              "groups), M^-0.5 (matmul: square tiles)", paper="β = 1 and β = ½",
              library=max(_terms(att)) == 1 and max(_terms(mm)) == half)
    betas = sorted({beta for o in (att, mm) for beta in _terms(o)})
    book.erratum("S4.1-beta-zero", sec, "β_t is an exponent \"greater than zero\" (D-07: β_t ≥ 0; terms with β = 0 "
                 "exist, e.g. ac and 2qd)", paper="β_t > 0", library=min(betas), corrected=0, erratum="D-07")


def section_4_2(book, ctx):
    """§4.2 (eq. levels): H* = Σ_ℓ Ḣ_ℓ⁻¹ H*(a, M_ℓ) on a three-level hierarchy."""
    sec = "§4.2"
    M1, M2, w1, w2 = S("M_1", "M_2", "w_1", "w_2")
    three = Hierarchy((Level("global"), Level("L1", M1, w1), Level("L2", M2, w2)))
    for name, deriv in (("attention", ctx.flash), ("matmul", ctx.tiled_matmul)):
        opt = ctx.optimum_of(deriv)
        direct = w1 * opt.H.subs(M, M1) + w2 * opt.H.subs(M, M2)
        book.expr(f"S4.2-levels-{name}", sec, f"{name}: H* = Σ_ℓ Ḣ_ℓ⁻¹ H*(a, M_ℓ) (weights times per-level optima)",
                  paper=direct, library=three.total(opt))
    exponents = {}
    for name, deriv in (("attention", ctx.flash), ("matmul", ctx.tiled_matmul)):
        total = sympy.expand(three.total(ctx.optimum_of(deriv)))
        exponents[name] = {t.as_coeff_exponent(M1)[1] for t in sympy.Add.make_args(total) if t.has(M1)}
    book.fact("S4.2-key-factor", sec, "the key factor per level is Ḣ⁻¹/M for attention and Ḣ⁻¹/M^0.5 for matmul",
              paper="Ḣ⁻¹/M, Ḣ⁻¹/M^½", library=exponents == {"attention": {-1}, "matmul": {-sympy.Rational(1, 2)}},
              note=f"exponents of M_1 in the level-1 terms: {exponents}")


def section_4_3(book, ctx):
    """§4.3 (eq. quant): transfers scale as q^(1+β): FP32 → FP16 is ×4 for attention, ×2^1.5 for matmul."""
    sec = "§4.3"
    att = quantization_factors(ctx.optimum_of(ctx.flash), 4, 2)
    mm = quantization_factors(ctx.optimum_of(ctx.tiled_matmul), 4, 2)
    book.expr("S4.3-attention", sec, "halving FP32 → FP16 accelerates attention by up to ×4",
              paper=4, library=1 / att[max(att)])
    book.number("S4.3-matmul", sec, "and large matrix multiplication by 2^1.5 ≈ 2.83", paper=2.83,
                library=float(1 / mm[max(mm)]), abs_=0.005)
    book.fact("S4.3-superlinear", sec, "total transfers are superlinear in the degree of quantization (1+β ≥ 1)",
              paper="1 + β ≥ 1", library=all(f <= sympy.Rational(1, 2) for f in (*att.values(), *mm.values())))


def section_4_4_4_5(book, ctx):
    """§4.4-4.5, Appendix A.2: caching and cross-transfer levels keep the standard model's form."""
    sec = "§4.4"
    Mc, N, wh, wx, w1 = S("M_c", "N", "w_h", "w_x", "w_1")
    cached = Hierarchy((Level("global"), Level("L2", S("M_L2"), w1, kind="cache"),
                        Level("SM", Mc, wh, max_children=N)))
    eff = {i: (w, m) for i, w, m in cached.effective()}
    book.erratum("S4.4-cache-memory", sec, "a caching level uses the children's total memory M_ℓ1 = M_ℓ2 N_ℓ2^max "
                 "(D-05: the caption prints M_ℓ = M_ℓ1 N_ℓ2^max)", paper=S("M_L2") * N, library=eff[1][1],
                 corrected=Mc * N, erratum="D-05")
    sec = "§4.5"
    cross = Hierarchy((Level("global"), Level("cluster", S("M_x"), wx, kind="cross"),
                       Level("SM", Mc, wh, max_children=N)))
    eff = {i: (w, m) for i, w, m in cross.effective()}
    book.expr("S4.5-cross-weight", sec, "a cross-transfer level has weight Ḣ⁻¹_{h→c} − Ḣ⁻¹_{x→c}",
              paper=wh - wx, library=eff[1][0])
    book.erratum("S4.5-child-weight", sec, "and the child's weight is remapped (D-06: Ḣ_c⁻¹ = Ḣ⁻¹_{x→c}, printed "
                 "Ḣ_c = Ḣ⁻¹_{x→c})", paper=1 / wx, library=eff[2][0], corrected=wx, erratum="D-06")
    book.expr("S4.5-cross-memory", sec, "with memory M_c N_c^max", paper=Mc * N, library=eff[1][1])
    opt = ctx.optimum_of(ctx.flash)
    plain = Hierarchy((Level("global"), Level("SM", Mc, wh)))
    direct = plain.total(opt) - cross.total(opt).subs(S("M_x"), Mc * N)
    gain = cross_transfer_gain(opt, Mc, N, wh, wx)
    book.expr("S4.5-delta-H", sec, "ΔH* = ΔḢ⁻¹(N) Σ_t α_t M_c^-β_t (1 − N^-β_t) (Appendix A.2, additional notes)",
              paper=sympy.simplify(direct), library=sympy.simplify(gain),
              note="the paper's side is the difference of the two hierarchies' totals, computed independently")


def appendix_a1(book, ctx):
    """Appendix A.1: streamability from accumulators; the fusion theorem; Table 4 (errata D-08)."""
    sec = "App. A.1"
    book.fact("A1-contraction-streamable", sec, "contraction (a dot product) is streamable",
              paper="streamable", library=_streamable(kernel(einsum("k, k -> ")), "k"))
    book.fact("A1-softmax-alone", sec, "SoftMax alone is not streamable (its output grows with the axis)",
              paper="not streamable", library=not _streamable(kernel(softmax("q x", over="x")), "x"))
    book.fact("A1-fusion-compose", sec, "composing a streamable algorithm with E weaved over the streamed axis "
              "keeps it streamable (attention from SoftMax-contraction)", paper="streamable",
              library=_streamable(kernel(ctx.attention), "x"))
    woven = weave(ctx.attention, "h")
    book.fact("A1-fusion-weave", sec, "weaving a streamable algorithm keeps it streamable (multi-head attention)",
              paper="streamable", library=_streamable(kernel(woven), "x"))
    sec = "App. Table 4"
    rng = np.random.default_rng(7)
    S_, V = rng.normal(size=(6, 10)) * 3, rng.normal(size=(10, 4))
    att = (softmax("q x", over="x") @ Id("x d")) >> einsum("q x, x d -> q d")
    whole = evaluate(att, S_, V)
    flash = stream(kernel(att), "x", "s_x")
    library_err = float(np.abs(evaluate(flash, S_, V, sizes={"s_x": 5}) - whole).max())
    literal_err = float(np.abs(_literal_table4(S_, V, 5) - whole).max())
    book.erratum("A1-table4-update", sec, "the prior output is rescaled as the chunks stream in (D-08: the printed "
                 "\"y′ *= y′ δz′/z\" read literally does not give SoftMax; the intended y′ ← y′·δz′/z does)",
                 paper=literal_err, library=library_err, corrected=0.0, abs_=1e-12, erratum="D-08",
                 note="max error against the unsplit SoftMax-contraction; the paper's side evaluates the literal "
                 "update rule in numpy, the library's side runs the streamed algorithm")


def appendix_a4(book, ctx):
    """Appendix A.4: matmul's transfers per FLOP, H/K = M^-0.5 + (2b)^-1."""
    sec = "App. A.4"
    opt = ctx.optimum_of(ctx.tiled_matmul)
    flops = cost(ctx.tiled_matmul.diagram).flops["tensor"]
    book.expr("A4-transfers-per-flop", sec, "with K = 2abc FLOPs, transfers per FLOP are M^-0.5 + (2b)^-1",
              paper=1 / sympy.sqrt(M) + 1 / (2 * b), library=sympy.simplify(opt.H / flops))


def _streamable(algorithm, axis) -> bool:
    try:
        stream(algorithm, axis, f"s_{axis}")
    except RewriteError:
        return False
    return True


def _literal_table4(scores, V, s):
    """Table 4's auxiliary SoftMax with its update read literally: y′ *= y′ δz′/z (i.e. y′ ← y′·y′·δz′/z)."""
    rows = scores.shape[0]
    mu, z, y = np.full(rows, -np.inf), np.zeros(rows), np.zeros((rows, V.shape[1]))
    for start in range(0, scores.shape[1], s):
        chunk, v = scores[:, start:start + s], V[start:start + s]
        new_mu = np.maximum(mu, chunk.max(1))
        e = np.exp(chunk - new_mu[:, None])
        delta = np.where(np.isneginf(mu), 0.0, np.exp(mu - new_mu))
        new_z = delta * z + e.sum(1)
        y = y * y * (delta * z / new_z)[:, None] + (e / new_z[:, None]) @ v
        mu, z = new_mu, new_z
    return y


def hstar_plots(book, ctx):
    """Figures: H*(M) of matmul and attention, the paper's large-M forms beside the exact integer optima."""
    if not ctx.out:
        return
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib.figure import Figure
    fig = Figure(figsize=(10, 4))
    axes = fig.subplots(1, 2)
    cases = (("matmul", ctx.tiled_matmul, {"a": 256, "b": 256, "c": 256}, range(8, 15), 1),
             ("attention", ctx.flash, {"q": 512, "x": 512, "d": 32}, range(10, 17), 2))
    for ax, (name, deriv, sizes, exps, _) in zip(axes, cases):
        cst = cost(deriv.diagram)
        form = ctx.optimum_of(deriv).H.subs({S(k): v for k, v in sizes.items()})
        Ms = [2 ** e for e in exps]
        exact = []
        for mem in Ms:
            try:
                exact.append(float(optimal(cst, memory=mem, sizes=sizes).H))
            except NapkinError:  # no tile fits this memory: leave the point out
                exact.append(float("nan"))
        ax.loglog(Ms, [float(form.subs(M, mem)) for mem in Ms], "o-", label="paper's large-M form")
        ax.loglog(Ms, exact, "s--", label="exact integer optimum (library)")
        ax.set_title(f"{name} {sizes}")
        ax.set_xlabel("M (values on chip)")
        ax.set_ylabel("H* (values moved)")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(ctx.figure("hstar.png"), dpi=120)


SECTIONS = [("§4.1 power terms", section_4_1), ("§4.2 multi-level", section_4_2), ("§4.3 quantization", section_4_3),
            ("§4.4-4.5 caching, cross-transfer", section_4_4_4_5), ("App. A.1 streaming, Table 4", appendix_a1),
            ("App. A.4 intensity", appendix_a4), ("H*(M) plots", hstar_plots)]
