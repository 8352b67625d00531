"""``napkin gallery --out DIR``: every derived algorithm in one place, and the page ``docs/gallery.md``.

For each entry (:mod:`.examples`: the library's algorithms, then the registered examples) the command
derives the algorithm at every memory of a range (:mod:`.build`), draws the diagram as written, the derived
algorithm and the curves, writes each variant's pseudocode into ``DIR/<entry>/``, and writes the page
(:mod:`.page`; default ``DIR.md`` beside the folder, so ``--out docs/gallery`` writes ``docs/gallery.md``).

>>> import tempfile, os
>>> with tempfile.TemporaryDirectory() as tmp:
...     built = build(os.path.join(tmp, "g"), only=["cross_entropy"], memories=[2 ** 10, 2 ** 12], progress=False)
...     [r.example.name for r in built.results], os.path.exists(os.path.join(tmp, "g.md"))
(['cross_entropy'], True)
"""
from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass

from napkin_cat.cli.gallery.build import Result, code_fingerprint, compute, draw_files, file_names, is_gallery_file
from napkin_cat.cli.gallery.examples import AXIS_SIZES, DEFAULT_SIZE, EXAMPLES, Example, example, examples, sizes_of
from napkin_cat.cli.gallery.page import page, section, sections
from napkin_cat.errors import CLIError, NapkinError
from napkin_cat.cli.commands import writable_folder
from napkin_cat.cli.inputs import parse_memory, parse_sizes
from napkin_cat.paper.progress import progress as progress_bar

__all__ = ["build", "command", "compute", "code_fingerprint", "examples", "example", "Example", "EXAMPLES", "Result",
           "sections", "DEFAULT_MEMORY", "default_memories", "DEFAULT_SIZE", "AXIS_SIZES", "FORMATS"]

#: the memories every entry is derived at, unless ``--memory`` says otherwise
DEFAULT_MEMORY = "2^8..2^20"
FORMATS = ("png", "svg")


def default_memories() -> list:
    """The memories every gallery entry is derived at, parsed from :data:`DEFAULT_MEMORY`."""
    return parse_memory(DEFAULT_MEMORY)


@dataclass(frozen=True)
class Built:
    """What :func:`build` made: the entries' results, the page's path, the seconds it took."""

    results: list
    markdown: str
    seconds: float


def build(out: str, *, markdown: str | None = None, only=None, sizes: dict | None = None, memories=None,
          fmt: str = "png", progress: bool = True, command: str | None = None, say=None) -> Built:
    """Compute, draw and write the entries named in ``only`` (default: all) into ``out``, and the page.
    ``say(line)`` is called with one line per entry as it is done."""
    if fmt not in FORMATS:
        raise CLIError(f"--format {fmt!r}: the pictures are one of {', '.join(FORMATS)}")
    chosen = examples() if not only else [example(n) for n in dict.fromkeys(only)]
    memories = list(memories) if memories is not None else default_memories()
    if not isinstance(memories, list) or len(memories) < 2:
        raise CLIError(f"--memory {memories!r}: give a range of memories such as {DEFAULT_MEMORY} (a curve needs "
                       "at least two)")
    markdown = markdown or out.rstrip("/\\") + ".md"
    if not markdown.endswith(".md"):
        raise CLIError(f"--markdown {markdown!r}: the page is a Markdown file (*.md)")
    start = time.perf_counter()
    results, files = [], {}
    bar = progress_bar(chosen, enabled=progress, unit="entry")
    for e in bar:
        if hasattr(bar, "set_description"):
            bar.set_description(e.name)
        try:
            r = compute(e, memories=memories, sizes=sizes)
            files[e.name] = draw_files(r, os.path.join(out, e.name), fmt)
        except CLIError as err:
            raise CLIError(f"gallery entry {e.name}: {err}") from None
        except NapkinError as err:
            raise CLIError(f"gallery entry {e.name}: {type(err).__name__}: {str(err).splitlines()[0]}") from None
        results.append(r)
        if say is not None:
            line = (f"{e.name}: {r.seconds:.1f} s, {len(r.ranges)} variant(s) over M = {r.memories[0]} … "
                    f"{r.memories[-1]}")
            bar.write(line) if hasattr(bar, "write") else say(line)
    if not only:
        _remove_old_entries(out, {e.name for e in chosen})
    page_dir = os.path.dirname(os.path.abspath(markdown))
    text = page(results, files, page_dir, command or f"napkin gallery --out {out}", memories, code_fingerprint())
    with open(markdown, "w", encoding="utf-8") as f:
        f.write(text)
    return Built(results, markdown, time.perf_counter() - start)


