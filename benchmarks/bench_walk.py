"""The search's costing walk on the symbolic block, fingerprinted and timed (issue 35, walk-35c).

Run with ``OPENBLAS_NUM_THREADS=1 python benchmarks/bench_walk.py [--fingerprints FILE] [--warm N]``.  One
``nc.derive(nc.library.transformer_block(), memory="M")`` in this interpreter, observed through
:class:`~napkin_cat.search.curves.Curve` (no timing asserted anywhere):

* ``derive``, ``costed``: CPU seconds of the derive and of its partition costings (``Curve._costed``, both
  arithmetics), the calls per arithmetic;
* ``--fingerprints FILE``: one line per costing, in the order the derive made them: the arithmetic and a sha1 of
  the record's ``H``, ``H_bytes``, columns, FLOPs, groups, streams and assumptions, each value read as an expanded
  sympy expression (``srepr``).  Two checkouts' files are equal where a change to the walk left every record
  as it was (the 830 records of the block: ``cmp``);
* ``--warm N``: the polynomial costings made again ``N`` times in this interpreter (each partition's caches kept:
  the walk's arithmetic alone, without what a first costing builds), CPU seconds per pass, and the sympy
  ``Symbol`` hashes one more pass makes (what a monomial keyed by its symbols costs a dict lookup).
"""
from __future__ import annotations

import argparse
import hashlib
import os
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import sympy  # noqa: E402

import napkin_cat as nc  # noqa: E402
from napkin_cat.cost.iocost import cost  # noqa: E402
from napkin_cat.cost.polynomial import POLYNOMIAL, as_expr  # noqa: E402
from napkin_cat.search import curves  # noqa: E402
from napkin_cat.search.variants import Variant  # noqa: E402


def _read(v):
    return sympy.srepr(as_expr(v)) if isinstance(v, sympy.Basic) or hasattr(v, "as_expr") else repr(v)


def fingerprint(c) -> str:
    """A sha1 of a cost record's values, each read as an expanded sympy expression (either arithmetic alike)."""
    parts = [sorted((lvl, _read(h)) for lvl, h in c.H.items()),
             sorted((lvl, _read(h)) for lvl, h in c.H_bytes.items()),
             sorted((lvl, sorted(_read(v) for v in cols)) for lvl, cols in c.columns.items()),
             sorted((p, _read(v)) for p, v in c.flops.items()),
             [(g.axes, str(g.tiles), _read(g.N_g), sorted((lvl, _read(h)) for lvl, h in g.H_g.items()))
              for g in c.groups],
             [tuple(map(str, s)) for s in c.streams], [str(a) for a in c.assumptions]]
    return hashlib.sha1(repr(parts).encode()).hexdigest()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--fingerprints", default=None)
    ap.add_argument("--warm", type=int, default=0)
    args = ap.parse_args()
    spent, made = [0.0], []
    costed = curves.Curve._costed

    def observed(self, arithmetic):
        t = time.process_time()
        out = costed(self, arithmetic)
        spent[0] += time.process_time() - t
        made.append((self, arithmetic, out))
        return out

    curves.Curve._costed = observed
    f = nc.library.transformer_block()
    t = time.process_time()
    nc.derive(f, memory="M")
    total = time.process_time() - t
    curves.Curve._costed = costed
    calls = {}
    for _, a, _ in made:
        calls[a.name] = calls.get(a.name, 0) + 1
    print(f"derive {total:.2f} CPU s, costed {spent[0]:.3f} CPU s, calls {calls}")
    if args.fingerprints:
        with open(args.fingerprints, "w") as fh:
            for _, a, c in made:
                fh.write(f"{a.name} {fingerprint(c)}\n")
    if args.warm:
        diagrams = [s.partition.record if isinstance(s.partition, Variant) else s.partition
                    for s, a, _ in made if a is POLYNOMIAL]
        passes = []
        for _ in range(args.warm):
            t = time.process_time()
            for d in diagrams:
                cost(d, arithmetic=POLYNOMIAL, ops=False)
            passes.append(time.process_time() - t)
        hashed, symbol_hash, own = [0], sympy.Symbol.__hash__, "__hash__" in vars(sympy.Symbol)

        def counted(s):
            hashed[0] += 1
            return symbol_hash(s)
        sympy.Symbol.__hash__ = counted
        try:
            for d in diagrams:
                cost(d, arithmetic=POLYNOMIAL, ops=False)
        finally:
            if own:
                sympy.Symbol.__hash__ = symbol_hash
            else:
                del sympy.Symbol.__hash__
        print(f"warm passes over {len(diagrams)} costings: " + " ".join(f"{x:.3f}" for x in passes)
              + f" CPU s (min {min(passes):.3f}); Symbol hashes per pass {hashed[0]}")


if __name__ == "__main__":
    main()
