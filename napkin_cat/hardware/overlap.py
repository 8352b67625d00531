"""Overlap schedules (§5.7, §6): warpgroups issuing a streamed loop's ops to shared pipelines.

The model, cycle-exact in clocks per thread (Table 3's unit; a warpgroup's op of ``c`` clk/thread
keeps its pipeline busy ``c`` per-thread clocks for the whole warpgroup):

* a **task** per Table-3 column: its pipeline, its clocks, and an **overhead** fraction (conversions,
  FP32 exponentials, ...) that extends its occupancy of its own pipeline (the paper's hatched regions);
* **dependencies**: in one iteration each column consumes the previous one; across iterations each
  column carries its state to itself (running max, accumulator);
* every **pipeline** (tensor, special, general) is one server per SM, shared by all warpgroups, FIFO;
* a **warpgroup** issues its program in order; an op on an *asynchronous* pipeline (Hopper's wgmma,
  from the toy hierarchy) returns at once, any other op holds the warpgroup until it completes;
* **barriers** are extra dependencies between warpgroups (drawn as thick dotted lines).

Strategies (programs), built from the column order alone:

* ``sequential``: one iteration after another;
* ``intra``: software pipelining inside one warpgroup: a tensor op consuming a general-purpose result
  moves to the next slot, an op consuming a tensor result issued in a later slot moves one slot further;
  in a slot the tensor ops are issued first, then the other ops from the oldest iteration to the newest
  (FlashAttention-3's intra-warpgroup overlap: QK_j, PV_{j−1} issued, then softmax_j);
* ``inter``: several warpgroups, each sequential (or ``pipelined``), with a ping-pong barrier: the
  special-function op of warpgroup w waits for that of warpgroup w−1 (FlashAttention-3's ping-pong).

Utilisation is the steady-state share of time the tensor pipeline does useful work::

    utilisation = tensor busy time / elapsed time      (over whole periods, after the start-up)

>>> from fractions import Fraction as F
>>> tasks = [Task("QK", "tensor", F(8)), Task("SM", "special", F(8), F(2, 3)), Task("PV", "tensor", F(8))]
>>> simulate(intra(tasks)).utilisation()          # 16 tensor clocks per 8 + 8·(1 + 2/3): FA3 FP16
Fraction(3, 4)
>>> simulate(inter(tasks, warpgroups=2)).utilisation()
Fraction(1, 1)
"""
from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

from napkin_cat.hardware.errors import ScheduleError
from napkin_cat.hardware.tables import decimal, dumps, number, text_table
from napkin_cat.hardware.toy import hierarchy_of

STRATEGIES = ("sequential", "intra", "inter")


@dataclass(frozen=True)
class Task:
    """One column of the loop: ``clocks`` per thread on ``pipeline``, plus ``overhead`` × clocks (hatched)."""

    name: str
    pipeline: str
    clocks: Fraction
    overhead: Fraction = Fraction(0)

    @property
    def duration(self) -> Fraction:
        return self.clocks * (1 + self.overhead)


@dataclass(frozen=True)
class Barrier:
    """Task ``waiter`` of warpgroup ``wg`` in iteration j starts after task ``signal`` of warpgroup ``after``
    in iteration ``j + shift`` completes."""

    wg: int
    waiter: int
    after: int
    signal: int
    shift: int = 0


@dataclass
class Program:
    """A warp-specialised program: its tasks, the warpgroups running them, each slot's issue order (task, iteration
    offset), the barriers between them and the pipelines issued without blocking.
    """

    name: str
    tasks: list
    warpgroups: int
    slots: list          # issue order of one slot: [(task index, iteration offset)], the offset ≤ 0
    barriers: list = field(default_factory=list)
    asynchronous: tuple = ("tensor",)

    def deps(self, wg, k, j):
        """The ops (warpgroup, task, iteration) that task ``k`` of iteration ``j`` waits for."""
        out = []
        if k > 0:
            out.append((wg, k - 1, j))
        if j > 0:
            out.append((wg, k, j - 1))
        for b in self.barriers:
            if b.wg == wg and b.waiter == k and j + b.shift >= 0:
                out.append((b.after, b.signal, j + b.shift))
        return out


def _stages(tasks, asynchronous):
    stages = [0]
    for k in range(1, len(tasks)):
        prev, here = tasks[k - 1], tasks[k]
        prev_async, here_async = prev.pipeline in asynchronous, here.pipeline in asynchronous
        if here_async and not prev_async:
            stages.append(stages[-1] + 1)
        elif prev_async and not here_async and stages[-1] > 0:
            stages.append(stages[-1] + 1)
        else:
            stages.append(stages[-1])
    return stages


