"""§7 (future work: "consideration of backpropagation"), carried out: attention's backward pass beside its forward.

``nc.grad(attention)`` is the diagram of the vector-Jacobian product, ``(Q, K, V, dO) → (dQ, dK, dV)``.
The section checks it against the chain rule written in numpy, then derives it and the forward with the
same search (``nc.derive``, what ``napkin derive --memory`` and ``napkin derive --grad`` run) at the
sizes of the paper's configuration over a range of memories, and shows both through the same drawers:
``compare_derivations`` (the curves ``napkin derive --plot`` draws, one colour per pass) and the
derivation strips (``napkin derive --strip``) of each pass's winner at :data:`HEADLINE`.

The law checked: the backward reads what the forward reads and more (Q, K, V and dO; it writes three
arrays for one), so at every memory ``H*_backward(M) ≥ H*_forward(M)``; and the search's winner never
moves more than the unfused backward.  The backward's values change as rules land (recomputation from the
saved log-sum-exp); the claims are these inequalities, not today's numbers.

>>> import numpy as np
>>> dQ, dK, dV = chain_rule(*np.ones((4, 2, 2)))
>>> dV.tolist()                         # uniform probabilities: dV = Pᵀ dO with P = ½
[[1.0, 1.0], [1.0, 1.0]]
"""
from __future__ import annotations

import numpy as np

from napkin_cat.autodiff import grad
from napkin_cat.render.curves import compare_derivations
from napkin_cat.semantics.equivalent import equivalent
from napkin_cat.semantics.evaluate import evaluate
from napkin_cat.search import derive

#: the paper's configuration (§5: d = 128) at a sequence length of 4096, and the memories searched
SIZES = {"q": 4096, "x": 4096, "d": 128}
MEMORIES = [2 ** e for e in range(14, 21)]
#: the memory whose winners' derivations are drawn as strips
HEADLINE = 2 ** 16


def chain_rule(Q, K, V, dO):
    """dQ, dK, dV of O = SoftMax(QKᵀ/√d)V by the chain rule, in numpy (the reference the diagram is checked
    against): dV = Pᵀ dO, dP = dO Vᵀ, dS = P ⊙ (dP − rowsum(dP ⊙ P)), dQ = dS K/√d, dK = dSᵀ Q/√d."""
    scale = 1 / np.sqrt(Q.shape[1])
    S = Q @ K.T * scale
    P = np.exp(S - S.max(1, keepdims=True))
    P /= P.sum(1, keepdims=True)
    dP = dO @ V.T
    dS = P * (dP - (dP * P).sum(1, keepdims=True))
    return dS @ K * scale, dS.T @ Q * scale, P.T @ dO


def _power(m: int) -> str:
    return f"2^{m.bit_length() - 1}"


def backward_pass(book, ctx):
    """The backward pass of attention: its signature, its values, its derivation beside the forward's."""
    sec = "§7 backward"
    att = ctx.attention
    g = grad(att)
    book.fact("S7-grad-signature", sec, "nc.grad(attention) takes Q, K, V and the output's cotangent dO and gives "
              "dQ, dK, dV (the inputs' gradients, in input order)", paper="(Q, K, V, dO) → (dQ, dK, dV)",
              library=list(g.dom.inside) == [*att.dom.inside, *att.cod.inside]
              and list(g.cod.inside) == list(att.dom.inside))
    rng = np.random.default_rng(0)
    Q, K, V, dO = (rng.normal(size=s) for s in ((7, 5), (11, 5), (11, 5), (7, 5)))      # ragged sizes
    got = evaluate(g, Q, K, V, dO)
    err = max(float(np.abs(a - b).max()) for a, b in zip(got, chain_rule(Q, K, V, dO)))
    book.number("S7-grad-values", sec, "the gradient diagram computes dQ, dK, dV (vs the chain rule in numpy)",
                paper=0.0, library=err, abs_=1e-12)
    fwd = derive(att, memory=MEMORIES, sizes=SIZES)
    bwd = derive(g, memory=MEMORIES, sizes=SIZES)
    pairs = [(f.memory, int(f.H), int(b.H)) for f, b in zip(fwd.regimes, bwd.regimes)]
    where = "at q = x = 4096, d = 128 and every M = 2^14 … 2^20"
    book.fact("S7-backward-moves-more", sec, f"{where}, the derived backward moves at least what the derived "
              "forward moves", paper="H*_bwd(M) ≥ H*_fwd(M)",
              library=all(hb >= hf for _, hf, hb in pairs) and [m for m, _, _ in pairs] == MEMORIES,
              note="; ".join(f"M = {_power(m)}: {hf:,} → {hb:,}" for m, hf, hb in pairs))
    unfused = dict(bwd.candidates).get("unfused", {})
    book.fact("S7-backward-beats-unfused", sec, f"{where}, the derived backward moves no more than the unfused "
              "backward (one kernel per operation)", paper="H*_bwd(M) ≤ H_unfused(M)",
              library=bool(unfused) and all(hb <= unfused[m] for m, _, hb in pairs if m in unfused),
              note="; ".join(f"M = {_power(m)}: unfused {unfused[m]:,}" for m, _, _ in pairs if m in unfused))
    winners = {name: next(x for x in r.regimes if x.memory == HEADLINE) for name, r in (("forward", fwd),
                                                                                        ("backward", bwd))}
    verdict = equivalent(g, winners["backward"].diagram, trials=2)
    book.fact("S7-backward-derived", sec, f"the backward derived at M = {_power(HEADLINE)} computes the gradient "
              "(random sizes, tiles and data)", paper="≡ nc.grad(attention)", library=bool(verdict),
              note=f"{len(winners['backward'].trace)} rewrites: {winners['backward'].variant.describe()}")
    if not ctx.out:
        return
    compare_derivations({"forward": fwd, "backward": bwd}, ctx.figure("backward_hstar.png"),
                        title=f"attention forward and backward (nc.grad), derived by nc.derive at {SIZES}")
    for name, winner in winners.items():
        winner.trace.draw(ctx.figure(f"{name}_search_derivation.png"))


SECTIONS = [("§7 backward pass (nc.grad)", backward_pass)]
