"""Models in: ``nc.from_torch(fn_or_module, *example_inputs)``, a diagram from a ``torch.export`` graph.

The model is exported (``torch.export.export``); its inputs (the user's, then the parameters, buffers and
constants the graph lifts, named by their module paths) become the diagram's inputs; each ATen operation becomes
the library's boxes by the table of :mod:`~napkin_cat.torch.aten`; each class of dimensions that the operations
make one axis (:mod:`~napkin_cat.torch.classes`) is named by ``names=``, else by the ``torch.export.Dim`` that
``dynamic_shapes`` gives it (its size then symbolic), else after the first input dimension that carries it
(``x_0``: input ``x``, dimension 0).  An operation it cannot translate is an
:class:`~napkin_cat.errors.UnsupportedOperationError` naming the ATen operation, its module path and its line::

    nc.evaluate(r.diagram, *r.inputs.values())  ==  module(*example_inputs)      (size-1 dimensions dropped)

>>> import torch, napkin_cat as nc
>>> lin = torch.nn.Linear(3, 2).double()
>>> r = nc.from_torch(lin, torch.randn(4, 3, dtype=torch.float64), names={"input": "n i"})
>>> r.diagram.dom, r.diagram.cod
(Ty(Array(n[4]×i[3]), Array(weight_0[2]×i[3]), Array(weight_0[2])), Ty(Array(n[4]×weight_0[2])))
>>> list(r.inputs), bool(abs(r.evaluate() - lin(torch.as_tensor(r.inputs["input"])).detach().numpy()).max() < 1e-12)
(['input', 'weight', 'bias'], True)
"""
from __future__ import annotations

import inspect
import operator
import os
import re
from dataclasses import dataclass

import numpy as np
import sympy
import torch

from napkin_cat.errors import ArgumentError, IndexingError, ShapeError, UnsupportedOperationError
from napkin_cat.semantics.evaluate import evaluate
from napkin_cat.syntax.adapter import Diagram
from napkin_cat.syntax.axis import symbol
from napkin_cat.syntax.dtype import BF16, BOOL, FP16, FP32, INT32
from napkin_cat.torch.aten import ATEN, CHECKS, Indices
from napkin_cat.torch.classes import BY_DIM, BY_INPUT, BY_USER
from napkin_cat.torch.traced import Tensor
from napkin_cat.torch.translate import Translation

#: torch's formats → the diagram's (a float64 model is labelled fp32: numpy evaluates it in float64)
FORMATS = {torch.float64: FP32, torch.float32: FP32, torch.float16: FP16, torch.bfloat16: BF16,
           torch.int64: INT32, torch.int32: INT32, torch.int16: INT32, torch.int8: INT32, torch.uint8: INT32,
           torch.bool: BOOL}
#: the source trees whose frames are not the model's (torch's, and this layer's wrappers, flex_attention's)
LIBRARIES = (os.path.dirname(torch.__file__) + os.sep, os.path.dirname(__file__) + os.sep)
#: the inputs a graph lifts besides the user's
LIFTED = ("PARAMETER", "BUFFER", "CONSTANT_TENSOR")
#: ``node.meta`` key: the dimensions an ``aten.index`` node counts a negative index from the end along
#: (:func:`mark_wraps`)
WRAPS = "napkin_wraps"
#: the operations that read a table at integer indices → ``(table, dimension, index)`` of each read of a node
READS = {
    "index.Tensor": lambda n: [(n.args[0], k, i) for k, i in enumerate(n.args[1]) if isinstance(i, torch.fx.Node)],
    "index_select.default": lambda n: [(n.args[0], n.args[1], n.args[2])],
    "gather.default": lambda n: [(n.args[0], n.args[1], n.args[2])],
    "embedding.default": lambda n: [(n.args[0], 0, n.args[1])],
}


