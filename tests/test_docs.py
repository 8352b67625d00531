"""The documentation cannot rot: every Python block of the pages in docs/ runs, and the API reference
builds from the docstrings without a warning and documents the whole public surface."""
from __future__ import annotations

import importlib.util
import os
import pathlib
import re
import subprocess
import sys

import pytest

import napkin_cat as nc
from napkin_cat.rewriting import registry
import rewrites

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PAGES = sorted(p for p in DOCS.glob("*.md") if "```python" in p.read_text(encoding="utf-8"))
BLOCK = re.compile(r"^```python\n(.*?)^```$", re.S | re.M)


def python_blocks(page: pathlib.Path) -> list[tuple[int, str]]:
    """``(line number, source)`` of every ```python block of a Markdown page."""
    text = page.read_text(encoding="utf-8")
    return [(text[:m.start()].count("\n") + 2, m.group(1)) for m in BLOCK.finditer(text)]


def test_the_how_to_pages_are_there_and_hold_code():
    names = {p.name for p in PAGES}
    assert {"adding-a-primitive.md", "adding-a-rule.md"} <= names, names
    assert all(len(python_blocks(p)) >= 5 for p in PAGES if p.name.startswith("adding-"))


@pytest.fixture
def scratch_registries():
    """Kinds and rule books a page declares are removed afterwards (other tests see the built-ins only)."""
    kinds, books = set(nc.engine.KINDS), set(registry.rulebooks())   # entry points loaded first: they stay registered
    yield
    for name in set(nc.engine.KINDS) - kinds:
        del nc.engine.KINDS[name]
    for name in set(registry.BOOKS) - books:
        del registry.BOOKS[name]


# the rule page marks its proofs with `proves`, which proofs/conftest.py registers for proofs/ only
@pytest.mark.filterwarnings("ignore:Unknown pytest.mark.proves")
@pytest.mark.parametrize("page", PAGES, ids=[p.stem for p in PAGES])
def test_page_code_runs(page, tmp_path, monkeypatch, scratch_registries):
    """Run the page's blocks in order in one namespace (in a scratch folder), then every ``test_*``
    function the page defines; a failure names the block by its line in the page."""
    if "import torch" in page.read_text(encoding="utf-8") and importlib.util.find_spec("torch") is None:
        pytest.skip(f"{page.name} uses torch, the `kernels` extra (pip install 'napkin-cat[kernels]')")
    monkeypatch.chdir(tmp_path)
    namespace = {"__name__": f"docs_{page.stem.replace('-', '_')}"}
    for line, source in python_blocks(page):
        code = compile("\n" * (line - 1) + source, str(page), "exec")   # tracebacks point into the page
        exec(code, namespace)
    tests = [f for name, f in namespace.items() if name.startswith("test_") and callable(f)]
    for test in tests:
        test()
    assert tests or "def test_" not in page.read_text(encoding="utf-8")


def test_api_reference_builds_and_documents_the_public_surface(tmp_path):
    """``python docs/api.py OUT`` (pdoc, warnings are errors) writes a page per layer and module, and the
    front page documents every name of ``napkin_cat.__all__`` and the rule library's ``__all__``."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    run = subprocess.run([sys.executable, str(DOCS / "api.py"), str(tmp_path)], capture_output=True, text=True,
                         env=env, timeout=300, stdin=subprocess.DEVNULL)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "Warn" not in run.stderr, run.stderr[-3000:]
    pages = {p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*.html")}
    layers = {"syntax", "algorithms", "library", "semantics", "cost", "rewriting", "search", "plan", "codegen",
              "hardware", "render", "io"}
    expected = {"index.html", "napkin_cat.html", "rewrites.html", "napkin_cat/cli.html", "napkin_cat/errors.html",
                "napkin_cat/cost/hierarchy.html", "napkin_cat/render/tikz.html", "rewrites/derive.html"}
    expected |= {f"napkin_cat/{layer}.html" for layer in layers}
    assert expected <= pages, sorted(expected - pages)
    # every module of the packages has its page
    modules = {p.relative_to(ROOT).with_suffix(".html").as_posix() for pkg in ("napkin_cat", "rewrites")
               for p in (ROOT / pkg).rglob("*.py") if p.name not in ("__init__.py", "__main__.py")}
    assert modules <= pages, sorted(modules - pages)

    def documented(page):
        html = (tmp_path / page).read_text(encoding="utf-8")
        return set(re.findall(r'<section id="([^"]+)"', html)), set(re.findall(r'href="([^"#]+)\.html"', html))

    sections, links = documented("napkin_cat.html")
    missing = [n for n in nc.__all__ if n not in sections and f"napkin_cat/{n}" not in links]
    assert not missing, f"napkin_cat.html does not document {missing}"
    sections, links = documented("rewrites.html")
    missing = [n for n in rewrites.__all__ if n not in sections and f"rewrites/{n}" not in links]
    assert not missing, f"rewrites.html does not document {missing}"


def test_the_index_links_every_page_and_notebook():
    index = (DOCS / "index.md").read_text(encoding="utf-8")
    linked = set(re.findall(r"\]\(([^)#]+)\)", index))
    pages = {p.name for p in DOCS.glob("*.md")} - {"index.md"}
    notebooks = {f"../notebooks/{p.name}" for p in (ROOT / "notebooks").glob("*.ipynb")}
    assert pages | notebooks <= linked, sorted((pages | notebooks) - linked)
    assert all((DOCS / target).exists() for target in linked), [t for t in linked if not (DOCS / t).exists()]
