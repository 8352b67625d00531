"""What the command line takes in: an algorithm (a library name or a user's Python file), sizes, memory.

Every malformed input raises :class:`CLIError` with a one-line message saying what is wrong and
what would be legal; ``napkin`` prints it and exits with status 2 (no traceback).

>>> parse_sizes("q=4096, x=4096,d=64")
{'q': 4096, 'x': 4096, 'd': 64}
>>> parse_memory("2^14"), parse_memory("2^10..2^12")
(16384, [1024, 2048, 4096])
>>> label, g = differentiated("attention", library.attention(), "2,0")
>>> label, [str(a) for a in g.dom.inside], [str(a) for a in g.cod.inside]
('grad(attention, wrt=2,0)', ['q×d', 'x×d', 'x×d', 'q×d'], ['x×d', 'q×d'])
>>> label, f = algorithm("attention(lse=True)")          # a library algorithm with keyword arguments
>>> label, [str(a) for a in f.cod.inside]
('attention(lse=True)', ['q×d', 'q'])
>>> label, g = differentiated(label, f, saved=True, aux=1)   # reads the saved O and L; no cotangent for L
>>> label, len(g.dom), len(g.cod)
('grad(attention(lse=True), saved, aux=1)', 6, 3)
>>> parse_sizes("q=4096,x")
Traceback (most recent call last):
...
napkin_cat.errors.CLIError: malformed --sizes 'q=4096,x': 'x' is not name=positive-int (e.g. q=4096,x=4096,d=64)
"""
from __future__ import annotations

import ast
import inspect
import math
import os
import re
import runpy

from napkin_cat import library
from napkin_cat.autodiff import grad
from napkin_cat.errors import CLIError
from napkin_cat.syntax.adapter import Diagram

def _takes_nothing(fn) -> bool:
    return all(p.default is not p.empty or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
               for p in inspect.signature(fn).parameters.values())


#: the named algorithms a name on the command line builds (helpers, and algorithms that need an argument such
#: as a window's width, are written in a Python file)
LIBRARY = tuple(n for n in library.__all__ if n not in library.HELPERS and _takes_nothing(getattr(library, n)))
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_']*$")
#: ``name(keyword=literal, ...)``: a library algorithm built with keyword arguments
_CALL = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*\((.*)\)\s*$", re.S)
#: what a keyword argument on the command line may be (a literal: nothing is evaluated)
_LITERALS = (bool, int, float, str, type(None))
_DIGITS = re.compile(r"[0-9]+")     # ASCII digits only: str.isdigit() accepts '²', which int() refuses
#: the most values a memory may hold (as nc.optimal's limit): 2^64
LARGEST_MEMORY_BITS = 64
#: digits of the largest size (2^64, ``LARGEST_SIZE``): a longer number is refused before it is converted
_LARGEST_DIGITS = len(str(2 ** 64))


def algorithm(spec: str, *, name: str | None = None) -> tuple[str, Diagram]:
    """``(label, diagram)`` from a library name (``attention``) or a Python file that defines a diagram.

    The file is run as a script; the diagram is its top-level ``diagram`` variable, else its only
    top-level :class:`~napkin_cat.Diagram` (``name`` picks one when there are several).
    """
    if spec in LIBRARY:
        return spec, getattr(library, spec)()
    if _CALL.match(spec):
        return library_call(spec)
    if not spec.endswith(".py"):
        raise CLIError(f"unknown algorithm {spec!r}: give one of {', '.join(LIBRARY)} (with keyword arguments if "
                       "it takes some, e.g. 'attention(lse=True)'), or a Python file (*.py) that defines a diagram")
    if not os.path.isfile(spec):
        raise CLIError(f"no such file {spec!r}")
    try:
        namespace = runpy.run_path(spec, run_name="__napkin__")
    except SystemExit as e:
        raise CLIError(f"{spec} exited (status {e.code}) instead of defining a diagram") from None
    except BaseException as e:  # a user's file: report any failure in one line
        raise CLIError(f"{spec} raised {type(e).__name__}: {e}".splitlines()[0]) from None
    found = {k: v for k, v in namespace.items() if isinstance(v, Diagram) and not k.startswith("_")}
    label = os.path.splitext(os.path.basename(spec))[0]
    if name is not None:
        if name not in found:
            raise CLIError(f"{spec} defines no diagram called {name!r}; its diagrams: {sorted(found) or 'none'}")
        return label, found[name]
    if "diagram" in found:
        return label, found["diagram"]
    if len(found) == 1:
        return label, next(iter(found.values()))
    if not found:
        raise CLIError(f"{spec} defines no diagram: assign one at top level, e.g. "
                       "`diagram = nc.einsum(\"a b, b c -> a c\")`")
    raise CLIError(f"{spec} defines several diagrams ({', '.join(sorted(found))}): name one with --name, or "
                   "call it `diagram`")