@dataclass(frozen=True)
class FromTorch:
    """A translated model: its ``diagram``, the arrays of its inputs (``inputs``: name → numpy array, in the
    diagram's input order, size-1 dimensions dropped), each input's axis names (``axes``: name → one name per
    dimension, None for size 1), the example's size of each symbolic axis (``sizes``: a dynamic dimension's axis;
    ``nc.derive(r.diagram, memory=M, sizes=r.sizes)``) and the exported program it came from."""
    diagram: Diagram
    inputs: dict
    axes: dict
    sizes: dict
    program: object
    dropped: tuple                  # per output: the dimensions of size 1 (not axes of the diagram's array)
    requirements: tuple             # (input name, check, what it refuses)

    def arrays(self, **replaced) -> list:
        """The diagram's input arrays: ``inputs``, with any named one replaced (a tensor or an array, checked)."""
        unknown = sorted(set(replaced) - set(self.inputs))
        if unknown:
            raise ArgumentError(f"{unknown} are not inputs of the diagram; its inputs are {list(self.inputs)}")
        out = []
        for name, x in self.inputs.items():
            if name in replaced:
                x = as_array(name, replaced[name], self.axes[name])
            for input_name, check, refused in self.requirements:
                if input_name == name and not check(x):
                    raise ShapeError(f"input {name!r} holds {refused}")
            out.append(x)
        if replaced:
            self.check_indices(dict(zip(self.inputs, out)))
        return out

    def check_indices(self, arrays: dict):
        """:func:`check_indices` on these input arrays (the model's own shapes back), where they are all of the
        model's inputs (FlexAttention's positions are not: ``nc.torch.flex_attention`` checks its own)."""
        specs = self.program.graph_signature.input_specs
        user = [s.arg.name for s in specs if s.kind.name == "USER_INPUT"]
        if any(n not in arrays for n in user):
            return

        def tensor(name):
            a = np.asarray(arrays[name])
            sizes = iter(a.shape)
            return torch.as_tensor(a).reshape([1 if d is None else next(sizes) for d in self.axes[name]])
        check_indices(self.program, [tensor(n) for n in user],
                      {s.target: tensor(s.target) for s in specs if s.kind.name in LIFTED and s.target in arrays},
                      at="on the inputs given")

    def evaluate(self, **replaced):
        """``nc.evaluate`` of the diagram on :meth:`arrays`, each output with the model's size-1 dimensions back:
        what the model returns, as numpy arrays (one, or a tuple)."""
        outs = evaluate(self.diagram, *self.arrays(**replaced))
        outs = outs if isinstance(outs, tuple) else (outs,)
        outs = tuple(np.expand_dims(o, tuple(d)) if d else o for o, d in zip(outs, self.dropped))
        return outs[0] if len(outs) == 1 else outs


def as_array(name: str, x, axes) -> np.ndarray:
    """A tensor's values as the diagram takes them: numpy, size-1 dimensions dropped, integers as int32."""
    if isinstance(x, torch.Tensor) and x.dtype == torch.bfloat16:   # numpy has no bfloat16: its values in float32
        x = x.float()
    a = x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)
    if a.ndim != len(axes):
        raise ShapeError(f"input {name!r} has {a.ndim} dimensions, the model's has {len(axes)} ({axes})")
    a = a.reshape([s for s, n in zip(a.shape, axes) if n is not None])
    if np.issubdtype(a.dtype, np.integer):
        if a.size and (a.min() < -2 ** 31 or a.max() >= 2 ** 31):
            raise ShapeError(f"input {name!r} holds integers outside int32, the diagram's integer format")
        a = a.astype(np.int32)
    return a


