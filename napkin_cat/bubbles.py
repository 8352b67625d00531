"""Regions with control structure: ``Kernel``, ``Grid`` and ``Stream`` bubbles (paper §2.2-2.4).

A region is a discopy bubble around a diagram (its ``arg``) with parameters:

* ``Kernel(level)``: the inside runs as one fused kernel; its boundary is Loads/Saves.
* ``Grid(axis, g)``: group partition; the inside sees ``axis`` with size ``g``
  and runs ``a/g`` times on separate cores; inputs without the axis go to every group.
* ``Stream(axis, s)``: stream partition; the inside sees the streamed inputs
  with ``axis`` of size ``s``; its body (the accumulator) runs ``b/s`` times.

Every region has ``region`` (its kind), ``params`` (a dict of JSON-able or sympy
values) and is rebuilt by ``REGIONS[region].rebuild(arg, dom, cod, params)``.

>>> import napkin_cat as nc
>>> k = Kernel.around(nc.at_level(nc.einsum("a b, b c -> a c"), 1), level=1)
>>> k.region, k.params
('kernel', {'level': 1})
"""
from __future__ import annotations

from napkin_cat.adapter import Array, Bubble, Diagram, Ty

REGIONS: dict[str, type] = {}


def _register(cls):
    REGIONS[cls.region] = cls
    return cls


class Region(Bubble):
    """Base class of Kernel, Grid and Stream."""

    region = "region"

    def __init__(self, arg: Diagram, dom: Ty, cod: Ty, params: dict):
        self.params = dict(params)
        super().__init__(arg, dom=dom, cod=cod, name=self.title(self.params))

    @classmethod
    def title(cls, params) -> str:
        inner = ", ".join(f"{k}={v}" for k, v in params.items())
        return f"{cls.__name__}({inner})"

    @classmethod
    def rebuild(cls, arg: Diagram, dom: Ty, cod: Ty, params: dict) -> "Region":
        return cls(arg, dom, cod, params)

    def map_arrays(self, fa, fname):
        from napkin_cat.relabel import map_arrays
        return type(self).rebuild(map_arrays(self.arg, fa, fname), Ty(*map(fa, self.dom.inside)),
                                  Ty(*map(fa, self.cod.inside)), self.mapped_params(fa, fname))

    def mapped_params(self, fa, fname) -> dict:
        return dict(self.params)

    def run(self, xs, env):
        from napkin_cat.evaluate import interpret
        return interpret(self.arg, xs, env)

    def __eq__(self, other):
        return (isinstance(other, Region) and type(self) is type(other) and self.params == other.params
                and self.arg == other.arg and self.dom == other.dom and self.cod == other.cod)

    def __hash__(self):
        return hash((self.region, self.name))

    def __repr__(self):
        return f"{self.name}[{self.dom} → {self.cod}; {len(self.arg.boxes)} boxes]"


@_register
class Kernel(Region):
    """One fused kernel: the inside runs at ``level`` between its Loads and Saves."""

    region = "kernel"

    @classmethod
    def around(cls, arg: Diagram, level: int) -> "Kernel":
        return cls(arg, arg.dom, arg.cod, {"level": int(level)})


def weave_bubble(box: Region, axis, inputs: dict, position: int):
    """Weave a region: weave its inside (the region keeps its parameters)."""
    from napkin_cat.weave import weave, insert_at
    inner = weave(box.arg, axis, inputs=inputs, position=position)
    dom = list(box.dom.inside)
    for i, p in inputs.items():
        dom[i] = dom[i].replace(axes=insert_at(dom[i].axes, axis, p, f"input {i} of {box.name}"))
    cod = [a.replace(axes=insert_at(a.axes, axis, position, f"output of {box.name}")) for a in box.cod.inside]
    return type(box).rebuild(inner, Ty(*dom), Ty(*cod), box.params)
