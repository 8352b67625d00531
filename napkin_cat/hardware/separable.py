"""The fastest tile assignment of a program, found per connected component of its kernel–tile graph (§5.4, §5.7).

The time models charge each kernel on its own tiles: a program's time is ``T(τ) = Σ_k T_k(τ|S_k)``, where ``S_k``
is the set of symbols kernel ``k`` reads (its Grids' and Streams' tiles, its split parts, any other symbol its
terms hold), its transfers ``H(τ) = Σ_k H_k(τ|S_k)`` likewise, and every filter is a kernel's own (over shared
memory or registers; ``min_blocks``: every kernel launches that many blocks).  Join two kernels that read a common
tile; the connected components ``C_1 … C_m`` of that graph split the kernels and the tiles (a tile no kernel reads
is a component of its own, without kernels).  An assignment is ``τ = (τ_1, …, τ_m)``, ``τ_j`` over ``C_j``'s
tiles, legal iff each ``τ_j`` is, and::

    T(τ) = Σ_j T_j(τ_j)        H(τ) = Σ_j H_j(τ_j)        T_j, H_j: the sums over C_j's kernels

The search keeps the least ``key(τ) = (T(τ), H(τ), −τ)`` (fastest; ties: fewer transfers, then larger tiles,
``−τ`` compared lexicographically in the program's tile order), ``T`` the exact sum of the kernels' times (as
:class:`~fractions.Fraction` s: no rounding, so a sum is strictly increasing in each term).  **Law**: that least
is the assignment made of each component's least ``key_j(τ_j) = (T_j, H_j, −τ_j)`` (``−τ_j``: ``C_j``'s tiles in
the same relative order), so the search enumerates ``Σ_j |values of C_j|`` assignments, not their product.
Proof: (1) ``T(τ) ≥ Σ_j min T_j``, with equality iff every ``τ_j`` minimises ``T_j``: the fastest are
``A = ∏ A_j``.  (2) On ``A``, ``H = Σ_j H_j`` is least iff every ``τ_j`` is least in ``H_j`` on ``A_j``: the set is
``∏ B_j``, ``B_j`` the least of ``C_j`` by ``(T_j, H_j)``.  (3) On ``∏ B_j``, let ``τ*`` be made of each
component's lexicographically least ``−τ_j``; if some ``σ`` had ``−σ <lex −τ*``, the first tile where they differ
belongs to one component ``C_j``, and ``σ`` agrees with ``τ*`` on ``C_j``'s tiles before it, so
``−σ_j <lex −τ*_j`` with ``σ_j ∈ B_j``: a contradiction.  ∎

:func:`components` finds the components; :func:`assembled` puts the components' timed rows together.

>>> components([{"a", "x"}, {"b"}, {"a", "c"}], ["a", "b", "c", "d"])
[((0, 2), ('a', 'c')), ((1,), ('b',)), ((), ('d',))]
>>> rows = assembled(["a", "b"], [[(3, 1, {"a": 64}, {0: "k0"}), (5, 0, {"a": 32}, {0: "k0'"})],
...                               [(2, 4, {"b": 16}, {1: "k1"})]])
>>> [(t, h, tiles, kts) for t, h, tiles, kts in rows]
[(5, 5, {'a': 64, 'b': 16}, ['k0', 'k1']), (7, 4, {'a': 32, 'b': 16}, ["k0'", 'k1'])]
"""
from __future__ import annotations


def components(reads: list, tiles: list) -> list:
    """The connected components of the graph joining kernels that read a common tile: ``[(kernel positions, tiles
    in the order of tiles)]``, each ``reads[k]`` the symbols kernel ``k`` reads (those not in ``tiles`` join
    nothing), a tile no kernel reads a component of its own (no kernel), in order of their first kernel."""
    tiles = list(tiles)
    own = [{t for t in r if t in set(tiles)} for r in reads]
    parent = list(range(len(reads)))

    def root(k):
        while parent[k] != k:
            parent[k] = parent[parent[k]]
            k = parent[k]
        return k
    first: dict = {}                    # a tile → the first kernel that reads it
    for k, ts in enumerate(own):
        for t in ts:
            if t in first:
                parent[root(k)] = root(first[t])
            else:
                first[t] = k
    groups: dict = {}
    for k in range(len(reads)):
        groups.setdefault(root(k), []).append(k)
    out = [(tuple(ks), tuple(t for t in tiles if any(t in own[k] for k in ks))) for ks in groups.values()]
    return sorted(out) + [((), (t,)) for t in tiles if t not in first]


def assembled(tiles: list, parts: list) -> list:
    """The rows of a program from its components' rows: each part a component's ``[(T, H, its tiles, {kernel
    position: kernel time})]`` sorted by :func:`components`' law's ``key_j`` (its best first).  The first row is
    every component at its best (the program's best, by the law); then each component's other rows, the others at
    their best: ``[(T, H, tiles in the order of tiles, [kernel times by position])]``.  An empty part (a component
    no assignment of which is legal) leaves the program none: ``[]``."""
    if any(not rows for rows in parts):
        return []
    best = [rows[0] for rows in parts]
    out = []
    for i, rows in enumerate(parts):
        for row in rows[1 if i else 0:]:
            chosen = best[:i] + [row] + best[i + 1:]
            merged = {t: v for c in chosen for t, v in c[2].items()}
            kts = {k: kt for c in chosen for k, kt in c[3].items()}
            out.append((sum(c[0] for c in chosen), sum(c[1] for c in chosen), {t: merged[t] for t in tiles},
                        [kts[k] for k in sorted(kts)]))
    return out
