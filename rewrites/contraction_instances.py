"""Random contractions: the instances that prove and fuzz the contraction-order rules.

Random axis names (never the ones a rule might expect), random ranks, operand counts, batch
(weave) axes shared by every operand, symbolic or concrete sizes, and one random level and dtype
per diagram.  Operands may pass through an elementwise map φ first, as in linear attention.

>>> import numpy as np
>>> d = random_einsum(np.random.default_rng(0), 3)
>>> len(d.dom), d.boxes[0].name
(3, '·')
"""
from __future__ import annotations

import napkin_cat as nc

LETTERS = "abcdefghijklmnopqrstuvwxyz"
SUFFIXES = ("", "", "2", "_k", "'", "0")
MAPS = ("relu", "tanh", "sigmoid", "square")


def random_names(rng, k: int, avoid=()) -> list:
    """``k`` distinct axis names unlike each other and unlike ``avoid`` (one or two letters, a suffix)."""
    out, taken = [], set(avoid)
    while len(out) < k:
        n = "".join(rng.choice(list(LETTERS), size=int(rng.integers(1, 3)))) + str(rng.choice(SUFFIXES))
        if n not in taken:
            taken.add(n)
            out.append(n)
    return out


def _sizes(rng, names) -> dict:
    """Half the axes concrete (1-4), the others symbolic."""
    return {n: int(rng.integers(1, 5)) for n in names if rng.random() < 0.5}


def _format(rng) -> dict:
    return {"level": 0, "dtype": nc.FP32} if rng.random() < 0.75 else {"level": 1, "dtype": nc.FP16}


def _sig(names) -> str:
    return " ".join(names) or "()"   # () is an array without axes


def _pick(rng, names, low: int, high: int) -> list:
    k = int(rng.integers(low, min(high, len(names)) + 1))
    return [str(n) for n in rng.permutation(list(names))[:k]]


class _Scope:
    """One diagram's axis sizes and format, so that every box agrees on them."""

    def __init__(self, rng):
        self.rng, self.sizes, self.fmt = rng, {}, _format(rng)

    def names(self, k, avoid=()):
        new = random_names(self.rng, k, avoid=set(avoid) | set(self.sizes))
        self.sizes.update({n: None for n in new})
        self.sizes.update(_sizes(self.rng, new))
        return new

    def kw(self, *name_lists) -> dict:
        used = {n for ns in name_lists for n in ns}
        return {**self.fmt, **{n: s for n, s in self.sizes.items() if n in used and s is not None}}

    def einsum(self, operands, output):
        sig = ", ".join(map(_sig, operands)) + " -> " + _sig(output)
        return nc.einsum(sig, **self.kw(*operands, output))

    def phi(self, names):
        return nc.elementwise(str(self.rng.choice(MAPS)), _sig(names), **self.kw(names))


def _operands(rng, scope, n, pool, batch):
    """``n`` operands over ``pool`` (1-3 axes each) plus the batch axes, every pool axis used."""
    ops = [batch + _pick(rng, pool, 1, 3) for _ in range(n)]
    for a in pool:
        if not any(a in o for o in ops):
            ops[int(rng.integers(n))].append(a)
    return [[str(x) for x in rng.permutation(o)] for o in ops]


def _term(rng, scope, n, max_names, avoid=()):
    batch = scope.names(int(rng.random() < 0.3), avoid)
    pool = scope.names(int(rng.integers(2, max_names + 1)), avoid)
    ops = _operands(rng, scope, n, pool, batch)
    kept = [a for a in pool if rng.random() < 0.4]
    if len(kept) == len(pool) and rng.random() < 0.9:  # mostly sum something (outer products occur too)
        kept = kept[:-1]
    if not batch and not kept:  # no scalar outputs: einsum strings cannot name them as operands
        kept = pool[:1]
    return ops, [str(x) for x in rng.permutation(batch + kept)]


def random_einsum(rng, n: int, max_names: int = 4):
    """One contraction of ``n`` operands with random axes."""
    scope = _Scope(rng)
    ops, out = _term(rng, scope, n, max_names)
    return scope.einsum(ops, out)


