"""Build the API reference of napkin_cat and rewrites from their docstrings, with pdoc.

    python docs/api.py OUT_DIR          # then open OUT_DIR/index.html

Every module is documented: the public surface (``napkin_cat``, whose ``__all__`` is what
``import napkin_cat as nc`` offers), each layer package and its modules, and the rule library.  pdoc
follows a package's submodules only when its ``__all__`` names them, and ``napkin_cat.__all__`` names
functions (``nc.cost``, ``nc.draw``), not the layers, so the layers are listed here explicitly, each once.
Exits non-zero if pdoc fails or warns (a docstring that does not render is a build error).
"""
from __future__ import annotations

import ast
import contextlib
import functools
import gc
import inspect
import linecache
import os
import pkgutil
import sys
import types
import warnings
from pathlib import Path

PACKAGES = ("napkin_cat", "rewrites")


def modules() -> list[str]:
    """Every module of the packages, each listed once, in the order pdoc reaches it."""
    import importlib
    names, covered = [], set()
    for top in PACKAGES:
        package = importlib.import_module(top)
        found = [top] + [m.name for m in pkgutil.walk_packages(package.__path__, top + ".")]
        for name in found:
            if name in covered:
                continue
            names.append(name)
            covered |= _reached(name, found)
    return names


def _reached(name: str, found: list[str]) -> set:
    """The modules pdoc documents for the spec ``name``: itself and, recursively, the submodules that
    its ``__all__`` (when it has one) names."""
    import importlib
    out, todo = set(), [name]
    while todo:
        current = todo.pop()
        out.add(current)
        module = importlib.import_module(current)
        names = getattr(module, "__all__", None)
        for child in found:
            parent, _, short = child.rpartition(".")
            if parent == current and (names is None or short in names):
                todo.append(child)
    return out


@contextlib.contextmanager
def collector_paused():
    """Python's cyclic garbage collector paused while the block runs, enabled again after (if it was).

    pdoc makes and drops many small objects (syntax trees: ``inspect.findsource`` parses a class's whole module
    again for every class; template frames) while every module of the library, torch and sympy are live, so each
    collection they trigger walks that whole heap: measured on this repository, one process each, the build's CPU
    37.7 s with the collector and 23.6 s without it (memoising ``ast.parse`` instead saved nothing measurable: the
    parses were cheap, the collections they triggered were not).  The pages are the same bytes either way.

    >>> with collector_paused():
    ...     gc.isenabled()
    False
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def source_spans(filename: str) -> tuple[dict, dict]:
    """The classes and functions of the source file ``filename``, from one parse, each as the lines ``(first, last)``
    (from 1) that :func:`inspect.getsource` returns for it, from its first decorator to the end of its body.
    Classes by qualified name: the first of two classes of one name, as :func:`inspect.findsource` finds it
    (functions' locals named ``f.<locals>.C``); functions (``def`` and ``async def``, methods and nested ones too) by
    ``(first line, name)``: the line a function's code object starts at (``co_firstlineno``: its first decorator,
    where :func:`inspect.findsource` starts) and its name.

    >>> classes, functions = source_spans(inspect.getsourcefile(ast))
    >>> def cut(span):
    ...     return "".join(linecache.getlines(inspect.getsourcefile(ast))[span[0] - 1:span[1]])
    >>> cut(classes["NodeVisitor"]) == inspect.getsource(ast.NodeVisitor)
    True
    >>> code = ast.NodeVisitor.generic_visit.__code__
    >>> cut(functions[code.co_firstlineno, code.co_name]) == inspect.getsource(ast.NodeVisitor.generic_visit)
    True
    """
    classes: dict = {}
    functions: dict = {}

    def visit(node, prefix):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                first = child.decorator_list[0].lineno if child.decorator_list else child.lineno
                if isinstance(child, ast.ClassDef):
                    classes.setdefault(prefix + child.name, (first, child.end_lineno))
                    visit(child, f"{prefix}{child.name}.")
                else:
                    functions.setdefault((first, child.name), (first, child.end_lineno))
                    visit(child, f"{prefix}{child.name}.<locals>.")
            else:
                visit(child, prefix)
    visit(ast.parse("".join(linecache.getlines(filename))), "")
    return classes, functions


@contextlib.contextmanager
def sources_by_module():
    """pdoc reads a class's or function's source through :func:`inspect.getsource`, which (Python < 3.13) parses
    a class's whole module again, and tokenizes the class or function to find its end, for every one: in this
    build, 2,800 parses of the library's modules and 2,500 functions tokenized.  While the block runs, a class's or
    a plain function's source is cut from one parse of its module per file (:func:`source_spans`); anything else,
    or one not found there, goes to pdoc's own reader.  The pages are the same bytes (measured: the build's CPU
    18.6 → 14.7 s in one process with classes cut, ``diff -r`` of the two outputs under one ``PYTHONHASHSEED``
    empty; with functions cut too, every source pdoc asks for equals :func:`inspect.getsource`'s, and the outputs
    are again the same bytes)."""
    import pdoc.doc_ast as doc_ast
    original = getattr(doc_ast, "_get_source", None)
    if original is None or not hasattr(original, "__wrapped__"):      # another pdoc: its own reader, unchanged
        yield
        return
    spans = functools.cache(source_spans)

    def span(obj):
        """``(filename, (first, last))`` of a class or a plain function (unwrapped as inspect does), else None."""
        if isinstance(obj, type):
            filename = inspect.getsourcefile(obj)
            return filename, spans(filename)[0][obj.__qualname__]
        fn = inspect.unwrap(obj)
        if isinstance(fn, types.FunctionType):
            filename, code = inspect.getsourcefile(fn), fn.__code__
            return filename, spans(filename)[1][code.co_firstlineno, code.co_name]
        return None

    @functools.cache
    def source(obj):
        with contextlib.suppress(Exception):
            found = span(obj)
            if found is not None:
                filename, (first, last) = found
                return "".join(linecache.getlines(filename)[first - 1:last])
        return original.__wrapped__(obj)
    doc_ast._get_source = source
    try:
        yield
    finally:
        doc_ast._get_source = original


def build(out_dir) -> list[Path]:
    """Write the HTML reference into ``out_dir``; return the pages written."""
    os.environ.setdefault("PDOC_ALLOW_EXEC", "1")   # discopy imports matplotlib's image comparison, which
    import pdoc                                      # asks for ghostscript's version: let it run
    out = Path(out_dir)
    with warnings.catch_warnings(), collector_paused(), sources_by_module():
        warnings.simplefilter("error")               # an unresolved or broken docstring fails the build
        # no "view source" blocks: the source is in the repository, and highlighting it is most of the build
        pdoc.render.configure(docformat="restructuredtext", footer_text="napkin-cat", show_source=False)
        pdoc.pdoc(*modules(), output_directory=out)
    return sorted(out.rglob("*.html"))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    pages = build(sys.argv[1])
    print(f"{len(pages)} pages in {sys.argv[1]}")
    # the process ends here: what the build left (pdoc's documents of every module, the packages, torch, sympy) moved
    # out of the collector's generations, so that the interpreter's collections as it shuts down do not walk them
    # (measured: the process's CPU 32.9 s with them, 24.7 s without, one process each; the pages already written)
    gc.freeze()
