"""napkin-cat: FlashAttention on a napkin, as software.

Neural circuit diagrams (paper §2) built on discopy, verified rewrites, and
functors to numpy, IO cost, plans and pictures.  ``__all__`` is the public
surface; the layers behind it are subpackages reached by their paths
(``napkin_cat.syntax``, ``.algorithms``, ``.library``, ``.semantics``, ``.cost``,
``.rewriting``, ``.search``, ``.plan``, ``.codegen``, ``.hardware``, ``.render``,
``.io``; see ``docs/architecture.md``).

>>> import napkin_cat as nc
>>> att = nc.library.attention()
>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> Q, K, V = rng.normal(size=(4, 8)), rng.normal(size=(6, 8)), rng.normal(size=(6, 8))
>>> nc.evaluate(att, Q, K, V).shape
(4, 8)
"""
from napkin_cat.syntax import ops as _ops  # noqa: F401  (registers the built-in primitive kinds)
from napkin_cat.syntax import logsumexp as _logsumexp  # noqa: F401  (log-sum-exp and its online step)
from napkin_cat.syntax.indices import compare, gather, logical, position, select, where
from napkin_cat.errors import (AxisError, CompositionError, LevelError, MemoryLimitError,
                               IndexingError, NapkinError, RewriteError, SerialisationError, ShapeError,
                               SignatureError, UnknownPrimitiveError, WeaveError)
from napkin_cat.syntax.adapter import Array, Box, Diagram, Ty
from napkin_cat.syntax.axis import Axis, axes, symbol
from napkin_cat.syntax.construct import (Id, apply, cast, einsum, elementwise, join, parse, reduce, rename,
                                         softmax, split, transfer, types)
from napkin_cat.syntax.dtype import BF16, BOOL, DTYPES, FP8, FP16, FP32, INT32, DType
from napkin_cat.syntax.primitive import Accumulator, KINDS, declare
from napkin_cat.syntax.weave import weave
from napkin_cat.syntax.relabel import at_level, rename_axis, substitute
from napkin_cat.syntax.builder import Builder
from napkin_cat.syntax.wiring import traverse
from napkin_cat import library
from napkin_cat.algorithms.bubbles import Grid, Kernel, Region, Stream
from napkin_cat.algorithms.partitions import group, kernel, stream, unfused
from napkin_cat.algorithms import online as _online  # noqa: F401  (registers log-sum-exp's online form)
from napkin_cat.semantics.evaluate import evaluate
from napkin_cat.semantics.equivalent import Equivalence, equivalent
from napkin_cat.cost.record import Cost
from napkin_cat.cost.functor import cost
from napkin_cat.cost.optimum import Optimum, optimal, power_terms
from napkin_cat.rewriting.netlist import Netlist, to_netlist
from napkin_cat.rewriting.readback import to_diagram
from napkin_cat.rewriting.isomorphism import isomorphic
from napkin_cat.rewriting.obligation import Obligation, ObligationError
from napkin_cat.rewriting.rules import Condition, Rule, RuleSet
from napkin_cat.rewriting.trace import Derivation, Trace
from napkin_cat.rewriting.driver import rewrite
from napkin_cat.search import derive
from napkin_cat.autodiff import GradError, NoVJPError, grad
from napkin_cat.plan import Counters, Plan, PlanError, plan
from napkin_cat.io.serial import dumps, loads
from napkin_cat import hardware
from napkin_cat import codegen
from napkin_cat.render.draw import draw, to_tikz
from napkin_cat.render import strip as _strip  # noqa: F401  (registers the derivation-strip drawer)

__version__ = "0.1.0"

__all__ = [
    # errors
    "NapkinError", "AxisError", "IndexingError", "CompositionError", "LevelError", "MemoryLimitError", "RewriteError",
    "SerialisationError", "ShapeError", "SignatureError", "UnknownPrimitiveError", "WeaveError",
    # syntax
    "Array", "Box", "Diagram", "Ty", "Axis", "axes", "symbol", "DType", "DTYPES", "FP32", "FP16", "BF16", "FP8",
    "INT32", "BOOL", "position", "compare", "logical", "where", "select", "gather",
    "Accumulator", "KINDS", "declare", "Id", "apply", "cast", "einsum", "elementwise", "join", "parse", "reduce",
    "rename", "softmax", "split", "transfer", "types", "weave", "at_level", "rename_axis", "substitute", "Builder",
    "traverse",
    # algorithms and the named ones
    "library", "Region", "Kernel", "Grid", "Stream", "kernel", "unfused", "group", "stream",
    # functors: numpy, cost
    "evaluate", "equivalent", "Equivalence", "Cost", "cost", "Optimum", "optimal", "power_terms",
    # rewriting
    "Netlist", "to_netlist", "to_diagram", "isomorphic", "Condition", "Rule", "RuleSet", "Obligation",
    "ObligationError", "Trace", "Derivation", "rewrite",
    # derivation search
    "derive", "grad", "GradError", "NoVJPError",
    # plans
    "plan", "Plan", "Counters", "PlanError",
    # pictures and JSON
    "draw", "to_tikz", "dumps", "loads",
    # hardware models and tables; kernels
    "hardware", "codegen",
]
