"""einops-style constructors: strings in, single-box diagrams out.

Axis sizes are keywords (``d=64``), symbolic otherwise.  The rule for every
constructor: an axis that appears in the output is a *weave* (carried by the
inputs that name it, copied to the others); an axis that appears only in
inputs, or is named in ``core``, belongs to the item-level core.

>>> import napkin_cat as nc
>>> s = einsum("q d, x d -> q x", d=64)
>>> s.dom, s.cod
(Ty(Array(q×d[64]), Array(x×d[64])), Ty(Array(q×x)))
>>> [w.name for w in s.boxes[0].data.weaves]          # innermost first
['x', 'q']
>>> softmax("q x", over="x").boxes[0].name
'SoftMax'
"""
from __future__ import annotations

import numbers
import re

import sympy

from napkin_cat.syntax.array import Array
from napkin_cat.syntax.adapter import Diagram, Ty
from napkin_cat.syntax.axis import MAX_AXES, Axis, canonical, check_name, resolve
from napkin_cat.syntax.dtype import FP32, as_dtype
from napkin_cat.errors import AxisError, SignatureError, UnknownPrimitiveError
from napkin_cat.syntax.ops import REDUCTIONS
from napkin_cat.syntax.primitive import KINDS, Weave, kind_of
from napkin_cat.syntax.weave import build_box

_TOKEN = re.compile(r"^[A-Za-z_][A-Za-z0-9_']*$")


def parse(signature: str, *, arrow: bool | None = None) -> tuple[list[list[str]], list[list[str]] | None]:
    """Parse ``"q d, x d -> q x"`` into input and output name lists; ``()`` is an array without axes (the item
    R, a scalar), which a signature of one operand may also leave empty.

    >>> parse("q d, x d -> q x")
    ([['q', 'd'], ['x', 'd']], [['q', 'x']])
    >>> parse("q x")
    ([['q', 'x']], None)
    >>> parse("(), d -> d")
    ([[], ['d']], [['d']])
    """
    if not isinstance(signature, str):
        raise SignatureError(f"a signature must be a string such as 'q d, x d -> q x', got {signature!r}")
    if signature.count("->") > 1:
        raise SignatureError(f"signature {signature!r} has more than one '->'")
    if "->" in signature:
        lhs, rhs = signature.split("->")
    else:
        lhs, rhs = signature, None
    if arrow is True and rhs is None:
        raise SignatureError(f"signature {signature!r} needs an output after '->', e.g. 'q d, x d -> q x'")

    def operands(text, where):
        parts = text.split(",")
        out, empty = [], False
        for k, part in enumerate(parts):
            names = [] if part.strip() == "()" else part.split()
            empty = empty or not part.split()
            for n in names:
                if not _TOKEN.match(n):
                    raise SignatureError(f"cannot parse {signature!r}: {n!r} in {where} operand {k} "
                                         "is not an axis name (letters, digits, _ and ')")
            if len(names) > MAX_AXES:
                raise SignatureError(f"{where} operand {k} of the signature names {len(names)} axes; an array "
                                     f"carries at most {MAX_AXES} (the most dimensions numpy holds before numpy 2)")
            if len(set(names)) != len(names):
                dup = sorted({n for n in names if names.count(n) > 1})[0]
                raise SignatureError(f"{where} operand {k} of {signature!r} names axis {dup!r} twice; "
                                     "an array carries each axis once")
            out.append(names)
        if empty and len(out) > 1:
            raise SignatureError(f"{where} of {signature!r} has an empty operand between commas "
                                 "(write () for an array without axes)")
        return out

    ins = operands(lhs, "input")
    outs = operands(rhs, "output") if rhs is not None else None
    return ins, outs


