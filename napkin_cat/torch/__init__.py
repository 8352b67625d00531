"""Layer 7, torch: napkin-cat inside PyTorch (issue 33): derived algorithms as ``torch.library`` custom ops.

``nc.torch.compile(f, ...)`` (:mod:`~napkin_cat.torch.ops`) turns a function diagram, or a derivation of one,
into a registered custom op on torch tensors, with a fake implementation and its backward derived from
``nc.grad(f, saved=True)``; :mod:`~napkin_cat.torch.binding` reads a call's sizes, dtype and device off its
tensors; :mod:`~napkin_cat.torch.kernels` derives, tiles, plans and compiles a function at a call's sizes, once,
and :mod:`~napkin_cat.torch.stored` keeps each derivation on disk, so that the next process reads it back.
``nc.from_torch(model, *inputs)`` (:mod:`~napkin_cat.torch.exported`) is the other way: a diagram from a
``torch.export`` graph, its ATen operations translated by :mod:`~napkin_cat.torch.aten` on the axis algebra of
:mod:`~napkin_cat.torch.translate` and :mod:`~napkin_cat.torch.classes`.  The how-to is ``docs/torch.md``.

torch is an optional dependency (the ``kernels`` extra): ``import napkin_cat`` never imports this layer, and
``nc.torch`` loads it on first use; without torch that use is a
:class:`~napkin_cat.errors.ToolNotFoundError` saying how to install it.

May import: every layer up to codegen and hardware, io (a diagram's JSON names an op), and torch (the one layer
that imports it at module level).
"""
import importlib.util

from napkin_cat.errors import ToolNotFoundError
from napkin_cat.lazy import on_first_use

if importlib.util.find_spec("torch") is None:
    raise ToolNotFoundError("torch is not installed; nc.torch needs it (pip install 'napkin-cat[kernels]')")

#: each public name → the submodule that defines it, imported on first use (:mod:`napkin_cat.lazy`: each submodule
#: executed once, by whoever imports it first; imported eagerly here, ``--doctest-modules napkin_cat/torch/flex.py``
#: executed flex.py twice, and ``nc.torch.flex_attention`` wrote its traces in the first copy's ``TRACES`` while
#: ``nc.torch.flex.TRACES`` read the second's)
PUBLIC = {"Signature": "binding", "Derived": "kernels", "CompiledOp": "ops", "compile": "ops",
          "FromTorch": "exported", "from_torch": "exported", "flex_attention": "flex"}

__all__ = ["compile", "CompiledOp", "Derived", "Signature", "from_torch", "FromTorch", "flex_attention"]


#: the public name or submodule asked for, imported on first use (:func:`napkin_cat.lazy.on_first_use`)
__getattr__, __dir__ = on_first_use(globals(), PUBLIC)
