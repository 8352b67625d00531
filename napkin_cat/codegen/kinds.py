"""How a printer reads a kind's record: the printed form of a statement's kind, its helpers filled by the dialect.

A statement prints by its kind's printed form in the printer's ``dialect`` (``Kind.part``; the record's, never a
printer's table, :mod:`napkin_cat.syntax.printed`):

=====================================  ====================================================================
the record's form                      what the printer does
=====================================  ====================================================================
``Template("{max}({0}, {alpha} * {0})")``  an elementwise map: the helper calls filled from the dialect's
                                       ``helpers`` (C: ``nc_fmax``; CUDA: a NaN-propagating select; Triton:
                                       ``tl.maximum``), then the operands and the box's parameters (the
                                       template's defaults for those the box leaves out)
``Structured("reduce", fold=SUM)``     the dialect's method ``_print_reduce``, which reads the options
``Structured("fill", values=(v, …))``  an initialiser: each output written full of its value (:meth:`filled`)
an accumulated statement               its accumulator's printed ``Fold`` (``{0} + {1}``)
no form for the dialect                :class:`~napkin_cat.codegen.errors.UnknownKindError` (a
                                       ``MissingPartError``) naming the kind, the backend and ``forms=``
=====================================  ====================================================================

>>> import napkin_cat as nc
>>> from napkin_cat.codegen.c import CPrinter
>>> from napkin_cat.codegen.cuda import CudaPrinter
>>> relu = nc.engine.KINDS["relu"].part("c")
>>> relu
Template('{max}({0}, 0.0f)')
>>> relu.expand(CPrinter.helpers), relu.expand(CudaPrinter.helpers)
('nc_fmax({0}, 0.0f)', '(({0}) != ({0}) || ({0}) > (0.0f) ? ({0}) : (0.0f))')
>>> "reduce" in CPrinter.structures() and "split" in CPrinter.structures()
True
"""
from __future__ import annotations

import sympy

from napkin_cat.codegen.errors import CodegenError, MissingPartError, UnknownKindError
from napkin_cat.syntax.printed import Template
from napkin_cat.syntax.primitive import accumulator_named, kind_of


