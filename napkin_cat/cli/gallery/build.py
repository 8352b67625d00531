"""One gallery entry computed: the search's answer over a range of memories, its variants by range, their plans.

Nothing here walks a diagram: :func:`napkin_cat.search.derive` (what ``napkin derive --memory`` runs) gives
the winner per memory with its variant, tiles, transfers, the unfused candidate's transfers and the lower
bound; consecutive memories with the same variant make a *range*; :func:`napkin_cat.plan.program.plan` and
its printer (what ``napkin plan`` prints) give each range's pseudocode.  Pictures are drawn by ``nc.draw``
and the curves by :func:`napkin_cat.render.curves.plot_derivation` (``napkin derive --plot``).

>>> from napkin_cat.cli.gallery.examples import example
>>> r = compute(example("matmul"), memories=[2 ** 10, 2 ** 12], sizes={"a": 64, "b": 64, "c": 64})
>>> [(g.first, g.last, g.kind) for g in r.ranges]
[(1024, 4096, 'fully fused')]
>>> r.rows[0]["H"], r.rows[0]["unfused"], r.bound_name.startswith("Hong-Kung")
(28672, 28672, True)

An entry is a function of its inputs (:func:`fingerprint`: the diagram, sizes, memories) and of the code that
computes it (:func:`code_fingerprint`: the packages in :data:`CODE` and every registered rule book's package,
their comments and docstrings left out), so the page records both and its test fails when either changed::

    code_text("x = 1  # one") == code_text('x = 1')      # a comment or a docstring is not code
"""
from __future__ import annotations

import ast
import hashlib
import io
import json
import os
import time
import tokenize
from dataclasses import dataclass, field
from functools import lru_cache
from importlib.metadata import entry_points
from importlib.util import find_spec
from pathlib import Path

from napkin_cat.algorithms.accumulators import PLUGIN_GROUPS
from napkin_cat.errors import CLIError, MemoryLimitError, NapkinError
from napkin_cat.cli.commands import row_text
from napkin_cat.cli.gallery.examples import sizes_of
from napkin_cat.io.serial import dumps
from napkin_cat.plan.program import plan, render
from napkin_cat.render.curves import plot_derivation
from napkin_cat.render.draw import draw
from napkin_cat.search import derive

#: bump when what a section says changes without its inputs changing (the fingerprint covers it)
FORMAT = 1


@dataclass(frozen=True)
class Range:
    """Consecutive memories ``first`` … ``last`` whose winner has the same variant; ``label`` (A, B, …),
    ``kind``, ``describe`` (the variant in words, as ``napkin derive`` prints it), ``pseudocode`` (the plan
    at ``first``, as ``napkin plan`` prints it, or why there is none)."""

    label: str
    first: int
    last: int
    kind: str
    describe: str
    pseudocode: str


@dataclass(frozen=True)
class Result:
    """A gallery entry computed (see the module docstring); ``seconds`` is not part of its page."""

    example: object
    diagram: object
    sizes: dict
    memories: list
    derivation: object
    rows: list
    ranges: list
    bound_name: str | None
    bound_note: str
    headline: int
    headline_pseudocode: str
    fingerprint: str
    seconds: float = 0.0
    smallest: int | None = None
    files: dict = field(default_factory=dict)

    def range_of(self, memory: int) -> Range:
        return next(g for g in self.ranges if g.first <= memory <= g.last)