def from_torch(fn_or_module, *example_inputs, dynamic_shapes=None, names=None) -> FromTorch:
    """The diagram of ``fn_or_module`` (a ``torch.nn.Module`` or a function of tensors) traced by ``torch.export``
    at ``example_inputs`` (see the module docstring).

    ``dynamic_shapes`` is ``torch.export``'s (a ``Dim``'s name names its axis, whose size is then a symbol);
    ``names`` maps an input's name (an argument, or a parameter's path such as ``"fc1.weight"``) to its axes'
    names, one per dimension (``"n d"`` or a sequence; ``None`` or ``"_"`` leaves one to the default).
    An index outside the table it reads (``x[i]``, ``index_select``, ``gather``, ``embedding``) is an
    :class:`~napkin_cat.errors.IndexingError` on the example's values (:func:`check_indices`), and on the values
    of inputs replaced in :meth:`FromTorch.evaluate`: the diagram's gather would read 0 there.
    """
    module = fn_or_module if isinstance(fn_or_module, torch.nn.Module) else wrap(fn_or_module)
    if isinstance(dynamic_shapes, dict) and not isinstance(fn_or_module, torch.nn.Module):
        params = list(inspect.signature(fn_or_module).parameters)
        dynamic_shapes = {k: v for k, v in dynamic_shapes.items() if k in params}
    program = torch.export.export(module, tuple(example_inputs), dynamic_shapes=dynamic_shapes)
    example, constants = torch.utils._pytree.tree_leaves(tuple(example_inputs)), {**program.state_dict,
                                                                                  **program.constants}
    mark_wraps(program, example, constants)
    check_indices(program, example, constants, at="on the example inputs")
    return translate(program, module, example_inputs, dynamic_shapes, names or {})


def wrap(fn) -> torch.nn.Module:
    """A function as a module whose ``forward`` has the function's signature (so its arguments keep their names)."""
    if not callable(fn):
        raise ArgumentError(f"nc.from_torch takes a torch.nn.Module or a function of tensors, got {type(fn).__name__}")

    class Function(torch.nn.Module):
        def forward(self, *args, **kwargs):
            return fn(*args, **kwargs)
    sig = inspect.signature(fn)
    this = inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)
    Function.forward.__signature__ = sig.replace(parameters=[this, *sig.parameters.values()])
    return Function()


def dim_names(program, module, dynamic_shapes) -> dict:
    """``(user input name, dimension) → the name of the torch.export.Dim`` that ``dynamic_shapes`` gives it."""
    if dynamic_shapes is None:
        return {}
    params = [p for p in inspect.signature(module.forward).parameters]
    specs = dynamic_shapes if isinstance(dynamic_shapes, dict) else dict(zip(params, dynamic_shapes))
    out = {}
    for arg, spec in specs.items():
        items = spec.items() if isinstance(spec, dict) else enumerate(spec or ())
        for d, dim in items:
            name = getattr(dim, "__name__", None)
            if isinstance(name, str) and re.match(r"^[A-Za-z_][A-Za-z0-9_']*$", name):
                out[(arg, d)] = name
    return out


def location(node) -> str:
    """Where a node is in the model: its ATen operation, module path and source line (what torch.export recorded)."""
    what = f"aten.{name}" if (name := op_name(node)) else str(node.target)
    stack = node.meta.get("nn_module_stack") or {}
    path, kind = list(stack.values())[-1] if stack else ("", "")
    module = f" in module '{path}' ({kind.rsplit('.', 1)[-1]})" if path else (f" in the model ({kind})" if kind else "")
    frames = re.findall(r'File "([^"]+)", line (\d+), in (\S+)\n\s*(.*)', node.meta.get("stack_trace") or "")
    user = [f for f in frames if not f[0].startswith(LIBRARIES)] or frames
    line = f", {user[-1][0].rsplit('/', 1)[-1]}:{user[-1][1]} in {user[-1][2]}: {user[-1][3].strip()}" if user else ""
    return f"{what} (node {node.name}){module}{line}"


def op_name(node) -> str:
    """The aten op a graph node calls, with its overload (``"index.Tensor"``); ``""`` for anything else."""
    target = node.target
    if isinstance(target, torch._ops.OpOverload) and target.namespace == "aten":
        return target.__name__          # "index.Tensor": the op and its overload
    return ""


