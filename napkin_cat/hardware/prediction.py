"""What a time model answers: a :class:`Prediction` of an algorithm, one :class:`KernelTime` per kernel launch.

A prediction is the sum of its kernels' times, each the largest of its terms over the wave's utilisation plus the
launch (:mod:`napkin_cat.hardware.predict` on a GPU model, :mod:`napkin_cat.hardware.cputime` on a CPU model); the
records say how it was reached (terms in seconds, the term that bounds it, blocks, residency, waves, the bytes and
FLOPs counted) and what it assumed (:attr:`Prediction.assumptions`, sentences a measurement can refute).  Both
travel as JSON (a benchmark's results file); the law::

    Prediction.from_dict(p.to_dict()) == p        where p's numbers are plain ints and floats

>>> k = KernelTime("k0", 2e-6, {"hbm": 1e-6, "l2": 5e-7, "tensor": 1e-6}, "hbm", 132, 1, 1, 1.0,
...                {"compulsory": 8}, {"tensor": 1024.0})
>>> p = Prediction(2e-6, (k,), "h100-sxm5", {"q": 64}, "sequential", ("a sentence",))
>>> Prediction.from_dict(p.to_dict()) == p, p.bound, p.blocks, p.terms["hbm"]
(True, 'hbm', 132, 1e-06)
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class KernelTime:
    """One kernel's prediction: its terms (seconds), blocks, residency and waves."""

    label: str
    time: float
    terms: dict
    bound: str
    blocks: int
    resident: int
    waves: int
    utilisation: float
    bytes: dict
    flops: dict
    products: dict = field(default_factory=dict)
    combine: "KernelTime | None" = None

    def to_dict(self) -> dict:
        """The launch as JSON-ready numbers and words (its combine's inside, where it has one)."""
        return {"label": self.label, "time_s": self.time, "terms_s": self.terms, "bound": self.bound,
                "blocks": self.blocks, "resident": self.resident, "waves": self.waves,
                "utilisation": self.utilisation, "bytes": self.bytes, "flops": self.flops,
                "products": dict(self.products), "combine": None if self.combine is None else self.combine.to_dict()}

    @classmethod
    def from_dict(cls, k: dict) -> "KernelTime":
        """The launch :meth:`to_dict` wrote."""
        return cls(k["label"], k["time_s"], dict(k["terms_s"]), k["bound"], k["blocks"], k["resident"], k["waves"],
                   k["utilisation"], dict(k["bytes"]), dict(k["flops"]), dict(k.get("products", {})),
                   None if k.get("combine") is None else cls.from_dict(k["combine"]))


@dataclass(frozen=True)
class Prediction:
    """The predicted time of an algorithm (seconds) and how it was reached (see the module docstring)."""

    time: float
    kernels: tuple
    hardware: str
    sizes: dict
    overlap: str
    assumptions: tuple = field(default=())

    @property
    def terms(self) -> dict:
        """Each term summed over the kernels and their combine launches (seconds)."""
        out: dict = {}
        for k in self.kernels:
            for t in (k.terms, k.combine.terms if k.combine is not None else {}):
                for name, v in t.items():
                    out[name] = out.get(name, 0.0) + v
        return out

    @property
    def bound(self) -> str:
        """The term that sets the time of the longest kernel."""
        return max(self.kernels, key=lambda k: k.time).bound

    @property
    def blocks(self) -> int:
        """Thread blocks of the narrowest kernel."""
        return min(k.blocks for k in self.kernels)

    def to_dict(self) -> dict:
        return {"time_s": self.time, "hardware": self.hardware, "overlap": self.overlap, "bound": self.bound,
                "sizes": {str(k): int(v) for k, v in self.sizes.items()}, "terms_s": self.terms,
                "kernels": [k.to_dict() for k in self.kernels],
                "assumptions": list(self.assumptions)}

    @classmethod
    def from_dict(cls, obj: dict) -> "Prediction":
        """The prediction :meth:`to_dict` wrote (its derived ``terms_s`` and ``bound`` are read off the kernels
        again): ``Prediction.from_dict(p.to_dict()) == p`` where its numbers are plain ints and floats."""
        kernels = tuple(KernelTime.from_dict(k) for k in obj["kernels"])
        return cls(obj["time_s"], kernels, obj["hardware"], dict(obj["sizes"]), obj["overlap"],
                   tuple(obj.get("assumptions", ())))


__all__ = ["KernelTime", "Prediction"]
