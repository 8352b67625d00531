"""``napkin gallery``: its command line (help, JSON, one-line errors), and ``docs/gallery.md`` is not stale.

Staleness is checked in three ways, none of which redraws the gallery:

* every entry (the library's algorithms, then the registered examples) is on the page, in order, with the
  fingerprint of what it is computed from (the diagram's JSON, sizes, memories): an algorithm added, removed
  or changed is caught for every entry, in well under a second;
* the cheapest entries (fewest boxes first, until a time budget is spent) and one registered example are
  *recomputed* (the search, the plans) and their sections and pseudocode files must be byte-equal to the
  committed ones: a change of the search, the cost functor or the plan printer is caught;
* every picture and file the page links to exists.

Regenerate with ``napkin gallery --out docs/gallery`` (about two minutes on two cores).
"""
from __future__ import annotations

import json
import pathlib
import re
import time

import pytest

import napkin_cat as nc
from napkin_cat.cli import main
from napkin_cat.cli.gallery import compute, examples, sections
from napkin_cat.cli.gallery.build import file_names, fingerprint
from napkin_cat.cli.gallery.examples import sizes_of
from napkin_cat.cli.gallery.page import section
from napkin_cat.cli.inputs import LIBRARY

ROOT = pathlib.Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "gallery.md"
FOLDER = ROOT / "docs" / "gallery"
REGENERATE = "stale: regenerate with `napkin gallery --out docs/gallery` and commit docs/gallery.md and docs/gallery/"
#: seconds the recomputation of the cheapest entries may spend (it stops after the entry that crosses it)
BUDGET = 5.0
#: a registered example that is cheap to recompute (the registry's path through the page is checked on it)
REGISTERED = "grad_cross_entropy"


def _committed() -> dict:
    return sections(PAGE.read_text(encoding="utf-8"))


# --------------------------------------------------------------------------------------------- staleness
def test_the_page_has_every_entry_in_order_with_its_current_inputs():
    from napkin_cat.cli.gallery import default_memories
    committed = _committed()
    wanted = []
    for e in examples():
        d = e.build()
        wanted.append((e.name, fingerprint(e, d, sizes_of(e, d), default_memories())))
    assert set(LIBRARY) <= {n for n, _ in wanted}            # the library is iterated, none left out
    assert [(n, fp) for n, (fp, _) in committed.items()] == wanted, REGENERATE


def _check(name: str, committed: dict):
    from napkin_cat.cli.gallery import default_memories, example
    r = compute(example(name), memories=default_memories())
    files = file_names(r, str(FOLDER / name))
    assert section(r, files, str(PAGE.parent)) == committed[name][1], f"{name}: {REGENERATE}"
    for g in r.ranges:
        text = pathlib.Path(files[f"pseudocode {g.label}"]).read_text(encoding="utf-8")
        assert text.rstrip("\n") == g.pseudocode.rstrip("\n"), f"{name} pseudocode {g.label}: {REGENERATE}"
    return r


def test_the_cheapest_entries_recompute_to_the_committed_sections():
    committed = _committed()
    order = sorted(examples(), key=lambda e: len(e.build().boxes))
    start, checked = time.perf_counter(), []
    for e in order:
        if len(checked) >= 3 and time.perf_counter() - start > BUDGET:
            break
        r = _check(e.name, committed)
        checked.append(e.name)
    assert len(checked) >= 3
    # an independent route for the first one: the cost functor at the tiles the page shows gives its H*
    row = next(x for x in r.rows if x["M"] == r.headline)
    head = next(g for g in r.derivation.regimes if g.memory == r.headline)
    counted = nc.cost(head.diagram, sizes={**r.sizes, **{k: int(v) for k, v in head.tiles.items()}})
    assert counted.H[1] == row["H"]


def test_a_registered_example_recomputes_to_its_committed_section():
    _check(REGISTERED, _committed())


def test_every_file_the_page_links_to_exists():
    text = PAGE.read_text(encoding="utf-8")
    targets = re.findall(r"\]\(((?!https?://|#)[^)]+)\)", text)
    assert len(targets) > 4 * len(examples())
    missing = [t for t in targets if not (PAGE.parent / t).exists()]
    assert not missing, f"{missing[:5]}: {REGENERATE}"
    anchors = re.findall(r"\]\(#([^)]+)\)", text)
    assert sorted(anchors) == sorted(e.name for e in examples())
    linked = {(PAGE.parent / t).resolve() for t in targets}
    orphans = [str(p.relative_to(ROOT)) for p in FOLDER.rglob("*") if p.is_file() and p.resolve() not in linked]
    assert not orphans, f"{orphans[:5]} are linked from no entry: {REGENERATE}"


