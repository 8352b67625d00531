"""Where the reference search's fixed cost goes: a census of the kernels one derive costs (issue 35, share-35).

Run with ``OPENBLAS_NUM_THREADS=1 python benchmarks/census_costed_kernels.py [symbolic|block|stack]``
(default ``symbolic``: ``nc.derive(nc.library.transformer_block(), memory="M")``; ``block``/``stack``:
``bench_targets``'s numeric rows).  One derive in this interpreter, observed through the search's classes (no
timing asserted anywhere):

* ``cost calls``: :func:`napkin_cat.cost.iocost.cost` calls made by :class:`~napkin_cat.search.curves.Curve` (per
  arithmetic) and their CPU seconds;
* ``kernels``: the :class:`~napkin_cat.search.choice.Choice` objects built (one per distinct kernel diagram), their
  partitions (curves) and how many were costed; ``first``/``later``: the mean CPU ms of the first costed partition of
  a kernel and of its others (equal means: no work is shared between a kernel's partitions);
* ``same stream``: partitions that stream the same axis (sliced alike) as an earlier partition of their kernel: the
  only ones whose stream schedule (head, trip, tail: what a variant's cost folds) another partition already walked;
  the rest differ in their stream axis, so only their inside's boxes are common to them;
* ``alike up to names``: kernels equal to an earlier one once their axes are renamed in order of first appearance
  (an estimate: ``nc.dumps`` with every axis name replaced as a whole word), the most a cache keyed up to renaming
  could share.
"""
from __future__ import annotations

import collections
import os
import re
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import napkin_cat as nc  # noqa: E402
import napkin_cat.search.choice as choice_module  # noqa: E402
import napkin_cat.search.curves as curves_module  # noqa: E402
from napkin_cat.search.variants import Variant  # noqa: E402
from napkin_cat.syntax.flat import layers  # noqa: E402

TB = {"n": 512, "e": 256, "h": 4, "d": 64, "f": 1024}


def program(case: str):
    """The function and the derive's keywords of ``case``."""
    if case == "symbolic":
        return nc.library.transformer_block(), {"memory": "M"}
    from bench_scale import STACK
    scope = {"nc": nc}
    exec(STACK, scope)
    return scope["stack"](1 if case == "block" else 32), {"memory": 2 ** 16, "sizes": TB}


def renamed_key(diagram) -> str:
    """``nc.dumps(diagram)`` with each axis name replaced by its rank of first appearance (an estimate, see above)."""
    text, names = nc.dumps(diagram), []
    for _, box in layers(diagram):
        for arr in (*box.dom.inside, *box.cod.inside):
            names += [n for n in arr.names if n not in names]
    for n in sorted(names, key=len, reverse=True):
        text = re.sub(r"(?<![A-Za-z0-9_])" + re.escape(n) + r"(?![A-Za-z0-9_])", f"#{names.index(n)}", text)
    return text


def main(case: str = "symbolic") -> None:
    calls, seconds, timed = collections.Counter(), collections.Counter(), {"first": [], "later": []}
    kernels, seen = [], set()
    cost, costed, init = curves_module.cost, curves_module.Curve._costed, choice_module.Choice.__init__

    def counted_cost(diagram, *args, **kwargs):
        t = time.process_time()
        try:
            return cost(diagram, *args, **kwargs)
        finally:
            name = kwargs.get("arithmetic").name
            calls[name] += 1
            seconds[name] += time.process_time() - t

    def timed_costed(self, arithmetic):
        t = time.process_time()
        out = costed(self, arithmetic)
        key = (id(self.partition.function), arithmetic.name) if isinstance(self.partition, Variant) else None
        timed["later" if key in seen else "first"].append(time.process_time() - t)
        seen.add(key)
        return out

    def kept_init(self, *args, **kwargs):
        init(self, *args, **kwargs)
        kernels.append(self)

    curves_module.cost, curves_module.Curve._costed, choice_module.Choice.__init__ = \
        counted_cost, timed_costed, kept_init
    f, kwargs = program(case)
    t = time.process_time()
    nc.derive(f, **kwargs)
    total = time.process_time() - t
    curves_module.cost, curves_module.Curve._costed, choice_module.Choice.__init__ = cost, costed, init

    built = [k for k in kernels if k._options is not None]
    options = [(v, c) for k in built for v, c in k.options]
    same = 0
    for k in built:
        streams = [(v.stream, v.sliced) for v, _ in k.options if v.stream is not None]
        same += len(streams) - len(set(streams))
    alike = len(built) - len({renamed_key(k.function) for k in built})
    print(f"{case}: derive {total:.2f} CPU s")
    print("cost calls " + ", ".join(f"{n} {calls[n]} ({seconds[n]:.2f} s)" for n in sorted(calls)))
    print(f"kernels {len(built)}, partitions {len(options)}, costed {sum(c.costed for _, c in options)}; "
          + ", ".join(f"{n} {len(v)} x {1e3 * sum(v) / max(len(v), 1):.2f} ms" for n, v in timed.items()))
    print(f"same stream as an earlier partition {same}; kernels alike up to names of axes {alike}")


if __name__ == "__main__":
    main(*sys.argv[1:2])