def translate(program, module, example_inputs, dynamic_shapes, names: dict, positions=None) -> FromTorch:
    """The diagram of an exported program (see :func:`from_torch`).  ``positions`` maps a user input to ``(input,
    dimension)``: it is no input of the diagram but the positions ``0 … n−1`` along that input's dimension (an
    ``nc.position`` box; index 0 where the dimension has size 1), the input's other dimensions of size 1 (the
    index tensors FlexAttention's mods read: ``q_idx`` is the positions along the queries)."""
    positions = positions or {}
    t = Translation()
    dims = dim_names(program, module, dynamic_shapes)
    graph = program.graph
    placeholders = {n.name: n for n in graph.nodes if n.op == "placeholder"}
    symbols: dict = {}
    specs = program.graph_signature.input_specs
    user = [s for s in specs if s.kind.name == "USER_INPUT"]
    lifted = [s for s in specs if s.kind.name in LIFTED]
    other = [s for s in specs if s.kind.name not in LIFTED + ("USER_INPUT",)]
    if other:
        raise UnsupportedOperationError(f"the exported model takes {other[0].kind.name} input {other[0].arg.name!r}; "
                                        f"napkin-cat takes tensors, parameters, buffers and constants")
    for s in user:
        val = placeholders[s.arg.name].meta.get("val")
        for d, size in enumerate(getattr(val, "shape", ())):
            if (s.arg.name, d) in dims and isinstance(size, torch.SymInt):
                symbols[size.node.expr] = dims[(s.arg.name, d)]

    def sizes(shape):
        out = []
        for s in shape:
            if isinstance(s, torch.SymInt):
                expr = s.node.expr
                if not isinstance(expr, sympy.Symbol):
                    raise UnsupportedOperationError(f"a dimension of size {expr} (a formula of dynamic sizes); "
                                                    f"napkin-cat's axes are sizes or symbols")
                out.append(symbol(symbols.get(expr, str(expr))))
            else:
                out.append(int(s))
        return tuple(out)

    unknown = sorted(set(names) - {s.arg.name for s in user} - {s.target for s in lifted})
    if unknown:
        raise ArgumentError(f"names= names {unknown}, which are not inputs of the model; its inputs are "
                            f"{[s.arg.name for s in user] + [s.target for s in lifted]}")
    values, axes, env = {}, {}, {}
    given_values = dict(zip((s.arg.name for s in user), torch.utils._pytree.tree_leaves(tuple(example_inputs))))
    for s in user + lifted:
        name = s.arg.name if s.kind.name == "USER_INPUT" else s.target
        val = placeholders[s.arg.name].meta.get("val")
        if not isinstance(val, torch.Tensor):
            raise UnsupportedOperationError(f"input {name!r} is a {type(val).__name__}, not a tensor")
        shape = sizes(val.shape)
        if name in positions:
            env[s.arg.name] = position_of(t, name, shape, positions[name], env)
            continue
        given = names.get(name)
        given = given.split() if isinstance(given, str) else list(given) if given is not None else [None] * len(shape)
        if len(given) != len(shape):
            raise ArgumentError(f"names= gives input {name!r} {len(given)} axis names, but it has {len(shape)} "
                                f"dimensions {tuple(val.shape)}")
        base = re.sub(r"\W", "_", name)
        claims = []
        for d in range(len(shape)):
            c = [(BY_INPUT, f"{base}_{d}", f"{name}[{d}]")]
            if (name, d) in dims:
                c.append((BY_DIM, dims[(name, d)], f"{name}[{d}]"))
            if given[d] not in (None, "_"):
                c.append((BY_USER, given[d], f"{name}[{d}]"))
            claims.append(c)
        env[s.arg.name] = t.input(name, shape, format_of(val.dtype, name), claims)
        data = program.state_dict.get(s.target) if s.kind.name in ("PARAMETER", "BUFFER") else \
            program.constants.get(s.target) if s.kind.name == "CONSTANT_TENSOR" else given_values[s.arg.name]
        values[name] = data
        axes[name] = shape
    for node in graph.nodes:
        if node.op != "call_function":
            continue
        t.at, t.op, t.node, t.wraps = location(node), op_name(node), node.name, node.meta.get(WRAPS, set())
        if node.target is operator.getitem:
            env[node.name] = env[node.args[0].name][node.args[1]]
            continue
        if t.op in CHECKS:
            continue
        if t.op not in ATEN:
            t.refuse("napkin-cat has no box for this operation; the operations it translates are the keys of "
                     "napkin_cat.torch.aten.ATEN (docs/torch.md lists them)")
        val = node.meta.get("val")
        if isinstance(val, torch.Tensor):
            if val.dtype not in FORMATS:
                t.refuse(f"its result is a {val.dtype} tensor; napkin-cat's formats take "
                         f"{sorted(str(d) for d in FORMATS)}")
            t.shape, t.dtype = sizes(val.shape), FORMATS[val.dtype]
            t.eps = torch.finfo(val.dtype).eps if val.dtype.is_floating_point else 0.0
        args = torch.fx.node.map_arg(node.args, lambda a: value(t, env, a))
        kwargs = torch.fx.node.map_arg(node.kwargs, lambda a: value(t, env, a))
        env[node.name] = ATEN[t.op](t, *args, **kwargs)
    outputs = []
    (out_node,) = [n for n in graph.nodes if n.op == "output"]
    for spec, arg in zip(program.graph_signature.output_specs, out_node.args[0]):
        if spec.kind.name != "USER_OUTPUT":
            raise UnsupportedOperationError(f"the model mutates {spec.target!r} ({spec.kind.name}); napkin-cat's "
                                            f"diagrams compute outputs and change no input")
        x = value(t, env, arg) if isinstance(arg, torch.fx.Node) else arg
        if not isinstance(x, Tensor):
            raise UnsupportedOperationError(f"the model returns {x!r}, not a tensor")
        outputs.append(x)
    diagram = t.build(outputs)
    inputs = {}
    names_of = t.classes.names()
    result_axes = {name: tuple(None if c is None else names_of[c] for c in x.dims) for name, x in t.inputs}
    for name, x in t.inputs:
        inputs[name] = as_array(name, t.values[name] if name in t.values else values[name], result_axes[name])
    requirements = tuple((name, check, refused) for x, check, refused in t.requirements
                         for name, y in t.inputs if y is x)
    dynamic = {c for c in range(len(t.classes.size)) if not isinstance(t.classes.size[t.classes.find(c)], int)}
    symbolic = {names_of[c]: int(values[name].shape[p]) for name, x in t.inputs if name not in t.values
                for p, c in enumerate(x.dims) if c in dynamic}
    return FromTorch(diagram, inputs, result_axes, symbolic, program,
                     tuple(tuple(p for p, c in enumerate(x.dims) if c is None) for x in outputs), requirements)