def fingerprint(example, diagram, sizes: dict, memories: list) -> str:
    """A hash of what an entry is computed from: the diagram (its JSON), its sizes, the memories, :data:`FORMAT`."""
    blob = json.dumps({"diagram": dumps(diagram), "sizes": sizes, "memories": memories, "code": example.code,
                       "about": example.about, "options": example.options,
                       "format": FORMAT}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


#: the parts of ``napkin_cat`` an entry is computed by (paths under the package): what builds the diagram, rewrites,
#: derives, costs, plans and draws it, and the gallery's own modules and the CLI text they print; not the kernels'
#: printers, the GPU models, JSON, the paper's report, the fuzz or the other commands, which no entry runs
CODE = ("errors.py", "syntax", "algorithms", "library", "autodiff", "semantics", "cost", "rewriting", "search", "plan",
        "render", "cli/gallery", "cli/commands.py", "cli/inputs.py")
PACKAGE = Path(__file__).resolve().parents[2]


def code_text(source: str) -> str:
    """What of a module's source runs: its text without comments, docstrings and blank lines (so that prose
    edits leave the fingerprint alone); from positions that every Python since 3.8 reports alike.

    >>> code_text("def f(x):\\n    'Twice x.'\\n    return 2 * x   # doubled\\n\\n")
    'def f(x):\\n    return 2 * x'
    """
    lines = source.splitlines()
    cut = []          # (line, column) spans, 1-based lines, to blank out
    for node in ast.walk(ast.parse(source)):
        body = getattr(node, "body", None)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and body and \
                isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) and \
                isinstance(body[0].value.value, str):
            d = body[0]
            cut.append(((d.lineno, d.col_offset), (d.end_lineno, d.end_col_offset)))
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            cut.append((tok.start, tok.end))
    for (l0, c0), (l1, c1) in sorted(cut, reverse=True):
        if l0 == l1:
            lines[l0 - 1] = lines[l0 - 1][:c0] + lines[l0 - 1][c1:]
        else:
            lines[l0 - 1:l1] = [lines[l0 - 1][:c0] + lines[l1 - 1][c1:]]
    return "\n".join(line.rstrip() for line in lines if line.strip())


#: :func:`code_text` remembered by the source text it is a function of: parsing and tokenizing the package's
#: files took seconds per :func:`code_fingerprint`, and a process that builds the gallery again (or checks a page
#: against the code) asks for the same texts; an edited file is a new text, computed afresh
_code_text = lru_cache(maxsize=None)(code_text)


def code_sources() -> dict:
    """``{part: {relative path: file}}``: each part of :data:`CODE` (under ``napkin_cat/``), and the top-level
    package of every registered rule book and accumulator form (the entry points of the groups
    :data:`~napkin_cat.algorithms.accumulators.PLUGIN_GROUPS`: ``rewrites`` for the paper's), its ``.py`` files."""
    roots = {name: PACKAGE / name for name in CODE}
    for group in PLUGIN_GROUPS:
        for ep in entry_points(group=group):
            top = ep.value.split(":")[0].split(".")[0]
            spec = find_spec(top)
            if spec is not None and spec.origin is not None:
                origin = Path(spec.origin)
                roots.setdefault(top, origin.parent if spec.submodule_search_locations else origin)
    out = {}
    for name, root in roots.items():
        files = sorted(root.rglob("*.py")) if root.is_dir() else [root]
        base = root if root.is_dir() else root.parent
        out[name] = {f.relative_to(base).as_posix(): f for f in files}
    return out


def code_fingerprint() -> dict:
    """``{part: hash}``: the hash of the code of each part of :func:`code_sources` (its files' paths and their
    :func:`code_text`), and ``"all"``, the hash of them all."""
    out = {}
    for name, files in code_sources().items():
        h = hashlib.sha256()
        for rel, f in files.items():
            h.update(f"{rel}\n{_code_text(f.read_text(encoding='utf-8'))}\n".encode())
        out[name] = h.hexdigest()[:8]
    out["all"] = hashlib.sha256(json.dumps(out, sort_keys=True).encode()).hexdigest()[:16]
    return out


def _derive(diagram, memories: list, sizes: dict, options=None):
    """``(derivation, memories that fit, smallest memory that works or None)``."""
    try:
        return derive(diagram, memory=memories, sizes=sizes, **(options or {})), memories, None
    except MemoryLimitError as e:
        smallest = getattr(e, "smallest", None)
        fit = [m for m in memories if smallest is not None and m >= smallest]
        if not fit:
            raise CLIError(f"no algorithm fits the largest memory {memories[-1]} at sizes {sizes}: the smallest "
                           f"that works is {smallest} values (widen --memory)") from None
        return derive(diagram, memory=fit, sizes=sizes, **(options or {})), fit, smallest


def _pseudocode(regime, sizes: dict) -> str:
    try:
        return render(plan(regime.diagram, {**sizes, **{k: int(v) for k, v in regime.tiles.items()}}))
    except NapkinError as e:
        return f"(no plan: {type(e).__name__}: {str(e).splitlines()[0]})"


