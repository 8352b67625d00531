"""``napkin reproduce``: run every section's claims and write ``report.md`` and ``report.json``.

The report has one table row per claim (paper value, library value, status), the formulas in
LaTeX, and each section's pictures beside its table.  ``reproduce`` returns the :class:`Ledger`;
``ledger.ok`` is False when a value differs from the paper beyond the documented errata.

>>> import tempfile, json, os
>>> with tempfile.TemporaryDirectory() as tmp:
...     book = reproduce(tmp, sections=["§4.1 power terms"], progress=False)
...     data = json.load(open(os.path.join(tmp, "report.json")))
>>> book.ok, sorted(data)[:2], data["claims"][0]["status"]
(True, ['claims', 'counts'], 'reproduced')
"""
from __future__ import annotations

import json
import os
import platform
import time

import sympy

from napkin_cat.errors import NapkinError
from napkin_cat.paper import analysis, backward, configuration, examples, plans, throughput
from napkin_cat.paper.context import Context
from napkin_cat.paper.ledger import Ledger
from napkin_cat.paper.progress import progress as progress_bar

#: (title, function(ledger, context)) in the order of the paper; later layers append theirs.
SECTIONS = [*examples.SECTIONS, *analysis.SECTIONS, *plans.SECTIONS, *configuration.SECTIONS,
            *throughput.SECTIONS, *backward.SECTIONS]


def section_names() -> list:
    """The report's section titles, in the paper's order."""
    return [title for title, _ in SECTIONS]


def reproduce(out: str, *, sections=None, progress: bool = True) -> Ledger:
    """Run the claims of ``sections`` (titles; default: all) and write the report into ``out``."""
    chosen = SECTIONS if sections is None else [s for s in SECTIONS if s[0] in set(sections)]
    unknown = set(sections or ()) - {t for t, _ in SECTIONS}
    if unknown:
        raise NapkinError(f"unknown section(s) {sorted(unknown)}; the sections are {section_names()}")
    ctx = Context(out)
    book = Ledger()
    figures, times, recorded = {}, {}, {}
    bar = progress_bar(chosen, enabled=progress, unit="section")
    for title, run in bar:
        if hasattr(bar, "set_description"):
            bar.set_description(title)
        before = set(os.listdir(os.path.join(out, "figures")))
        start, first = time.perf_counter(), len(book.claims)
        ctx.section = title
        run(book, ctx)
        times[title] = time.perf_counter() - start
        recorded[title] = book.claims[first:]
        figures[title] = sorted(set(os.listdir(os.path.join(out, "figures"))) - before)
    _write_json(book, out, times, ctx.notes)
    _write_markdown(book, out, recorded, figures, times, ctx.notes)
    return book


def _write_json(book, out, times, notes):
    data = {"claims": [c.as_json() for c in book.claims], "counts": book.counts(), "ok": book.ok,
            "seconds": {k: round(v, 3) for k, v in times.items()}, "notes": notes,
            "python": platform.python_version()}
    with open(os.path.join(out, "report.json"), "w") as f:
        json.dump(data, f, indent=1)


def _latex(value) -> str:
    if isinstance(value, sympy.Basic) and not value.is_Number:
        return f"${sympy.latex(value)}$"
    if isinstance(value, dict):
        return ", ".join(f"{_latex(k)}: {_latex(v)}" for k, v in value.items())
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value).replace("|", "\\|")


STATUS_MARK = {"reproduced": "reproduced", "erratum": "erratum", "differs": "**DIFFERS**"}


def _write_markdown(book, out, recorded, figures, times, notes):
    counts = book.counts()
    lines = ["# FlashAttention on a Napkin, reproduced by napkin-cat", "",
             f"{len(book.claims)} claims: {counts['reproduced']} reproduced, {counts['erratum']} errata (the "
             f"library computes the corrected value), {counts['differs']} differ.", "",
             "Every library value is computed by napkin-cat's functors from diagrams (the algorithms of §3 are "
             "derived from their functions by rewrite rules); the paper's values are what it prints. Each erratum "
             "code links to [errata.md](errata.md) (beside this report): what the paper prints, what the library "
             "computes, and why.", ""]
    for title, rows in recorded.items():
        lines += [f"## {title}", "", f"({times[title]:.2f} s)", ""]
        for name in figures.get(title, []):
            lines += [f"![{name}](figures/{name})", ""]
        for text in notes.get(title, []):
            lines += [f"> not checked on this machine: {text}", ""]
        if rows:
            lines += ["| id | claim | paper | library | status |", "| --- | --- | --- | --- | --- |"]
            for c in rows:
                status = STATUS_MARK[c.status] + (f" ([{c.erratum}](errata.md#{c.erratum}): corrected "
                                                  f"{_latex(c.corrected)})" if c.status == "erratum" else "")
                what = c.what + (f" — {c.note}" if c.note else "")
                lines.append(f"| {c.id} | {_latex(what)} | {_latex(c.paper)} | {_latex(c.library)} | {status} |")
            lines.append("")
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write("\n".join(lines))
    with open(os.path.join(out, "errata.md"), "w") as f:      # the codes' explanations, linked from the rows
        f.write(errata_text())


def errata_text() -> str:
    """The errata page (``napkin_cat/paper/errata.md``): one entry per code the report can cite."""
    from importlib import resources
    return (resources.files("napkin_cat.paper") / "errata.md").read_text(encoding="utf-8")
