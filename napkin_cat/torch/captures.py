"""What FlexAttention's mods read: the values they capture by name (closure cells, globals, a method's object, a
module's attributes), what a trace of them depends on in each (:func:`fingerprint`), and the path from the mods to
each captured tensor, which dynamo follows under ``torch.compile`` (:func:`paths`, :func:`follow`).

A path is ``(role, steps)``: the mod (``"score_mod"`` or ``"mask_mod"``), then each step one of ``("self", None)``
(a bound method's object), ``("func", None)`` (its function), ``("forward", None)`` (a module's ``forward``),
``("cell", k)`` (closure cell ``k``'s value), ``("global", name)``, ``("attr", name)``, ``("item", key)`` (a dict's
entry, a list's item)::

    follow(score_mod, mask_mod, path_of(score_mod, mask_mod, key)) is captured(score_mod, mask_mod)[key]

>>> import torch
>>> def make():
...     table = torch.arange(3.0)
...     return lambda s, b, h, q, x: s + table[q]
>>> mod = make()
>>> sorted(captured(mod, None))
['score_mod.table']
>>> path = path_of(mod, None, "score_mod.table")
>>> path, follow(mod, None, path) is captured(mod, None)["score_mod.table"]
(('score_mod', (('cell', 0),)), True)
"""
from __future__ import annotations

import inspect
import types

import torch

#: how many levels of attributes and dict entries deep a captured value is looked into (lists and tuples: all)
DEPTH = 3


def captured(score_mod, mask_mod) -> dict:
    """The values the mods read by name (closure cells and globals, modules left out; a bound method's object, or a
    mod that is a ``torch.nn.Module``, as ``"score_mod.__self__"``): ``"score_mod.TABLE"`` → the tensor.  None where a
    mod is neither a Python function, a method nor a module (a callable object: what it reads is not visible)."""
    out = {}
    for role, fn in (("score_mod", score_mod), ("mask_mod", mask_mod)):
        if fn is None:
            continue
        if isinstance(fn, torch.nn.Module):     # what its forward reads: its attributes (in its fingerprint)
            out[f"{role}.__self__"] = fn
            fn = type(fn).forward
        if inspect.ismethod(fn):
            out[f"{role}.__self__"] = fn.__self__
            fn = fn.__func__
        if not inspect.isfunction(fn):
            return None
        seen = inspect.getclosurevars(fn)
        out.update({f"{role}.{k}": v for k, v in {**seen.globals, **seen.nonlocals}.items()
                    if not isinstance(v, types.ModuleType)})
    return out


def modules(score_mod, mask_mod, reads) -> list:
    """The ``torch.nn.Module`` objects the mods read (a bound method's object, a module in a closure cell or a
    global, or inside a captured object, dict or list: :func:`reached`), registered under :class:`Scores` (as a mod
    that is a module is already) so that ``torch.export`` lifts their parameters and buffers as the originals
    (``PARAMETER`` inputs, read at each call, their gradients given back), not as copies of their values at the
    trace."""
    found = [fn.__self__ for fn in (score_mod, mask_mod) if inspect.ismethod(fn)
              and isinstance(fn.__self__, torch.nn.Module)]
    found += [v for _, _, v in reached(score_mod, mask_mod, reads) if isinstance(v, torch.nn.Module)]
    out = []
    for m in found:
        if all(m is not k for k in out):
            out.append(m)
    return out