def _merge_sizes(where: str, given, more: dict, names=(), **options) -> dict:
    """The axis sizes of a constructor call: ``sizes=`` (a dict, for any axis name) and size keywords.

    An axis named like one of the constructor's own keywords (``beta``, ``const``) cannot take its size
    by keyword: when that keyword is given a value other than its default, the call is refused as
    ambiguous unless ``sizes=`` sizes the axis.
    """
    if given is None:
        given = {}
    if not isinstance(given, dict):
        raise SignatureError(f"{where}: sizes= must be a dict of axis name → size, got {given!r}")
    twice = sorted(set(given) & set(more))
    if twice:
        raise SignatureError(f"{where}: the size of {twice} is given twice (as sizes= and as a keyword)")
    out = {**more, **given}
    for option, (value, default) in options.items():
        if option in names and option not in out and not (value is default or value == default):
            raise SignatureError(f"{where}: {option}={value!r} is {where}'s own {option!r}, not the size of the "
                                 f"axis {option!r} the signature names; give that axis its size with "
                                 f"sizes={{{option!r}: …}}")
    return out


def _number(value, what: str):
    """``value`` when it is a real number (an int, a float, a numpy or sympy number) or a sympy expression in sizes
    (``1/sqrt(d)``); a string, a bool, a list or a complex number is refused (a string is never parsed as an
    expression)."""
    value = canonical(value)
    if isinstance(value, bool) or not isinstance(value, (numbers.Real, sympy.Expr)) or (
            isinstance(value, sympy.Expr) and value.is_extended_real is False):
        raise SignatureError(f"{what} must be a number (a real one) or a sympy expression in sizes (such as "
                             f"1/sqrt(d)), got {value!r}")
    return value


def _names(signature) -> set:
    try:
        ins, outs = parse(signature)
    except SignatureError:
        return set()
    return {n for names in ins + (outs or []) for n in names}


def axes_for(names_lists, sizes):
    """``{name: Axis}`` for every axis named in ``names_lists`` (each name checked), sized from ``sizes``."""
    known = {}
    for names in names_lists:
        for n in names:
            check_name(n)
            known.setdefault(n, Axis(n, sizes.get(n)))
    return known


def apply(kind: str, signature: str, *, core=(), params=None, level: int = 0, dtype=FP32,
          out_dtype=None, out_level=None, name: str | None = None, sizes: dict | None = None, **more) -> Diagram:
    """A box of any declared kind from an einops-style signature.

    Weaves are the output axes not named in ``core``; each is carried by the
    inputs that name it.  Core axes are the ``core`` names plus the input axes
    missing from every output.
    """
    sizes = _merge_sizes('apply', sizes, more, _names(signature))
    ins, outs = parse(signature, arrow=None)
    if outs is None:
        outs = [list(ins[0])]
    unknown = set(sizes) - {n for names in ins + outs for n in names}
    if unknown:
        raise SignatureError(f"sizes given for {sorted(unknown)} which {signature!r} does not name")
    axes = axes_for(ins + outs, sizes)
    core = set(core.split() if isinstance(core, str) else core)
    in_names = {n for names in ins for n in names}
    weave_names = []
    for names in outs:
        for n in names:
            if n not in core and n not in weave_names:
                weave_names.append(n)
    for j, names in enumerate(outs):
        for n in weave_names:
            if n not in names:
                raise SignatureError(f"{kind}: axis {n!r} is mapped over (weaved) but output {j} "
                                     f"{names} lacks it; every output carries every weave")
        for n in names:
            if n not in in_names and n not in core:
                raise SignatureError(f"{kind}: output axis {n!r} of {signature!r} appears in no input")
    weaves = [Weave(n, tuple(i for i, names in enumerate(ins) if n in names))
              for n in reversed(weave_names)]
    out_dtype = dtype if out_dtype is None else out_dtype
    out_level = level if out_level is None else out_level
    dom = [Array(tuple(axes[n] for n in names), level, dtype) for names in ins]
    cod = [Array(tuple(axes[n] for n in names), out_level, out_dtype) for names in outs]
    return build_box(kind, dom, cod, weaves, params, name=name)


