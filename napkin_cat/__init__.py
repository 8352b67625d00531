"""napkin-cat: FlashAttention on a napkin, as software.

Neural circuit diagrams (paper §2) built on discopy, verified rewrites, and
functors to numpy, IO cost, plans and pictures.  ``__all__`` is the user's
vocabulary: build, rewrite, cost, plan, run, draw, and every error
(:mod:`napkin_cat.errors`, each also ``nc.<Error>``).  The parts napkin-cat is
built from, for a user who extends it (a primitive's registry, the one fold,
netlists, proof obligations), are :mod:`napkin_cat.engine` (``nc.engine``); the
layers behind both are subpackages reached by their paths (``napkin_cat.syntax``,
``.algorithms``, ``.library``, ``.semantics``, ``.cost``, ``.rewriting``,
``.search``, ``.plan``, ``.codegen``, ``.hardware``, ``.render``, ``.io``; see
``docs/architecture.md``).  ``nc.torch`` (derived algorithms as PyTorch custom ops) is
loaded on first use: torch is optional, and ``import napkin_cat`` never imports it.
A name that left the vocabulary still resolves, with a DeprecationWarning saying
where it lives (``MOVED``).

>>> import napkin_cat as nc
>>> att = nc.library.attention()
>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> Q, K, V = rng.normal(size=(4, 8)), rng.normal(size=(6, 8)), rng.normal(size=(6, 8))
>>> nc.evaluate(att, Q, K, V).shape
(4, 8)
"""
import importlib as _importlib
import pkgutil as _pkgutil
import sys as _sys
import types as _types
import warnings as _warnings

from napkin_cat.syntax import ops  # noqa: F401  (registers the built-in primitive kinds)
from napkin_cat.errors import *  # noqa: F401,F403  (every error: nc.AxisError, nc.PlanError, ...)
from napkin_cat import errors
from napkin_cat.syntax.array import Array
from napkin_cat.syntax.adapter import Diagram, Ty
from napkin_cat.syntax.axis import Axis, axes, symbol
from napkin_cat.syntax.sizes import Sizes
from napkin_cat.syntax.construct import (Id, apply, cast, einsum, elementwise, join, reduce, renaming, softmax, split,
                                         transfer, types)
from napkin_cat.syntax.dtype import BF16, DTYPES, FP8, FP16, FP32, DType
from napkin_cat.syntax.primitive import Accumulator, declare
from napkin_cat.syntax.printed import Fold, Structured, Template
from napkin_cat.syntax import logsumexp  # noqa: F401  (log-sum-exp and its online step)
from napkin_cat.syntax import division  # noqa: F401  (floor division and remainder)
from napkin_cat.syntax.indices import compare, gather, logical, position, select, where
from napkin_cat.syntax.dtype import BOOL, INT32
from napkin_cat.syntax.weave import weave
from napkin_cat.syntax.relabel import at_level, rename_axis, substitute
from napkin_cat.syntax.builder import Builder
from napkin_cat import library
from napkin_cat.algorithms.bubbles import Grid, Kernel, Region, Stream
from napkin_cat.algorithms.partitions import group, kernel, stream, unfused
from napkin_cat.algorithms.devices import Shard, shard
from napkin_cat.algorithms.ring import Ring, ring
from napkin_cat.syntax.collectives import all_gather, all_reduce, all_to_all, reduce_scatter
from napkin_cat.algorithms import online  # noqa: F401  (registers log-sum-exp's online form)
from napkin_cat.algorithms import moments  # noqa: F401  (registers the mean's and variance's forms)
from napkin_cat.semantics.evaluate import evaluate
from napkin_cat.semantics.equivalent import Equivalence, equivalent
from napkin_cat.algorithms.blockmask import BlockMask
from napkin_cat.semantics.blockmasks import block_mask
from napkin_cat.cost.record import Cost
from napkin_cat.cost.functor import cost
from napkin_cat.cost.optimum import Optimum, optimal
from napkin_cat.rewriting.isomorphism import isomorphic
from napkin_cat.rewriting.rules import Condition, Rule, RuleSet
from napkin_cat.rewriting.trace import Derivation, Trace
from napkin_cat.rewriting.driver import rewrite
from napkin_cat.hardware.objective import derive   # transfers at a memory, or predicted time given hardware=
from napkin_cat.autodiff import grad
from napkin_cat.plan import Counters, Plan, plan
from napkin_cat.io.serial import dumps, loads
from napkin_cat import hardware
from napkin_cat import codegen
from napkin_cat.render.draw import draw, to_tikz
from napkin_cat.render import strip  # noqa: F401  (registers the derivation-strip drawer)
from napkin_cat import engine
del ops, logsumexp, division, online, moments, strip     # (imported for their registrations: no names of nc)


