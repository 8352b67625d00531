"""The code a stored derivation depends on: the modules a search and the kernels' printers run, as code.

A stored derivation (:mod:`.stored`) is valid while the code that searched it is unchanged.  That code is the
import closure of the entry points: the package's face (``napkin_cat/__init__.py``: it runs at every import and
registers the primitive kinds and their online forms the search reads), :mod:`napkin_cat.torch.kernels` (an op
derives, plans and prints its kernels there) and the module of each rule of the book (``rewrites``), following every
``import`` statement (module level or inside a function, read with ``ast``) into the packages of those entries.
What no entry imports (the CLI, the paper's tables, the test helpers, ``nc.distributed``, torch's export path) does
not run in a search.  Each file counts as its code: its syntax tree with docstrings removed, without positions, so
that a docstring, a comment or a blank line changed keeps every stored derivation (each file parsed once per
content: :data:`MEMO`, kept under the cache root)::

    fingerprint(book) = sha256(each file of code_run(entries of book): its path, ast.dump(tree without docstrings);
                               the versions of LIBRARIES)

A process whose source files are those a process before it saw reads their bytes only, once: the code hash is kept
in :data:`MEMO` under the *tree digest* of the entries' packages (every ``.py`` file under their folders, each by
its path and bytes: a superset of the import closure, so that any file of it edited is another tree digest), and
neither a file is parsed nor a module looked for again (:func:`code_fingerprint`)::

    tree(roots) = sha256(each .py file under the roots, sorted: its path under the roots' parents, sha256(bytes))
    MEMO[entries, tree(roots)] = code_hash(code_run(entries, roots), roots)

>>> from pathlib import Path
>>> files = code_run(("napkin_cat.search.paths",))
>>> any(f.as_posix().endswith("napkin_cat/search/blocks.py") for f in files)
True
>>> any("cli" in f.parts for f in files)
False
>>> code_hash([files[0]]) == code_hash([files[0]])
True
"""
from __future__ import annotations

import ast
import functools
import hashlib
import importlib.util
import json
import os
import sys
import uuid
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from napkin_cat.codegen.kernel import cache_root

#: the libraries whose behaviour a search's answer depends on beside napkin-cat's own code
LIBRARIES = ("discopy", "sympy", "networkx", "numpy")
#: the layout of a file's facts (:func:`facts`) kept under the cache root, one file per Python version (``ast.dump``
#: differs between versions)
FACTS_FORMAT = 1
#: each file's bytes (sha256) → its code hash and the modules it imports, read from the cache root once per process;
#: under ``"trees"``, ``entries | tree digest`` → the code hash (:func:`code_fingerprint`)
MEMO: dict = {}

#: the modules every search runs from, beside the rule book's: the package's face and the ops' deriving module
ENTRIES = ("napkin_cat", "napkin_cat.torch.kernels")
#: the code hashes :data:`MEMO` keeps by tree digest (one per version of the code a cache folder saw), the oldest
#: dropped first
TREES = 32


def package_root(package: str) -> Path | None:
    """The folder of a top-level package (None where it is not found or is a single file)."""
    spec = importlib.util.find_spec(package)
    locations = list(spec.submodule_search_locations or ()) if spec is not None else []
    return Path(locations[0]) if locations else None


def module_file(name: str, roots: dict, present: frozenset | None = None) -> Path | None:
    """The file of module ``name`` under ``roots`` (top-level package → folder), None where it is not there;
    ``present``: the files under the roots (:func:`python_files`), looked up instead of the disk."""
    top, *rest = name.split(".")
    if top not in roots:
        return None
    base = roots[top].joinpath(*rest)
    for path in (base / "__init__.py", base.with_suffix(".py")):
        if path in present if present is not None else path.is_file():
            return path
    return None


def walk(roots: dict) -> list[tuple[str, str]]:
    """Every ``.py`` file under the roots' folders (``__pycache__`` left out) as ``(its path under its root's
    parent, its full path)``, sorted: strings, so that listing a package costs no ``Path`` objects."""
    found = []
    for root in roots.values():
        parent = os.path.dirname(os.fspath(root))
        for folder, subfolders, names in os.walk(root):
            subfolders[:] = [d for d in subfolders if d != "__pycache__"]
            rel = os.path.relpath(folder, parent).replace(os.sep, "/")
            found += [(f"{rel}/{n}", os.path.join(folder, n)) for n in names if n.endswith(".py")]
    return sorted(found)


def python_files(roots: dict) -> list[Path]:
    """Every ``.py`` file under the roots' folders (``__pycache__`` left out), sorted."""
    return sorted(Path(full) for _, full in walk(roots))


def tree_digest(roots: dict) -> str:
    """The hash of the ``.py`` files under the roots by their paths under the roots' parents and their bytes (each
    read once): any byte of any file changed, a file added, removed or renamed, is another digest."""
    h = hashlib.sha256()
    for rel, full in walk(roots):
        with open(full, "rb") as file:
            digest = hashlib.sha256(file.read()).hexdigest()
        h.update(rel.encode() + b"\0" + digest.encode() + b"\0")
    return h.hexdigest()


def relative(path: Path, roots: dict | None) -> str:
    """A file's name under its package's parent folder (its name alone where it is under none of the roots)."""
    parents = [r.parent for r in (roots or {}).values()]
    return next((path.relative_to(p).as_posix() for p in parents if path.is_relative_to(p)), path.name)


