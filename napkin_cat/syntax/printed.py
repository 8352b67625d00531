"""Printed forms: how a primitive kind, and an accumulator, is written in each backend's language.

A kind's record holds one form per backend (``Kind.forms``, keys ``c``, ``cuda``, ``triton``; the CUDA printer
prints the C form where a kind has no CUDA form of its own), read through ``Kind.part(backend)``.  A form is one
of two things:

* a :class:`Template`, for an elementwise map: an expression over the printed operands ``{0}``, ``{1}``, …,
  the box's numeric parameters (``{c}``, ``{alpha}``: ``defaults`` for those a box may leave out) and calls of
  the dialect's **helpers**, written ``{max}(a, b)``.  The dialect fills a helper with a function name
  (C: ``nc_fmax``, which propagates NaN as numpy does; Triton: ``tl.maximum``) or with a template over the
  call's arguments (CUDA: a select), so that one C form prints in both C dialects;
* a :class:`Structured` form, for a kind that is not a map (a contraction, a reduction, the SoftMax family,
  a gather …): the name of the structure the printers print it by (each dialect's ``_print_<structure>``)
  and its options (a reduction's ``fold``, a mean's division, a normalised online SoftMax).  An
  **initialiser** (a kind whose outputs are constants whatever its inputs hold, such as the head of an online
  SoftMax, ``Initialize() = (−∞, 0)``) prints by the structure ``fill`` with its outputs' ``values``
  (:func:`filled`): every backend writes each output full of its value, wherever the box stands.

An accumulator's form per backend is a :class:`Fold`: its ``combine`` template (the old value ``{0}`` with the
new ``{1}``) and, where the backend has one, the reduction of many values at once (OpenMP's ``reduction``
operator in C, where it agrees with ``combine``; Triton's block reduction ``tl.sum``).

The law of a helper call: filling it calls the dialect's function on the call's arguments, or substitutes them
into the dialect's own template ``H``::

    Template("{max}({0}, 0.0f)").expand({"max": "nc_fmax"})  == "nc_fmax({0}, 0.0f)"
    Template("{max}({0}, 0.0f)").expand({"max": H})          == H.format("{0}", "0.0f")

>>> relu = Template("{max}({0}, 0.0f)")
>>> relu.expand({"max": "nc_fmax"})
'nc_fmax({0}, 0.0f)'
>>> relu.expand({"max": "(({0}) > ({1}) ? ({0}) : ({1}))"}).format("x")
'((x) > (0.0f) ? (x) : (0.0f))'
>>> clamp = Template("{min}({max}({0}, {lo}), {hi})")
>>> clamp.helpers, clamp.parameters
(('max', 'min'), ('hi', 'lo'))
>>> clamp.expand({"max": "fmaxf", "min": "fminf"})
'fminf(fmaxf({0}, {lo}), {hi})'
>>> Structured("reduce", mean=True).option("mean")
True
"""
from __future__ import annotations

import re
import string
from dataclasses import dataclass, field
from functools import lru_cache

from napkin_cat.errors import SignatureError

#: a helper call in a template: ``{name}(``
_CALL = re.compile(r"\{([A-Za-z_]\w*)\}\(")


def _arguments(text: str, start: int) -> tuple[list[str], int]:
    """The comma-separated arguments of the call whose ``(`` ends just before ``start``, and where its ``)`` is."""
    args, depth, here = [], 0, start
    for i in range(start, len(text)):
        c = text[i]
        if c in "([":
            depth += 1
        elif c in ")]":
            if depth == 0:
                args.append(text[here:i].strip())
                return ([] if args == [""] else args), i
            depth -= 1
        elif c == "," and depth == 0:
            args.append(text[here:i].strip())
            here = i + 1
    raise SignatureError(f"the printed form {text!r} opens a helper call at {start} that it never closes")


@lru_cache(maxsize=4096)
def _expand(text: str, helpers: tuple) -> str:
    table = dict(helpers)
    out, at = [], 0
    while True:
        m = _CALL.search(text, at)
        if m is None:
            return "".join(out) + text[at:]
        name = m.group(1)
        if name not in table:
            raise SignatureError(f"the printed form {text!r} calls the helper {name!r}, which the dialect does not "
                                 f"fill; it fills {sorted(table)}")
        args, close = _arguments(text, m.end())
        args = [_expand(a, helpers) for a in args]
        helper = table[name]
        call = helper.format(*args) if "{" in helper else f"{helper}({', '.join(args)})"
        out += [text[at:m.start()], call]
        at = close + 1


@lru_cache(maxsize=4096)
def _fields(text: str) -> tuple[frozenset, frozenset, int]:
    """``(helpers called, parameters named, operands used)`` of a template's text."""
    helpers = {m.group(1) for m in _CALL.finditer(text)}
    names, operands = set(), 0
    for _, name, _, _ in string.Formatter().parse(text):
        if name is None:
            continue
        if name.isdigit():
            operands = max(operands, int(name) + 1)
        elif name not in helpers:
            names.add(name)
    return frozenset(helpers), frozenset(names), operands