# -------------------------------------------------------------------------------------------- the command
def test_help_names_the_options(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["gallery", "--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    for option in ("--out", "--markdown", "--only", "--memory", "--sizes", "--json", "--no-progress"):
        assert option in out


def test_json_lists_the_entries_their_ranges_and_the_files(tmp_path, capsys):
    out = tmp_path / "g"
    assert main(["gallery", "--out", str(out), "--only", "matmul,cross_entropy", "--memory", "2^10..2^12",
                 "--sizes", "a=64,b=64,c=64,n=64,v=256", "--json", "--no-progress"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [e["name"] for e in data["entries"]] == ["matmul", "cross_entropy"]
    matmul = data["entries"][0]
    assert matmul["sizes"] == {"a": 64, "b": 64, "c": 64} and matmul["memories"] == [1024, 2048, 4096]
    assert [g["kind"] for g in matmul["ranges"]] == ["fully fused"] and matmul["bound"].startswith("Hong-Kung")
    # an independent route: nc.derive at one memory gives the same H* as the gallery's row
    alone = nc.derive(nc.library.matmul(), memory=2048, sizes={"a": 64, "b": 64, "c": 64})
    assert next(r["H"] for r in matmul["rows"] if r["M"] == 2048) == alone.H
    assert data["entries"][1]["bound"] is None and data["markdown"] == str(out) + ".md"
    page = (tmp_path / "g.md").read_text()
    assert "Lower bound: none known beyond the compulsory transfers" in page and "## cross_entropy" in page
    for name in ("matmul", "cross_entropy"):
        for f in ("written.png", "derived.png", "curves.png", "pseudocode-A.txt"):
            assert (out / name / f).stat().st_size > 100
    assert "stream b" in (out / "matmul" / "pseudocode-A.txt").read_text()


def test_a_rebuild_removes_what_it_no_longer_writes(tmp_path, monkeypatch):
    out = tmp_path / "g"
    (out / "gone").mkdir(parents=True)
    (out / "gone" / "curves.png").write_bytes(b"old")
    (out / "mine").mkdir()
    (out / "mine" / "notes.txt").write_text("not the gallery's")
    from napkin_cat.cli.gallery import build
    build(str(out), only=["cross_entropy"], memories=[2 ** 10, 2 ** 11], progress=False)
    (out / "cross_entropy" / "pseudocode-Z.txt").write_text("a range of an older build")
    assert (out / "gone").exists()                    # --only builds some entries: the others stay
    import napkin_cat.cli.gallery as gallery
    monkeypatch.setattr(gallery, "examples", lambda: [gallery.example("cross_entropy")])   # "gone" left the list
    build(str(out), memories=[2 ** 10, 2 ** 11], progress=False)
    assert not (out / "gone").exists() and (out / "mine" / "notes.txt").exists()
    assert not (out / "cross_entropy" / "pseudocode-Z.txt").exists()
    assert (out / "cross_entropy" / "pseudocode-A.txt").exists()


def test_text_output_prints_one_line_per_entry_and_the_time(tmp_path, capsys):
    assert main(["gallery", "--out", str(tmp_path / "g"), "--only", "cross_entropy", "--memory", "2^10..2^11",
                 "--markdown", str(tmp_path / "page.md"), "--no-progress"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("cross_entropy: ") and "variant(s)" in lines[0]
    assert re.match(r"gallery: 1 entries in \d+ s → .*page\.md", lines[-1])


BAD = [
    (["--only", "resnet"], "no gallery entry 'resnet'"),
    (["--memory", "2^12"], "give a range"),
    (["--memory", "2^x..2^4"], "malformed --memory"),
    (["--sizes", "q=0"], "malformed --sizes"),
    (["--only", "matmul", "--sizes", "zz=4"], "an axis of no entry built"),
    (["--markdown", "page.txt"], "is a Markdown file"),
    (["--format", "pdf"], "invalid choice: 'pdf'"),
]


@pytest.mark.parametrize("argv, message", BAD, ids=[b[1][:20] for b in BAD])
def test_bad_input_is_one_line_and_status_2(argv, message, tmp_path, capsys):
    assert main(["gallery", "--out", str(tmp_path / "g"), "--no-progress", *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("napkin: error: ") and message in err, err
