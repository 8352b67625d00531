"""What a derived algorithm is, in words: its kernels, what each fuses, streams and groups.

>>> s = Schedule((KernelChoice(("·",), "d", ("x", "q")), KernelChoice(("SoftMax", "·"), "x", ("d", "q"))))
>>> s.kind, str(s)
('partly fused', '[·] group x,q · stream d | [SoftMax ; ·] group d,q · stream x')
>>> Schedule((KernelChoice(("·", "SoftMax", "·"), "x", ("q",)),), ("softmax_contraction_to_unscaled",)).kind
'fully fused'
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class KernelChoice:
    """One kernel: the operations it fuses (box names, in order), its streamed axis and grouped axes,
    and the tile names of its partitions (``{axis: tile}``)."""

    ops: tuple
    stream: str | None
    groups: tuple
    tiles: dict = field(default_factory=dict, compare=False)
    sliced: bool = False   # the stream writes its outputs slice by slice (a sweep)
    parts: str | None = None   # a split stream: the name of its number of parts (run by parallel blocks)
    inner: tuple = ()      # axes streamed inside the stream's trip (a 2-D loop)
    def __str__(self):
        parts = []
        if self.groups:
            parts.append("group " + ",".join(self.groups))
        if self.stream:
            parts.append(("sweep " if self.sliced else "stream ") + self.stream
                         + (f" ×{self.parts}" if self.parts else ""))
        parts += [f"stream {a} inside" for a in self.inner]
        return f"[{' ; '.join(self.ops)}]" + (" " + " · ".join(parts) if parts else "")

    def as_json(self) -> dict:
        return {"ops": list(self.ops), "stream": self.stream, "groups": list(self.groups),
                "tiles": {a: str(t) for a, t in self.tiles.items()}, **({"sliced": True} if self.sliced else {}),
                **({"parts": self.parts} if self.parts else {}),
                **({"inner": list(self.inner)} if self.inner else {})}

    @classmethod
    def from_json(cls, obj: dict) -> "KernelChoice":
        """The kernel :meth:`as_json` wrote: ``KernelChoice.from_json(k.as_json()) == k``."""
        return cls(tuple(obj["ops"]), obj["stream"], tuple(obj["groups"]), dict(obj.get("tiles", {})),
                   bool(obj.get("sliced", False)), obj.get("parts"), tuple(obj.get("inner", ())))


@dataclass(frozen=True)
class Schedule:
    """The variant of a derivation: its kernels in execution order and the function-level rewrites
    applied first (``prepared``: rule names)."""

    kernels: tuple
    prepared: tuple = ()

    @property
    def kind(self) -> str:
        """``'fully fused'`` (one kernel), ``'unfused'`` (one kernel per operation) or ``'partly fused'``."""
        if len(self.kernels) == 1:
            return "fully fused"
        if all(len(k.ops) == 1 for k in self.kernels):
            return "unfused"
        return "partly fused"

    def __str__(self):
        return " | ".join(map(str, self.kernels))

    def describe(self) -> str:
        pre = f" after {', '.join(self.prepared)}" if self.prepared else ""
        return f"{self.kind}{pre}: {self}"

    def as_json(self) -> dict:
        return {"kind": self.kind, "prepared": list(self.prepared), "kernels": [k.as_json() for k in self.kernels]}

    @classmethod
    def from_json(cls, obj: dict) -> "Schedule":
        """The schedule :meth:`as_json` wrote (its ``kind`` is read off the kernels again).

        >>> s = Schedule((KernelChoice(("·", "SoftMax"), "x", ("q",), {"x": "s_x", "q": "g_q"}),), ("online",))
        >>> t = Schedule.from_json(s.as_json())
        >>> t == s and str(t) == str(s) and t.kernels[0].tiles == {"x": "s_x", "q": "g_q"}
        True
        """
        return cls(tuple(KernelChoice.from_json(k) for k in obj["kernels"]), tuple(obj.get("prepared", ())))
