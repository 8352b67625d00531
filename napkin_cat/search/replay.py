"""A search step run at many points, answered at a point by replaying what it read at another.

Seam fusion (:func:`~napkin_cat.search.segments.segmented_shortest`) and greedy fusion past the cap
(:func:`~napkin_cat.search.paths.grow`) run once per memory of a select: the same input path, the same joins tried,
only the kernels' H at that memory differ.  Such a step is deterministic: besides its input (the path) and what does
not depend on the point (a block's compulsory bound, convexity, the order of kernels), it reads the point only through
``evaluate(curve, k)``.

**Law.** Run at point ``k`` with a recording ``evaluate``, a step reads ``(c₁, v₁), (c₂, v₂), …`` in this order and
answers ``A``.  At a point ``k'`` with the same input, if ``evaluate(cᵢ, k') == vᵢ`` for every ``i``, the step run at
``k'`` takes the same branches, reads the same curves in the same order and answers ``A``: by induction on the reads,
each one is asked because every read before it had the same value.  So the replay checks the reads in order, stops at
the first that differs (so no curve is read that the step at ``k'`` would not read first itself), and only then runs
the step.  What the answer holds that reads the point besides (the path's whole H, of which the step reads only the
kernels it joins) is the caller's to add, by what the step saved.

>>> reads = []
>>> H = {"a": [3, 3, 5], "b": [1, 1, 1]}
>>> def evaluate(curve, k):
...     reads.append((curve, k))
...     return H[curve][k]
>>> def step(ev, k):                   # joins when a's H is below 4
...     return "join" if ev("a", k) + ev("b", k) < 5 else "apart"
>>> memo = Replays()
>>> [memo.answer("path", evaluate, k, step) for k in range(3)], memo.replayed
(['join', 'join', 'apart'], 1)
>>> reads                              # point 1 read a and b to check, point 2 stopped at a, then ran
[('a', 0), ('b', 0), ('a', 1), ('b', 1), ('a', 2), ('a', 2), ('b', 2)]
"""
from __future__ import annotations

#: the latest runs per input a point is checked against (the points of a select come in order, and a step's answer
#: changes where its kernels' H does: the last few runs are those most often alike)
KEPT = 4


class Replays:
    """Runs of a step per input: ``answer(key, evaluate, k, step)`` is ``step(evaluate, k)``, replayed from a run of the
    same ``key`` whose reads all answer alike at ``k`` (module docstring), else run with its reads recorded.
    ``replayed`` and ``ran`` count both."""

    __slots__ = ("runs", "replayed", "ran")

    def __init__(self):
        self.runs: dict = {}
        self.replayed = self.ran = 0

    def answer(self, key, evaluate, k, step):
        kept = self.runs.get(key)
        if kept is not None:
            for reads, found in reversed(kept):
                if all(evaluate(curve, k) == v for curve, v in reads):
                    self.replayed += 1
                    return found
        reads = []

        def recording(curve, point):
            v = evaluate(curve, point)
            reads.append((curve, v))
            return v
        found = step(recording, k)
        self.ran += 1
        kept = self.runs.setdefault(key, [])
        kept.append((tuple(reads), found))
        if len(kept) > KEPT:
            del kept[0]
        return found


__all__ = ["KEPT", "Replays"]
