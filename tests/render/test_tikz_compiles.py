"""The TikZ output compiles with plain ``pdflatex``: every library algorithm and both derivation strips.

``.ci/run`` installs ``pdflatex`` with the packages the preamble needs (Debian's ``texlive-latex-base``,
``texlive-pictures`` for TikZ and ``preview-latex-style`` for cropping), so CI never skips these tests;
on a machine without ``pdflatex`` they are skipped and say why.
"""
from __future__ import annotations

import inspect
import re
import shutil
import subprocess
import unicodedata

import numpy as np
import pytest

import napkin_cat as nc
from rewrites import flash_attention, tiled_matmul

PDFLATEX = shutil.which("pdflatex")
needs_pdflatex = pytest.mark.skipif(
    PDFLATEX is None, reason="pdflatex is not installed (Debian: apt-get install --no-install-recommends "
                             "texlive-latex-base texlive-pictures preview-latex-style; .ci/run does this)")


def _algorithms() -> dict:
    """Every function of ``nc.library`` that builds a diagram from its defaults (all of its arguments
    optional): the library's algorithms, found by what they return rather than by name."""
    found = {}
    for name in nc.library.__all__:
        f = getattr(nc.library, name)
        params = inspect.signature(f).parameters.values()
        if all(p.default is not p.empty or p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL) for p in params):
            d = f()
            if isinstance(d, nc.Diagram):
                found[name] = d
    return found


ALGORITHMS = _algorithms()


def compile_tex(source: str, tmp_path, name: str = "picture"):
    """Run ``pdflatex`` on ``source``; assert it succeeds, with no missing glyph, into a non-empty PDF."""
    tex = tmp_path / f"{name}.tex"
    tex.write_text(source, encoding="ascii")
    run = subprocess.run([PDFLATEX, "-interaction=nonstopmode", "-halt-on-error", "-no-shell-escape", tex.name],
                         cwd=tmp_path, capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL)
    log = (tmp_path / f"{name}.log").read_text(errors="replace") if (tmp_path / f"{name}.log").exists() else ""
    errors = [line for line in (run.stdout + log).splitlines() if line.startswith("!")]
    assert run.returncode == 0, f"pdflatex failed on {name}.tex: {errors[:5]}\n{run.stdout[-1500:]}"
    assert "Missing character" not in log, re.findall(r"Missing character.*", log)[:5]
    pdf = tmp_path / f"{name}.pdf"
    assert pdf.exists() and pdf.read_bytes()[:5] == b"%PDF-" and pdf.stat().st_size > 1000
    return pdf


def test_the_library_has_algorithms_to_compile():
    assert {"attention", "matmul", "multi_head_attention"} <= set(ALGORITHMS), sorted(ALGORITHMS)


BEGIN, END = "\\begin{document}\n", "\\end{document}"


def one_document(sources: dict[str, str]) -> str:
    """The standalone documents ``sources`` (name: source) as one document, a page each: their common preamble, then
    each body, announced in the log (``napkin picture NAME``) so that a failure names its picture.  One
    ``pdflatex`` run for every picture (each run loads TikZ again)."""
    heads = {s.split(BEGIN)[0] for s in sources.values()}
    assert len(heads) == 1, "the pictures have different preambles: compile them apart"
    bodies = [f"\\typeout{{napkin picture {name}}}\n"
              + s.split(BEGIN, 1)[1].rsplit(END, 1)[0] for name, s in sources.items()]
    return heads.pop() + BEGIN + "".join(bodies) + END + "\n"


