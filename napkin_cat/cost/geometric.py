"""The exact optimum over real tiles, numerically: the tiling program as a geometric program.

In log coordinates ``u = log g`` every posynomial ``P(g) = Σ α_k g^(E_k)`` becomes
``f(u) = log Σ exp(log α_k + E_k·u)``, a convex function, so::

    min log H(e^u)   s.t.   log C_j(e^u) − log M ≤ 0,   −u_i ≤ 0 (g ≥ 1),   u_i − log n_i ≤ 0 (g ≤ n)

is a convex program. A barrier method (Newton on ``t·f_0 − Σ log(−f_j)``, ``t`` growing) finds
its minimum to a duality gap of ``1e-10`` in ``log H`` (a relative error of 1e-10 in ``H``); a
phase I (minimise ``s`` with ``f_j ≤ s``) finds the strictly feasible start.

>>> import numpy as np
>>> # min 1/g_a + 1/g_c  s.t.  g_a g_c ≤ 64: the square tile g = 8
>>> obj = LogSumExp(np.zeros(2), np.array([[-1.0, 0.0], [0.0, -1.0]]))
>>> mem = LogSumExp(np.array([-np.log(64.0)]), np.array([[1.0, 1.0]]))
>>> u = minimise(obj, [mem])
>>> np.round(np.exp(u), 6)
array([8., 8.])
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from napkin_cat.errors import MemoryLimitError

GAP = 1e-10


@dataclass(frozen=True)
class LogSumExp:
    """``f(u) = log Σ_k exp(logc_k + E_k·u)``: a posynomial in log coordinates."""

    logc: np.ndarray
    E: np.ndarray

    def __call__(self, u):
        z = self.logc + self.E @ u
        top = z.max()
        w = np.exp(z - top)
        total = w.sum()
        return top + np.log(total), w / total

    def derivatives(self, u):
        f, w = self(u)
        grad = self.E.T @ w
        hess = (self.E.T * w) @ self.E - np.outer(grad, grad)
        return f, grad, hess


def bound_below(n: int, i: int) -> LogSumExp:
    """``g_i ≥ 1`` as ``log(1/g_i) ≤ 0``."""
    E = np.zeros((1, n))
    E[0, i] = -1.0
    return LogSumExp(np.zeros(1), E)


def bound_above(n: int, i: int, full: float) -> LogSumExp:
    """``g_i ≤ full`` as ``log(g_i/full) ≤ 0``."""
    E = np.zeros((1, n))
    E[0, i] = 1.0
    return LogSumExp(np.array([-np.log(full)]), E)


class Stack:
    """Constraints ``f_j(u) ≤ 0`` stacked term by term, so that all of them are evaluated in one pass."""

    def __init__(self, constraints):
        self.logc = np.concatenate([c.logc for c in constraints])
        self.E = np.vstack([c.E for c in constraints])
        sizes = [len(c.logc) for c in constraints]
        self.starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(int)
        self.segment = np.repeat(np.arange(len(constraints)), sizes)
        self.EE = self.E[:, :, None] * self.E[:, None, :]

    def values(self, u):
        z = self.logc + self.E @ u
        top = np.maximum.reduceat(z, self.starts)
        w = np.exp(z - top[self.segment])
        total = np.add.reduceat(w, self.starts)
        return top + np.log(total), w / total[self.segment]

    def derivatives(self, u):
        f, p = self.values(u)
        grad = np.add.reduceat(p[:, None] * self.E, self.starts)
        hess = np.add.reduceat(p[:, None, None] * self.EE, self.starts) - grad[:, :, None] * grad[:, None, :]
        return f, grad, hess


def _centre(objective, stack, u, t):
    """Newton's method on ``t·f_0 − Σ log(−f_j)`` from a strictly feasible ``u``."""
    def phi(v):
        vals = stack.values(v)[0]
        if (vals >= 0).any():
            return np.inf
        return t * objective(v)[0] - np.log(-vals).sum()

    for _ in range(50):
        _, g0, h0 = objective.derivatives(u)
        f, g, h = stack.derivatives(u)
        grad = t * g0 - (g / f[:, None]).sum(axis=0)
        hess = t * h0 - (h / f[:, None, None]).sum(axis=0) + (g / f[:, None]).T @ (g / f[:, None])
        try:
            step = -np.linalg.solve(hess, grad)
        except np.linalg.LinAlgError:
            step = -np.linalg.lstsq(hess, grad, rcond=None)[0]
        decrement = -grad @ step
        if decrement / 2 <= 1e-10:
            return u
        here, size = phi(u), 1.0
        # near the centre Newton converges quadratically and φ (of size t) cannot resolve the
        # decrease: take the full step if it stays feasible; elsewhere backtrack (Armijo)
        accept = (lambda v: np.isfinite(phi(v))) if decrement < 1e-4 else \
            (lambda v: phi(v) <= here - 0.25 * size * decrement)
        for _ in range(60):
            if accept(u + size * step):
                break
            size /= 2
        else:
            return u
        u = u + size * step
    return u


def _barrier(objective, stack, u, *, stop=None):
    t, m = 1.0, len(stack.starts)
    while True:
        u = _centre(objective, stack, u, t)
        if stop is not None and stop(u):
            return u
        if m / t < GAP:
            return u
        t *= 50.0


def minimise(objective: LogSumExp, constraints: list) -> np.ndarray:
    """``argmin f_0(u)  s.t.  f_j(u) ≤ 0``; :class:`MemoryLimitError` if no point is strictly feasible."""
    n = objective.E.shape[1]
    u = np.zeros(n)
    stack = Stack(constraints)
    if (stack.values(u)[0] >= 0).any():
        u = _phase_one(constraints, n)
    return _barrier(objective, stack, u)


def _phase_one(constraints, n):
    """A point with every ``f_j < 0``: minimise ``s`` subject to ``f_j(u) ≤ s``."""
    lifted = [LogSumExp(c.logc, np.hstack([c.E, -np.ones((len(c.logc), 1))])) for c in constraints]
    s_only = LogSumExp(np.zeros(1), np.eye(1, n + 1, n))
    start = np.zeros(n + 1)
    start[n] = max(c(np.zeros(n))[0] for c in constraints) + 1.0
    v = _barrier(s_only, Stack(lifted), start, stop=lambda v: v[n] < -1e-3)
    if v[n] >= -1e-12:
        worst = max(constraints, key=lambda c: c(v[:n])[0])
        raise MemoryLimitError(f"no real tile sizes fit strictly inside the memory: the tightest constraint "
                               f"stays at {np.exp(worst(v[:n])[0]):.6g} times its limit")
    return v[:n]
