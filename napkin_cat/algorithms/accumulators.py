"""Accumulator forms: what makes a box that keeps the streamed axis streamable (paper Fig. streaming_condition).

A stream runs ``F`` as ``head ; B ; B ; … ; B ; tail`` (Appendix A.1, Fig. streamingtheorem1).
A monoid reducer (contraction: sum; reductions: sum/max/min) carries its accumulator in its
primitive kind.  A box whose output still grows with the axis, such as SoftMax, is streamable only
together with what consumes it, and only when a rule supplies the accumulator of that composite: an
**accumulator form**.  A form, matched at a box of the region, gives a :class:`Binding`:

* ``state``: the arrays the stream maintains, each with its value for an empty stream (the head);
* ``step``: a diagram ``state ⊗ chunk inputs → state``, the accumulator ``B`` run once per trip;
* ``finish``: a diagram ``state → outputs``, the tail that turns the state into ``F``'s outputs.

The forms come from a registry: ``register(form)`` (a user's form), or the entry-point group
``napkin_cat.accumulators`` (how ``rewrites``, the rule library, supplies SoftMax's online form
without napkin_cat importing it).  The obligation of every form (proved in ``proofs/``)::

    finish(B(… B(B(init, x₁), x₂) …, xₙ)) == F(x₁ ++ x₂ ++ … ++ xₙ)     for every chunking

>>> import napkin_cat as nc
>>> [f.name for f in forms_for("softmax")]
['softmax_contraction_to_unscaled']
>>> forms_for("no_such_kind")
[]
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Callable

from napkin_cat.errors import RewriteError
from napkin_cat.syntax.array import Array
from napkin_cat.syntax.adapter import Bubble, Diagram, Ty, single
from napkin_cat.syntax.builder import Builder
from napkin_cat.syntax.relabel import remembered

GROUP = "napkin_cat.accumulators"
#: plugin groups imported for their side effect of registering forms (a rule book registers its own)
PLUGIN_GROUPS = (GROUP, "napkin_cat.rules")
FORMS: dict = {}


@dataclass(frozen=True)
class StateArray:
    """One maintained array of a stream: ``name``, its ``array`` (axes, level, dtype) and ``init``."""

    name: str
    array: Array
    init: float


@dataclass(frozen=True)
class Binding:
    """A form matched in a region: the ops it covers and its state, step and finish.

    ``inputs`` are the value ids the step reads after the state (chunks or values fixed for the
    stream); ``outputs`` the value ids that ``finish`` produces, in order.
    """

    form: object
    ops: tuple
    inputs: tuple
    state: tuple
    step: Diagram
    finish: Diagram
    outputs: tuple


def is_contraction_over(box, axis: str) -> bool:
    """Whether ``box`` is a contraction that reads ``axis`` and sums it away."""
    if isinstance(box, Bubble) or box.data.kind != "contract":
        return False
    return any(axis in a.names for a in box.dom.inside) and all(axis not in a.names for a in box.cod.inside)


def label(box) -> str:
    """How an error names a box: its name (``SoftMax``)."""
    return str(box.name)


def _checked(form_name, what, diagram, dom, cod):
    if diagram.dom != dom or diagram.cod != cod:
        raise RewriteError(f"accumulator form {form_name!r}: its {what} goes {diagram.dom} → {diagram.cod}, "
                           f"but the stream needs {dom} → {cod}")
    return diagram


def build_state_diagrams(form, state, inputs, step, finish, outputs):
    """``(step, finish)`` diagrams from builder functions, checked against the state and outputs.

    ``step(b, state_wires, *input_wires) -> new state wires`` and ``finish(b, state_wires) -> output wire(s)``.
    """
    sty = Ty(*(s.array for s in state))
    b = Builder(sty @ Ty(*inputs))
    new = step(b, b.inputs[:len(state)], *b.inputs[len(state):])
    step_d = _checked(form, "step", b.build(*new), sty @ Ty(*inputs), sty)
    b = Builder(sty)
    out = finish(b, b.inputs)
    out = out if isinstance(out, (tuple, list)) else (out,)
    return step_d, _checked(form, "finish", b.build(*out), sty, Ty(*outputs))


@dataclass(frozen=True)
class NormaliserForm:
    """The online form of ``N ; contraction``: a normaliser ``N`` over one axis, summed away at once.

    Matched at a box of kind ``kind`` whose only consumer is a contraction over the streamed axis
    that keeps every other axis of ``N``'s output (paper Appendix "Fusion of SoftMax-Contraction").

    * ``state(scores, out, axis) -> [StateArray]``: ``scores`` is N's input (one chunk), ``out``
      the contraction's output;
    * ``step(b, state, scores, contract, axis, box) -> new state``: wires of a :class:`Builder`;
      ``contract(w)`` applies the region's contraction with ``w`` in N's place (its other operands
      are the chunk's); ``box`` is the normaliser (for its parameters);
    * ``finish(b, state) -> output``: the contraction's output from the final state.

    ``name`` names the rule whose obligation proves the form (its proof sits in ``proofs/``).
    ``neutral(consts) -> bool`` (optional): whether a trip whose step inputs are the constants ``consts``
    (None where not constant) leaves the state unchanged: such a trip may be skipped (:mod:`.skipping`).
    """

    name: str
    kind: str
    state: Callable
    step: Callable
    finish: Callable
    doc: str = ""
    neutral: Callable | None = None

    def match(self, plan, i: int):
        """A :class:`Binding` at op ``i`` of the streaming analysis ``plan``, or the reason why not."""
        box, ins, outs = plan.ops[i]
        axis = plan.axis
        if len(box.dom) != 1 or len(box.cod) != 1 or axis not in box.cod.inside[0].names:
            return f"{label(box)} is not a normaliser along {axis!r} (one array in, one array out, keeping {axis!r})"
        users = plan.uses.get(outs[0], [])
        if not (len(users) == 1 and users[0][0] >= 0 and is_contraction_over(plan.ops[users[0][0]][0], axis)):
            return (f"{label(box)} alone is not streamable along {axis!r}: its output grows with {axis!r} "
                    f"(output 0 carries it); compose it with a contraction over {axis!r}")
        core = [a.name for a in box.dom.inside[0].axes if a.name not in box.data.weave_names]
        if core != [axis]:
            return (f"{label(box)} over {core} is streamable along one of its axes only when it runs over "
                    f"that axis alone; here it runs over {core}")
        c, port = users[0]
        cbox, cins, couts = plan.ops[c]
        lost = [n for n in box.cod.inside[0].names if n != axis and n not in cbox.cod.inside[0].names]
        if lost:
            return (f"{label(box)}-contraction is not streamable along {axis!r}: the contraction also sums away "
                    f"{lost}, along which the normaliser's state differs")
        others = [p for p in range(len(cins)) if p != port]

        def build():
            scores, out = box.dom.inside[0], cbox.cod.inside[0]
            state = tuple(self.state(scores, out, axis))
            contraction = single(cbox)

            def step(b, st, s, *rest):
                def contract(w):  # the contraction takes its operand in its own number format
                    args = list(rest)
                    args.insert(port, b.convert(w, cbox.dom.inside[port].dtype))
                    return b(contraction, *args)
                return self.step(b, list(st), s, contract, axis, box)
            return (state, *build_state_diagrams(self.name, state, [scores] + [cbox.dom.inside[p] for p in others],
                                                 step, self.finish, [out]))
        state, step_d, finish_d = remembered(box, (self, axis, port, cbox), build)
        return Binding(self, (i, c), (ins[0], *(cins[p] for p in others)), state, step_d, finish_d, (couts[0],))


def register(form):
    """Make ``form`` (with ``name``, ``kind`` and ``match(plan, i)``) available to the streaming analysis."""
    for attr in ("name", "kind", "match"):
        if not hasattr(form, attr):
            raise RewriteError(f"an accumulator form needs {attr!r}; got {type(form).__name__}")
    FORMS[(form.kind, form.name)] = form
    return form


def unregister(name: str) -> None:
    """Remove the forms called ``name`` (a user's experiment, or a test)."""
    for key in [k for k in FORMS if k[1] == name]:
        del FORMS[key]


@functools.cache
def load_entry_points() -> None:
    """Import the plugins of :data:`PLUGIN_GROUPS`, registering the forms of :data:`GROUP`'s: once per process (a
    cached call; ``load_entry_points.cache_clear()`` makes the next :func:`forms_for` load them again)."""
    for group in PLUGIN_GROUPS:
        for ep in entry_points(group=group):
            value = ep.load()
            if group == GROUP:
                for form in (value if isinstance(value, (list, tuple)) else [value]):
                    FORMS.setdefault((form.kind, form.name), form)


def forms_for(kind: str) -> list:
    """The registered forms triggered by a box of ``kind`` (plugins loaded on first use)."""
    load_entry_points()
    return [f for f in FORMS.values() if f.kind == kind]