def _folders_under_functions() -> None:
    """Each module of a folder whose name a function takes on the folder's parent, an attribute of that function.

    ``nc.cost`` and ``nc.plan`` are functions named as their layers' folders (``napkin_cat/cost``, ``napkin_cat/plan``;
    likewise ``napkin_cat.codegen.c``, ``.cuda``, ``.triton``), and the function replaced the folder on its parent.
    ``import napkin_cat.cost.iocost as io`` reads ``napkin_cat.cost.iocost`` attribute by attribute, so it asked the
    *function* ``nc.cost`` for ``iocost`` and failed ("cannot import name 'iocost' from 'cost'": Python's fallback
    looks ``sys.modules`` up under the function's ``__name__``, ``cost``), for every module of those folders.  The
    functions stay functions (``tests/test_surface.py``); every module of such a folder is one of its attributes too.
    (A module named as a function of its package, such as ``napkin_cat.autodiff.grad``, is out of reach by
    attributes: ``from napkin_cat.autodiff import grad`` is the function, and so is ``import ... as``.)"""
    for name, module in list(_sys.modules.items()):
        parent, _, last = name.rpartition(".")
        if parent.startswith(__name__) and hasattr(module, "__path__"):
            found = getattr(_sys.modules.get(parent), last, None)
            if callable(found) and not isinstance(found, _types.ModuleType):
                for sub in _pkgutil.iter_modules(module.__path__):
                    setattr(found, sub.name, _importlib.import_module(f"{name}.{sub.name}"))


_folders_under_functions()

__version__ = "0.1.0"

__all__ = [
    # errors: every one (napkin_cat.errors)
    *errors.__all__,
    # syntax
    "Array", "Diagram", "Ty", "Axis", "axes", "symbol", "Sizes", "DType", "DTYPES", "FP32", "FP16", "BF16", "FP8",
    "Accumulator", "declare", "Template", "Structured", "Fold",
    "Id", "apply", "cast", "einsum", "elementwise", "join", "reduce", "renaming",
    "softmax", "split", "transfer", "types", "weave", "at_level", "rename_axis", "substitute", "Builder",
    "INT32", "BOOL", "position", "compare", "logical", "where", "select", "gather",
    # algorithms and the named ones
    "library", "Region", "Kernel", "Grid", "Stream", "kernel", "unfused", "group", "stream",
    # the device level: device regions and collectives
    "Shard", "shard", "Ring", "ring", "all_gather", "reduce_scatter", "all_reduce", "all_to_all",
    # functors: numpy, cost
    "evaluate", "equivalent", "Equivalence", "Cost", "cost", "Optimum", "optimal", "BlockMask", "block_mask",
    # rewriting
    "isomorphic", "Condition", "Rule", "RuleSet", "Trace", "Derivation", "rewrite",
    # derivation search, gradients
    "derive", "grad",
    # plans
    "plan", "Plan", "Counters",
    # pictures and JSON
    "draw", "to_tikz", "dumps", "loads",
    # hardware models and tables; kernels; the engine (for extending napkin-cat)
    "hardware", "codegen", "engine",
]

#: names that left the vocabulary (issue 20): where each lives now; ``nc.<name>`` still resolves, with a warning
MOVED = {**{name: "engine" for name in ("Box", "KINDS", "parse", "traverse", "Netlist", "to_netlist", "to_diagram",
                                        "Obligation", "power_terms")},
         "rename": "renaming"}


def __getattr__(name):
    if name == "torch":    # optional (torch is the `kernels` extra): loaded on first use, never by `import napkin_cat`
        return _importlib.import_module("napkin_cat.torch")
    if name == "distributed":    # optional as nc.torch is: torch.distributed, loaded on first use
        return _importlib.import_module("napkin_cat.distributed")
    if name == "from_torch":    # nc.torch.from_torch, loaded as nc.torch is
        return _importlib.import_module("napkin_cat.torch").from_torch
    if name in MOVED:
        where = MOVED[name]
        new = f"nc.engine.{name}" if where == "engine" else f"nc.{where}"
        _warnings.warn(f"nc.{name} is {new} now", DeprecationWarning, stacklevel=2)
        return getattr(engine, name) if where == "engine" else globals()[where]
    raise AttributeError(f"module 'napkin_cat' has no attribute {name!r}")