def read_values(program, example, constants: dict) -> list:
    """Every read of a table at integer indices (:data:`READS`) with its index's values on these inputs:
    ``(node, table node, dimension, the table's shape, the index tensor)``, the index tensors computed from the
    inputs (``example``: the user's, in order) and the lifted tensors (``constants``: by target) by the graph's own
    operations, run by torch."""
    graph = program.graph
    reads = [(n, r) for n in graph.nodes if n.op == "call_function" and op_name(n) in READS
             for r in READS[op_name(n)](n)]
    if not reads:
        return []
    needed, stack = set(), [x for _, (table, _, index) in reads for x in (table, index)]
    while stack:
        n = stack.pop()
        if n not in needed:
            needed.add(n)
            stack.extend(n.all_input_nodes)
    specs = {s.arg.name: s for s in program.graph_signature.input_specs}
    users = iter(example)
    env = {}
    for n in graph.nodes:
        if n.op == "placeholder":
            spec = specs[n.name]
            env[n] = next(users) if spec.kind.name == "USER_INPUT" else constants.get(spec.target)
        elif n in needed and n.op == "call_function":
            args = torch.fx.node.map_arg(n.args, lambda a: env[a])
            kwargs = torch.fx.node.map_arg(n.kwargs, lambda a: env[a])
            env[n] = n.target(*args, **kwargs)
    out = []
    for n, (table, dim, index) in reads:
        shape = tuple(env[table].shape)
        out.append((n, table, dim % len(shape), shape, env[index]))
    return out


def mark_wraps(program, example, constants: dict):
    """Mark (in ``node.meta[WRAPS]``) each dimension an ``aten.index`` reads at an index with a negative value on
    these inputs: torch counts such an index from the end (``table[q − x]`` reads ``table[n + q − x]`` where
    ``q < x``), so the translation reads the table at ``index mod n`` there (:func:`~napkin_cat.torch.aten.index`)
    and :func:`check_indices` takes ``−n … n−1`` for it.  (``index_select``, ``gather`` and ``embedding`` refuse a
    negative index in torch too.)"""
    for n, _, dim, _, v in read_values(program, example, constants):
        if op_name(n) == "index.Tensor" and v.numel() and int(v.min()) < 0:
            n.meta.setdefault(WRAPS, set()).add(dim)


