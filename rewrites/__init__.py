"""The theorem library: rewrite rules of the paper as data (built on napkin_cat's public API).

One module per family; each rule's docstring shows ``lhs → rhs`` and cites the
paper, and each rule carries its proof obligation (discharged in ``proofs/``).

=================  ==========================================================================
ruleset            rules
=================  ==========================================================================
``BASIC``          copy_discard, delete_pure_box, remove_identity, common_value (one value computed once; it plays
                   ``normalise``, not ``simplify``: a ``prepare`` rule computes a value twice on purpose)
``SOFTMAX``        softmax_to_auxiliary, auxiliary_to_unscaled, divide_after_contraction,
                   softmax_contraction_to_unscaled
``FUSION``         save_load_elimination
``SHARING``        shared_load (a kernel loads a value it reads in several places once)
``SIBLINGS``       sibling_fusion (two independent kernels that read one value become one kernel)
``LSE_STATE``      logsumexp_from_softmax (a row's log-sum-exp read off the online SoftMax's state beside it:
                   μ + log z)
``COMPUTE_ONCE``   kernel_common_value (a kernel computes each value once: the copies of a value that fusion or a
                   join brought into one kernel merged inside it)
``SIMPLIFY``       the terminating clean-up rules (copy law, deletion, identities, Save;Load)
``UNSCALED``       the paper's SoftMax → Auxiliary → Unscaled derivation, plus SIMPLIFY
``PARTITION``      kernel_formation, kernel_fusion, stream_partition, sliced_stream, group_partition
``RECOMPUTE``      recompute (a consumer recomputes a value from the inputs and small statistics),
                   softmax_to_logsumexp (SoftMax's probabilities from their row's log-sum-exp: a statistic)
``INNER``          inner_stream (a stream inside a stream's trip along another axis: the 2-D tiled loop)
``DECOMPOSE``      group_split_join, stream_decomposition, online_softmax_decomposition (written-out forms)
``NORMALISERS``    softmax_statistics_pass, centred_statistics_pass (a normaliser as a statistics pass and a
                   normalising pass)
``CONTRACTION``    contraction_merge, contraction_split, contraction_reassociation, contracted_axis_renaming,
                   pairwise_contraction (an n-ary contraction as pairwise ones, in an order the search costs)
``SPLITS``         split_stream (a stream's slices in parts run by parallel blocks, their states merged)
``DEVICES``        device_partition, device_reduction, device_fusion, device_gather, device_generation (a program
                   over P devices: shards, partials merged by an all-reduce, regions fused with the all-gathers a
                   whole read needs, inputs arriving sharded and all-gathered, positions computed on each device;
                   device_ring: such inputs passed round the devices
                   instead, the inside streamed over their shards; device_ring_gathered: the all-gather of a value
                   computed on the shards made a ring; device_ulysses: a part woven over the heads
                   run on a head shard between two all-to-alls, its sequence sharded; device_scatter,
                   device_gather_later, device_gather_output, device_local_fusion: an all-reduce split into a
                   reduce-scatter and an all-gather, the all-gathers moved past the boxes local to their axis
                   (sequence parallelism); oriented by their user with
                   ``rule.using(devices=P)``; ``tensor_parallel`` applies them)
``NORMAL_FORM``    written_softmax, unshifted_softmax, written_logsumexp, scale_into_softmax, product_with_itself,
                   times_reciprocal, mean_of_sum (an operation written by hand as the primitive that names it)
``LOG_FORM``       log_of_softmax, gather_before_maps (log SoftMax as x − LSE; a gather taken before the
                   pointwise maps it reads: cross-entropy reads its logits once)
``GATHERED``       softmax_of_gathered (a SoftMax read only by a gather along its axes as exp(βx − LSE), the gather
                   taken first: a picked probability reads the logits once; offered, role ``prepare``)
``SUM_FORM``       sum_of_contraction, own_axes_first (a sum is a one-operand contraction, summed as early as
                   its axes allow); with contraction_into_readers (a contraction merged into each reader)
``SCALE_FORM``     scale_through_contraction, scales_multiply (a scale taken after the contractions that read
                   it, toward the outputs; consecutive scales one)
``VARIANCE_FORM``  uncentred_variance (mean(x²) − mean(x)² as the centred variance mean((x − mean x)²))
=================  ==========================================================================

Derivations: ``flash_attention(attention)`` and ``tiled_matmul(matmul)`` (module ``derive``).

>>> import napkin_cat as nc
>>> att = nc.library.attention()
>>> r = unscaled_softmax(att)
>>> [s.rule for s in r.trace][:3]
['softmax_to_auxiliary', 'auxiliary_to_unscaled', 'divide_after_contraction']
>>> nc.isomorphic(r.diagram, softmax_contraction_to_unscaled.apply(att))
True
"""
from napkin_cat.rewriting import Derivation, RuleSet, rewrite
from napkin_cat.rewriting.registry import Rulebook
from rewrites.basic import RULES as BASIC
from rewrites import contraction, contraction_order, devices, sum_normal_form
from rewrites.contraction import (contracted_axis_renaming, contraction_merge, contraction_reassociation,
                                  contraction_split)
