"""The masked attentions and the losses of ``nc.library``: equivalent to plain numpy written from the mathematics
(declared as reference kinds, so ``nc.equivalent`` compares at random and ragged sizes), their sizes, and their
partitioned algorithms."""
import math

import numpy as np
import pytest

import napkin_cat as nc
from napkin_cat.syntax.weave import build_box


def _softmax_rows(S):
    with np.errstate(invalid="ignore"):
        m = np.max(S, axis=-1, keepdims=True)
        e = np.exp(S - m)
        return e / e.sum(-1, keepdims=True)


def _attention(Q, K, V, allowed, bias=0.0):
    S = Q @ K.T / math.sqrt(Q.shape[1]) + bias
    return _softmax_rows(np.where(allowed, S, -np.inf)) @ V


def _positions(Q, K):
    return np.arange(Q.shape[0])[:, None], np.arange(K.shape[0])[None, :]


REFERENCES = {
    "causal": (lambda: nc.library.causal_attention(),
               lambda Q, K, V: _attention(Q, K, V, _positions(Q, K)[1] <= _positions(Q, K)[0])),
    "window": (lambda: nc.library.sliding_window_attention(2),
               lambda Q, K, V: _attention(Q, K, V, np.abs(_positions(Q, K)[0] - _positions(Q, K)[1]) <= 2)),
    "alibi": (lambda: nc.library.alibi_attention(0.5),
              lambda Q, K, V: _attention(Q, K, V, _positions(Q, K)[1] <= _positions(Q, K)[0],
                                         0.5 * (_positions(Q, K)[1] - _positions(Q, K)[0]))),
    "alibi, not causal": (lambda: nc.library.alibi_attention(0.5, causal=False),
                          lambda Q, K, V: _attention(Q, K, V, True, 0.5 * (_positions(Q, K)[1] - _positions(Q, K)[0]))),
    "document": (lambda: nc.library.document_attention(),
                 lambda Q, K, V, sq, sx: _attention(Q, K, V, sq[:, None] == sx[None, :])),
    "document, causal": (lambda: nc.library.document_attention(causal=True),
                         lambda Q, K, V, sq, sx: _attention(Q, K, V, (sq[:, None] == sx[None, :])
                                                            & (_positions(Q, K)[1] <= _positions(Q, K)[0]))),
    "cross-entropy": (lambda: nc.library.cross_entropy(),
                      lambda L, t: np.log(np.exp(L).sum(1)) - L[np.arange(len(t)), t]),
    "linear cross-entropy": (lambda: nc.library.linear_cross_entropy(),
                             lambda H, W, t: np.log(np.exp(H @ W.T).sum(1)) - (H @ W.T)[np.arange(len(t)), t]),
}


def _reference(name, diagram):
    """The numpy reference as a box of the diagram's type (every axis in its core: the whole arrays)."""
    fn = REFERENCES[name][1]
    kind = "reference_" + "".join(c if c.isalnum() else "_" for c in name)
    nc.declare(kind, lambda xs, core: [fn(*[np.asarray(x) for x in xs])], flops=lambda core: {}, replace=True)
    box = build_box(kind, list(diagram.dom.inside), list(diagram.cod.inside), [])
    return nc.Diagram.id(box.dom).then(box)


def _partitioned(d):
    axis, rows = ("v", "n") if "v" in {a.name for arr in d.dom.inside for a in arr.axes} else ("x", "q")
    return nc.group(nc.stream(d, axis, f"s_{axis}"), rows, f"g_{rows}")


@pytest.mark.parametrize("name", list(REFERENCES))
def test_the_library_computes_the_mathematics(name, scratch_kinds):
    d = REFERENCES[name][0]()
    ref = _reference(name, d)
    fixed = {"v": 8} if "entropy" in name else {}      # targets in [0, 7]: every one a row's column
    # a bias is cast to the scores' format (fp32) and scaled by √d there, so √d·bias is rounded to float32: the
    # comparison's tolerance follows (nc.semantics.precision), no atol given
    assert nc.equivalent(d, ref, trials=4, sizes=fixed)
    assert nc.equivalent(_partitioned(d), ref, trials=4, sizes=fixed)     # a ragged trial among them


@pytest.mark.parametrize("name", list(REFERENCES))
def test_sizes_are_symbolic_by_default_and_taken_as_keywords(name):
    make = {"causal": nc.library.causal_attention, "window": lambda **k: nc.library.sliding_window_attention(3, **k),
            "alibi": nc.library.alibi_attention, "alibi, not causal": nc.library.alibi_attention,
            "document": nc.library.document_attention, "document, causal": nc.library.document_attention,
            "cross-entropy": nc.library.cross_entropy,
            "linear cross-entropy": nc.library.linear_cross_entropy}[name]
    d = make()
    assert all(not a.is_concrete for arr in d.dom.inside for a in arr.axes)
    names = sorted({a.name for arr in d.dom.inside for a in arr.axes})
    given = make(**{n: 3 + k for k, n in enumerate(names)})
    assert all(a.size == 3 + names.index(a.name) for arr in given.dom.inside for a in arr.axes)


def test_document_attention_takes_the_segment_ids_after_q_k_v():
    d = nc.library.document_attention(q=4, x=6, d=2)
    assert [str(a) for a in d.dom.inside] == ["q[4]×d[2]", "x[6]×d[2]", "x[6]×d[2]", "q[4]:int32", "x[6]:int32"]


def test_the_losses_take_integer_targets_and_give_a_loss_per_row():
    ce, lce = nc.library.cross_entropy(), nc.library.linear_cross_entropy()
    assert [str(a) for a in ce.dom.inside] == ["n×v", "n:int32"] and [str(a) for a in ce.cod.inside] == ["n"]
    assert [str(a) for a in lce.dom.inside] == ["n×e", "v×e", "n:int32"] and str(lce.cod.inside[0]) == "n"


def test_masks_read_no_input_and_are_drawn_from_positions():
    for mask in (nc.library.causal_mask(), nc.library.window_mask(4), nc.library.alibi_bias()):
        assert mask.dom == nc.Ty()
        assert sum(getattr(b.data, "kind", None) == "position" for b in mask.boxes) == 2
    assert [str(a) for a in nc.library.document_mask().dom.inside] == ["q:int32", "x:int32"]