def imported(tree: ast.AST) -> set[str]:
    """Every module an ``import`` statement of the tree may name (``from a import b``: ``a`` and ``a.b``)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
    return out


def code_run(entries: tuple, roots: dict | None = None) -> list[Path]:
    """The files of the import closure of ``entries`` (module names) within their top-level packages, sorted;
    ``roots`` maps a top-level package to its folder (by default where Python finds it)."""
    if roots is None:
        roots = {top: root for top in {e.split(".")[0] for e in entries} if (root := package_root(top))}
    present = frozenset(python_files(roots))
    seen, todo = set(), [f for e in entries if (f := module_file(e, roots, present))]
    while todo:
        path = todo.pop()
        if path not in seen:
            seen.add(path)
            todo += [f for name in facts(path)[1] if (f := module_file(name, roots, present)) and f not in seen]
    return sorted(seen)


def without_docstrings(tree: ast.AST) -> ast.AST:
    """The tree with the docstring of the module, each class and each function removed (``pass`` where a body
    was only its docstring)."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value,
                                                                                                      str):
                node.body = node.body[1:] or [ast.Pass()]
    return tree


def memo_file() -> Path:
    """Where :data:`MEMO` is kept: under the cache root, by format and Python version."""
    return cache_root() / "code" / f"facts-{FACTS_FORMAT}-py{sys.version_info[0]}.{sys.version_info[1]}.json"


def facts(path: Path) -> tuple:
    """``(code hash, modules imported)`` of a file: the hash of its tree without docstrings and positions, and
    :func:`imported`; parsed once per content (:data:`MEMO`), so that a process whose files are unchanged reads
    their bytes only (parsing the package takes seconds)."""
    data = path.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    load_memo()
    found = MEMO.get(digest)
    if found is None:
        tree = ast.parse(data, str(path))
        names = sorted(imported(tree))
        found = MEMO[digest] = [hashlib.sha256(ast.dump(without_docstrings(tree)).encode()).hexdigest(), names]
        MEMO["changed"] = True
    return found[0], tuple(found[1])


def load_memo() -> None:
    """:data:`MEMO` read from :func:`memo_file` where this process has not read it yet (none or unreadable: empty)."""
    if not MEMO:
        try:
            found = json.loads(memo_file().read_text())
            if isinstance(found, dict) and found.get("format") == FACTS_FORMAT:
                MEMO.update(found)
        except (OSError, ValueError):
            pass
        MEMO.setdefault("format", FACTS_FORMAT)


def keep_memo() -> None:
    """:data:`MEMO` written back where it grew (whole: a temporary file renamed over it); a folder it cannot write
    is no error (the next process parses again)."""
    if MEMO.pop("changed", False):
        path = memo_file()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            part = path.with_suffix(f".{uuid.uuid4().hex}.part")
            part.write_text(json.dumps(MEMO))
            os.replace(part, path)
        except OSError:
            pass


def code_hash(files: list[Path], roots: dict | None = None) -> str:
    """The hash of the files' code (each by its path under its package's parent folder, or its name), docstrings,
    comments and positions not counted."""
    h = hashlib.sha256()
    for path in files:
        h.update(relative(path, roots).encode() + b"\0" + facts(path)[0].encode() + b"\0")
    return h.hexdigest()


def tree_code_hash(entries: tuple, roots: dict) -> str:
    """:func:`code_hash` of :func:`code_run` of ``entries`` under ``roots``, kept in :data:`MEMO` by the roots'
    :func:`tree_digest`: where the tree was seen, its files' bytes are read and hashed, and nothing parsed."""
    load_memo()
    trees = MEMO.setdefault("trees", {})
    at = f"{','.join(entries)}|{tree_digest(roots)}"
    found = trees.get(at)
    if found is None:
        found = code_hash(code_run(entries, roots), roots)
        trees[at] = found
        for old in list(trees)[:-TREES]:
            del trees[old]
        MEMO["changed"] = True
    return found


@functools.lru_cache(maxsize=None)
def code_fingerprint(entries: tuple) -> str:
    """:func:`tree_code_hash` of ``entries`` with Python's package folders, once per process."""
    roots = {top: root for top in {e.split(".")[0] for e in entries} if (root := package_root(top))}
    found = tree_code_hash(entries, roots)
    keep_memo()
    return found


@functools.lru_cache(maxsize=None)
def library_versions() -> tuple:
    """The versions of :data:`LIBRARIES` (``None`` for one not installed), read once per process."""
    out = []
    for lib in LIBRARIES:
        try:
            out.append((lib, version(lib)))
        except PackageNotFoundError:
            out.append((lib, None))
    return tuple(out)


def fingerprint(book) -> str:
    """The code a search with ``book`` runs (:data:`ENTRIES`, the modules of the book's rules' right-hand sides and
    their packages, :func:`code_fingerprint`) and the versions of :data:`LIBRARIES`."""
    rules = {rule.rhs.__module__ for rule in book.rules if getattr(rule.rhs, "__module__", None)}
    packages = {name.split(".")[0] for name in rules}      # (their packages' faces run too: ``rewrites``)
    h = hashlib.sha256(code_fingerprint(tuple(sorted({*ENTRIES, *rules, *packages}))).encode())
    for lib, v in library_versions():
        h.update(f"{lib}=={v}\0".encode() if v is not None else f"{lib} absent\0".encode())
    return h.hexdigest()


__all__ = ["fingerprint", "code_fingerprint", "code_run", "code_hash", "tree_code_hash", "tree_digest",
           "python_files", "without_docstrings", "ENTRIES", "LIBRARIES"]