class RecordForms:
    """The printers' reading of the kinds' records (see the module docstring); a dialect sets the two tables."""

    #: the backend of the kinds' records whose printed forms it prints (``Kind.forms``: c, cuda, triton)
    dialect = "c"
    #: helper → a function name, or a template over the call's arguments: what ``{max}(a, b)`` in a form prints
    helpers: dict = {}

    def form(self, stmt):
        """The printed form of the statement's kind in this dialect (its record's), or
        :class:`UnknownKindError` naming the kind, the backend and the keyword that gives one."""
        try:
            return kind_of(stmt.kind).part(self.dialect)
        except MissingPartError as e:
            raise UnknownKindError(stmt.kind, self.backend, str(e)) from None

    def option(self, stmt, name: str, default=None):
        """An option of the statement's structured form (``Structured("reduce", mean=True)``)."""
        return self.form(stmt).option(name, default)

    @classmethod
    def structures(cls) -> list[str]:
        """The structures this dialect prints (its ``_print_<structure>`` methods)."""
        return sorted(n[len("_print_"):] for n in dir(cls)
                      if n.startswith("_print_") and n[len("_print_"):].islower() and n != "_print_elementwise")

    def _print_Compute(self, s, depth):
        form = self.form(s)
        if isinstance(form, Template):
            return self._print_elementwise(s, depth)
        method = getattr(self, f"_print_{form.structure}", None)    # a lower-case name: never a node's printer
        if method is None:
            raise UnknownKindError(s.kind, self.backend, f"its form {form!r} names a structure the {self.backend} "
                                   f"printer does not print; it prints {self.structures()}")
        return method(s, depth)

    def _print_elementwise(self, s, depth):
        raise NotImplementedError

    def filled(self, stmt) -> list:
        """``[(output, value)]`` of an initialiser (its form's ``values``, one per output), or
        :class:`CodegenError` naming the box when its record gives another number of values than it has outputs."""
        values = tuple(self.option(stmt, "values", ()))
        if len(values) != len(stmt.outs):
            raise CodegenError(f"{stmt.box.name}: kind {stmt.kind!r} prints as a fill of its {len(stmt.outs)} "
                               f"output(s), but its {self.dialect} form {self.form(stmt)!r} gives {len(values)} "
                               f"value(s); give one per output (forms=filled(v₀, v₁, …))")
        return list(zip(stmt.outs, values))

    def fill(self, template: Template, what: str) -> str:
        """The template's text with its helper calls filled from this dialect's ``helpers`` (``what``: whose form
        it is, for the error)."""
        missing = sorted(set(template.helpers) - set(self.helpers))
        if missing:
            raise CodegenError(f"{what} calls the helper(s) {missing}, which the {self.backend} backend does not fill; "
                               f"it fills {sorted(self.helpers)}")
        return template.expand(self.helpers)

    def accumulator(self, monoid: str, kind: str | None = None):
        """The accumulator record a statement folds with: ``kind``'s own when it is called ``monoid``, else the
        declared one of that name."""
        acc = kind_of(kind).accumulator if kind is not None else None
        return acc if acc is not None and acc.name == monoid else accumulator_named(monoid)

    def fold(self, accumulator, kind: str | None = None):
        """The accumulator's printed fold in this dialect (its record's :class:`~napkin_cat.syntax.printed.Fold`), or
        the record's refusal (:class:`UnknownKindError` for the kind that folds with it, where there is one)."""
        try:
            return accumulator.fold(self.dialect)
        except MissingPartError as e:
            if kind is None:
                raise
            raise UnknownKindError(kind, self.backend, str(e)) from None

    def combine(self, monoid: str, old: str, new: str, kind: str | None = None) -> str:
        """``old ⊕ new`` with the accumulator ``monoid`` (``kind``'s, where it is its): its fold's template."""
        acc = self.accumulator(monoid, kind)
        return self.fill(self.fold(acc, kind).combine, f"accumulator {monoid!r}'s {self.dialect} fold").format(old, new)

    def reduction(self, stmt):
        """``(accumulator, fold)`` a ``reduce`` structure folds with: its form's ``fold`` option, else its kind's
        accumulator."""
        acc = self.option(stmt, "fold") or kind_of(stmt.kind).accumulator
        if acc is None:
            raise CodegenError(f"{stmt.box.name}: kind {stmt.kind!r} prints as a reduction, but neither its form "
                               f"{self.form(stmt)!r} names a fold (Structured('reduce', fold=…)) nor has it an "
                               "accumulator")
        return acc, self.fold(acc, stmt.kind)

    def apply(self, stmt, args: list) -> str:
        """The element formula of an elementwise statement on printed arguments: its kind's template with the
        box's numeric parameters (the template's defaults for those it leaves out)."""
        form = self.form(stmt)
        if not isinstance(form, Template):
            raise UnknownKindError(stmt.kind, self.backend, f"its form {form!r} is not an elementwise template")
        params = {k: self.number(v) for k, v in form.defaults}
        params.update({k: self.number(self.param(stmt, k)) for k, v in stmt.box.data.params
                       if isinstance(v, (int, float, sympy.Basic)) and not isinstance(v, bool)})
        text = self.fill(form, f"kind {stmt.kind!r}'s {self.dialect} form {form.text!r}")
        missing = sorted(set(form.parameters) - set(params))
        if missing or form.arity > len(args):
            raise CodegenError(f"{stmt.box.name}: kind {stmt.kind!r}'s {self.dialect} form {form.text!r} reads "
                               + (f"the parameter(s) {missing}, which the box does not carry (it carries "
                                  f"{sorted(params)}); give them to the box (params={{…}}) or as the form's defaults"
                                  if missing else f"{form.arity} operands; the box has {len(args)}"))
        return text.format(*args, **params)


__all__ = ["RecordForms"]
