"""Layer 4, rewriting: netlists, matching, rules, the one driver, traces and proof obligations.

A rule is a value (pattern, right-hand side, side conditions, obligation); the driver
applies rule sets and records a replayable ``Trace``.  The theorem library itself lives
outside the package, in ``rewrites/``, and plugs in through the public API.

May import: every layer below (errors, syntax, algorithms, semantics, cost).  Traces are
drawn and serialised by the render and io layers, which register themselves on ``Trace``.
"""
from napkin_cat.rewriting.netlist import INPUT, OUTPUT, Netlist, Node, Wire, to_netlist
from napkin_cat.rewriting.readback import to_diagram
from napkin_cat.rewriting.isomorphism import isomorphic
from napkin_cat.rewriting.pattern import ANY_BOX, Pattern, feeds_only, kind, structural, where
from napkin_cat.rewriting.match import Match, find, peel_weave
from napkin_cat.rewriting.obligation import (Obligation, ObligationError, Proof, bind_tiles, random_sizes,
                                             shape_of)
from napkin_cat.rewriting.rules import Condition, Rule, RuleSet, as_ruleset
from napkin_cat.rewriting.trace import Derivation, Step, Trace
from napkin_cat.rewriting.driver import rewrite

__all__ = ["INPUT", "OUTPUT", "Netlist", "Node", "Wire", "to_netlist", "to_diagram", "isomorphic", "ANY_BOX",
           "Match", "Pattern", "feeds_only", "find", "kind", "peel_weave", "structural", "where", "Obligation",
           "ObligationError", "Proof", "bind_tiles", "random_sizes", "shape_of", "Condition", "Rule", "RuleSet",
           "as_ruleset", "Derivation", "Step", "Trace", "rewrite"]
