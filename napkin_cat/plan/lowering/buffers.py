"""Pass ``buffer``: the tiles a stream loads from global memory on every trip get the hierarchy's copies.

Step 5: a tile loaded in a stream's body (every trip) is loaded asynchronously into one of ``buffers``
copies while the kernel reads another (TMA on Hopper); a tile loaded once (in a head) keeps one::

    for i_x:  K_1[s_x×d] ← load K[i_x]        ⟶        K_1 has 2 buffers (2·s_x·d values held)

>>> import napkin_cat as nc
>>> from napkin_cat.plan.lowering import Options, lower
>>> p = nc.plan(nc.group(nc.stream(nc.library.matmul(), "b", "s_b"), "a", "g_a"),
...             {"a": 8, "b": 8, "c": 4, "s_b": 4, "g_a": 8}, accumulate=False)
>>> s = lower(p, nc.hardware.load_hierarchy("hopper"), Options(buffers=3, given={"w_a": 4, "t_a": 1}))
>>> [(v.name, v.buffers) for v in s.plan.variables if v.role == "tile" and v.level == 1]
[('x0_1', 3), ('x1_1', 3)]
>>> s.what["x0_1"]
'tile of x0 loaded every trip from GMEM (3 buffers: asynchronous loads)'
"""
from __future__ import annotations

from dataclasses import replace

from napkin_cat.plan.ir import Kernel, Load, StreamLoop, walk_scoped
from napkin_cat.plan.lowering.state import frozen


def in_a_stream_body(scope) -> bool:
    """Whether a statement runs on every trip of its innermost stream (its body, not its head or tail)."""
    streams = [k for s, k in scope if isinstance(s, StreamLoop)]
    return bool(streams) and streams[-1] == 1


def buffer(state):
    """The pass: buffers and descriptions of the block's loads from global memory."""
    variables, what = dict(state.variables), dict(state.what)
    for s, scope in walk_scoped(state.body):
        kernels = [x for x, _ in scope if isinstance(x, Kernel)]
        if not isinstance(s, Load) or len(kernels) != 1 or variables[s.src.var].level != 0:
            continue      # only the block kernel's own loads from GMEM (a unit kernel loads from the block)
        every = in_a_stream_body(scope)
        v = variables[s.dst.var]
        what[v.name] = f"tile of {s.src.var} loaded {'every trip' if every else 'once'} from GMEM"
        if every and state.options.buffers != 1:
            variables[v.name] = replace(v, buffers=state.options.buffers)
            what[v.name] += f" ({state.options.buffers} buffers: asynchronous loads)"
    return replace(state, variables=frozen(variables), what=frozen(what))
