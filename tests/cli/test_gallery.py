"""``napkin gallery``: its command line (help, JSON, one-line errors), and ``docs/gallery.md`` is not stale.

Staleness is checked in four ways, none of which redraws the gallery:

* every entry (the library's algorithms, then the registered examples) is on the page, in order, with the
  fingerprint of what it is computed from (the diagram's JSON, sizes, memories): an algorithm added, removed
  or changed is caught for every entry, in well under a second;
* the page records the fingerprint of the code that computed it (``code_fingerprint``: the packages that build,
  rewrite, derive, cost, plan and draw an entry, and the rule books' packages, comments and docstrings left
  out): a change to the search (or any of them) fails the test for the expensive entries too, naming the
  packages that changed;
* the cheapest entries (fewest boxes first, until a time budget is spent) and one registered example are
  *recomputed* (the search, the plans) and their sections and pseudocode files must be byte-equal to the
  committed ones: a change of the search, the cost functor or the plan printer is caught;
* every picture and file the page links to exists.

Regenerate with ``napkin gallery --out docs/gallery``: one process, 172 s and 176 s of CPU in two runs (user +
system, 21 entries, /usr/bin/time), so about three minutes on an idle core; the pictures and pseudocode it
rewrites are byte-equal where nothing they show changed (all of them were, in both runs), so its diff is what
changed.
"""
from __future__ import annotations

import importlib
import json
import pathlib
import re
import time

import pytest

import napkin_cat as nc
from napkin_cat.cli import main
from napkin_cat.cli.gallery import compute, examples, sections
from napkin_cat.cli.gallery.build import code_fingerprint, code_sources, code_text, file_names, fingerprint
from napkin_cat.cli.gallery.examples import sizes_of
from napkin_cat.cli.gallery.page import code_of, section
from napkin_cat.cli.inputs import LIBRARY

ROOT = pathlib.Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "gallery.md"
FOLDER = ROOT / "docs" / "gallery"
#: the module (``napkin_cat.cli.gallery.build``; the package's ``build`` is the function that builds the gallery)
gallery_build = importlib.import_module("napkin_cat.cli.gallery.build")
REGENERATE = ("stale: regenerate with `napkin gallery --out docs/gallery` (about three minutes) and commit "
              "docs/gallery.md and docs/gallery/")
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


def test_the_page_was_computed_by_the_current_code():
    recorded = code_of(PAGE.read_text(encoding="utf-8"))
    assert recorded is not None, f"the page records no code fingerprint: {REGENERATE}"
    now = code_fingerprint()
    changed = sorted(k for k in set(now) | set(recorded) if k != "all" and now.get(k) != recorded.get(k))
    assert recorded == now, f"the code of {', '.join(changed)} changed since the page was computed: {REGENERATE}"


def test_the_code_fingerprint_follows_the_code_and_not_its_prose():
    f = "def f(x):\n    \"\"\"Twice x.\"\"\"\n    return 2 * x   # doubled\n"
    assert code_text(f) == "def f(x):\n    return 2 * x"
    assert code_text(f) == code_text(f.replace("Twice x.", "Double.").replace("# doubled", "# times two\n\n"))
    assert code_text(f) != code_text(f.replace("2 * x", "3 * x"))
    # a '#' inside a string is code, and so is a string that is not the first statement of its body
    assert code_text("s = 'a # b'  # c") == "s = 'a # b'"
    assert "'kept'" in code_text("def g():\n    y = 1\n    'kept'\n")


def test_a_change_to_the_search_changes_the_code_fingerprint(tmp_path, monkeypatch):
    """On a copy of the package: a statement added to the search changes its part (and the whole); a comment
    does not; the rule books' package is covered too."""
    import shutil
    shutil.copytree(gallery_build.PACKAGE, tmp_path / "napkin_cat", ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(gallery_build, "PACKAGE", tmp_path / "napkin_cat")
    parts = code_sources()
    assert "derivation.py" in parts["search"] and "partition.py" in parts["rewrites"]
    before = code_fingerprint()
    search = tmp_path / "napkin_cat" / "search" / "derivation.py"
    search.write_text(search.read_text(encoding="utf-8") + "\n# a comment only\n", encoding="utf-8")
    assert code_fingerprint() == before
    search.write_text(search.read_text(encoding="utf-8") + "\nSEARCH_CHANGED = True\n", encoding="utf-8")
    after = code_fingerprint()
    assert {k for k in before if before[k] != after[k]} == {"search", "all"}


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
