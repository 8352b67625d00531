"""nc.derive is never above the curves it gave before (``stored_curves.json``: matmul, attention, MHA, GQA, the
MLPs, the norms at M = 2^10 … 2^20): a change to the search or the rule book may lower a point, never raise one.
The points issue 21 lowered (a kernel loads a value it reads in several places once) are checked as lowered."""
import json
from pathlib import Path

import pytest

import napkin_cat as nc

STORED = json.loads((Path(__file__).parent / "stored_curves.json").read_text())["cases"]
BUILD = {
    "matmul": nc.library.matmul, "attention": nc.library.attention,
    "multi_head_attention": nc.library.multi_head_attention,
    "grouped_query_attention": nc.library.grouped_query_attention,
    "mlp_gelu": nc.library.mlp, "mlp_relu_nobias": lambda: nc.library.mlp(activation="relu"),
    "swiglu_mlp": nc.library.swiglu_mlp, "layer_norm": nc.library.layer_norm, "rms_norm": nc.library.rms_norm,
}
#: Where loading X once lowers the curve: the memory from which one kernel holding a row fits, and the new H.
LOWERED = {"layer_norm": (2 ** 12, 2 * 4096 * 1024 + 2048), "rms_norm": (2 ** 12, 2 * 4096 * 1024 + 1024)}


def test_every_stored_case_is_built():
    assert set(STORED) == set(BUILD)


@pytest.mark.parametrize("name", sorted(STORED))
def test_never_above_the_stored_curve(name):
    case = STORED[name]
    stored = {int(m): h for m, h in case["H"].items()}
    r = nc.derive(BUILD[name](), memory=sorted(stored), sizes=case["sizes"])
    above = {m: (r.H[m], h) for m, h in stored.items() if r.H[m] > h}
    assert not above, f"{name}: derive moves more than before at {above}"
    if name in LOWERED:
        start, H = LOWERED[name]
        assert all(r.H[m] == H < stored[m] for m in stored if m >= start), r.H
