"""The losses napkin-cat translates from ATen (rules of :data:`~napkin_cat.torch.aten.ATEN`, written on
:class:`~napkin_cat.torch.translate.Translation`'s operations): ``F.cross_entropy`` and ``F.nll_loss`` on integer
targets, each row's loss the logits (or log-probabilities) read at its class by a gather::

    cross_entropy(x, t)ᵢ = logsumexp_v x[i, v] − x[i, tᵢ]        nll_loss(x, t)ᵢ = −x[i, tᵢ]

then their mean (``reduction`` 1, torch's default), sum (2) or none (0).  Class weights, label smoothing, class
probabilities as targets and a target equal to ``ignore_index`` (a row torch skips) are refused by name.

>>> sorted(LOSSES)
['cross_entropy_loss.default', 'nll_loss.default', 'nll_loss_nd.default']
"""
from __future__ import annotations

from napkin_cat.torch.traced import Tensor
from napkin_cat.torch.translate import Translation


def cross_entropy(t: Translation, x: Tensor, target: Tensor, weight=None, reduction=1, ignore_index=-100,
                  label_smoothing=0.0):
    """``logsumexp_v x − x[target]`` per row, then its mean (reduction 1), sum (2) or none (0)."""
    if label_smoothing:
        t.refuse("cross-entropy with label smoothing; napkin-cat's cross-entropy has none")
    v = 1 if x.rank >= 2 else 0
    return negative_picked(t, x, target, weight, reduction, ignore_index, t.reduce("logsumexp", x, [v]))


def nll_loss(t: Translation, x: Tensor, target: Tensor, weight=None, reduction=1, ignore_index=-100):
    """``F.nll_loss``: ``−x[target]`` per row (``x`` log-probabilities, as ``log_softmax`` gives), then its mean
    (reduction 1), sum (2) or none (0)."""
    return negative_picked(t, x, target, weight, reduction, ignore_index, None)


def negative_picked(t: Translation, x: Tensor, target: Tensor, weight, reduction, ignore_index, offset):
    """``offset − x[target]`` per row (``−x[target]`` without an offset), the class read along dimension 1 (0 for
    one row), reduced as ``reduction`` says: the loss of ``cross_entropy`` and ``nll_loss``."""
    if weight is not None:
        t.refuse("a loss with class weights; napkin-cat's cross-entropy and NLL loss have none")
    if target.dtype == x.dtype:
        t.refuse("a loss against class probabilities; napkin-cat's takes integer targets")
    v = 1 if x.rank >= 2 else 0
    t.require(target, lambda a: bool((a != ignore_index).all()),
              f"a target equal to ignore_index={ignore_index} (that row is not skipped: the diagram's targets are "
              f"class indices in [0, v))")
    picked = t.gather(x, v, t.view(target, target.dims[:v] + (None,) + target.dims[v:]))
    picked = t.view(picked, picked.dims[:v] + picked.dims[v + 1:])
    loss = t.pointwise("neg", picked) if offset is None else t.pointwise("sub", offset, picked)
    if reduction == 0:
        return loss
    return t.reduce("mean" if reduction == 1 else "sum", loss, list(range(loss.rank)))


#: ATen operation → its rule ``rule(t, *args, **kwargs)`` (merged into :data:`~napkin_cat.torch.aten.ATEN`)
LOSSES = {"cross_entropy_loss.default": cross_entropy, "nll_loss_nd.default": nll_loss, "nll_loss.default": nll_loss}

__all__ = ["LOSSES", "cross_entropy", "nll_loss", "negative_picked"]
