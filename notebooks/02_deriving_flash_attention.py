# %% [markdown]
# # Deriving FlashAttention by rewriting (paper §3.2, Appendix A.1, Table 4)
#
# Attention is a function.  FlashAttention is an *algorithm* for it.  The rules in `rewrites/` take one
# to the other, each step checked; the cost functor then reads the paper's performance model off the
# result.  Public API only.

# %%
import sympy

import napkin_cat as nc
from rewrites import ALL_RULES, flash_attention, online_softmax_decomposition, unscaled_softmax

attention = nc.library.attention()
r = flash_attention(attention)
for k, step in enumerate(r.trace):
    print(k, step.rule)
assert r.trace.check() and r.trace.replay(attention) == r.diagram
print("H* =", nc.optimal(nc.cost(r.diagram)).H)

# %% [markdown]
# ## Why SoftMax-contraction streams: the online softmax, written out
#
# `online_softmax_decomposition` rewrites `SoftMax(x)·v` over a concrete axis into two chunks with the
# unscaled SoftMax of Table 4 (with the corrections of errata D-08): the running max μ and sum z are
# carried from chunk to chunk and the `/z` is applied once at the end.

# %%
small = nc.library.attention(q=2, x=8, d=4)
two = online_softmax_decomposition.using(first=4).apply(small)
print([b.name for b in two.boxes if b.name in ("SoftMax₁", "Initialize", "·", "div", "mul", "add")])
assert nc.equivalent(small, two, scale=1e3)

# %% [markdown]
# ## The same step-by-step, as the paper's appendix does it: SoftMax → auxiliary → unscaled

# %%
u = unscaled_softmax(attention)
print([s.rule for s in u.trace])
assert nc.equivalent(attention, u.diagram)
print(len(ALL_RULES), "rules in the library, each with a discharged proof obligation (see proofs/)")

# %% [markdown]
# ## Multi-head and grouped-query attention: the same derivation

# %%
for build in (nc.library.multi_head_attention, nc.library.grouped_query_attention):
    d = build()
    r = flash_attention(d)
    o = nc.optimal(nc.cost(r.diagram))
    print(build.__name__, "H* =", o.H)
    assert sympy.expand(o.H.subs(nc.symbol("x"), 0) - nc.cost(r.diagram).H[1].subs(nc.symbol("x"), 0)) == 0