@dataclass(frozen=True)
class Template:
    """An elementwise map's printed form: ``text`` over the operands ``{0}``, ``{1}``, …, the box's parameters
    ``{name}`` (``defaults``: parameter → number, for a box that leaves it out) and helper calls ``{max}(a, b)``
    that the dialect fills (see the module docstring)."""

    text: str
    defaults: tuple = ()     # ((parameter, number), …), sorted

    def __init__(self, text: str, defaults: dict | None = None):
        if not isinstance(text, str):
            raise SignatureError(f"a printed form is a template string over the operands {{0}}, {{1}}, …; got "
                                 f"{type(text).__name__} {text!r}")
        try:
            _fields(text)
        except ValueError as e:
            raise SignatureError(f"the printed form {text!r} is not a template: {e}") from None
        defaults = dict(defaults or {})
        for k, v in defaults.items():
            if not isinstance(v, (int, float)) or isinstance(v, bool):
                raise SignatureError(f"the printed form {text!r}: the default of parameter {k!r} must be a number, "
                                     f"got {v!r}")
        object.__setattr__(self, "text", text)
        object.__setattr__(self, "defaults", tuple(sorted(defaults.items())))

    def __repr__(self):
        return f"Template({self.text!r}" + (f", defaults={dict(self.defaults)!r})" if self.defaults else ")")

    @property
    def helpers(self) -> tuple[str, ...]:
        """The helpers it calls (``{max}(…)``: ``max``), sorted."""
        return tuple(sorted(_fields(self.text)[0]))

    @property
    def parameters(self) -> tuple[str, ...]:
        """The box parameters it names (``{alpha}``), sorted."""
        return tuple(sorted(_fields(self.text)[1]))

    @property
    def arity(self) -> int:
        """How many operands it reads (one more than its largest ``{k}``)."""
        return _fields(self.text)[2]

    def expand(self, helpers: dict) -> str:
        """The text with every helper call replaced by the dialect's ``helpers`` (name → function name, or a
        template over the call's arguments); a helper the dialect lacks is refused by name."""
        return _expand(self.text, tuple(sorted(helpers.items())))


@dataclass(frozen=True)
class Structured:
    """A kind printed by a structure the printers know (each dialect's ``_print_<structure>``): its name and
    its options (``Structured("reduce", fold=SUM, mean=True)``)."""

    structure: str
    options: tuple = ()      # ((name, value), …), sorted

    def __init__(self, structure: str, **options):
        if not (isinstance(structure, str) and structure.isidentifier() and structure.islower()
                and structure != "elementwise"):
            raise SignatureError(f"a structure is named by a lower-case identifier other than 'elementwise' (the "
                                 f"printers' _print_<structure>), got {structure!r}")
        object.__setattr__(self, "structure", structure)
        object.__setattr__(self, "options", tuple(sorted(options.items())))

    def __repr__(self):
        return f"Structured({self.structure!r}" + "".join(f", {k}={v!r}" for k, v in self.options) + ")"

    def option(self, name: str, default=None):
        """The option ``name`` (``default`` where it is not given)."""
        return dict(self.options).get(name, default)


@dataclass(frozen=True)
class Fold:
    """An accumulator's printed form in one backend: ``combine`` folds the old value ``{0}`` with the new ``{1}``
    (a :class:`Template`); ``reduce`` is the backend's reduction of many values at once where it has one that
    agrees with ``combine`` (OpenMP's ``reduction`` operator in C: ``+``; Triton's ``tl.sum``), else None."""

    combine: Template
    reduce: str | None = field(default=None)

    def __post_init__(self):
        if isinstance(self.combine, str):
            object.__setattr__(self, "combine", Template(self.combine))
        if not isinstance(self.combine, Template) or self.combine.arity > 2:
            raise SignatureError(f"a fold's combine is a template over the old value {{0}} and the new {{1}}, got "
                                 f"{self.combine!r}")


def as_form(form):
    """A printed form as the record holds it: a string is a :class:`Template`."""
    if isinstance(form, str):
        return Template(form)
    if isinstance(form, (Template, Structured)):
        return form
    raise SignatureError(f"a printed form is a Template (or its text) or a Structured form, got "
                         f"{type(form).__name__} {form!r}")


def printed(c, triton, *, cuda=None, defaults: dict | None = None) -> dict:
    """The ``forms`` of a kind: its C form (CUDA's too, unless ``cuda`` is given) and its Triton form, strings
    being :class:`Template` texts with ``defaults`` for their parameters.

    >>> printed("({c} * {0})", "({c} * {0})", defaults={"c": 1.0})["triton"]
    Template('({c} * {0})', defaults={'c': 1.0})
    """
    out = {"c": c, "triton": triton} if cuda is None else {"c": c, "cuda": cuda, "triton": triton}
    return {k: Template(v, defaults) if isinstance(v, str) else as_form(v) for k, v in out.items()}


def structured(structure: str, **options) -> dict:
    """The ``forms`` of a kind every backend prints by one structure (C, CUDA and Triton)."""
    form = Structured(structure, **options)
    return {"c": form, "triton": form}


def filled(*values) -> dict:
    """The ``forms`` of an initialiser: its ``k``-th output is ``values[k]`` everywhere, whatever its inputs hold
    (they give only its shape), printed by the structure ``fill`` in every backend.

    >>> filled(float("-inf"), 0)["c"]
    Structured('fill', values=(-inf, 0.0))
    >>> filled("zero")
    Traceback (most recent call last):
    ...
    napkin_cat.errors.SignatureError: an initialiser's values are numbers, one per output; got ('zero',)
    """
    if not values or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        raise SignatureError(f"an initialiser's values are numbers, one per output; got {values!r}")
    return structured("fill", values=tuple(float(v) for v in values))


__all__ = ["Template", "Structured", "Fold", "as_form", "printed", "structured", "filled"]
