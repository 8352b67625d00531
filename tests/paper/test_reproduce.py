"""``napkin reproduce``: the paper end to end, one claim per row, exit status by the claims."""
import json

import pytest

from napkin_cat.cli import main
from napkin_cat.paper.ledger import Ledger
from napkin_cat.paper.report import SECTIONS


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    out = tmp_path_factory.mktemp("reproduce")
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
