"""§2-§3 reproduced: FLOPs by weaving, group and stream partitions, matmul, attention, MHA, GQA.

Every library value is read off a diagram by a functor (``nc.cost``, ``nc.optimal``, ``nc.evaluate``);
the algorithms of §3 are derived from their functions by the rule book's rules.  The paper's
printed formulas are the ``paper=`` side of each claim.

>>> from napkin_cat.paper.ledger import Ledger
>>> from napkin_cat.paper.context import Context
>>> book = Ledger(); section_3_1(book, Context(out=None))
>>> book.ok, len(book.claims) >= 8
(True, True)
"""
from __future__ import annotations

import numpy as np
import sympy

from napkin_cat import library
from napkin_cat.algorithms.partitions import group, kernel, stream
from napkin_cat.cost.iocost import cost
from napkin_cat.paper.context import M, S
from napkin_cat.render.draw import draw
from napkin_cat.semantics.equivalent import equivalent
from napkin_cat.semantics.evaluate import evaluate
from napkin_cat.syntax.construct import einsum, elementwise

a, b, c, q, x, d, h, g, k, m, n = S(*"abcqxdhgkmn")


def section_2(book, ctx):
    """§2.2-2.4: FLOPs of contractions; N_g and H = N_g·H_g; a stream moves the whole axis in s_b slices."""
    sec = "§2.2"
    book.expr("S2.2-contraction-flops", sec, "a k-size contraction requires 2k FLOPs",
              paper=2 * k, library=cost(einsum("k, k -> ")).flops["tensor"])
    book.expr("S2.2-matmul-flops", sec, "m×k by k×n matrix multiplication requires 2mkn FLOPs",
              paper=2 * m * k * n, library=cost(einsum("m k, k n -> m n")).flops["tensor"])
    sec = "§2.3"
    f = kernel(elementwise("exp", "a b"))
    one = cost(group(f, "a", "g_a"))
    book.expr("S2.3-N_g", sec, "group partitioning runs N_g = a/g_a sub-algorithms",
              paper=a / S("g_a"), library=one.N_g)
    book.expr("S2.3-H", sec, "H_ℓ = N_g·H_g (per-group transfers times groups)",
              paper=one.N_g * one.H_g[1], library=one.H[1])
    two = cost(group(group(f, "a", "g_a"), "b", "g_b"))
    book.expr("S2.3-multiple-weaves", sec, "relabelling several weaves gives N_g = ab/(g_a g_b)",
              paper=a * b / (S("g_a") * S("g_b")), library=two.N_g)
    mm = kernel(einsum("a b, b -> a"))
    shared = cost(group(mm, "a", "g_a"))
    book.expr("S2.3-unweaved-input", sec, "an un-weaved input is sent to every group: its cost is multiplied by "
              "N_g without a per-group reduction", paper=a * b / S("g_a") + a * b + a,
              library=shared.H[1], note="matrix-vector product grouped over a: the vector b goes to every group")
    sec = "§2.4"
    whole, streamed = cost(mm), cost(stream(mm, "b", "s_b"))
    book.expr("S2.4-stream-transfers", sec, "a streamed axis is transferred whole: H uses the full size b",
              paper=whole.H[1], library=streamed.H[1])
    mem = streamed.M[1]
    book.fact("S2.4-stream-memory", sec, "memory is evaluated with the stream size s_b instead of b",
              paper="M uses s_b", library=mem.has(S("s_b")) and not mem.has(b), note=f"M = {mem}")
    slopes = [sympy.diff(col, S("s_b")) for col in streamed.columns[1]]
    book.fact("S2.4-stream-size-one", sec, "limiting the stream size to 1 reduces memory at no transfer cost",
              paper="s_b = 1 is optimal", library=not streamed.H[1].has(S("s_b"))
              and all(s.is_nonnegative for s in slopes) and any(s.is_positive for s in slopes),
              note="H does not depend on s_b; every memory column is non-decreasing in s_b, some increasing")