def _wrap(rng, scope, operands, body, *, wrapped: bool = True):
    """``body`` applied to the inputs, some through an elementwise φ; maybe a φ after (if ``wrapped``)."""
    b = nc.Builder(nc.types(", ".join(map(_sig, operands)), **scope.kw(*operands)))
    ws = [b(scope.phi(o), w) if wrapped and rng.random() < 0.4 else w for o, w in zip(operands, b.inputs)]
    y = body(b, ws)
    if wrapped and rng.random() < 0.3:
        y = b(scope.phi(y.array.names), y)
    return b.build(y)


def contraction_instance(rng):
    """A contraction of 2-5 operands (with two, operand 0 sums an axis of its own)."""
    scope = _Scope(rng)
    n = int(rng.integers(2, 6))
    ops, out = _term(rng, scope, n, 4)
    if n == 2:
        own = scope.names(1)
        ops[0] = ops[0] + own
    return _wrap(rng, scope, ops, lambda b, ws: b(scope.einsum(ops, out), *ws))


def _chain(rng, *, capture: bool, wrapped: bool):
    scope = _Scope(rng)
    k1 = int(rng.integers(1, 4))
    k2 = int(rng.integers(max(1, 3 - k1), 3))
    ops1, t = _term(rng, scope, k1, 4)
    summed1 = sorted({a for o in ops1 for a in o} - set(t))
    if capture and not summed1:
        ops1[0] = ops1[0] + scope.names(1)
        summed1 = [ops1[0][-1]]
    pool = list(t) + scope.names(int(rng.integers(1, 3)))
    others = [_pick(rng, pool, 1, 3) for _ in range(k2)]
    if capture:  # a name the first contraction sums, reused by the second
        a = str(rng.choice(summed1))
        others[int(rng.integers(k2))].append(a)
    union = {a for o in others for a in o} | set(t)
    out = [str(a) for a in rng.permutation(sorted(union)) if rng.random() < 0.5] or [t[0]]
    at = int(rng.integers(k2 + 1))
    operands = ops1 + others

    def body(b, ws):
        tw = b(scope.einsum(ops1, t), *ws[:k1])
        rest = ws[k1:]
        return b(scope.einsum(others[:at] + [t] + others[at:], out), *rest[:at], tw, *rest[at:])
    return _wrap(rng, scope, operands, body, wrapped=wrapped)


def chain_instance(rng, *, wrapped: bool = True):
    """``C₂(…, C₁(A…), …)`` with random operand counts (at least three in all) and no capture;
    ``wrapped``: some operands through φ, maybe a φ after."""
    return _chain(rng, capture=False, wrapped=wrapped)


def capture_instance(rng, *, wrapped: bool = True):
    """A chain whose second contraction names an axis the first one sums (α-conversion's prey)."""
    return _chain(rng, capture=True, wrapped=wrapped)


def random_contraction_diagram(rng, n_contractions: int = 3):
    """A data-flow of contractions over shared inputs: chains, reuse (copies) and name clashes occur."""
    scope = _Scope(rng)
    shapes = [scope.names(int(rng.integers(1, 3))) for _ in range(int(rng.integers(2, 5)))]
    b = nc.Builder(nc.types(", ".join(map(_sig, shapes)), **scope.kw(*shapes)))
    pool = list(b.inputs)
    for _ in range(n_contractions):
        k = int(rng.integers(1, min(3, len(pool)) + 1))
        picked = [pool[int(i)] for i in rng.choice(len(pool), size=k, replace=False)]
        if rng.random() < 0.6:  # prefer the newest wire, so that chains form
            picked[0] = pool[-1] if pool[-1] not in picked[1:] else picked[0]
        ops = [list(w.array.names) for w in picked]
        names = list(dict.fromkeys(a for o in ops for a in o))
        out = [str(a) for a in rng.permutation(names) if rng.random() < 0.45] or names[:1]
        pool.append(b(scope.einsum(ops, out), *picked))
    return b.build(pool[-1])
