# %% [markdown]
# # FlashAttention on a napkin, §3 and §4 reproduced
#
# Every formula below is *computed* from a diagram by napkin-cat's functors and then compared with
# the paper's printed formula.  Run as a script or open as a notebook (jupytext percent format).

# %%
import sympy

import napkin_cat as nc

S = nc.symbol
a, b, c, q, x, d, h, M = (S(n) for n in "abcqxdhM")

# %% [markdown]
# ## §3.1 Matrix multiplication: contraction is streamable, matmul is its weave

# %%
matmul = nc.library.matmul()
tiled = nc.group(nc.group(nc.stream(matmul, "b", "s_b"), "a", "g_a"), "c", "g_c")
assert nc.equivalent(matmul, tiled)
cost = nc.cost(tiled)
print("N_g =", cost.N_g, "  H_g =", cost.H_g[1], "  M =", cost.M[1])
opt = nc.optimal(cost, memory="M")
print("H* =", opt.H, " with", opt.sizes)
assert sympy.expand(opt.H - (2 * a * b * c / sympy.sqrt(M) + a * c)) == 0
print("exact optimum (errata D-12):", opt.exact_sizes)

# %% [markdown]
# ## §3.2 Attention: SoftMax-contraction is streamable; precompose with E, weave q and d

# %%
attention = nc.library.attention()
flash = nc.group(nc.stream(attention, "x", "s_x"), "q", "g_q")
assert nc.equivalent(attention, flash)
cost = nc.cost(flash)
print("N_g =", cost.N_g, "  H_g =", cost.H_g[1])
opt = nc.optimal(cost, memory="M")
print("H* =", opt.H, " with", opt.sizes)
assert sympy.expand(opt.H - (2 * q * d + 4 * x * q * d ** 2 / M)) == 0
print("unfused (native PyTorch) H =", nc.cost(nc.unfused(attention)).H[1])

# %% [markdown]
# ## Multi-head attention (errata D-02, D-03: each group loads K and V for g_h heads)

# %%
mha = nc.group(nc.group(nc.stream(nc.library.multi_head_attention(), "x", "s_x"), "q", "g_q"), "h", "g_h")
cost = nc.cost(mha)
print("H_g =", cost.H_g[1], "(paper prints 2 g_q g_h d + 2 x d)")
opt = nc.optimal(cost, memory="M")
assert sympy.expand(opt.H - (2 * h * q * d + 4 * h * x * q * d ** 2 / M)) == 0
print("H* =", opt.H, " with", opt.sizes)

# %% [markdown]
# ## §4.3 Quantization: FP32 → FP16

# %%
from napkin_cat.cost.hierarchy import quantization_factors

att_q = quantization_factors(nc.optimal(nc.cost(flash)), 4, 2)
mm_q = quantization_factors(nc.optimal(nc.cost(tiled)), 4, 2)
print("attention speed-up on its M-bound term:", 1 / att_q[1])
print("matmul speed-up on its M-bound term:", float(1 / mm_q[sympy.Rational(1, 2)]))
assert 1 / att_q[1] == 4 and abs(float(1 / mm_q[sympy.Rational(1, 2)]) - 2 ** 1.5) < 1e-12
