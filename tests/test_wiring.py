"""One traversal: what swap, copy and discard do to values is written in ``syntax/wiring.py`` only.

Every functor (numpy, cost, weaving, renaming, netlists, plans, the values view) walks a diagram with
:func:`napkin_cat.syntax.wiring.traverse` and asks only what a computing box does.  This test reads
every module of ``napkin_cat`` with ``ast`` and fails where a module branches on the *kind* of a
structural box itself:

* it uses the result of ``is_structural(box)`` other than as the predicate ``is None`` / ``is not None``
  (``kind = is_structural(box)``, ``is_structural(box) == "swap"``, ``in ("copy", ...)``);
* it tests ``isinstance`` against discopy's structural classes (``Swap``, ``Copy``, ``Discard``,
  ``Merge``, imported from the adapter or discopy, or ``markov.Swap``).

Exempt are the modules whose job is the encoding of the generators themselves, each with its reason
(``ENCODERS``).  Run on main before the traversal was shared, the test failed with::

    napkin_cat/semantics/evaluate.py:35 branches on is_structural(...): ...
    napkin_cat/syntax/relabel.py:41 branches on is_structural(...): ...
    napkin_cat/syntax/weave.py:164 branches on is_structural(...): ...
    napkin_cat/rewriting/netlist.py:94 branches on is_structural(...): ...
"""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "napkin_cat"

#: module → why it may look at the kind of a structural box.
ENCODERS = {
    "syntax/adapter.py": "defines the generators (discopy's boxes)",
    "syntax/flat.py": "defines is_structural itself (the kind of each of discopy's structural boxes)",
    "syntax/wiring.py": "the one traversal: route (what each generator does to values), retype, traverse",
    "io/serial.py": "writes and reads the JSON form of each generator ({'type': 'swap', ...})",
    "render/layout.py": "draws each generator its own way (a swap's wires cross, a copy forks at a dot, "
                        "a discard ends in a dot, a merge joins); the routing of the wires is wiring.route",
}
STRUCTURAL = {"Swap", "Copy", "Discard", "Merge"}


def _parents(tree):
    parent = {}
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            parent[child] = node
    return parent


def _is_none_test(call, parent) -> bool:
    """``is_structural(b) is None`` / ``is not None``: a predicate (computes or not), not a kind."""
    up = parent.get(call)
    return (isinstance(up, ast.Compare) and up.left is call and len(up.ops) == 1
            and isinstance(up.ops[0], (ast.Is, ast.IsNot))
            and isinstance(up.comparators[0], ast.Constant) and up.comparators[0].value is None)


def branches_on_kinds(source: str, where: str) -> list:
    """The places in ``source`` that branch on the kind of a structural box (see module docstring)."""
    tree = ast.parse(source)
    parent = _parents(tree)
    structural_names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and (
                node.module == "napkin_cat.syntax.adapter" or node.module.startswith("discopy")):
            structural_names |= {a.asname or a.name for a in node.names if a.name in STRUCTURAL}
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        fn = node.func
        name = fn.id if isinstance(fn, ast.Name) else fn.attr if isinstance(fn, ast.Attribute) else None
        if name == "is_structural" and not _is_none_test(node, parent):
            found.append((node.lineno, f"{where}:{node.lineno} branches on is_structural(...): a kind of wiring "
                                       "is interpreted here; use napkin_cat.syntax.wiring (traverse, route, "
                                       "retype, computes)"))
        if name == "isinstance" and len(node.args) == 2:
            classes = node.args[1].elts if isinstance(node.args[1], ast.Tuple) else [node.args[1]]
            for c in classes:
                if (isinstance(c, ast.Name) and c.id in structural_names) or (
                        isinstance(c, ast.Attribute) and c.attr in STRUCTURAL
                        and isinstance(c.value, ast.Name) and c.value.id == "markov"):
                    found.append((node.lineno, f"{where}:{node.lineno} tests isinstance against a structural "
                                               f"box ({ast.unparse(c)}); use napkin_cat.syntax.wiring"))
    return [message for _, message in sorted(found)]


def violations(package: Path = PACKAGE) -> list:
    found = []
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package).as_posix()
        if rel in ENCODERS:
            continue
        found += branches_on_kinds(path.read_text(), f"napkin_cat/{rel}")
    return found


def test_only_the_wiring_and_the_encoders_branch_on_structural_kinds():
    found = violations()
    assert not found, "\n".join(found)


def test_every_encoder_exists_and_uses_the_kinds():
    """An exemption that is no longer needed is removed (else the list hides a module from the law)."""
    for rel, why in ENCODERS.items():
        path = PACKAGE / rel
        assert path.exists(), f"{rel} is exempt ({why}) but does not exist"
        assert "is_structural" in path.read_text() or "markov" in path.read_text(), (
            f"{rel} no longer looks at structural kinds: drop it from ENCODERS")


def test_the_checker_catches_a_module_that_routes_values_itself():
    planted = '''
from napkin_cat.syntax.adapter import Copy, is_structural, layers
from napkin_cat.plan.ir import Copy as Statement

def my_functor(diagram, values):
    for offset, box in layers(diagram):
        kind = is_structural(box)
        if kind == "swap":
            pass
        if is_structural(box) in ("copy", "discard"):
            pass
        if isinstance(box, Copy):
            pass
        if isinstance(box, Statement) or is_structural(box) is None:
            pass
'''
    found = branches_on_kinds(planted, "planted.py")
    assert [f.split(" ")[0] for f in found] == ["planted.py:7", "planted.py:10", "planted.py:12"], found
