"""The package's layers: every import goes down, and no import circle exists.

The layers, lowest first (``../shared/design/architecture.md``, "Layout")::

    errors → syntax → algorithms, library → semantics, cost → rewriting → search, plan
           → codegen, hardware → render, io → cli and the package face (napkin_cat/__init__.py, engine.py)

A module may import from its own layer or below.  The imports are read with ``ast``
from the source (function-level and ``TYPE_CHECKING`` imports included: a lazy import
is still a dependency), so the test sees what the interpreter would import.  The theorem
library ``rewrites`` sits above the package: nothing in ``napkin_cat`` imports it.

Two more rules keep modules whole concepts (issue 32, item 5): no module takes a ``_private`` name
from another (``from X import _name`` or ``X._name``: what another module needs is public in its
module, or the concept moves), and no function imports the package's own modules (``napkin_cat``,
``rewrites``) except the few in :data:`LOCAL_IMPORTS_ALLOWED`, each with its reason (only an optional
dependency such as torch or triton behind its adapter module is one; an import circle is debt).

Run on the tree before the move to subpackages, this test failed with::

    napkin_cat/adapter.py is in no layer: put it in one of the layer folders (...)
    ...
    import circle: napkin_cat.bubbles → napkin_cat.evaluate → napkin_cat.bubbles
    import circle: napkin_cat.obligation → napkin_cat.rewrite → napkin_cat.obligation
"""
from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "napkin_cat"

#: folder (or top-level module) → layer rank; a module imports only ranks ≤ its own.
LAYERS = {
    "errors": 0, "lazy": 0,
    "syntax": 1,
    "algorithms": 2, "library": 2, "autodiff": 2,
    "semantics": 3, "cost": 3,
    "rewriting": 4,
    "search": 5, "plan": 5,
    "codegen": 6, "hardware": 6,
    "render": 7, "io": 7, "torch": 7, "distributed": 7,
    "cli": 8, "paper": 8, "testing": 8, "__init__": 8, "engine": 8,
}

#: the layer keys that are no layer folder of their own: the top-level modules (errors, lazy, engine), the package's
#: face (__init__) and the command line (cli, layer 8 like the face); the others are folders with a docstring
#: saying what they may import, mirrored under tests/
TOP_LEVEL = ("cli", "__init__", "errors", "lazy", "engine")

#: function-local imports of the package's own modules that stay: ``(file, module imported) → why``.  Empty: the
#: 95 there were (issue 32, item 5) all moved to module level, no circle resulting.
LOCAL_IMPORTS_ALLOWED: dict[tuple[str, str], str] = {}
OURS = (PACKAGE, "rewrites")


def module_name(path: Path, root: Path) -> str:
    rel = path.relative_to(root).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts = parts[:-1]
    return ".".join(parts)


def layer_of(module: str) -> str | None:
    """The layer key of ``napkin_cat.<key>...``; the bare package is its face, ``__init__``."""
    parts = module.split(".")
    if parts == [PACKAGE]:
        return "__init__"
    return parts[1] if len(parts) > 1 and parts[1] in LAYERS else None


