"""A cluster derivation swept over a size: each device form's predicted time, the choice, and where it changes.

``sweep(f, cluster, sizes, axes=("q", "x"), values=[...])`` runs :func:`~napkin_cat.hardware.clustered.
derive_for_cluster` at each value (every axis of ``axes`` set to it, the other sizes from ``sizes``), the device
forms made once and the per-device derivations cached across the points.  The law of a change::

    chosen(v) = argmin_{forms that fit at v} T_form(v)
    a change between v and v' (consecutive values) where chosen(v) ≠ chosen(v'); its reason is "memory" where
    chosen(v) does not fit at v', else "time" (chosen(v') is predicted faster there)

:func:`napkin_cat.render.sweeps.plot_cluster_sweep` draws it (``napkin derive --cluster ... --sweep ... --plot``).

>>> import napkin_cat as nc
>>> c = nc.hardware.cluster("h100-sxm5", devices=2, link="nvlink4")
>>> mm = nc.einsum("n k, k m -> n m", dtype="bf16", out_dtype="fp32")
>>> s = sweep(mm, c, {"k": 4096, "m": 4096}, axes=("n",), values=[64, 4096])
>>> s.chosen, s.changes()
(('shard m', 'shard n'), [(64, 4096, 'shard m', 'shard n', 'time')])
"""
from __future__ import annotations

from dataclasses import dataclass

from napkin_cat.errors import AxisError, CapacityError, HardwareError
from napkin_cat.hardware.clustered import check_cluster, derive_for_cluster
from napkin_cat.search.devices import device_forms
from napkin_cat.syntax.sizes import as_sizes


@dataclass(frozen=True)
class SweepPoint:
    """One value of the swept axes: its derivation (None where no form fits: ``error`` says why)."""

    value: int
    derivation: object = None
    error: str | None = None


@dataclass(frozen=True)
class ClusterSweep:
    """The points of a sweep over ``axes`` (see the module docstring), on the cluster named ``cluster``."""

    axes: tuple
    points: tuple
    cluster: str

    @property
    def values(self) -> tuple:
        return tuple(p.value for p in self.points)

    @property
    def chosen(self) -> tuple:
        """The chosen form's label at each value (None where none fits)."""
        return tuple(p.derivation.label if p.derivation is not None else None for p in self.points)

    @property
    def labels(self) -> list:
        """Every form timed at some value, in the candidates' order."""
        out = []
        for p in self.points:
            for c in p.derivation.candidates if p.derivation is not None else ():
                if c.time is not None and c.label not in out:
                    out.append(c.label)
        return out

    def times(self) -> dict:
        """Label → the predicted time at each value (None where it was refused there)."""
        out = {label: [] for label in self.labels}
        for p in self.points:
            rows = {c.label: c for c in p.derivation.candidates} if p.derivation is not None else {}
            for label in out:
                row = rows.get(label)
                out[label].append(row.time if row is not None else None)
        return out

    def changes(self) -> list:
        """``(v, v', before, after, reason)`` for each pair of consecutive values whose choice differs."""
        out = []
        for a, b in zip(self.points, self.points[1:]):
            before = a.derivation.label if a.derivation is not None else None
            after = b.derivation.label if b.derivation is not None else None
            if before == after:
                continue
            reason = "time"
            if b.derivation is None:
                reason = "memory"
            else:
                row = next((c for c in b.derivation.candidates if c.label == before), None)
                if row is not None and row.refused is not None:
                    reason = "memory" if row.refused.startswith("memory") else "refused"
            out.append((a.value, b.value, before, after, reason))
        return out


def sweep(f, c, sizes, *, axes, values, book=None, cache: dict | None = None, **options) -> ClusterSweep:
    """``f`` derived on the cluster ``c`` at each of ``values`` for the ``axes`` (each set to the value), the other
    axes at ``sizes``; ``options`` as :func:`~napkin_cat.hardware.clustered.derive_for_cluster`'s."""
    check_cluster(c)
    axes = (axes,) if isinstance(axes, str) else tuple(axes)
    names = {n for a in (*f.dom.inside, *f.cod.inside) for n in a.names}
    for a in axes:
        if a not in names:
            raise AxisError(f"cannot sweep {a!r}: the program has no such axis; its axes are {sorted(names)}")
    values = [int(v) for v in values]
    if not values or any(v < 1 for v in values):
        raise AxisError(f"sweep values {values}: at least one, each a positive int")
    forms = device_forms(f, c.devices, book=book)
    cache = {} if cache is None else cache
    base = dict(as_sizes(sizes or {}))
    points = []
    for v in values:
        at = {**base, **{a: v for a in axes}}
        try:
            points.append(SweepPoint(v, derive_for_cluster(f, c, at, forms=forms, cache=cache, **options)))
        except (CapacityError, HardwareError) as e:
            points.append(SweepPoint(v, None, str(e).splitlines()[0]))
    return ClusterSweep(axes, tuple(points), c.name)


__all__ = ["ClusterSweep", "SweepPoint", "sweep"]
