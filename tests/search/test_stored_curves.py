"""nc.derive gives exactly the curves it gave when they were stored (``stored_curves.json``: matmul, attention, MHA,
GQA, the MLPs, the norms at M = 2^10 … 2^20), and those curves are what the algorithms move.

Two-sided: a point above the stored curve is a regression; a point below it is either a better search (regenerate
the file on purpose, ``python tests/search/test_stored_curves.py``, and review its diff) or a cost functor that
undercounts.  The stored numbers are the code's own output, so they are checked by routes that do not go
through the search:

* every point is at least the compulsory IO (each input read once, each output written once), computed here from
  the sizes; the norms from 2^12 on, and matmul and attention's one-kernel form at every memory where derive gives
  them, equal formulas written out here from their loop nests at the tiles derive chose;
* every derived algorithm (each distinct one along a curve) is planned at small ragged sizes and run: the
  transfers the runner counts from the arrays it moves equal ``nc.cost`` there, and derive's H is ``nc.cost`` of
  its diagram at its tiles.
"""
import functools
import json
import subprocess
import sys
from math import prod
from pathlib import Path

import numpy as np
import pytest

import napkin_cat as nc
from napkin_cat.syntax.sizes import symbols_of

FILE = Path(__file__).parent / "stored_curves.json"
STORED = json.loads(FILE.read_text())["cases"]
BUILD = {
    "matmul": nc.library.matmul, "attention": nc.library.attention,
    "multi_head_attention": nc.library.multi_head_attention,
    "grouped_query_attention": nc.library.grouped_query_attention,
    "mlp_gelu": nc.library.mlp, "mlp_relu_nobias": lambda: nc.library.mlp(activation="relu"),
    "swiglu_mlp": nc.library.swiglu_mlp, "layer_norm": nc.library.layer_norm, "rms_norm": nc.library.rms_norm,
}
MEMORIES = [2 ** k for k in range(10, 21)]


@functools.lru_cache(maxsize=None)
def derived(name):
    return nc.derive(BUILD[name](), memory=MEMORIES, sizes=STORED[name]["sizes"])


def ceil(a, b):
    return -(-a // b)


def test_every_stored_case_is_built():
    assert set(STORED) == set(BUILD)
    assert all(sorted(int(m) for m in case["H"]) == MEMORIES for case in STORED.values())


@pytest.mark.parametrize("name", sorted(STORED))
def test_the_stored_curve_both_ways(name):
    stored = {int(m): h for m, h in STORED[name]["H"].items()}
    r = derived(name)
    above = {m: (r.H[m], h) for m, h in stored.items() if r.H[m] > h}
    below = {m: (r.H[m], h) for m, h in stored.items() if r.H[m] < h}
    assert not above, f"{name}: derive moves more than the stored curve at {above} (derived, stored)"
    assert not below, (f"{name}: derive moves less than the stored curve at {below} (derived, stored): a better "
                       f"search (regenerate: python tests/search/test_stored_curves.py) or a cost that undercounts")


@pytest.mark.parametrize("name", sorted(STORED))
def test_no_point_is_below_the_compulsory_io(name):
    sizes, f = STORED[name]["sizes"], BUILD[name]()
    compulsory = sum(prod(sizes[a] for a in arr.names) for arr in f.dom.inside + f.cod.inside)
    assert all(h >= compulsory for h in derived(name).H.values())
    if name in ("layer_norm", "rms_norm"):      # one kernel holding a row reads X and the weights once from 2^12
        n, d = sizes["n"], sizes["d"]
        weights = {"layer_norm": 2 * d, "rms_norm": d}[name]
        assert compulsory == 2 * n * d + weights
        assert all(h == compulsory for m, h in derived(name).H.items() if m >= 2 ** 12)


def test_matmul_is_the_tiled_loop_nests_io():
    """(a×b)(b×c) grouped over a and c, streaming b: each of the ⌈a/g_a⌉·⌈c/g_c⌉ blocks reads a g_a×b panel of
    A and a b×g_c panel of B and writes its g_a×g_c tile of C."""
    a, b, c = (STORED["matmul"]["sizes"][k] for k in "abc")
    for reg in derived("matmul").regimes:
        (k,) = reg.variant.kernels
        assert set(k.groups) == {"a", "c"} and k.stream == "b"
        ga, gc = (reg.optimum.sizes[k.tiles[x]] for x in "ac")
        assert reg.H == a * b * ceil(c, gc) + ceil(a, ga) * b * c + a * c, reg.memory


def test_attention_in_one_kernel_is_flashattentions_io():
    """Grouped over q, streaming x (FlashAttention): Q read and O written once, K and V read once per query block:
    2qd + 2⌈q/g_q⌉xd (the paper's H for its derivation)."""
    q, x, d = (STORED["attention"]["sizes"][k] for k in "qxd")
    one = [reg for reg in derived("attention").regimes if len(reg.variant.kernels) == 1]
    assert [reg.memory for reg in one] == [2 ** k for k in range(15, 21)]
    for reg in one:
        (k,) = reg.variant.kernels
        assert k.groups == ("q",) and k.stream == "x"
        assert reg.H == 2 * q * d + 2 * ceil(q, reg.optimum.sizes[k.tiles["q"]]) * x * d, reg.memory


def small_sizes(name, d):
    """Ragged sizes for ``d``: its axes 5, 6, 7, …, every tile 2."""
    axes = sorted(STORED[name]["sizes"])
    sizes = {a: 5 + k % 3 for k, a in enumerate(axes)}
    return {**sizes, **{str(s): 2 for s in symbols_of(d) if str(s) not in sizes}}


@pytest.mark.parametrize("name", sorted(STORED))
def test_every_derived_algorithm_moves_what_its_cost_says(name):
    r = derived(name)
    distinct = {}
    for reg in r.regimes:
        assert nc.cost(reg.diagram, sizes=reg.optimum.sizes).H[1] == reg.H == r.H[reg.memory], reg.memory
        distinct.setdefault(str(reg.variant), reg.diagram)
    rng = np.random.default_rng(0)
    for variant, d in distinct.items():
        sizes = small_sizes(name, d)
        xs = [rng.normal(size=tuple(sizes[a] for a in arr.names)) for arr in d.dom.inside]
        _, counted = nc.plan(d, sizes).run(*xs)
        assert counted.transfers == nc.cost(d, sizes=sizes).H, variant


def regenerate():
    """Store the curves derive gives now (run on purpose; review the diff)."""
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=FILE.parent).stdout.strip()
    cases = {name: {"sizes": case["sizes"], "H": {str(m): int(h) for m, h in derived(name).H.items()}}
             for name, case in STORED.items()}
    about = (f"nc.derive's H per memory (numeric mode, divisor tiles, level 1), stored at {commit}; "
             "tests/search/test_stored_curves.py asserts that derive gives exactly these and checks them against "
             "the compulsory IO, formulas, and the runner's counts. Regenerate only on purpose: python "
             "tests/search/test_stored_curves.py (a better search lowers them), and review the diff.")
    FILE.write_text(json.dumps({"about": about, "cases": cases}, indent=1) + "\n")


if __name__ == "__main__":
    sys.exit(regenerate())