def reached(score_mod, mask_mod, reads=None) -> list:
    """Every tensor and module the mods read: by name (:func:`captured`), or inside a value they read by name: an
    object's attributes, a dict's entries (keyed by a string or an int), a list's or a tuple's items, as deep as
    :func:`fingerprint` looks (a module is not looked inside: its parameters and buffers are read through
    :func:`modules`).  Each as ``(name, path, value)``: ``"score_mod.cfg.table"``, ``"mask_mod.tables['doc']"``,
    ``"score_mod.biases[0]"``, and its path (:func:`follow`); a value reached twice, once (its first path).

    >>> class Cfg: pass
    >>> cfg, bias = Cfg(), {"table": torch.zeros(3)}
    >>> cfg.slopes = [torch.ones(2)]
    >>> mod = lambda s, b, h, q, x: s * cfg.slopes[0][h] + bias["table"][q]
    >>> for name, path, _ in reached(mod, None):
    ...     print(name, path)
    score_mod.bias['table'] ('score_mod', (('global', 'bias'), ('item', 'table')))
    score_mod.cfg.slopes[0] ('score_mod', (('global', 'cfg'), ('attr', 'slopes'), ('item', 0)))
    """
    reads = captured(score_mod, mask_mod) if reads is None else reads
    out, seen = [], set()
    for key, value in sorted((reads or {}).items()):
        inside(key, path_of(score_mod, mask_mod, key), value, DEPTH, out, seen)
    return out


def inside(name: str, path: tuple, value, depth: int, out: list, seen: set):
    """:func:`reached`'s walk from ``value`` (at ``name``, ``path``), ``depth`` levels of attributes and entries."""
    if id(value) in seen:
        return
    if isinstance(value, (torch.Tensor, torch.nn.Module)):
        seen.add(id(value))
        out.append((name, path, value))
        return
    role, steps = path
    if isinstance(value, (tuple, list)):
        seen.add(id(value))
        for k, v in enumerate(value):
            inside(f"{name}[{k}]", (role, steps + (("item", k),)), v, depth, out, seen)
        return
    if not depth:
        return
    if isinstance(value, dict):
        seen.add(id(value))
        for k, v in value.items():
            if isinstance(k, (str, int)) and not isinstance(k, bool):
                inside(f"{name}[{k!r}]", (role, steps + (("item", k),)), v, depth - 1, out, seen)
        return
    attributes = attributes_of(value)
    if attributes is not None:
        seen.add(id(value))
        for k, v in attributes.items():
            if isinstance(k, str):
                inside(f"{name}.{k}", (role, steps + (("attr", k),)), v, depth - 1, out, seen)


def attributes_of(value):
    """A plain object's attributes (its ``__dict__``), None for a type, a function, a method, a Python module or a
    value without one."""
    if isinstance(value, (type, types.FunctionType, types.MethodType, types.ModuleType)):
        return None
    attributes = getattr(value, "__dict__", None)
    return attributes if isinstance(attributes, dict) else None


def fingerprint(value, depth: int = DEPTH):
    """What a traced diagram depends on in a captured value: a tensor's shape, dtype and device (not its values,
    which are the diagram's inputs), a number's or a string's value; an object's identity and the fingerprints of
    its attributes (a module's: its public attributes, its parameters' and buffers' shapes, its submodules'), a
    dict's entries, a set's members, so that ``cfg.width = 5``, ``widths["w"] = 5`` or a table rebound to another
    shape traces again; ``depth`` levels of attributes deep.

    >>> widths = {"w": 3}
    >>> before = fingerprint(widths)
    >>> widths["w"] = 5
    >>> before == fingerprint(widths), fingerprint((2, "a")) == fingerprint((2, "a"))
    (False, True)
    """
    if isinstance(value, torch.Tensor):
        return ("tensor", tuple(value.shape), value.dtype, value.device.type)
    if value is None or isinstance(value, (bool, int, float, complex, str)):
        return ("value", type(value).__name__, value)
    if isinstance(value, (tuple, list)):
        return (type(value).__name__, tuple(fingerprint(v, depth) for v in value))
    if isinstance(value, dict) and depth:       # ``width["w"] = 5``: its entries, as an object's attributes
        return ("dict", id(value), tuple(sorted((repr(k), fingerprint(v, depth - 1)) for k, v in value.items())))
    if isinstance(value, (set, frozenset)) and depth:
        return (type(value).__name__, tuple(sorted(repr(fingerprint(v, depth - 1)) for v in value)))
    attributes = attributes_of(value) if depth else None
    if attributes is None:
        return ("object", id(value))
    if isinstance(value, torch.nn.Module):
        attributes = {**{k: v for k, v in attributes.items() if not k.startswith("_")},
                      **dict(value.named_parameters()), **dict(value.named_buffers()),
                      **{f"{k}.": m for k, m in value.named_children()}}
    return ("object", id(value), tuple(sorted((str(k), fingerprint(v, depth - 1)) for k, v in attributes.items())))