def sequential(tasks, *, warpgroups: int = 1, asynchronous=("tensor",)) -> Program:
    """The program running ``tasks`` one after another in each iteration, on ``warpgroups`` alike, with no barriers."""
    return Program("sequential", list(tasks), warpgroups, [(k, 0) for k in range(len(tasks))], [],
                   tuple(asynchronous))


def intra(tasks, *, warpgroups: int = 1, asynchronous=("tensor",)) -> Program:
    """Software pipelining inside a warpgroup (see module docstring)."""
    stages = _stages(tasks, asynchronous)
    issued = sorted((k for k in range(len(tasks)) if tasks[k].pipeline in asynchronous), key=lambda k: (stages[k], k))
    held = sorted((k for k in range(len(tasks)) if tasks[k].pipeline not in asynchronous),
                  key=lambda k: (-stages[k], k))
    return Program("intra", list(tasks), warpgroups, [(k, -stages[k]) for k in issued + held], [],
                   tuple(asynchronous))


def inter(tasks, *, warpgroups: int = 2, pipelined: bool = False, asynchronous=("tensor",)) -> Program:
    """Several warpgroups with a ping-pong barrier on the first non-asynchronous op (see module docstring)."""
    base = intra(tasks, asynchronous=asynchronous) if pipelined else sequential(tasks, asynchronous=asynchronous)
    held = [k for k, t in enumerate(tasks) if t.pipeline not in asynchronous]
    barriers = []
    if held and warpgroups > 1:
        k = held[0]
        for w in range(warpgroups):
            barriers.append(Barrier(w, k, (w - 1) % warpgroups, k, 0 if w > 0 else -1))
    name = f"inter ({warpgroups} warpgroups{', pipelined' if pipelined else ''})"
    return Program(name, list(tasks), warpgroups, base.slots, barriers, tuple(asynchronous))


@dataclass(frozen=True)
class Event:
    """One op of a schedule: its warpgroup, task, iteration and pipeline, when it starts, ends its work and ends,
    and the barriers that held it."""

    wg: int
    task: int
    iteration: int
    pipeline: str
    start: Fraction
    work_end: Fraction     # end of the useful work; [work_end, end) is the overhead (hatched)
    end: Fraction
    waited_on: tuple = ()  # barriers that held this op: (warpgroup, task, iteration) of the signal


@dataclass
class Schedule:
    """The events of ``iterations`` iterations of ``program``: its period, its utilisation per pipeline, its window."""

    program: Program
    events: list
    iterations: int

    def finished(self, j) -> Fraction:
        """The time every warpgroup has finished iteration ``j``."""
        return max(e.end for e in self.events if e.iteration == j)

    def window(self):
        a, b = self.iterations // 3, self.iterations // 3 + 24
        return self.finished(a), self.finished(b)

    def busy(self, pipeline, t0, t1) -> Fraction:
        total = Fraction(0)
        for e in self.events:
            if e.pipeline == pipeline:
                total += max(Fraction(0), min(e.work_end, t1) - max(e.start, t0))
        return total

    def utilisation(self, pipeline: str = "tensor") -> Fraction:
        """Steady-state share of time ``pipeline`` does useful work (overhead excluded)."""
        t0, t1 = self.window()
        return self.busy(pipeline, t0, t1) / (t1 - t0)

    def occupancy(self, pipeline: str) -> Fraction:
        """Steady-state share of time ``pipeline`` is held, overhead included."""
        t0, t1 = self.window()
        total = Fraction(0)
        for e in self.events:
            if e.pipeline == pipeline:
                total += max(Fraction(0), min(e.end, t1) - max(e.start, t0))
        return total / (t1 - t0)

    def period(self) -> Fraction:
        """Steady-state clocks per thread per iteration (of every warpgroup)."""
        t0, t1 = self.window()
        return (t1 - t0) / 24


