"""The gallery's Markdown page: an index, then one section per entry between markers that name it.

Every section is a pure function of its :class:`~.build.Result` and where the page and the pictures lie
(no time, no machine), so a section regenerated later is byte-equal when nothing it shows has changed; the
marker carries the entry's input fingerprint (:func:`.build.fingerprint`), which is cheap to recompute
for every entry.  :func:`sections` reads a page back into ``{name: (fingerprint, text)}``.  The page's head
carries the fingerprint of the code that computed it (:func:`.build.code_fingerprint`, per part), which
:func:`code_of` reads back.

>>> power(2 ** 14), power(3000)
('2^14', '3000')
>>> sections("<!-- gallery-entry a 12ab -->\\nbody\\n<!-- /gallery-entry -->\\n")
{'a': ('12ab', '<!-- gallery-entry a 12ab -->\\nbody\\n<!-- /gallery-entry -->')}
>>> code_of(code_marker({"search": "8c029db1", "all": "3fa9d6ce8284b8ec"}))
{'search': '8c029db1', 'all': '3fa9d6ce8284b8ec'}
"""
from __future__ import annotations

import os
import re

from napkin_cat.cli.gallery.examples import AXIS_SIZES, DEFAULT_SIZE

_SECTION = re.compile(r"^<!-- gallery-entry (\S+) (\S+) -->\n.*?^<!-- /gallery-entry -->", re.S | re.M)
_CODE = re.compile(r"^<!-- gallery-code ((?:\S+=\S+ )*)-->$", re.M)


def _root() -> str:
    """The folder holding the package (the repository, when the package runs from a source tree)."""
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def power(m: int) -> str:
    """``2^k`` for a power of two, else the number."""
    return f"2^{m.bit_length() - 1}" if m > 0 and m & (m - 1) == 0 else str(m)


def _number(v) -> str:
    if v is None:
        return "—"
    return f"{v:,.0f}" if isinstance(v, float) else f"{v:,}"


def _link(target: str, page_dir: str) -> str:
    return os.path.relpath(target, page_dir).replace(os.sep, "/")


def _repo_link(path: str, page_dir: str) -> str:
    """A link to a file of the repository when the page lies inside it, else the path as code."""
    root = _root()
    full = os.path.join(root, path)
    inside = os.path.exists(os.path.join(root, "pyproject.toml")) and \
        os.path.abspath(page_dir).startswith(root + os.sep)
    return f"[`{path}`]({_link(full, page_dir)})" if inside and os.path.exists(full) else f"`{path}`"


def sizes_text(sizes: dict) -> str:
    """Sizes as the page prints them.

    >>> sizes_text({"q": 4, "d": 8})
    'q = 4, d = 8'
    """
    return ", ".join(f"{k} = {v}" for k, v in sizes.items())


def section(result, files: dict, page_dir: str) -> str:
    """The Markdown section of one entry; ``files`` as :func:`.build.file_names` gives them."""
    e = result.example
    link = (lambda role: _link(files[role], page_dir))
    ms = result.memories
    lines = [f"<!-- gallery-entry {e.name} {result.fingerprint} -->", f"## {e.name}", "",
             f"{e.about[:1].upper()}{e.about[1:]}" + ("" if e.about.endswith((".", ")", ":")) else "."), "",
             f"`{e.code}` at {sizes_text(result.sizes)}; memories {power(ms[0])} … {power(ms[-1])} values at "
             f"level 1" + (f" (smaller ones fit nothing: the smallest that works is {result.smallest})"
                           if result.smallest else "") + "."
             + (f" See {_repo_link(e.see, page_dir)}." if e.see else ""), "",
             "As written:", "", f"![{e.name} as written]({link('written')})", "",
             f"Derived at M = {power(result.headline)} (variant {result.range_of(result.headline).label}):", "",
             f"![{e.name} derived at M = {power(result.headline)}]({link('derived')})", "",
             "H*(M), every candidate the search kept, the envelope it returns and the lower bound:", "",
             f"![H*(M) of {e.name}]({link('curves')})", ""]
    if result.bound_name:
        lines.append(f"Lower bound: {result.bound_name}.")
    elif result.bound_note.startswith("compulsory"):
        lines.append("Lower bound: none known beyond the compulsory transfers (each input read once, each output "
                     "written once), so no ratio is given.")
    else:
        lines.append(f"Lower bound: none ({result.bound_note}).")
    lines += ["", "| M | H* derived | H unfused | H* / bound | variant | tiles |",
              "| ---: | ---: | ---: | ---: | :-: | --- |"]
    for row in result.rows:
        lines.append(f"| {power(row['M'])} | {_number(row['H'])} | {_number(row['unfused'])} | {row['ratio']} | "
                     f"{row['range']} | {row['tiles'] or '—'} |")
    lines += ["", "Variants by memory range (pseudocode at the range's smallest memory):", ""]
    for g in result.ranges:
        span = power(g.first) if g.first == g.last else f"{power(g.first)} … {power(g.last)}"
        lines.append(f"- **{g.label}**, M = {span}: {g.describe} ([pseudocode]({link('pseudocode ' + g.label)}))")
    lines += ["", f"<details><summary>Pseudocode at M = {power(result.headline)}</summary>", "", "```",
              result.headline_pseudocode.rstrip("\n"), "```", "", "</details>", "", "<!-- /gallery-entry -->"]
    return "\n".join(lines)


