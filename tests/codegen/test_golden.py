"""Golden files: the emitted sources of the derived matmul and FlashAttention, reviewed as diffs.

A change to a printer shows up here as a diff of ``tests/golden/*``.  To accept it on purpose, regenerate
the files and review the diff before committing::

    NAPKIN_REGENERATE_GOLDEN=1 python -m pytest -q tests/codegen/test_golden.py
    git diff tests/golden
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

import napkin_cat as nc

GOLDEN = Path(__file__).resolve().parents[1] / "golden"


def _cases():
    from rewrites import flash_attention, tiled_matmul
    return {
        # ragged on every partitioned axis, so the masks are in the text
        "matmul": (tiled_matmul(nc.library.matmul()).diagram,
                   {"a": 10, "b": 12, "c": 9, "g_a": 4, "g_c": 4, "s_b": 8}),
        "flash_attention": (flash_attention(nc.library.attention()).diagram,
                            {"q": 100, "x": 90, "d": 16, "g_q": 32, "s_x": 16}),
    }


BACKENDS = {
    "c": (lambda p: nc.codegen.c(p, blas=True), "c"),
    "c-loops": (lambda p: nc.codegen.c(p, blas=False), "loops.c"),
    "cuda": (lambda p: nc.codegen.cuda(p), "cu"),
    "triton": (lambda p: nc.codegen.triton(p), "py"),
}


@pytest.mark.parametrize("backend", sorted(BACKENDS))
@pytest.mark.parametrize("case", ["matmul", "flash_attention"])
def test_emitted_source_matches_its_golden_file(case, backend):
    diagram, sizes = _cases()[case]
    make, suffix = BACKENDS[backend]
    source = make(nc.plan(diagram, sizes)).source
    path = GOLDEN / f"{case}.{suffix}"
    if os.environ.get("NAPKIN_REGENERATE_GOLDEN") == "1":
        path.write_text(source)
    assert path.exists(), f"{path} is missing: regenerate with NAPKIN_REGENERATE_GOLDEN=1 and review the diff"
    want = path.read_text()
    assert source == want, (f"the {backend} source of {case} differs from {path.name}; if the change is intended, "
                            "regenerate with NAPKIN_REGENERATE_GOLDEN=1 and review `git diff tests/golden`")