def imports_of(path: Path, modules: set) -> list[tuple[int, str]]:
    """``(line, module)`` for every napkin_cat/rewrites module imported by the file, anywhere in it."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for a in node.names:
                sub = f"{node.module}.{a.name}"
                out.append((node.lineno, sub if sub in modules else node.module))
    return [(line, m) for line, m in out if m.split(".")[0] in (PACKAGE, "rewrites")]


def violations(root: Path = ROOT) -> list[str]:
    """Every upward import, import of ``rewrites``, module outside the layers, and import circle."""
    files = sorted((root / PACKAGE).rglob("*.py"))
    modules = {module_name(p, root) for p in files}
    graph = nx.DiGraph()
    problems = []
    for path in files:
        me = module_name(path, root)
        graph.add_node(me)
        rel = path.relative_to(root)
        mine = layer_of(me)
        if mine is None:
            problems.append(f"{rel} is in no layer: put it in one of the layer folders "
                            f"{sorted(k for k in LAYERS if k not in TOP_LEVEL)}")
        for line, target in sorted(set(imports_of(path, modules))):
            if target.split(".")[0] == "rewrites":
                problems.append(f"{rel}:{line} imports {target}: the theorem library sits above the package; "
                                "find rules through napkin_cat.rewriting.registry instead")
                continue
            if target != me:
                graph.add_edge(me, target, line=line)
            theirs = layer_of(target)
            if mine is None or theirs is None:
                continue  # reported where the module is defined
            if LAYERS[theirs] > LAYERS[mine]:
                problems.append(f"{rel}:{line} imports {target} ({theirs}, layer {LAYERS[theirs]}) from "
                                f"{mine} (layer {LAYERS[mine]}): imports must go down")
    for cycle in nx.simple_cycles(graph):
        if len(cycle) > 1:
            ring = cycle + [cycle[0]]
            problems.append("import circle: " + " → ".join(ring))
    return problems


def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _ours(module: str | None) -> bool:
    return bool(module) and module.split(".")[0] in OURS


def _sources(root: Path) -> list[Path]:
    return sorted(p for top in OURS if (root / top).is_dir() for p in (root / top).rglob("*.py"))


def private_imports(root: Path = ROOT) -> list[str]:
    """Every ``from X import _name`` of a napkin_cat/rewrites module ``X``, and every ``y._name`` where ``y`` was
    imported from one of them (a module, or anything else it defines), across the package and ``rewrites``."""
    problems = []
    for path in _sources(root):
        rel = path.relative_to(root)
        bound = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and _ours(node.module):
                for a in node.names:
                    bound.add(a.asname or a.name)
                    if _is_private(a.name):
                        problems.append(f"{rel}:{node.lineno} imports the private {a.name} from {node.module}: "
                                        "make it public in its module (or move the concept to where it is used)")
            elif isinstance(node, ast.Import):
                bound |= {a.asname or a.name.split(".")[0] for a in node.names if _ours(a.name)}
            elif (isinstance(node, ast.Attribute) and _is_private(node.attr) and isinstance(node.value, ast.Name)
                  and node.value.id in bound):
                problems.append(f"{rel}:{node.lineno} reads the private {node.value.id}.{node.attr} of another "
                                "module: make it public there (or move the concept to where it is used)")
    return problems


def local_imports(root: Path = ROOT, allowed: dict = LOCAL_IMPORTS_ALLOWED) -> list[str]:
    """Every import of a napkin_cat/rewrites module inside a function not in ``allowed``, and every entry of
    ``allowed`` that matches no such import (paid debt leaves the list)."""
    problems, seen = [], set()
    for path in _sources(root):
        rel = path.relative_to(root).as_posix()
        tree = ast.parse(path.read_text(), str(path))
        functions = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
        for fn in functions:
            for node in ast.walk(fn):
                if isinstance(node, ast.ImportFrom) and node.level == 0:
                    modules = [node.module]
                elif isinstance(node, ast.Import):
                    modules = [a.name for a in node.names]
                else:
                    continue
                for module in filter(_ours, modules):
                    if (rel, module) in allowed:
                        seen.add((rel, module))
                        continue
                    problems.append(f"{rel}:{node.lineno} imports {module} inside {fn.name}(): import it at module "
                                    "level (a circle is mended by moving the concept; an optional dependency such as "
                                    "torch is listed in LOCAL_IMPORTS_ALLOWED with its reason)")
    problems += [f"LOCAL_IMPORTS_ALLOWED lists {key}, which no function imports any more: remove the entry"
                 for key in sorted(set(allowed) - seen)]
    return sorted(set(problems))


def test_no_module_takes_a_private_name_from_another():
    found = private_imports()
    assert not found, "private names across modules:\n" + "\n".join(found)


def test_no_function_imports_the_package_s_own_modules():
    found = local_imports()
    assert not found, "function-local imports of the package:\n" + "\n".join(found)


def test_the_checkers_catch_a_private_name_and_a_function_local_import(tmp_path):
    for top in OURS:
        (tmp_path / top).mkdir()
    (tmp_path / PACKAGE / "a.py").write_text("import napkin_cat.b as bee\n"
                                             "from napkin_cat.b import _hidden, __version__, public\n"
                                             "x = bee._inner + bee.__name__.__len__()\n"
                                             "def f():\n    from napkin_cat import c\n    import numpy\n"
                                             "class K:\n    def g(self):\n        import rewrites.r\n"
                                             "def h():\n    from napkin_cat.torchy import op\n")
    (tmp_path / "rewrites" / "r.py").write_text("from rewrites.s import _rule\n")
    private = private_imports(tmp_path)
    assert any("napkin_cat/a.py:2 imports the private _hidden from napkin_cat.b" in p for p in private), private
    assert any("napkin_cat/a.py:3 reads the private bee._inner" in p for p in private), private
    assert any("rewrites/r.py:1 imports the private _rule from rewrites.s" in p for p in private), private
    assert len(private) == 3, private   # dunders, public names and third-party modules pass
    allowed = {("napkin_cat/a.py", "napkin_cat.torchy"): "optional dependency: torch",
               ("napkin_cat/z.py", "napkin_cat.gone"): "a circle since mended"}
    local = local_imports(tmp_path, allowed)
    assert any("napkin_cat/a.py:5 imports napkin_cat inside f()" in p for p in local), local
    assert any("napkin_cat/a.py:9 imports rewrites.r inside g()" in p for p in local), local
    assert any("('napkin_cat/z.py', 'napkin_cat.gone'), which no function imports" in p for p in local), local
    assert len(local) == 3, local   # numpy, and the allowed torch adapter, pass


def test_imports_only_go_down_and_no_circle():
    found = violations()
    assert not found, "layering violations:\n" + "\n".join(found)


def test_every_layer_folder_is_a_package_with_a_docstring():
    for key in LAYERS:
        if key in TOP_LEVEL:
            continue
        init = ROOT / PACKAGE / key / "__init__.py"
        assert init.exists(), f"{key}/ has no __init__.py"
        doc = ast.get_docstring(ast.parse(init.read_text()))
        assert doc and "May import" in doc, f"{key}/__init__.py must say what the layer is and what it may import"


def test_the_checker_catches_an_upward_import_and_a_circle(tmp_path):
    pkg = tmp_path / PACKAGE
    for sub in ("syntax", "cost"):
        (pkg / sub).mkdir(parents=True)
        (pkg / sub / "__init__.py").write_text('"""May import: below."""\n')
    (pkg / "__init__.py").write_text("")
    (pkg / "syntax" / "a.py").write_text("def f():\n    from napkin_cat.cost import b\n")
    (pkg / "cost" / "b.py").write_text("from napkin_cat.syntax import a\n")
    (pkg / "flat.py").write_text("import rewrites\n")
    found = violations(tmp_path)
    assert any("syntax/a.py:2 imports napkin_cat.cost.b (cost, layer 3)" in f for f in found), found
    assert any(f.startswith("import circle:") and "napkin_cat.syntax.a" in f for f in found), found
    assert any("flat.py is in no layer" in f for f in found), found


def test_the_public_surface_is_all_and_hides_the_internals():
    import napkin_cat as nc
    assert "evaluate" in nc.__all__ and "cost" in nc.__all__ and "library" in nc.__all__
    for old in ("adapter", "bubbles", "iocost", "weave_box", "netlist", "obligation", "exprjson"):
        assert old not in nc.__all__, old
    for name in nc.__all__:
        assert hasattr(nc, name), f"nc.__all__ names {name!r}, which napkin_cat does not define"


@pytest.mark.parametrize("folder", sorted(k for k in LAYERS if k not in TOP_LEVEL))
def test_tests_mirror_the_package_folders(folder):
    code = ROOT / PACKAGE / folder
    modules = [p for p in code.glob("*.py") if p.name != "__init__.py"]
    if modules:
        assert (ROOT / "tests" / folder).is_dir(), f"tests/{folder}/ is missing: tests mirror napkin_cat/{folder}/"