from rewrites.contraction_order import pairwise_contraction
from rewrites.basic import common_value, copy_discard, delete_pure_box, remove_identity
from rewrites.fusion import RULES as FUSION
from rewrites.fusion import save_load_elimination
from rewrites.inner_stream import RULES as INNER
from rewrites.inner_stream import inner_stream
from rewrites.normalisers import RULES as NORMALISERS
from rewrites.normalisers import centred_statistics_pass, softmax_statistics_pass
from rewrites.normal_form import NORMAL_FORM
from rewrites.normal_form import (mean_of_sum, product_with_itself, scale_into_softmax, times_reciprocal,
                                  unshifted_softmax, written_logsumexp, written_softmax)
from rewrites.log_probability import LOG_FORM, gather_before_maps, log_of_softmax
from rewrites.gathered_probability import RULES as GATHERED
from rewrites.gathered_probability import softmax_of_gathered
from rewrites.sum_normal_form import SUM_FORM, contraction_into_readers, own_axes_first, sum_of_contraction
from rewrites.scale_normal_form import SCALE_FORM, scale_through_contraction, scales_multiply
from rewrites.variance_normal_form import VARIANCE_FORM, uncentred_variance
from rewrites.recompute import RULES as RECOMPUTE
from rewrites.recompute import recompute
from rewrites.softmax_statistics import RULES as STATISTICS
from rewrites.softmax_statistics import softmax_to_logsumexp
from rewrites.decompose import RULES as DECOMPOSE
from rewrites.decompose import group_split_join, online_softmax_decomposition, stream_decomposition
from rewrites.partition import RULES as PARTITION
from rewrites.partition import group_partition, kernel_formation, kernel_fusion, sliced_stream, stream_partition
from rewrites.splits import RULES as SPLITS
from rewrites.generation import device_generation
from rewrites.ring import device_ring
from rewrites.ring_gathered import device_ring_gathered
from rewrites.ulysses import device_ulysses
from rewrites.collectives import device_gather_later, device_gather_output, device_scatter
from rewrites.local_fusion import device_local_fusion
from rewrites.devices import device_fusion, device_gather, device_partition, device_reduction, tensor_parallel
from rewrites.splits import split_stream
from rewrites.sharing import RULES as SHARING
from rewrites.sharing import shared_load
from rewrites.siblings import RULES as SIBLINGS
from rewrites.siblings import sibling_fusion
from rewrites.compute_once import RULES as COMPUTE_ONCE
from rewrites.compute_once import kernel_common_value
from rewrites.axes_apart import RULES as APART
from rewrites.axes_apart import axes_apart
from rewrites.logsumexp_from_state import RULES as LSE_STATE
from rewrites.logsumexp_from_state import logsumexp_from_softmax
from rewrites.softmax import RULES as SOFTMAX
from rewrites.softmax import (auxiliary_to_unscaled, divide_after_contraction, softmax_contraction_to_unscaled,
                              softmax_to_auxiliary)

CONTRACTION = contraction.RULES + contraction_order.RULES
DEVICES = devices.RULES + RuleSet((device_generation, device_ring, device_ring_gathered, device_ulysses,
                                   device_local_fusion, device_scatter, device_gather_later, device_gather_output))
SIMPLIFY = RuleSet((copy_discard, delete_pure_box, remove_identity, save_load_elimination))
UNSCALED = RuleSet((softmax_to_auxiliary, auxiliary_to_unscaled, divide_after_contraction)) + SIMPLIFY

# A new family adds its RuleSet here; proofs/test_meta.py then demands a passing proof for each rule.
ALL_RULES = BASIC + SOFTMAX + FUSION + PARTITION + INNER + SHARING + SIBLINGS + COMPUTE_ONCE + LSE_STATE + DECOMPOSE \
    + CONTRACTION + NORMALISERS + SPLITS + RECOMPUTE + STATISTICS + NORMAL_FORM + LOG_FORM + GATHERED \
    + sum_normal_form.RULES + SCALE_FORM + VARIANCE_FORM + DEVICES + APART