def einsum(signature: str, *, level: int = 0, dtype=FP32, out_dtype=None, sizes: dict | None = None, **more) -> Diagram:
    """Contraction of any number of operands; contracted axes are those missing from the output.

    ``dtype`` is the operands' number format, ``out_dtype`` the result's (default: the same).

    >>> einsum("a b, b c, c d -> a d").dom
    Ty(Array(a×b), Array(b×c), Array(c×d))
    >>> einsum("a b, b c -> a c", dtype="fp8", out_dtype="fp16").cod
    Ty(Array(a×c:fp16))
    """
    sizes = _merge_sizes('einsum', sizes, more, _names(signature))
    ins, outs = parse(signature, arrow=True)
    if len(outs) != 1:
        raise SignatureError(f"einsum {signature!r} must have exactly one output array")
    return apply("contract", signature, level=level, dtype=dtype, out_dtype=out_dtype, sizes=sizes)


def softmax(signature: str, *, over, beta=1, level: int = 0, dtype=FP32, out_dtype=None,
            sizes: dict | None = None, **more) -> Diagram:
    """SoftMax along ``over`` (β the inverse temperature), weaved over the other axes.

    >>> softmax("q x", over="x", beta=0.125).cod
    Ty(Array(q×x))
    """
    sizes = _merge_sizes('softmax', sizes, more, _names(signature), beta=(beta, 1))
    ins, outs = parse(signature)
    if outs is not None or len(ins) != 1:
        raise SignatureError(f"softmax takes one array's axes such as 'q x', got {signature!r}")
    over_names = [over] if isinstance(over, str) else [a.name if isinstance(a, Axis) else a for a in over]
    over_names = [n for o in over_names for n in o.split()]
    for n in over_names:
        if n not in ins[0]:
            raise SignatureError(f"softmax over {n!r}: the array {ins[0]} has no such axis; "
                                 f"legal choices are {ins[0]}")
    beta = _number(beta, "the beta of softmax")
    params = {} if beta == 1 else {"beta": beta}
    return apply("softmax", signature, core=over_names, params=params, level=level, dtype=dtype,
                 out_dtype=out_dtype, sizes=sizes)


def elementwise(name: str, signature: str, *, const=None, level: int = 0, dtype=FP32,
                sizes: dict | None = None, **more) -> Diagram:
    """An elementwise map weaved over every axis; broadcasting through the signature.

    >>> elementwise("add", "q d, d -> q d").dom
    Ty(Array(q×d), Array(d))
    """
    sizes = _merge_sizes('elementwise', sizes, more, _names(signature), const=(const, None))
    maps = sorted(k for k, kind in KINDS.items() if kind.arity is not None)   # the built-in ones and a user's
    if name not in maps:
        raise UnknownPrimitiveError(f"unknown elementwise map {name!r}; legal names are {maps} (a kind of your own "
                                    f"is one when declared with arity=…)")
    arity = kind_of(name).arity
    ins, outs = parse(signature)
    if outs is None:
        ins = [list(ins[0])] * arity if len(ins) == 1 else ins
        outs = [list(ins[0])]
    if len(ins) != arity:
        raise SignatureError(f"elementwise {name!r} takes {arity} input(s), the signature "
                             f"{signature!r} gives {len(ins)}")
    if len(outs) != 1:
        raise SignatureError(f"elementwise {name!r} has one output, the signature gives {len(outs)}")
    for i, names in enumerate(ins):
        for n in names:
            if n not in outs[0]:
                raise SignatureError(f"elementwise {name!r}: input {i} axis {n!r} is not in the output "
                                     f"{outs[0]}; elementwise maps keep every axis (use reduce to drop one)")
    sig = ", ".join(spell(names) for names in ins) + " -> " + spell(outs[0])
    params = {}
    if "c" in kind_of(name).requires:            # const= gives the parameter c the kind's record requires
        if const is None:
            raise SignatureError(f"elementwise {name!r} needs const=<number>")
        params["c"] = _number(const, f"the const of elementwise {name!r}")
    elif const is not None:
        raise SignatureError(f"elementwise {name!r} takes no const")
    return apply(name, sig, params=params, level=level, dtype=dtype, sizes=sizes)