def library_call(spec: str) -> tuple[str, Diagram]:
    """``(label, diagram)`` from ``name(keyword=literal, ...)``: the library function ``name`` called with those
    keyword arguments, each a Python literal (True, 64, 'x', None: read by :func:`ast.literal_eval`, nothing is
    executed).  A name outside the library, a positional argument, a keyword the function does not take or a value
    that is not a literal is refused naming it and what is legal."""
    fn_name, inside = _CALL.match(spec).groups()
    callable_names = [n for n in library.__all__ if n not in library.HELPERS]
    if fn_name not in callable_names:
        raise CLIError(f"unknown algorithm {fn_name!r} in {spec!r}: give one of {', '.join(callable_names)}")
    fn = getattr(library, fn_name)
    try:
        call = ast.parse(f"f({inside})", mode="eval").body
    except SyntaxError:
        raise CLIError(f"malformed algorithm {spec!r}: write {fn_name}(keyword=value, ...), e.g. "
                       "'attention(lse=True)'") from None
    params = inspect.signature(fn).parameters
    legal = ", ".join(params)
    if call.args or any(k.arg is None for k in call.keywords):
        raise CLIError(f"{spec!r}: give {fn_name}'s arguments by keyword ({legal})")
    kwargs = {}
    for k in call.keywords:
        if k.arg not in params:
            raise CLIError(f"{spec!r}: {fn_name} takes no argument {k.arg!r}; its arguments: {legal}")
        try:
            value = ast.literal_eval(k.value)
        except ValueError:
            value = NotImplemented          # not a literal: refused below, as a list or a dict is
        if not isinstance(value, _LITERALS):
            raise CLIError(f"{spec!r}: {k.arg}={ast.unparse(k.value)} is not a literal (True, False, a number, a "
                           "quoted string or None)")
        if k.arg in kwargs:
            raise CLIError(f"{spec!r}: {k.arg!r} is given twice")
        kwargs[k.arg] = value
    try:
        diagram = fn(**kwargs)
    except TypeError as e:          # e.g. a required argument not given
        raise CLIError(f"{spec!r}: {e}; its arguments: {legal}") from None
    label = f"{fn_name}({', '.join(f'{k}={v!r}' for k, v in kwargs.items())})"
    return label, diagram


def parse_sizes(text: str | None) -> dict:
    """``"q=4096,x=4096,d=64"`` → ``{"q": 4096, ...}`` (names as axis names, positive ints)."""
    if not text:
        return {}
    out = {}
    for part in (p.strip() for p in text.split(",")):
        key, _, value = part.partition("=")
        key, value = key.strip(), value.strip()
        if _DIGITS.fullmatch(value) and len(value) > _LARGEST_DIGITS:    # before int(): 5,000 digits is a ValueError
            raise CLIError(f"--sizes {key}={value[:12]}…: {len(value)} digits; a size is at most 2^64 "
                           f"({_LARGEST_DIGITS} digits)")
        if not (_NAME.match(key) and _DIGITS.fullmatch(value) and int(value) > 0):
            raise CLIError(f"malformed --sizes {text!r}: {part!r} is not name=positive-int "
                           "(e.g. q=4096,x=4096,d=64)")
        if key in out:
            raise CLIError(f"malformed --sizes {text!r}: {key!r} is given twice")
        out[key] = int(value)
    return out


def _power(text: str, whole: str) -> int:
    text = text.strip()
    m = re.fullmatch(r"([0-9]+)(?:\^([0-9]+))?", text)
    if not m:
        raise CLIError(f"malformed --memory {whole!r}: {text!r} is not an int or a power such as 2^14")
    base, exponent = int(m.group(1)), int(m.group(2) or 1)
    if base > 1 and exponent * math.log2(base) > LARGEST_MEMORY_BITS:   # checked before computing the power
        raise CLIError(f"--memory {whole!r}: {text} is more values than any level holds (at most "
                       f"2^{LARGEST_MEMORY_BITS})")
    value = base ** exponent
    if value <= 0:
        raise CLIError(f"malformed --memory {whole!r}: memory must be positive, got {value}")
    return value


def parse_memory(text: str):
    """``"16384"`` or ``"2^14"`` → an int; ``"2^10..2^20"`` → the powers of two in that range (a list)."""
    if ".." in text:
        lo, _, hi = text.partition("..")
        lo, hi = _power(lo, text), _power(hi, text)
        if hi < lo:
            raise CLIError(f"malformed --memory {text!r}: the range runs from {lo} down to {hi}")
        out, m = [], lo
        while m <= hi:
            out.append(m)
            m *= 2
        return out
    return _power(text, text)


def _inputs(diagram) -> str:
    return ", ".join(f"{k}: {a}" for k, a in enumerate(diagram.dom.inside))


def parse_wrt(text: str | None, diagram) -> list | None:
    """``--wrt "0,2"`` → ``[0, 2]``: input positions of ``diagram`` (None: every input)."""
    if text is None:
        return None
    parts = [p.strip() for p in text.split(",")]
    if not all(p.isdigit() for p in parts):
        raise CLIError(f"malformed --wrt {text!r}: give input positions separated by commas, e.g. 0,2 (the inputs: "
                       f"{_inputs(diagram)})")
    positions = [int(p) for p in parts]
    outside = [p for p in positions if p >= len(diagram.dom)]
    if outside:
        raise CLIError(f"--wrt {text}: the diagram has no input {outside[0]}; its inputs are {_inputs(diagram)}")
    if len(set(positions)) != len(positions):
        raise CLIError(f"--wrt {text}: an input is named twice")
    return positions


def differentiated(label: str, diagram, wrt: str | None = None, *, saved: bool = False,
                   aux: int = 0) -> tuple[str, object]:
    """``(label, nc.grad(diagram, wrt, saved=, aux=))`` for ``--grad``: the gradient diagram takes ``diagram``'s
    inputs, with ``saved`` then all of its outputs as the forward saved them, then one cotangent per output but the
    last ``aux``, and gives the gradients of the inputs at the positions of ``wrt`` (default: all).  A primitive
    without a vector-Jacobian product is refused by name (:class:`~napkin_cat.errors.NoVJPError`), an ``aux``
    outside 0 … outputs − 1 by :class:`~napkin_cat.errors.GradError`."""
    positions = parse_wrt(wrt, diagram)
    suffix = "" if positions is None else ", wrt=" + ",".join(map(str, positions))
    suffix += ", saved" if saved else ""
    suffix += f", aux={aux}" if aux else ""
    return f"grad({label}{suffix})", grad(diagram, wrt=positions, saved=saved, aux=aux)
