"""Layer 2, library: the named algorithms, built only from the public constructors (paper §3).

Every function takes optional axis sizes (ints; symbolic when omitted).

May import: :mod:`napkin_cat.errors` and :mod:`napkin_cat.syntax`.

>>> import napkin_cat as nc
>>> len(attention().boxes), attention().cod
(3, Ty(Array(q×d)))
>>> grouped_query_attention().dom
Ty(Array(h×g×q×d), Array(h×x×d), Array(h×x×d))
"""
from napkin_cat.library.attention import (attention, grouped_query_attention, inverse_temperature,
                                          multi_head_attention)
from napkin_cat.library.dense import linear, matmul, mlp, swiglu, swiglu_mlp
from napkin_cat.library.losses import cross_entropy, linear_cross_entropy
from napkin_cat.library.masked import (alibi_attention, causal_attention, document_attention, masked_attention,
                                       prefix_lm_attention, sliding_window_attention, softcap_attention)
from napkin_cat.library.masks import alibi_bias, causal_mask, document_mask, prefix_lm_mask, window_mask
from napkin_cat.library.norms import layer_norm, rms_norm
from napkin_cat.library.transformer import in_a_row, transformer_block, transformer_stack

#: constructors of parts (masks, biases, β) and of families (a mask given): not algorithms by themselves
HELPERS = ("inverse_temperature", "masked_attention", "causal_mask", "window_mask", "prefix_lm_mask", "document_mask",
           "alibi_bias")

__all__ = ["matmul", "attention", "multi_head_attention", "grouped_query_attention", "linear", "mlp", "swiglu",
           "swiglu_mlp",
           "layer_norm", "rms_norm", "transformer_block", "transformer_stack", "in_a_row", "inverse_temperature",
           "masked_attention", "causal_attention", "sliding_window_attention", "prefix_lm_attention",
           "softcap_attention", "alibi_attention", "document_attention",
           "causal_mask", "window_mask", "prefix_lm_mask", "document_mask", "alibi_bias", "cross_entropy",
           "linear_cross_entropy"]
