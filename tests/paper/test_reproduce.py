"""``napkin reproduce``: the paper end to end, one claim per row, exit status by the claims.

The run every test reads is the whole command, every section at its own sizes, except two: §7's derivations run
at q = x = 64, d = 16 and M = 2^11, 2^12 (the sizes of ``tests/paper/test_backward.py``; at the paper's q = x = 4096
and seven memories §7 alone took most of the run), and §5.1's plans are counted at half their sizes and a quarter of
their memories (attention q = x = 256, d = 32, M = 2^11; matmul 128³, M = 2^10: the same claims, the large-M tiles
still holding more than M and the exact optimum's fitting, the kernels still compiled and run; the counting runner
at the library's sizes was 9.1 s of the run's CPU, here 5.2 s).  The same tests read the run at the library's sizes
with ``NAPKIN_SLOW=1``."""
import json
import os
import re

import pytest

from napkin_cat.cli import main
from napkin_cat.paper import backward, plans
from napkin_cat.paper.ledger import Ledger
from napkin_cat.paper.report import SECTIONS

SMALL_BACKWARD = {"SIZES": {"q": 64, "x": 64, "d": 16}, "MEMORIES": [2 ** 11, 2 ** 12], "HEADLINE": 2 ** 12}
#: §5.1's cases at smaller sizes and memories (name: sizes, M); g_q = M/2d and g_a = g_c = √M still divide them
SMALL_PLANS = {"attention": ({"q": 256, "x": 256, "d": 32}, 2 ** 11),
               "matmul": ({"a": 128, "b": 128, "c": 128}, 2 ** 10)}


@pytest.fixture(scope="module", params=["small", "paper-sizes"])
def report(request, tmp_path_factory):
    if request.param == "paper-sizes" and not os.environ.get("NAPKIN_SLOW"):
        pytest.skip("napkin reproduce with §7 at the paper's sizes (q = x = 4096, M = 2^14 … 2^20, minutes) and §5.1 "
                    "at the library's: "
                    "set NAPKIN_SLOW=1")
    out = tmp_path_factory.mktemp("reproduce")
    with pytest.MonkeyPatch.context() as mp:
        if request.param == "small":
            for name, value in SMALL_BACKWARD.items():
                mp.setattr(backward, name, value)
            mp.setattr(plans, "CASES", tuple((name, attr, sec, *SMALL_PLANS[name], paper)
                                             for name, attr, sec, _, _, paper in plans.CASES))
        status = main(["reproduce", "--out", str(out), "--no-progress"])
    return status, out


def test_reproduce_writes_the_report_and_passes(report):
    status, out = report
    assert status == 0
    data = json.loads((out / "report.json").read_text())
    assert data["ok"] is True and len(data["claims"]) >= 90
    for claim in data["claims"]:
        assert {"id", "section", "paper", "library", "status"} <= set(claim)
        assert claim["status"] in ("reproduced", "erratum")
    errata = {c["erratum"] for c in data["claims"] if c["status"] == "erratum"}
    assert {"D-02", "D-03", "D-04", "D-05", "D-08", "D-12"} <= errata
    md = (out / "report.md").read_text()
    assert "| S3.2-H-star |" in md and "![hstar.png](figures/hstar.png)" in md
    status = {c["id"]: c["status"] for c in data["claims"]}
    for name in ("attention", "matmul"):      # §5.1: counted by running the plans (the kernels where tools exist)
        assert status[f"S5.1-{name}-H-counted"] == status[f"S5.1-{name}-H-star-counted"] == "reproduced"
        assert status[f"S5.1-{name}-exact-optimum"] == "erratum"
        assert f"S5.1-{name}-c-kernel" in status or any("C kernel was not run" in n for n in data["notes"].get(
            "§5.1 plans and kernels", []))
    for picture in ("flash_derivation.png", "tiled_matmul.png", "hstar.png", "mha.png", "plan_counts.png"):
        assert (out / "figures" / picture).stat().st_size > 1000


def test_every_erratum_the_report_cites_is_explained_beside_it(report):
    """A reader of the report (wherever it was written) can look up each code: errata.md lies beside it, with
    an entry (what the paper prints, what the library computes, why) for every code a row cites."""
    status, out = report
    data = json.loads((out / "report.json").read_text())
    page, md = (out / "errata.md").read_text(), (out / "report.md").read_text()
    cited = {c["erratum"] for c in data["claims"] if c["status"] == "erratum"}
    assert cited
    for code in cited:
        assert f'<a id="{code}"></a>' in page and f"[{code}](errata.md#{code})" in md
        entry = page.split(f'<a id="{code}"></a>')[1].split("<a id=")[0]
        assert "**Printed:**" in entry or "Printed" in entry or "Nothing is computed" in entry, code


def test_every_section_records_claims(report):
    _, out = report
    md = (out / "report.md").read_text()
    for title, _ in SECTIONS:
        assert f"## {title}" in md


def test_a_claim_that_differs_makes_the_run_fail():
    book = Ledger()
    book.expr("x", "§0", "a formula the library gets wrong", paper=1, library=2)
    assert not book.ok and book.counts()["differs"] == 1
    book = Ledger()
    book.erratum("y", "§0", "an erratum the library does not correct", paper=8192, library=8192, corrected=16384,
                 erratum="D-01")
    assert not book.ok


def test_unknown_section_is_refused(tmp_path):
    from napkin_cat.errors import NapkinError
    from napkin_cat.paper.report import reproduce
    with pytest.raises(NapkinError, match="unknown section"):
        reproduce(str(tmp_path), sections=["§9 nothing"], progress=False)


def test_the_backward_pass_is_shown_beside_the_forward(report, request):
    """§7: the backward's strip and H*(M) beside the forward's, drawn by the search's own drawers; its claims are
    inequalities (the derived numbers change as rules land), each reproduced, and no other; the comparison of
    the two passes is made at every memory of the run.  (tests/paper/test_backward.py ran §7 again at the small
    sizes without pictures for these claims: the same derivations, in another worker.)"""
    _, out = report
    data = json.loads((out / "report.json").read_text())
    status = {c["id"]: c["status"] for c in data["claims"] if c["id"].startswith("S7-")}
    assert status == dict.fromkeys(["S7-grad-signature", "S7-grad-values", "S7-backward-moves-more",
                                    "S7-backward-beats-unfused", "S7-backward-derived"], "reproduced")
    more = next(c for c in data["claims"] if c["id"] == "S7-backward-moves-more")
    small = request.node.callspec.params["report"] == "small"
    memories = SMALL_BACKWARD["MEMORIES"] if small else backward.MEMORIES
    assert re.findall(r"M = 2\^(\d+):", more["note"]) == [str(m.bit_length() - 1) for m in memories]
    md = (out / "report.md").read_text()
    section = md.split("## §7 backward pass (nc.grad)")[1]
    for picture in ("backward_hstar.png", "forward_search_derivation.png", "backward_search_derivation.png"):
        assert f"![{picture}](figures/{picture})" in section
        assert (out / "figures" / picture).stat().st_size > 10_000
    from PIL import Image
    rules = int(next(c for c in data["claims"] if c["id"] == "S7-backward-derived")["note"].split()[0])
    with Image.open(out / "figures" / "backward_search_derivation.png") as im:    # one row per rewrite
        assert im.size[1] == 260 * rules