def code_marker(code: dict) -> str:
    """The line that records the code's fingerprint, part by part (:func:`.build.code_fingerprint`)."""
    return "<!-- gallery-code " + "".join(f"{k}={v} " for k, v in code.items()) + "-->"


def code_of(text: str) -> dict | None:
    """The code fingerprint a page records (``{part: hash}``), or None where it records none."""
    m = _CODE.search(text)
    return None if m is None else dict(kv.split("=", 1) for kv in m.group(1).split())


def index(results: list, page_dir: str, command: str, memories: list, code: dict | None = None) -> str:
    """The page's head: what it is, how it is made (and by which code), the settings, one row per entry."""
    small = ", ".join(f"{k} = {v}" for k, v in AXIS_SIZES.items())
    lines = ["# Gallery: what the search derives", ""] + ([code_marker(code), ""] if code else []) + [
             f"Generated by `{command}`; do not edit (`tests/cli/test_gallery.py` fails when it is stale: when "
             "an entry's inputs or the code that computes it change). "
             f"For every algorithm of `nc.library` and every example registered in "
             f"{_repo_link('napkin_cat/cli/gallery/examples.py', page_dir)}: the diagram as written, the algorithm "
             "`nc.derive` finds at each memory (its picture at the middle memory), its H*(M) against the unfused "
             "algorithm (every operation its own kernel) and the lower bound, its variant per range of memory, "
             "and the pseudocode of each variant (`napkin plan`'s).", "",
             f"Sizes: every axis {DEFAULT_SIZE} except {small}, unless an entry says otherwise; memories "
             f"{power(memories[0])} … {power(memories[-1])} values at level 1; tiles divide their axes. "
             "H counts values moved between level 0 and level 1; \"H* / bound\" is H* over the known lower "
             "bound (— where none is known); \"H unfused\" is — where the unfused algorithm does not fit.", "",
             "| entry | variants over M (smallest → largest memory) | lower bound |", "| --- | --- | --- |"]
    for r in results:
        kinds = " → ".join(f"{g.label}: {g.kind}" for g in r.ranges)
        bound = r.bound_name or "none"
        lines.append(f"| [{r.example.name}](#{r.example.name}) | {kinds} | {bound} |")
    return "\n".join(lines)


def page(results: list, files: dict, page_dir: str, command: str, memories: list, code: dict | None = None) -> str:
    """The whole page: :func:`index` (with the ``code`` fingerprint), then each entry's :func:`section`."""
    parts = [index(results, page_dir, command, memories, code)]
    parts += [section(r, files[r.example.name], page_dir) for r in results]
    return "\n\n".join(parts) + "\n"


def sections(text: str) -> dict:
    """``{name: (fingerprint, section text)}`` of a page."""
    return {m.group(1): (m.group(2), m.group(0)) for m in _SECTION.finditer(text)}
