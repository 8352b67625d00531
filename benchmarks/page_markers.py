"""A table kept on a documentation page between two markers, written by the benchmark that measured it.

>>> import tempfile, pathlib
>>> page = pathlib.Path(tempfile.mkdtemp()) / "p.md"
>>> _ = page.write_text("intro\\n<!-- b -->\\nold\\n<!-- e -->\\nend\\n")
>>> write_between(page, "<!-- b -->", "<!-- e -->", "| new |"); between(page, "<!-- b -->", "<!-- e -->")
'| new |'
"""
from __future__ import annotations

from pathlib import Path


def write_between(page: Path, begin: str, end: str, text: str) -> None:
    """Replace what ``page`` holds between ``begin`` and ``end`` with ``text``."""
    doc = page.read_text(encoding="utf-8")
    head, rest = doc.split(begin)
    _, tail = rest.split(end)
    page.write_text(f"{head}{begin}\n{text}\n{end}{tail}", encoding="utf-8")


def between(page: Path, begin: str, end: str) -> str:
    """What ``page`` holds between ``begin`` and ``end``, stripped."""
    return page.read_text(encoding="utf-8").split(begin)[1].split(end)[0].strip()