def mods(score_mod, mask_mod) -> dict:
    """The two FlexAttention functions by role: ``{"score_mod": …, "mask_mod": …}``."""
    return {"score_mod": score_mod, "mask_mod": mask_mod}


def function_steps(fn) -> tuple:
    """The steps from a mod to the Python function whose closure and globals it reads, and that function."""
    if isinstance(fn, torch.nn.Module):
        return (("forward", None),), type(fn).forward
    if inspect.ismethod(fn):
        return (("func", None),), fn.__func__
    return (), fn


def path_of(score_mod, mask_mod, key: str) -> tuple:
    """The path to the value :func:`captured` names ``key`` (``"score_mod.TABLE"``, ``"mask_mod.__self__"``)."""
    role, name = key.split(".", 1)
    fn = mods(score_mod, mask_mod)[role]
    if name == "__self__":
        return (role, ()) if isinstance(fn, torch.nn.Module) else (role, (("self", None),))
    steps, function = function_steps(fn)
    free = function.__code__.co_freevars
    return (role, steps + ((("cell", free.index(name)),) if name in free else (("global", name),)))


def tensors(score_mod, mask_mod) -> list:
    """Every tensor a trace of the mods may read per call, as ``(key, path, tensor)``: each tensor the mods read by
    name or inside a value they read by name (key ``("read", name)``, ``name`` as :func:`reached` gives it), and each
    parameter and buffer of each module they read (key ``("param", i, name)``: module ``i`` of :func:`modules`, the
    parameter's dotted name in it).  What a trace at given shapes reads is among them (:func:`key_of` names it), so
    that the list is known before the shapes are."""
    reads = captured(score_mod, mask_mod) or {}
    found = reached(score_mod, mask_mod, reads)
    out = [(("read", k), path, v) for k, path, v in found if isinstance(v, torch.Tensor)]
    for i, m in enumerate(modules(score_mod, mask_mod, reads)):
        paths = [(role, (("self", None),)) for role, fn in mods(score_mod, mask_mod).items()
                 if inspect.ismethod(fn) and fn.__self__ is m]
        paths += [path for _, path, v in found if v is m]
        role, steps = paths[0]
        for name, t in (*m.named_parameters(), *m.named_buffers()):
            out.append((("param", i, name), (role, steps + tuple(("attr", a) for a in name.split("."))), t))
    return out


def key_of(score_mod, mask_mod, held: list, source: str | None, target: str) -> tuple:
    """The key (:func:`tensors`) of an input of a trace: ``source``, the name of a captured tensor (the trace's
    ``sources``), or ``target``, a parameter's or buffer's name in :class:`~napkin_cat.torch.flex.Scores`
    (``held.0.table``, or ``score_mod.table`` for a mod that is a module); ``held`` the modules it registered."""
    if source is not None:
        return ("read", source)
    first, *rest = target.split(".")
    if first == "held":
        return ("param", int(rest[0]), ".".join(rest[1:]))
    module = mods(score_mod, mask_mod)[first]
    return ("param", next(i for i, m in enumerate(held) if m is module), ".".join(rest))


def follow(score_mod, mask_mod, path: tuple):
    """The value at ``path`` from the mods (see the module docstring): plain attribute reads, which dynamo traces
    (a tensor reached is an input of the graph)."""
    role, steps = path
    obj = score_mod if role == "score_mod" else mask_mod
    for kind, arg in steps:
        if kind == "self":
            obj = obj.__self__
        elif kind == "func":
            obj = obj.__func__
        elif kind == "forward":
            obj = type(obj).forward
        elif kind == "cell":
            obj = obj.__closure__[arg].cell_contents
        elif kind == "global":
            obj = obj.__globals__[arg]
        elif kind == "item":
            obj = obj[arg]
        else:
            obj = getattr(obj, arg)
    return obj


__all__ = ["captured", "modules", "reached", "fingerprint", "path_of", "tensors", "key_of", "follow", "DEPTH"]
