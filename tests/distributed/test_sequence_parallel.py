"""Sequence parallelism derived (issue 37, item 3; ``rewrites/collectives.py``): a pre-normed MLP with its residual,
``x + relu(LN(x) W₁) W₂``, made tensor-parallel on the hidden axis with its input arriving sharded along the tokens;
the book's ``scatter`` rules split the all-reduce into a reduce-scatter and an all-gather and move the all-gathers
past the boxes local to a token, so the norm and the residual run on a token shard.

Checked by a second route each: the values against numpy written here from the maths, on one device
(``nc.evaluate``) and on torch.distributed (gloo, P = 2 and 4, ragged shards); the link counts against NCCL's ring
algorithms counted here from numpy's shards (an all-gather of the normed input and a reduce-scatter of the output:
``(P − 1)·|x_p|`` sent and ``|x| − |x_p|`` received each, per device), which are also the ranks' own counts; and
``nc.derive`` on a cluster picking it, its time below the all-reduce form's by the norm's and the residual's work
and its memory below by the activations it holds as shards."""
from __future__ import annotations

import dataclasses
import functools

import numpy as np
import pytest

import napkin_cat as nc
from napkin_cat.search.devices import device_forms

SP = "shard h: all-gather n, reduce-scatter n"
OTHER = "shard h: all-gather n ×2, all-reduce"


def pre_normed_mlp():
    """``x + relu(LN(x) W₁) W₂``; inputs x: n×d, γ, β: d, W₁: d×h, W₂: h×d."""
    ln = nc.library.layer_norm()
    bld = nc.Builder(nc.types("n d, d, d, d h, h d"))
    x, g, b, w1, w2 = bld.inputs
    y = bld(nc.elementwise("relu", "n h"), bld(nc.einsum("n d, d h -> n h"), bld(ln, x, g, b), w1))
    return bld.build(bld(nc.elementwise("add", "n d, n d -> n d"), x, bld(nc.einsum("n h, h d -> n d"), y, w2)))


def numpy_block(x, g, b, w1, w2, eps=1e-5):
    mu = x.mean(-1, keepdims=True)
    z = (x - mu) / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + eps) * g + b
    return x + np.maximum(z @ w1, 0) @ w2


@functools.lru_cache(maxsize=None)
def forms_on(P):
    return {f.label: f for f in device_forms(pre_normed_mlp(), P)}


def sequence_parallel(P):
    return forms_on(P)[SP]


def inputs(rng, n, d, h):
    return [rng.normal(size=s) for s in [(n, d), (d,), (d,), (d, h), (h, d)]]


def ring_counts(n, d, P):
    """NCCL's ring all-gather (device p sends its shard to P − 1 others, receives the rest) and reduce-scatter (sends
    every shard but its own, receives its own from P − 1 others) of an n×d array cut along n (numpy's shards)."""
    rows = [len(c) * d for c in np.array_split(np.arange(n), P)]
    each = tuple((P - 1) * r + (n * d - r) for r in rows)
    return each, each


@pytest.mark.parametrize("P", [2, 3, 4])
def test_the_form_is_derived_by_the_rules_and_exact(P):
    f = pre_normed_mlp()
    form = sequence_parallel(P)
    assert form.trace.replay(f) == form.diagram
    (region,) = [b for b in form.diagram.boxes if isinstance(b, nc.Shard)]
    kinds = [b.data.kind for b in region.arg.boxes if getattr(b, "data", None) is not None]
    assert kinds.count("all_gather") == 1 and kinds.count("reducescatter") == 1 and "all_reduce" not in kinds
    # the norm's boxes and the residual run inside on token shards; nothing but wiring is left outside
    assert all(b.name.startswith(("Copy", "Swap")) for b in form.diagram.boxes if not isinstance(b, nc.Shard))
    assert region.sharded("cod") == ("n",)
    rng = np.random.default_rng(P)
    xs = inputs(rng, 11, 5, 7)                                           # ragged: 11 tokens, 7 hidden over P
    assert np.allclose(nc.evaluate(form.diagram, *xs), numpy_block(*xs))
    link = nc.cost(form.diagram, sizes={"n": 11, "d": 5, "h": 7}).link
    assert (link.sent, link.received) == ring_counts(11, 5, P)
    assert link.messages == (2 * (P - 1),) * P