from rewrites.derive import flash_attention, tiled_matmul  # noqa: E402  (derivations use the rules)


def unscaled_softmax(diagram, *, max_steps: int = 1000) -> Derivation:
    """Rewrite every SoftMax · contraction into Unscaled SoftMax · contraction / z, step by step
    (paper Appendix "Fusion of SoftMax-Contraction"); the first stage of a FlashAttention derivation."""
    return rewrite(diagram, UNSCALED, max_steps=max_steps)


#: The paper's rule book, found by napkin_cat through the ``napkin_cat.rules`` entry point (pyproject.toml).
RULEBOOK = Rulebook("paper", ALL_RULES, {"flash_attention": flash_attention, "tiled_matmul": tiled_matmul,
                                        "unscaled_softmax": unscaled_softmax},
                    roles={"kernel": "kernel_formation", "fuse": "kernel_fusion", "stream": "stream_partition",
                           "sweep": "sliced_stream", "split": "split_stream", "nest": "inner_stream",
                           "group": "group_partition", "share": "shared_load", "join": "sibling_fusion",
                           "compute_once": "kernel_common_value", "apart": "axes_apart",
                           "recompute": ("softmax_to_logsumexp", "recompute"),
                           "prepare": ("softmax_contraction_to_unscaled", "logsumexp_from_softmax",
                                       "contraction_reassociation", "pairwise_contraction", "softmax_statistics_pass",
                                       "centred_statistics_pass", "contraction_into_readers", "softmax_of_gathered"),
                           "simplify": tuple(SIMPLIFY.names),
                           "normalise": ("common_value",) + tuple(NORMAL_FORM.names) + tuple(LOG_FORM.names)
                           + tuple(SUM_FORM.names) + tuple(SCALE_FORM.names) + tuple(VARIANCE_FORM.names)
                           + ("contraction_merge",),
                           "shard": "device_partition", "shard_reduce": "device_reduction",
                           "shard_fuse": "device_fusion", "shard_gather": "device_gather",
                           "shard_generate": "device_generation", "ring": "device_ring",
                           "ring_gathered": "device_ring_gathered",
                           "reshard": "device_ulysses",
                           "scatter": ("device_local_fusion", "device_scatter", "device_gather_later",
                                       "device_gather_output")})


__all__ = ["RULEBOOK", "ALL_RULES", "BASIC", "SOFTMAX", "FUSION", "SIMPLIFY", "UNSCALED", "PARTITION",
           "unscaled_softmax",
           "flash_attention", "tiled_matmul", "kernel_formation", "kernel_fusion", "stream_partition", "sliced_stream",
           "group_partition", "INNER", "inner_stream", "RECOMPUTE", "recompute", "softmax_to_logsumexp",
           "SHARING", "shared_load", "SIBLINGS", "sibling_fusion", "COMPUTE_ONCE", "kernel_common_value",
           "LSE_STATE", "logsumexp_from_softmax", "APART", "axes_apart",
           "DECOMPOSE", "group_split_join",
           "stream_decomposition",
           "online_softmax_decomposition",
           "copy_discard", "delete_pure_box", "remove_identity", "common_value",
           "softmax_to_auxiliary", "auxiliary_to_unscaled", "divide_after_contraction",
           "softmax_contraction_to_unscaled", "save_load_elimination",
           "CONTRACTION", "contraction_merge", "contraction_split", "contraction_reassociation",
           "contracted_axis_renaming", "pairwise_contraction", "NORMALISERS", "softmax_statistics_pass",
           "centred_statistics_pass", "SPLITS", "split_stream", "device_ring", "device_ring_gathered",
           "NORMAL_FORM", "written_softmax",
           "written_logsumexp", "scale_into_softmax", "product_with_itself", "times_reciprocal", "mean_of_sum",
           "unshifted_softmax", "LOG_FORM", "log_of_softmax", "gather_before_maps", "GATHERED", "softmax_of_gathered",
           "SUM_FORM", "sum_of_contraction", "own_axes_first", "contraction_into_readers",
           "SCALE_FORM", "scale_through_contraction", "scales_multiply",
           "VARIANCE_FORM", "uncentred_variance", "DEVICES", "device_partition", "device_reduction", "device_fusion",
           "device_gather", "tensor_parallel", "device_ulysses", "device_scatter", "device_gather_later",
           "device_gather_output", "device_local_fusion"]