def _remove_old_entries(out: str, names: set) -> None:
    """Remove the folders of entries that are gone: only a folder holding nothing but gallery files."""
    import shutil
    for name in sorted(os.listdir(out)):
        folder = os.path.join(out, name)
        if name in names or not os.path.isdir(folder):
            continue
        inside = os.listdir(folder)
        if inside and all(is_gallery_file(f) for f in inside):
            shutil.rmtree(folder)


def section_of(name: str, *, out: str, markdown: str, memories=None, sizes: dict | None = None) -> str:
    """One entry's section as :func:`build` would write it into ``markdown`` (nothing is drawn or written)."""
    r = compute(example(name), memories=memories or default_memories(), sizes=sizes)
    fmt = "png"
    return section(r, file_names(r, os.path.join(out, name), fmt), os.path.dirname(os.path.abspath(markdown)))


def command(args) -> int:
    """``napkin gallery``: build the gallery; print one line per entry and the time (or JSON)."""
    only = [n.strip() for n in args.only.split(",") if n.strip()] if args.only else None
    if only is not None:
        for n in only:
            example(n)                        # an unknown name is refused before anything is computed
    sizes = parse_sizes(args.sizes)
    if sizes:
        axes = {a for e in (only and [example(n) for n in only] or examples()) for a in sizes_of(e, e.build())}
        unknown = sorted(set(sizes) - axes)
        if unknown:
            raise CLIError(f"--sizes names {', '.join(unknown)}, an axis of no entry built; their axes: "
                           f"{', '.join(sorted(axes))}")
    memories = parse_memory(args.memory)
    if not isinstance(memories, list):
        raise CLIError(f"malformed --memory {args.memory!r}: give a range such as {DEFAULT_MEMORY} (a curve needs "
                       "at least two memories)")
    if args.markdown and not args.markdown.endswith(".md"):
        raise CLIError(f"--markdown {args.markdown!r}: the page is a Markdown file (*.md)")
    out = writable_folder(args.out)
    if args.markdown:
        writable_folder(os.path.dirname(os.path.abspath(args.markdown)))
    shown = ["napkin gallery --out", args.out] + (["--memory", args.memory] if args.memory != DEFAULT_MEMORY else [])
    shown += (["--sizes", args.sizes] if args.sizes else []) + (["--format", args.format] if args.format != "png"
                                                                 else [])
    built = build(out, markdown=args.markdown, only=only, sizes=sizes, memories=memories, fmt=args.format,
                  progress=not args.no_progress, command=" ".join(shown), say=None if args.json else print)
    if args.json:
        print(json.dumps({
            "markdown": built.markdown, "seconds": round(built.seconds, 2),
            "entries": [{"name": r.example.name, "code": r.example.code, "sizes": r.sizes, "memories": r.memories,
                         "seconds": round(r.seconds, 2), "bound": r.bound_name, "fingerprint": r.fingerprint,
                         "ranges": [{"label": g.label, "from": g.first, "to": g.last, "kind": g.kind,
                                     "variant": g.describe} for g in r.ranges],
                         "rows": r.rows} for r in built.results]}, indent=1, default=str))
    else:
        print(f"gallery: {len(built.results)} entries in {built.seconds:.0f} s → {built.markdown} "
              f"(pictures and pseudocode under {out})")
    return 0