def section_3_1(book, ctx):
    """§3.1 (Fig. dot_product_streamable): tiled matmul derived by rules, its performance model."""
    sec = "§3.1"
    r = ctx.tiled_matmul
    g_a, g_c, s_b = S("g_a", "g_c", "s_b")
    book.fact("S3.1-derived", sec, "matmul is derived from the dot product's streamability (rules only)",
              paper="streamable", library=bool(r.trace.check()) and r.trace.replay(ctx.matmul) == r.diagram,
              note="trace: " + " ; ".join(s.rule for s in r.trace))
    cst = ctx.cost_of(r)
    book.expr("S3.1-N_g", sec, "N_g = ac/(g_a g_c)", paper=a * c / (g_a * g_c), library=cst.N_g)
    book.expr("S3.1-H_g", sec, "H_g = g_a b + b g_c + g_a g_c", paper=g_a * b + b * g_c + g_a * g_c,
              library=cst.H_g[1])
    book.expr("S3.1-M", sec, "M ≥ g_a g_c + g_a s_b + s_b g_c", paper=g_a * g_c + g_a * s_b + s_b * g_c,
              library=cst.M[1])
    book.expr("S3.1-H", sec, "H = abc(1/g_c + 1/g_a) + ac", paper=a * b * c * (1 / g_c + 1 / g_a) + a * c,
              library=sympy.expand(cst.H[1]))
    opt = ctx.optimum_of(r)
    book.expr("S3.1-square-tiles", sec, "√M ≥ g_c = g_a: square tiles are optimal",
              paper={g_a: sympy.sqrt(M), g_c: sympy.sqrt(M)}, library={t: opt.sizes[t] for t in (g_a, g_c)})
    book.expr("S3.1-H-star", sec, "H ≥ 2abc M^-0.5 + ac", paper=2 * a * b * c / sympy.sqrt(M) + a * c,
              library=opt.H)
    book.expr("S3.1-infinite-memory", sec, "as M → ∞ the tiles reach the axes: H = ab + bc + ac",
              paper=a * b + b * c + a * c, library=sympy.expand(cst.H[1].subs({g_a: a, g_c: c})))
    if opt.exact_sizes:
        book.erratum("S3.1-exact-tile", sec, "the optimal tile g = √M (D-12: a large-M form; exact with s_b = 1: "
                     "g = √(M+1) − 1)", paper=sympy.sqrt(M), library=opt.exact_sizes.get(g_a),
                     corrected=sympy.sqrt(M + 1) - 1, erratum="D-12")
    A, B = np.random.default_rng(0).normal(size=(24, 16)), np.random.default_rng(1).normal(size=(16, 20))
    tiled = evaluate(r.diagram, A, B, sizes={"g_a": 8, "g_c": 5, "s_b": 4})
    err = float(np.abs(tiled - A @ B).max())
    book.number("S3.1-numpy", sec, "the tiled algorithm computes A·B (run tile by tile, vs numpy)",
                paper=0.0, library=err, abs_=1e-12)
    path = ctx.figure("tiled_matmul.png")
    if path:
        draw(r.diagram, path, title="Tiled matmul (derived)")
        r.trace.draw(ctx.figure("matmul_derivation.png"))


def section_3_2(book, ctx):
    """§3.2 (Fig. softmax_streamable): FlashAttention derived by rules, its performance model."""
    sec = "§3.2"
    r = ctx.flash
    g_q, s_x = S("g_q", "s_x")
    book.fact("S3.2-derived", sec, "FlashAttention is derived from attention by the fusion theorems (rules only)",
              paper="streamable", library=bool(r.trace.check()) and r.trace.replay(ctx.attention) == r.diagram,
              note="trace: " + " ; ".join(s.rule for s in r.trace))
    rng = np.random.default_rng(0)
    Q, K, V = rng.normal(size=(12, 8)), rng.normal(size=(20, 8)), rng.normal(size=(20, 8))
    s = Q @ K.T / np.sqrt(8)
    p = np.exp(s - s.max(1, keepdims=True))
    reference = (p / p.sum(1, keepdims=True)) @ V
    err = float(np.abs(evaluate(r.diagram, Q, K, V, sizes={"g_q": 4, "s_x": 5}) - reference).max())
    book.number("S3.2-correct", sec, "the diagram computes O = SoftMax(QKᵀ/√d)V (tiled run vs numpy)",
                paper=0.0, library=err, abs_=1e-12)
    cst = ctx.cost_of(r)
    book.expr("S3.2-N_g", sec, "N_g = q/g_q", paper=q / g_q, library=cst.N_g)
    book.expr("S3.2-H_g", sec, "H_g = 2 g_q d + 2 x d", paper=2 * g_q * d + 2 * x * d, library=cst.H_g[1])
    book.expr("S3.2-H", sec, "H = 2qd + 2xdq/g_q", paper=2 * q * d + 2 * x * d * q / g_q,
              library=sympy.expand(cst.H[1]))
    bound = 2 * g_q * d + 2 * s_x * d
    covering = [col for col in cst.columns[1] if _nonnegative(sympy.expand(col - bound))]
    book.fact("S3.2-M", sec, "M ≥ 2 g_q d + 2 s_x d: the library's exact memory model (the maximum over every live "
              "column) contains these terms (D-12: it adds the g_q·s_x score tile and per-row auxiliaries)",
              paper=bound, library=bool(covering),
              note=f"columns {cst.columns[1]}; covering: {covering}")
    opt = ctx.optimum_of(r)
    book.expr("S3.2-g_q", sec, "g_q ≤ M/2d", paper=M / (2 * d), library=opt.sizes[g_q])
    book.expr("S3.2-H-star", sec, "H ≥ 2qd + 4xqd² M^-1", paper=2 * q * d + 4 * x * q * d ** 2 / M, library=opt.H)
    path = ctx.figure("flash_attention.png")
    if path:
        draw(ctx.attention, ctx.figure("attention.png"), title="Attention")
        draw(r.diagram, path, title="FlashAttention (derived)")
        r.trace.draw(ctx.figure("flash_derivation.png"))


