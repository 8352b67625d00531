"""The tile assignments a row of the GPU benchmark times: the derived pick and, beside it, the model's next fastest
(autotuning) or the assignments one tile away from the pick (a sweep): read off ``nc.derive(..., hardware=)``'s
timings, never searched again.

>>> class R: pass
>>> import sympy
>>> r = R(); r.variant = "v"; r.H = 1; r.optimum = R(); r.optimum.exact_sizes = {sympy.Symbol("a"): 2}
>>> r.prediction = R(); r.prediction.time = 1.0; r.timings = [("v", {"a": 2}, 1.0, 1), ("v", {"a": 4}, 2.0, 1)]
>>> [c["pick"] for c in candidates(r, 2)]
['derived', 'autotune']
"""
from __future__ import annotations


def candidates(r, k: int) -> list[dict]:
    """What ``r = nc.derive(..., hardware=)`` returns (its tiles: ``r.optimum.exact_sizes``), then the next fastest
    distinct tile assignments of the same structure by the model, ``k`` in all (fewer if it has fewer).  ``r.timings``
    holds, per group of kernels sharing tiles, that group's assignments with the others at their best: the second
    and third fastest of a structure are always among them (one differing in two groups is slower than the two
    that differ in one of those groups each), a fourth may not be."""
    derived = {str(a): int(v) for a, v in r.optimum.exact_sizes.items()}
    out = [{"pick": "derived", "variant": str(r.variant), "tiles": derived,
            "model_s": r.prediction.time, "H": int(r.H)}]
    for label, tiles, seconds, H in r.timings:
        t = {str(a): int(v) for a, v in tiles.items()}
        if len(out) == k:
            break
        if label == str(r.variant) and t not in [c["tiles"] for c in out]:
            out.append({"pick": "autotune", "variant": label, "tiles": t, "model_s": seconds, "H": H})
    return out


def neighbours(r, k: int) -> list[dict]:
    """The derived pick, then tile assignments of its variant that differ from it in exactly one tile (the search's
    timings: ``r.timings``), ``k`` in all, taken a tile at a time in turn (``"pick": "sweep"``): a sweep around the
    pick that times the model's ranking along each tile, what a change to the model is fitted and tested on.

    >>> class R: pass
    >>> r = R(); r.variant = "v"; r.H = 1
    >>> import sympy; r.optimum = R(); r.optimum.exact_sizes = {sympy.Symbol("a"): 2, sympy.Symbol("b"): 8}
    >>> r.prediction = R(); r.prediction.time = 1.0
    >>> r.timings = [("v", {"a": 2, "b": 8}, 1.0, 1), ("v", {"a": 4, "b": 8}, 2.0, 1), ("v", {"a": 2, "b": 4}, 3.0, 1),
    ...              ("v", {"a": 4, "b": 4}, 4.0, 1), ("w", {"a": 1, "b": 8}, 5.0, 1), ("v", {"a": 8, "b": 8}, 6.0, 1)]
    >>> [c["tiles"] for c in neighbours(r, 4)]
    [{'a': 2, 'b': 8}, {'a': 4, 'b': 8}, {'a': 2, 'b': 4}, {'a': 8, 'b': 8}]
    """
    out = candidates(r, 1)
    pick = out[0]["tiles"]
    by_tile: dict = {}
    for label, tiles, seconds, H in r.timings:
        t = {str(a): int(v) for a, v in tiles.items()}
        differ = [a for a in t if t[a] != pick.get(a)]
        if label == str(r.variant) and len(differ) == 1 and t.keys() == pick.keys():
            by_tile.setdefault(differ[0], {})[t[differ[0]]] = {"pick": "sweep", "variant": label, "tiles": t,
                                                               "model_s": seconds, "H": H}
    lanes = [[c for _, c in sorted(by_tile[a].items())] for a in sorted(by_tile)]
    while len(out) < k and any(lanes):
        for lane in lanes:
            if lane and len(out) < k:
                out.append(lane.pop(0))
    return out