@needs_pdflatex
def test_library_algorithms_tikz_compile(tmp_path):
    """Every library algorithm's standalone picture compiles: in one document, a page each (the page count read
    from pdflatex's own report: a picture left out fails)."""
    sources = {name: nc.to_tikz(d, standalone=True) for name, d in sorted(ALGORITHMS.items())}
    try:
        compile_tex(one_document(sources), tmp_path, "library")
    except AssertionError as e:
        log = (tmp_path / "library.log").read_text(errors="replace") if (tmp_path / "library.log").exists() else ""
        started = re.findall(r"^napkin picture (\S+)$", log, re.M)
        raise AssertionError(f"in the picture of {started[-1] if started else '?'}: {e}") from e
    pages = re.search(r"Output written on library\.pdf \((\d+) pages?", (tmp_path / "library.log").read_text(
        errors="replace").replace("\n", ""))
    assert pages and int(pages.group(1)) == len(sources), (pages and pages.group(0), len(sources))


@needs_pdflatex
@pytest.mark.parametrize("derive, start", [(flash_attention, nc.library.attention),
                                           (tiled_matmul, nc.library.matmul)], ids=["flash_attention", "tiled_matmul"])
def test_derivation_strip_tikz_compiles(derive, start, tmp_path):
    r = derive(start())
    path = r.trace.draw(str(tmp_path / "strip.tex"))
    src = open(path, encoding="ascii").read()
    assert src.count("% rule") == len(r.trace) >= 4
    for step in r.trace:     # every rule is named on its row (underscores escaped for TeX)
        assert "{= " + step.rule.replace("_", r"\_") + r" $\Rightarrow$};  % rule" in src
    compile_tex(src, tmp_path, "strip")


def test_strip_rows_hold_both_sides_of_every_step():
    """The strip is the before and after layouts of each step, side by side: its wires are theirs."""
    from napkin_cat.render.layout import layout
    from napkin_cat.render.strip import strip_layout
    r = tiled_matmul(nc.library.matmul())
    strip = strip_layout(r.trace)
    want = sum(len(layout(d).wire_labels()) for s in r.trace for d in (s.before, s.after))
    assert len(strip.wire_labels()) == want
    rows = [lab.pos[1] for lab in strip.labels("rule")]
    assert rows == sorted(rows) and len(set(rows)) == len(r.trace)       # one row per step, top to bottom


def test_strip_to_an_unknown_extension_is_refused(tmp_path):
    r = tiled_matmul(nc.library.matmul())
    with pytest.raises(nc.NapkinError, match=r"strip\.pdf'.*must be one of \.png, \.svg, \.tex"):
        r.trace.draw(str(tmp_path / "strip.pdf"))


# every assigned code point of the Greek block, accented Latin, ligatures, sub/superscripts and symbols
ALPHABETS = ("".join(chr(c) for c in range(0x370, 0x400) if unicodedata.name(chr(c), "")),
             "éèçñøßﬁ", "₀₁₂₊₋ₐₑᵢⱼ⁰¹²³⁺⁻ⁿ", "·×−÷Σ→⇒≡⊗√′…≤≥∞∘~^\\<>|")


def _exotic_labels():
    """User primitives labelled with Greek, sub/superscripts, symbols and an emoji; a cast; a rename."""
    nc.declare("tikz_exotic", lambda xs, core: [np.tanh(xs[0])], flops=lambda core: {"special": 1},
               label="σ≡μ₁′ ⇒ x² 🙂 & 50%_", shape="box")
    d = nc.apply("tikz_exotic", "q x")
    for k, label in enumerate(ALPHABETS):
        nc.declare(f"tikz_alphabet{k}", lambda xs, core: [xs[0]], label=label, shape="box")
        d = d >> nc.apply(f"tikz_alphabet{k}", "q x")
    return d >> nc.cast("q x", to="fp16", dtype="fp32") >> nc.renaming("q x -> q y", dtype="fp16")


def test_every_label_becomes_ascii_latex(scratch_kinds):
    src = nc.to_tikz(_exotic_labels(), standalone=True)
    assert src.isascii()
    assert r"$\sigma$$\equiv$$\mu$$_{1}$$'$ $\Rightarrow$ x$^{2}$ \texttt{[U+1F642]} \& 50\%\_" in src


@needs_pdflatex
def test_unicode_labels_compile(tmp_path, scratch_kinds):
    compile_tex(nc.to_tikz(_exotic_labels(), standalone=True), tmp_path, "exotic")