def reduce(name: str, signature: str, *, level: int = 0, dtype=FP32, sizes: dict | None = None, **more) -> Diagram:
    """Reduce the axes missing from the output: ``reduce("max", "q x -> q")``."""
    sizes = _merge_sizes('reduce', sizes, more, _names(signature))
    legal = sorted(set(REDUCTIONS) | {k[len("reduce_"):] for k in KINDS if k.startswith("reduce_")})
    if name not in legal:
        raise UnknownPrimitiveError(f"unknown reduction {name!r}; legal reductions are {legal}")
    ins, outs = parse(signature, arrow=True)
    if len(ins) != 1 or len(outs) != 1:
        raise SignatureError(f"reduce takes one array to one array, e.g. 'q x -> q', got {signature!r}")
    for n in outs[0]:
        if n not in ins[0]:
            raise SignatureError(f"reduce {name!r}: output axis {n!r} is not an input axis {ins[0]}")
    if set(outs[0]) == set(ins[0]):
        raise SignatureError(f"reduce {name!r}: {signature!r} reduces no axis; drop at least one")
    return apply(f"reduce_{name}", signature, level=level, dtype=dtype, sizes=sizes)


def spell(names) -> str:
    """The signature operand of an array with axes ``names``: ``"q x"``, or ``"()"`` for none.

    >>> spell(["q", "x"]), spell([])
    ('q x', '()')
    """
    return " ".join(names) or "()"


def types(spec, *, level: int = 0, dtype=FP32, sizes: dict | None = None, **more) -> Ty:
    """A type from ``"q d, x d"`` (commas separate arrays)."""
    sizes = _merge_sizes('types', sizes, more, _names(spec if isinstance(spec, str) else ''))
    if isinstance(spec, Ty):
        return spec
    if isinstance(spec, Array):
        return Ty(spec)
    if isinstance(spec, Axis):
        return Ty(Array((spec,), level, dtype))
    ins, outs = parse(spec) if isinstance(spec, str) else ([list(spec)], None)
    if outs is not None:
        raise SignatureError(f"a type has no '->': {spec!r}")
    if any(not isinstance(n, str) for names in ins for n in names):
        return Ty(Array(resolve(ins[0], sizes), level, dtype))
    axes = axes_for(ins, sizes)
    return Ty(*(Array(tuple(axes[n] for n in names), level, dtype) for names in ins))


def Id(spec=None, *, level: int = 0, dtype=FP32, sizes: dict | None = None, **more) -> Diagram:
    """The identity on arrays given as ``"x d"`` (or ``"q d, x d"``, a Ty, an Array).

    ``Id()`` is the identity on the empty tuple (the unit of ``@``); ``Id("")`` is
    the identity on the item R.

    >>> Id().dom, Id("").dom
    (Ty(), Ty(Array(R)))
    """
    sizes = _merge_sizes('Id', sizes, more, _names(spec if isinstance(spec, str) else ''))
    if spec is None:
        return Diagram.id(Ty())
    return Diagram.id(types(spec, level=level, dtype=dtype, sizes=sizes))


def split(signature: str, *, along: str, parts, level: int = 0, dtype=FP32,
          sizes: dict | None = None, **more) -> Diagram:
    """Split ``along`` an axis into consecutive slices of the given sizes.

    >>> split("q d", along="q", parts=(2, 3), q=5).cod
    Ty(Array(q[2]×d), Array(q[3]×d))
    """
    sizes = _merge_sizes('split', sizes, more, _names(signature))
    (names,), outs = parse(signature)
    if along not in names:
        raise SignatureError(f"split along {along!r}: the array {names} has no such axis")
    full = axes_for([names], sizes)
    parts = [Axis(along, p) for p in parts]
    if len(parts) < 2:
        raise SignatureError("split needs at least two parts")
    total = sum(p.size for p in parts)
    if full[along].is_concrete and all(p.is_concrete for p in parts) and total != full[along].size:
        raise AxisError(f"split of {along!r}: parts {[p.size for p in parts]} add up to {total}, "
                        f"not the axis size {full[along].size}")
    dom = Array(tuple(full[n] for n in names), level, dtype)
    cod = [Array(tuple(p if n == along else full[n] for n in names), level, dtype) for p in parts]
    weaves = [Weave(n, (0,)) for n in reversed(names) if n != along]
    return build_box("split", [dom], cod, weaves)