def test_the_link_equals_the_all_reduce_and_the_memory_is_smaller():
    """Symbolically: reduce-scatter and all-gather move what one ring all-reduce moves, ``2(P − 1)/P·n·d`` each way,
    where the all-reduce form whose input arrives sharded also all-gathers it twice; each device holds less."""
    P = 4
    forms = forms_on(P)
    n, d = nc.symbol("n"), nc.symbol("d")
    sp, ar = nc.cost(forms[SP].diagram).link, nc.cost(forms["shard h: all-reduce"].diagram).link
    assert (sp.sent - ar.sent).simplify() == 0 and (sp.sent - 2 * (P - 1) * n * d / P).simplify() == 0
    gathered = nc.cost(forms[OTHER].diagram).link
    assert (gathered.sent - sp.sent - 2 * (P - 1) * n * d / P).simplify() == 0
    at = {"n": 4096, "d": 1024, "h": 4096}
    held = {k: max(nc.cost(forms[k].diagram, sizes=at).link.held) for k in (SP, "shard h: all-reduce")}
    assert held[SP] < held["shard h: all-reduce"]


def test_derive_picks_it_where_the_input_arrives_sharded_along_the_tokens():
    """With x sharded along the tokens and the weights along the hidden axis, the forms that read x whole are refused
    by the layout, and on a device of 8 MiB those that hold the whole weights by their memory (before any is
    derived); of the two left, sequence parallelism holds less (the activations as shards) and spends half the link
    time (one all-gather and one reduce-scatter against two all-gathers and an all-reduce), the other is faster at
    these sizes.  A device too small for the all-gather form leaves it the only one that fits, and derive picks it
    (the choice flips on memory alone: the candidates' times are the same, read from the shared cache)."""
    c = nc.hardware.cluster("h100-sxm5", devices=4, link="nvlink4")
    f, sizes = pre_normed_mlp(), {"n": 1024, "d": 256, "h": 4096}
    layout, forms, cache = ("n", None, None, "h", "h"), list(forms_on(4).values()), {}
    roomy = nc.hardware.Cluster(dataclasses.replace(c.gpu, gmem=8 << 20), 4, c.link)
    r = nc.derive(f, sizes=sizes, hardware=roomy, layout=layout, compute="transfers", forms=forms, cache=cache)
    rows = {row.label: row for row in r.candidates}
    assert {k for k, v in rows.items() if v.time is not None} == {SP, OTHER}
    assert rows["shard h: all-reduce"].refused.startswith("layout")
    whole = 4 * (2 * 256 * 4096)                                      # W₁ and W₂ whole, fp32
    assert all(rows[k].refused.startswith("memory") and rows[k].memory > whole
               for k in ("one device", "shard n ; shard n: all-gather h ×2"))
    sp, other = rows[SP], rows[OTHER]
    link = {k: sum(p.time for p in v.prediction.phases if p.label != "compute") for k, v in ((SP, sp), ("o", other))}
    assert abs(link["o"] / link[SP] - 2) < 1e-9 and other.memory > sp.memory
    assert r.label == OTHER
    tight = nc.hardware.Cluster(dataclasses.replace(c.gpu, gmem=(other.memory + sp.memory) // 2), 4, c.link)
    r = nc.derive(f, sizes=sizes, hardware=tight, layout=layout, compute="transfers", forms=forms, cache=cache)
    assert r.label == SP and r.trace.replay(f) == r.diagram and r.prediction.time == sp.time
    assert {row.label: row for row in r.candidates}[OTHER].refused.startswith("memory")


@pytest.mark.parametrize("P", [2, 4])
def test_it_runs_on_torch_distributed(P, four):
    """On the session's world of four gloo ranks (tests/distributed/conftest.py), P = 2 on its first two."""
    form = sequence_parallel(P)
    rng = np.random.default_rng(10 + P)
    xs = inputs(rng, 9, 4, 6)                                            # 9 tokens, 6 hidden: ragged at P = 4
    r = nc.distributed.run(form.diagram, *xs, world_size=P, world=four if P == 4 else four.first(2))
    assert np.array_equal(r.outputs[0], nc.evaluate(form.diagram, *xs))
    assert np.allclose(r.outputs[0], numpy_block(*xs))
    link = nc.cost(form.diagram, sizes={"n": 9, "d": 4, "h": 6}).link
    assert (r.link.sent, r.link.received) == (link.sent, link.received) == ring_counts(9, 4, P)
