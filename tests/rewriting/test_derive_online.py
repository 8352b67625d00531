"""Item 8: the FlashAttention derivation uses the online-softmax rule of the rule library."""
import sympy

import napkin_cat as nc
from rewrites import flash_attention

S = nc.symbol
q, x, d, M = (S(n) for n in ("q", "x", "d", "M"))


def test_flash_attention_trace_shows_the_online_softmax_rule():
    att = nc.library.attention()
    r = flash_attention(att)
    rules = [s.rule for s in r.trace]
    assert rules[0] == "softmax_contraction_to_unscaled", rules
    assert rules[1:] == ["kernel_formation"] * 5 + ["kernel_fusion"] * 4 + ["stream_partition", "group_partition"]
    assert r.trace.replay(att) == r.diagram and r.trace.check()
    assert nc.equivalent(att, r.diagram, trials=5)
    (grid,) = r.diagram.boxes
    (stream,) = grid.arg.boxes[0].arg.boxes
    (reducer,) = stream.plan.reducers
    assert reducer.form.name == "softmax_contraction_to_unscaled"
    c = nc.cost(r.diagram)
    assert c.N_g == q / S("g_q") and sympy.expand(c.H_g[1] - (2 * S("g_q") * d + 2 * x * d)) == 0
    assert sympy.expand(nc.optimal(c).H - (2 * q * d + 4 * x * q * d ** 2 / M)) == 0