def check_indices(program, example, constants: dict, sources: dict | None = None, *, at: str = ""):
    """Refuse an index outside the table it reads, on these inputs (:func:`read_values`): each must lie in
    ``0 … n−1`` for a table of ``n`` entries along the dimension it reads (the diagram's gather reads 0 outside, a
    kernel would read out of bounds), or in ``−n … n−1`` where the translation counts a negative index from the end
    (:func:`mark_wraps`).  ``sources`` renames a lifted tensor (FlexAttention's ``score_mod.TABLE``).  An
    :class:`~napkin_cat.errors.IndexingError` names the operation and where it is, the table, the dimension, the
    values found and the legal range."""
    specs = {s.arg.name: s for s in program.graph_signature.input_specs}
    for n, table, dim, shape, v in read_values(program, example, constants):
        if not v.numel():
            continue
        lo, hi = int(v.min()), int(v.max())
        wraps = dim in n.meta.get(WRAPS, ())
        low = -shape[dim] if wraps else 0
        if lo < low or hi >= shape[dim]:
            spec = specs.get(table.name) if table.op == "placeholder" else None
            name = (f"the tensor of node {table.name}" if spec is None else
                    f"the input {spec.arg.name!r}" if spec.kind.name == "USER_INPUT" else
                    f"the captured table {(sources or {}).get(spec.target, spec.target)!r}")
            why = "negative indices count from the end" if wraps else \
                "negative indices do not count from the end: the model was traced with none here"
            raise IndexingError(f"{location(n)}: index {dim} into {name} of shape {shape} takes the values {lo} … "
                                f"{hi}{' ' + at if at else ''}; the legal range of dimension {dim} is {low} … "
                                f"{shape[dim] - 1} ({why})")


def position_of(t: Translation, name: str, shape, along, env) -> Tensor:
    """The positions along ``along = (input, dimension)`` as the tensor ``name`` of ``shape``: its one dimension
    not of size 1 (none where that dimension has size 1: the index 0, a number known now, no input:
    :meth:`~napkin_cat.torch.translate.Translation.known`)."""
    source, dim = along
    x = env.get(source)
    if x is None or not 0 <= dim < x.rank:
        raise ArgumentError(f"positions: {name!r} indexes dimension {dim} of {source!r}, which is no earlier input "
                            f"of that rank")
    c = x.dims[dim]
    along_ = [p for p, s in enumerate(shape) if s != 1]
    size = 1 if c is None else t.classes.size[t.classes.find(c)]
    if len(along_) > 1 or (along_ and shape[along_[0]] != size) or (not along_ and size != 1):
        raise ShapeError(f"positions: {name!r} has shape {tuple(shape)}, not the positions along dimension {dim} of "
                         f"{source!r} (of size {size}; size 1 elsewhere)")
    if c is None:
        t.node = name
        return t.known(0, INT32, len(shape))
    return t.view(t.position(c), tuple(c if p in along_ else None for p in range(len(shape))))


def x_size(t: Translation, c):
    """The size of the axis class ``c`` (its representative's)."""
    return t.classes.size[t.classes.find(c)]


def format_of(dtype, name: str):
    """napkin-cat's format of a torch ``dtype``, else an UnsupportedOperationError naming the tensor and the formats."""
    if dtype not in FORMATS:
        raise UnsupportedOperationError(f"{name} is a {dtype} tensor; napkin-cat's formats take "
                                        f"{sorted(str(d) for d in FORMATS)}")
    return FORMATS[dtype]


def value(t: Translation, env: dict, arg):
    """A node argument's value: what the translation made of the node (refusing the indices of a max or min), or the
    constant itself.
    """
    if isinstance(arg, torch.fx.Node):
        x = env[arg.name]
        if isinstance(x, Indices):
            t.refuse(f"it reads the indices of a max or min ({arg.name}); napkin-cat's reductions give the values")
        return x
    return arg

