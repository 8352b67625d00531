"""The code a stored derivation is keyed on (:mod:`napkin_cat.torch.searched_code`): the modules a search and the
kernels' printers run, as code, so that a docstring or a comment changed keeps every stored derivation, and a
change of code they run throws them away.

Before, the key hashed every ``.py`` file of ``napkin_cat`` and ``rewrites`` byte by byte: a docstring changed
anywhere (or a file of the CLI, of the paper's tables) was a new key for every stored derivation.

Second routes: (1) the files whose functions run during a derivation, a plan and a printed C kernel, recorded by
``sys.setprofile``, all lie in the fingerprinted set; (2) copies of the packages edited on disk, in and outside the
set, docstring and code, and the hash read again.

Mutations caught: ``without_docstrings`` returning the tree as it is (the docstring edit changes the key);
``code_run`` returning every file of the packages (the edit of ``cli/commands.py`` changes it)."""
from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="torch is the `kernels` extra (pip install 'napkin-cat[kernels]')")

import napkin_cat as nc  # noqa: E402
from napkin_cat.codegen.c import c as c_kernel  # noqa: E402
from napkin_cat.rewriting.registry import rulebook  # noqa: E402
from napkin_cat.torch import searched_code  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("napkin_cat", "rewrites")


def entries_of(book) -> tuple:
    rules = {rule.rhs.__module__ for rule in book.rules}
    return tuple(sorted({*searched_code.ENTRIES, *rules, *(m.split(".")[0] for m in rules)}))


def test_every_file_whose_code_runs_in_a_search_and_a_print_is_in_the_set():
    ran = set()

    def seen(frame, event, arg):
        if event == "call":
            ran.add(frame.f_code.co_filename)

    sizes = {"a": 32, "b": 24, "c": 16}
    sys.setprofile(seen)
    try:
        d = nc.derive(nc.library.matmul(), memory=256, sizes=sizes)
        c_kernel(nc.plan(d.diagram, {**sizes, **d.optimum.exact_sizes})).source
    finally:
        sys.setprofile(None)
    ours = {Path(f).resolve() for f in ran if any(Path(f).resolve().is_relative_to(ROOT / p) for p in PACKAGES)}
    files = set(searched_code.code_run(entries_of(rulebook())))
    assert len(ours) > 40 and ours <= files, sorted(map(str, ours - files))


@pytest.fixture(scope="module")
def copies(tmp_path_factory):
    base = tmp_path_factory.mktemp("code")
    for p in PACKAGES:
        shutil.copytree(ROOT / p, base / p, ignore=shutil.ignore_patterns("__pycache__"))
    return {p: base / p for p in PACKAGES}


@pytest.fixture(scope="module")
def facts_folder(tmp_path_factory):
    """A cache folder of this module's own (the files' facts parsed once for its tests)."""
    return tmp_path_factory.mktemp("cache")


def key(roots) -> str:
    return searched_code.code_hash(searched_code.code_run(entries_of(rulebook()), roots), roots)


@pytest.mark.parametrize("path, old, new, kept", [
    ("napkin_cat/search/paths.py", '"""Kernel splits as', '"""Kernel splits (edited) as', True),
    ("napkin_cat/search/paths.py", "import math\n", "import math  # a comment\n\n", True),
    ("napkin_cat/cli/commands.py", "\nimport", "\nEDITED = 1\nimport", True),
    ("napkin_cat/search/paths.py", "\nimport math\n", "\nimport math\nEDITED = 1\n", False),
    ("rewrites/softmax.py", "\nimport", "\nEDITED = 1\nimport", False),
    ("napkin_cat/syntax/ops.py", "\nimport", "\nEDITED = 1\nimport", False),
])
def test_a_docstring_comment_or_file_outside_keeps_the_key_and_code_inside_changes_it(copies, path, old, new, kept):
    before = key(copies)
    file = copies[path.split("/")[0]].parent / path
    text = file.read_text()
    assert old in text
    file.write_text(text.replace(old, new, 1))
    try:
        assert (key(copies) == before) is kept
    finally:
        file.write_text(text)
    assert key(copies) == before


def test_a_process_whose_files_are_unchanged_parses_none_of_them(tmp_path, monkeypatch):
    monkeypatch.setenv("NAPKIN_CACHE", str(tmp_path))
    entries = entries_of(rulebook())
    monkeypatch.setattr(searched_code, "MEMO", {})
    searched_code.code_fingerprint.cache_clear()
    first = searched_code.code_fingerprint(entries)
    assert searched_code.memo_file().is_file()
    monkeypatch.setattr(searched_code, "MEMO", {})           # a new process: the memo read back from the file
    searched_code.code_fingerprint.cache_clear()
    monkeypatch.setattr(searched_code.ast, "parse", lambda *a, **k: pytest.fail("parsed again"))
    assert searched_code.code_fingerprint(entries) == first
    searched_code.code_fingerprint.cache_clear()


@pytest.mark.parametrize("path, old, new, kept", [
    ("napkin_cat/search/paths.py", "\nimport math\n", "\nimport math\nEDITED = 1\n", False),
    ("rewrites/softmax.py", "\nimport", "\nEDITED = 1\nimport", False),
    ("napkin_cat/search/paths.py", '"""Kernel splits as', '"""Kernel splits (edited) as', True),
])
def test_a_tree_seen_before_is_read_as_bytes_and_any_edit_is_seen(copies, facts_folder, monkeypatch, path, old, new,
                                                                  kept):
    """The code hash kept by tree digest (a process that saw these files reads their bytes and parses none) is the
    one the closure gives afresh, before and after an edit of a copy of the packages (the second route:
    :func:`key`, every file parsed); an edit of code in the closure changes it, a docstring or a file outside
    keeps it.  Mutation caught: the tree digest of the files' paths without their bytes (the edit is not seen)."""
    monkeypatch.setenv("NAPKIN_CACHE", str(facts_folder))
    entries = entries_of(rulebook())

    def fresh_process():
        monkeypatch.setattr(searched_code, "MEMO", {})
        searched_code.load_memo()

    fresh_process()
    before = searched_code.tree_code_hash(entries, copies)
    searched_code.keep_memo()
    fresh_process()
    with monkeypatch.context() as m:
        m.setattr(searched_code.ast, "parse", lambda *a, **k: pytest.fail("parsed again"))
        assert searched_code.tree_code_hash(entries, copies) == before
    file = copies[path.split("/")[0]].parent / path
    text = file.read_text()
    file.write_text(text.replace(old, new, 1))
    try:
        fresh_process()
        after = searched_code.tree_code_hash(entries, copies)
        monkeypatch.setattr(searched_code, "MEMO", {})
        assert after == key(copies)
        assert (after == before) is kept
    finally:
        file.write_text(text)
    fresh_process()
    assert searched_code.tree_code_hash(entries, copies) == before