def _label(k: int) -> str:
    return chr(ord("A") + k) if k < 26 else f"V{k + 1}"


def compute(example, *, memories: list, sizes: dict | None = None) -> Result:
    """Derive ``example`` at every memory of ``memories`` (a list of ints) and ``sizes`` (default: the
    entry's, :func:`.examples.sizes_of`); group the winners into ranges; plan each range's first memory."""
    start = time.perf_counter()
    diagram = example.build()
    sizes = sizes_of(example, diagram, sizes)
    r, fit, smallest = _derive(diagram, list(memories), sizes, example.options)
    unfused = dict(r.candidates).get("unfused", {})
    rows, ranges, current = [], [], None
    for g in r.regimes:
        _, H, ratio, describe, tiles = row_text(g)
        key = (g.variant.kind, describe)
        if current is None or current[0] != key:
            current = [key, g.memory, g.memory, g]
            ranges.append(current)
        current[2] = g.memory
        rows.append({"M": g.memory, "H": int(g.H), "unfused": unfused.get(g.memory),
                     "bound": None if g.bound is None or not r.bound.structural else float(g.bound),
                     "ratio": ratio, "tiles": tiles, "range": _label(len(ranges) - 1)})
    made = [Range(_label(k), first, last, key[0], key[1], _pseudocode(g, sizes))
            for k, (key, first, last, g) in enumerate(ranges)]
    headline = fit[len(fit) // 2]
    head = next(g for g in r.regimes if g.memory == headline)
    structural = r.bound is not None and r.bound.structural
    return Result(example, diagram, sizes, fit, r, rows, made, r.bound.source if structural else None,
                  "" if structural else (r.bound.source if r.bound is not None else "no bound computed"),
                  headline, _pseudocode(head, sizes), fingerprint(example, diagram, sizes, list(memories)),
                  time.perf_counter() - start, smallest)


def draw_files(result: Result, folder: str, fmt: str = "png") -> dict:
    """Draw the entry's pictures into ``folder``: the diagram as written, the derived algorithm at the headline
    memory, the curves; write each range's pseudocode.  Returns ``{role: path}``."""
    os.makedirs(folder, exist_ok=True)
    paths = file_names(result, folder, fmt)
    for name in os.listdir(folder):          # a previous build's files that this one does not write
        if is_gallery_file(name) and os.path.join(folder, name) not in paths.values():
            os.remove(os.path.join(folder, name))
    draw(result.diagram, paths["written"], dpi=100)
    head = next(g for g in result.derivation.regimes if g.memory == result.headline)
    draw(head.diagram, paths["derived"], dpi=80)
    plot_derivation(result.derivation, paths["curves"])
    for role in ("written", "derived", "curves"):
        _shrink(paths[role])
    for g in result.ranges:
        with open(paths[f"pseudocode {g.label}"], "w", encoding="utf-8") as f:
            f.write(g.pseudocode if g.pseudocode.endswith("\n") else g.pseudocode + "\n")
    return paths


def _shrink(path: str) -> None:
    """Store a PNG with a palette of 256 colours (line art: about 3.5× smaller, no visible change)."""
    if not path.endswith(".png"):
        return
    try:
        from PIL import Image
    except ImportError:    # matplotlib brings Pillow; without it the picture stays as drawn
        return
    with Image.open(path) as im:
        small = im.convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT)
    small.save(path, optimize=True)


def is_gallery_file(name: str) -> bool:
    """Whether a file name is one :func:`draw_files` writes (a picture of a role, or a range's pseudocode)."""
    stem, ext = os.path.splitext(name)
    return (stem in ("written", "derived", "curves") and ext in (".png", ".svg")) or \
        (stem.startswith("pseudocode-") and ext == ".txt")


def file_names(result: Result, folder: str, fmt: str = "png") -> dict:
    """Where :func:`draw_files` writes each file (no file is touched)."""
    paths = {role: os.path.join(folder, f"{role}.{fmt}") for role in ("written", "derived", "curves")}
    for g in result.ranges:
        paths[f"pseudocode {g.label}"] = os.path.join(folder, f"pseudocode-{g.label}.txt")
    return paths
