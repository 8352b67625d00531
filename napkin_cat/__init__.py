"""napkin-cat: FlashAttention on a napkin, as software.

Neural circuit diagrams (paper §2) built on discopy, verified rewrites, and
functors to numpy, IO cost, plans and pictures.

>>> import napkin_cat as nc
>>> att = nc.library.attention()
>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> Q, K, V = rng.normal(size=(4, 8)), rng.normal(size=(6, 8)), rng.normal(size=(6, 8))
>>> nc.evaluate(att, Q, K, V).shape
(4, 8)
"""
from napkin_cat import ops as _ops  # registers the built-in primitive kinds
from napkin_cat.adapter import Array, Box, Diagram, Ty
from napkin_cat.axis import Axis, axes, symbol
from napkin_cat.construct import (Id, apply, cast, einsum, elementwise, join, parse, reduce, rename,
                                  softmax, split, transfer, types)
from napkin_cat.dtype import BF16, DTYPES, FP8, FP16, FP32, DType
from napkin_cat.errors import (AxisError, CompositionError, LevelError, MemoryLimitError,
                               NapkinError, RewriteError, SerialisationError, ShapeError,
                               SignatureError, UnknownPrimitiveError, WeaveError)
from napkin_cat.primitive import Accumulator, KINDS, declare
from napkin_cat.weave import weave
from napkin_cat.relabel import at_level, rename_axis, substitute
from napkin_cat.builder import Builder
from napkin_cat.evaluate import evaluate, equivalent, Equivalence
from napkin_cat import library
from napkin_cat.bubbles import Grid, Kernel, Region, Stream
from napkin_cat.algorithm import group, kernel, stream, unfused
from napkin_cat.iocost import Cost, cost
from napkin_cat.optimum import Optimum, optimal, power_terms

__version__ = "0.1.0"
from napkin_cat.serial import dumps, loads
from napkin_cat.netlist import Netlist, isomorphic, to_diagram, to_netlist
from napkin_cat.rewrite import (Condition, Derivation, Obligation, ObligationError, Rule, RuleSet, Trace,
                                rewrite)
from napkin_cat.draw import draw, to_tikz