def section_3_2_heads(book, ctx):
    """§3.2, Figs. mha and gqa: multi-head and grouped-query attention (errata D-02, D-03)."""
    sec = "§3.2 Fig. mha"
    g_q, g_h, g_g, s_x = S("g_q", "g_h", "g_g", "s_x")
    cst = ctx.cost_of(ctx.mha)
    book.expr("S3.2-mha-N_g", sec, "N_g = qh/(g_q g_h)", paper=q * h / (g_q * g_h), library=cst.N_g)
    book.erratum("S3.2-mha-H_g", sec, "H_g = 2 g_q g_h d + 2 x d (D-03: each group loads K and V for g_h heads)",
                 paper=2 * g_q * g_h * d + 2 * x * d, library=cst.H_g[1],
                 corrected=2 * g_q * g_h * d + 2 * x * g_h * d, erratum="D-03")
    book.erratum("S3.2-mha-H", sec, "H = 2qhd + 2xqhd/(g_q g_g) (D-02: g_g is g_h; with D-03 it is 2qhd + "
                 "2xqhd/g_q)", paper=2 * q * h * d + 2 * x * q * h * d / (g_q * g_g),
                 library=sympy.expand(cst.H[1]), corrected=2 * q * h * d + 2 * x * q * h * d / g_q, erratum="D-02")
    opt = ctx.optimum_of(ctx.mha)
    book.expr("S3.2-mha-tiles", sec, "g_q g_h ≤ M/2d (optimal at g_h = 1 by D-03)", paper=M / (2 * d),
              library=opt.sizes[g_q] * opt.sizes[g_h])
    book.expr("S3.2-mha-H-star", sec, "H ≥ 2hqd + 4hxqd² M^-1 (still correct under D-03)",
              paper=2 * h * q * d + 4 * h * x * q * d ** 2 / M, library=opt.H)
    book.fact("S3.2-mha-scaling", sec, "scaling h changes costs linearly, d quadratically",
              paper="linear in h, quadratic in d",
              library=sympy.degree(sympy.expand(opt.H), h) == 1 and sympy.degree(sympy.expand(opt.H), d) == 2)
    sec = "§3.2 Fig. gqa"
    cst = ctx.cost_of(ctx.gqa)
    one_head = {g_h: 1, h: 1}
    book.expr("S3.2-gqa-N_g", sec, "N_g = gq/(g_q g_g) (per key/value head)", paper=g * q / (g_q * g_g),
              library=cst.N_g.subs(one_head))
    book.expr("S3.2-gqa-H_g", sec, "H_g = 2 g_q g_g d + 2 x d (per key/value head)",
              paper=2 * g_q * g_g * d + 2 * x * d, library=cst.H_g[1].subs(one_head))
    opt = ctx.optimum_of(ctx.gqa)
    book.expr("S3.2-gqa-H-star", sec, "H ≥ 2gqd + 4gxqd² M^-1 (per key/value head)",
              paper=2 * g * q * d + 4 * g * x * q * d ** 2 / M, library=opt.H.subs(h, 1))
    mha_star = ctx.optimum_of(ctx.mha).H
    book.fact("S3.2-gqa-vs-mha", sec, "GQA's transfers are similar to MHA's (same form with g query heads)",
              paper="similar", library=sympy.simplify(opt.H.subs(h, 1) - mha_star.subs(h, g)) == 0)
    if ctx.out:
        draw(library.multi_head_attention(), ctx.figure("mha.png"), title="Multi-head attention")
        draw(library.grouped_query_attention(), ctx.figure("gqa.png"), title="Grouped-query attention")


def equivalence_of_derivations(book, ctx):
    """Every derived algorithm computes its function (random sizes, tiles and data)."""
    for name, start, r in (("flash", ctx.attention, ctx.flash), ("tiled-matmul", ctx.matmul, ctx.tiled_matmul),
                           ("mha", library.multi_head_attention(), ctx.mha),
                           ("gqa", library.grouped_query_attention(), ctx.gqa)):
        verdict = equivalent(start, r.diagram, trials=3)
        book.fact(f"S3-equivalent-{name}", "§3", f"the derived {name} computes its function",
                  paper="≡", library=bool(verdict), note=getattr(verdict, "message", ""))


def _nonnegative(poly) -> bool:
    """Every coefficient of a polynomial in positive sizes is ≥ 0 (so the polynomial is ≥ 0)."""
    return all(term.as_coeff_Mul()[0] >= 0 for term in sympy.Add.make_args(poly))


SECTIONS = [("§2 foundations", section_2), ("§3.1 matmul", section_3_1), ("§3.2 attention", section_3_2),
            ("§3.2 MHA/GQA", section_3_2_heads), ("§3 equivalence", equivalence_of_derivations)]