def simulate(program: Program, *, iterations: int = 60) -> Schedule:
    """Run ``program`` for ``iterations`` per warpgroup (module docstring's rules); exact in clocks."""
    if iterations < 30:
        raise ScheduleError(f"iterations = {iterations}: the steady state is measured over iterations "
                            f"{iterations // 3}..{iterations // 3 + 24}, so at least 30 are needed")
    W = program.warpgroups
    order = [[(k, j + off) for j in range(iterations + len(program.tasks)) for k, off in program.slots
              if 0 <= j + off < iterations] for _ in range(W)]
    done, events = {}, []
    free = {}
    ready = [Fraction(0)] * W
    at = [0] * W
    while True:
        best = None
        for w in range(W):
            if at[w] == len(order[w]):
                continue
            k, j = order[w][at[w]]
            deps = program.deps(w, k, j)
            if any(d not in done for d in deps):
                continue
            issue = max([ready[w]] + [done[d] for d in deps])
            if best is None or issue < best[0]:
                best = (issue, w, k, j, deps)
        if best is None:
            if all(at[w] == len(order[w]) for w in range(W)):
                break
            stuck = [(w, program.tasks[order[w][at[w]][0]].name, order[w][at[w]][1]) for w in range(W)
                     if at[w] < len(order[w])]
            raise ScheduleError(f"{program.name}: no op can issue (a barrier never opens); waiting: {stuck}")
        issue, w, k, j, deps = best
        task = program.tasks[k]
        start = max(issue, free.get(task.pipeline, Fraction(0)))
        end = start + task.duration
        free[task.pipeline] = end
        done[(w, k, j)] = end
        held = tuple(d for d in deps if d[0] != w)
        events.append(Event(w, k, j, task.pipeline, start, start + task.clocks, end, held))
        ready[w] = issue if task.pipeline in program.asynchronous else end
        at[w] += 1
    return Schedule(program, events, iterations)


# ---------------------------------------------------------------------------------------------- tables
def tasks_of(table, overhead: dict | None = None) -> list:
    """Tasks from a clock table's columns, with an overhead fraction per pipeline (or per column label)."""
    overhead = overhead or {}
    legal = sorted({c.pipeline for c in table.columns} | {c.label for c in table.columns})
    unknown = sorted(k for k in overhead if k not in legal)
    if unknown:
        raise ScheduleError(f"overhead for {unknown}, which the clock table has no column or pipeline of; legal "
                            f"keys are {legal}")
    out = []
    for c in table.columns:
        o = overhead.get(c.label, overhead.get(c.pipeline, 0))
        out.append(Task(c.label, c.pipeline, c.clocks, Fraction(o)))
    return out


@dataclass
class OverlapTable:
    """The overlap strategies' schedules on one GPU (a row per strategy) and the overheads they were timed with."""

    rows: list              # (strategy name, Schedule)
    overhead: dict
    hardware: str

    def to_dict(self) -> dict:
        return {"hardware": self.hardware, "overhead": {k: number(v) for k, v in self.overhead.items()},
                "strategies": [{"strategy": name, "warpgroups": s.program.warpgroups,
                                "period_clk_per_thread": number(s.period()),
                                "tensor_utilisation": number(s.utilisation("tensor")),
                                "occupancy": {p: number(s.occupancy(p)) for p in _pipes(s)}}
                               for name, s in self.rows]}

    def to_json(self) -> str:
        return dumps(self.to_dict())

    def to_text(self) -> str:
        pipes = sorted({p for _, s in self.rows for p in _pipes(s)})
        body = [[name, s.program.warpgroups, decimal(s.period()), f"{decimal(100 * s.utilisation('tensor'), 1)}%"]
                + [f"{decimal(100 * s.occupancy(p), 1)}%" for p in pipes] for name, s in self.rows]
        over = ", ".join(f"{k} {decimal(100 * Fraction(v), 1)}%" for k, v in self.overhead.items()) or "none"
        return text_table(["strategy", "warpgroups", "clk/iteration", "tensor utilisation"]
                          + [f"{p} busy" for p in pipes], body,
                          title=f"Overlap schedules on {self.hardware} (overhead: {over})")


def _pipes(schedule):
    return sorted({t.pipeline for t in schedule.program.tasks})


def overlap_table(table, *, overhead: dict | None = None, strategies=None, asynchronous=None) -> OverlapTable:
    """Utilisation of each strategy for a clock table's columns.  ``strategies``: ``[(name, builder kwargs)]``;
    default: sequential, intra, inter with 2 and 3 warpgroups.  ``asynchronous`` defaults to the hardware's
    toy hierarchy (Hopper: tensor; Ampere: none)."""
    overhead = dict(overhead or {})
    asynchronous = hierarchy_of(table.gpu).asynchronous if asynchronous is None else tuple(asynchronous)
    tasks = tasks_of(table, overhead)
    builders = {"sequential": sequential, "intra": intra, "inter": inter}
    strategies = strategies or [("sequential", {}), ("intra", {}), ("inter", {"warpgroups": 2}),
                                ("inter", {"warpgroups": 3, "pipelined": True})]
    rows = []
    for name, kwargs in strategies:
        if name not in builders:
            raise ScheduleError(f"unknown strategy {name!r}; strategies are {STRATEGIES}")
        program = builders[name](tasks, asynchronous=asynchronous, **kwargs)
        rows.append((program.name, simulate(program)))
    return OverlapTable(rows, overhead, table.gpu.name)