def join(signature: str, *, along: str, parts, level: int = 0, dtype=FP32,
         sizes: dict | None = None, **more) -> Diagram:
    """Join slices along an axis: the inverse of :func:`split`."""
    sizes = _merge_sizes('join', sizes, more, _names(signature))
    d = split(signature, along=along, parts=parts, level=level, dtype=dtype, sizes=sizes)
    b = d.boxes[0]
    return build_box("join", list(b.cod.inside), list(b.dom.inside),
                     [type(w)(w.name, tuple(range(len(b.cod)))) for w in b.data.weaves])


def cast(signature: str, *, to, level: int = 0, dtype=FP32, sizes: dict | None = None, **more) -> Diagram:
    """Convert an array's number format (``to`` = fp32, fp16, bf16 or fp8)."""
    sizes = _merge_sizes('cast', sizes, more, _names(signature))
    to = as_dtype(to)
    return apply("cast", signature, params={"dtype": to.name}, level=level, dtype=dtype,
                 out_dtype=to, sizes=sizes)


def transfer(direction: str, array: Array) -> Diagram:
    """``load`` (to the level below) or ``save`` (to the level above) of an array."""
    if direction not in ("load", "save"):
        raise SignatureError(f"a transfer is 'load' or 'save', not {direction!r}")
    target = array.level + (1 if direction == "load" else -1)
    if target < 0:
        raise SignatureError(f"cannot save {array} above level 0")
    weaves = [Weave(a.name, (0,)) for a in reversed(array.axes)]
    return build_box(direction, [array], [array.replace(level=target)], weaves)


def renaming(signature: str, *, level: int = 0, dtype=FP32, sizes: dict | None = None, **more) -> Diagram:
    """A box that gives axes new names, position by position: ``renaming("h n d -> h m d")`` (a primitive of kind
    ``rename``, the data unchanged; :func:`~napkin_cat.syntax.relabel.rename_axis` is the functor that renames
    an axis throughout a diagram).

    The renamed axis keeps its size (``m`` gets the size of ``n``).

    >>> renaming("n d -> m d", n=5).cod
    Ty(Array(m[5]×d))
    """
    sizes = _merge_sizes('renaming', sizes, more, _names(signature))
    (ins,), outs = parse(signature, arrow=True)
    if len(outs) != 1 or len(outs[0]) != len(ins):
        raise SignatureError(f"rename maps one array to one array of the same rank, got {signature!r}")
    out = outs[0]
    axes = axes_for([ins], sizes)
    renamed = [(a, b) for a, b in zip(ins, out) if a != b]
    if not renamed:
        raise SignatureError(f"rename {signature!r} renames no axis")
    for a, b in renamed:
        if b in ins:
            raise SignatureError(f"rename {signature!r}: new name {b!r} is already an input axis")
    new_axes = {b: Axis(b, axes[a].size) for a, b in renamed}
    dom = Array(tuple(axes[n] for n in ins), level, dtype)
    cod = Array(tuple(new_axes.get(n, axes.get(n)) for n in out), level, dtype)
    weaves = [Weave(n, (0,)) for n in reversed(out) if n not in new_axes]
    return build_box("rename", [dom], [cod], weaves)


#: the name before issue 20 (``nc.renaming``; ``nc.rename`` still resolves, with a DeprecationWarning)
rename = renaming
