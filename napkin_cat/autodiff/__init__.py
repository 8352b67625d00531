"""Layer 2, autodiff: ``nc.grad``, reverse-mode differentiation as a functor from diagrams to diagrams.

* :mod:`~napkin_cat.autodiff.grad`: the functor (values view in reverse, copies summed, discards zero);
* :mod:`~napkin_cat.autodiff.vjps`: each primitive kind's vector-Jacobian product, a diagram;
* :mod:`~napkin_cat.autodiff.saved`: reading what the forward saved (``grad(f, saved=True)``), two laws.

May import: syntax.

>>> import napkin_cat as nc
>>> g = grad(nc.library.attention())
>>> len(g.dom), len(g.cod)          # Q, K, V and the output's cotangent → dQ, dK, dV
(4, 3)
"""
from napkin_cat.autodiff.grad import GradError, grad
from napkin_cat.autodiff.vjps import NoVJPError

__all__ = ["grad", "GradError", "NoVJPError"]
