"""§5.1 in ``napkin reproduce``: counted transfers against the paper's formulas; the kernels against the plans."""
import pytest
import sympy

from napkin_cat.paper import plans
from napkin_cat.paper.context import Context
from napkin_cat.paper.ledger import Ledger


@pytest.fixture
def matmul_only(monkeypatch):
    monkeypatch.setattr(plans, "CASES", tuple(c for c in plans.CASES if c[0] == "matmul"))


def test_a_wrong_printed_formula_differs(matmul_only, monkeypatch):
    """The claims compare counts with the formula: a formula off by one value is caught."""
    (name, attr, sec, sizes, memory, paper), = plans.CASES
    monkeypatch.setattr(plans, "CASES", ((name, attr, sec, sizes, memory, {**paper, "H": paper["H"] + 1}),))
    book = Ledger()
    plans.section_5_1(book, Context(out=None), kernels=False)
    status = {c.id: c.status for c in book.claims}
    assert status["S5.1-matmul-H-counted"] == "differs" and not book.ok
    assert status["S5.1-matmul-H-star-counted"] == "reproduced"


def test_without_compilers_the_kernel_claims_are_noted_not_failed(matmul_only, monkeypatch, tmp_path):
    monkeypatch.setenv("NAPKIN_CACHE", str(tmp_path))       # nothing cached: the C kernel must be compiled
    monkeypatch.setattr("shutil.which", lambda name: None)
    ctx, book = Context(out=None), Ledger()
    ctx.section = "§5.1 plans and kernels"
    plans.section_5_1(book, ctx)
    assert book.ok and not any(c.id.endswith(("c-kernel", "cuda-smem")) for c in book.claims)
    notes = ctx.notes["§5.1 plans and kernels"]
    assert any("C kernel was not run (cc is not on this machine" in n for n in notes)
    assert any("CUDA kernel was not compiled (nvcc is not on this machine" in n for n in notes)


def test_the_paper_side_is_the_printed_formula_not_the_functor():
    """The paper's values are §3's printed formulas (not read off the library's cost functor)."""
    (att,), (mm,) = ([c for c in plans.CASES if c[0] == n] for n in ("attention", "matmul"))
    q, x, d, g_q = sympy.symbols("q x d g_q", positive=True, integer=True)
    assert sympy.simplify(att[5]["H"] - (2 * q * d + 2 * x * d * q / g_q)) == 0
    assert str(mm[5]["H*"]) == "a*c + 2*a*b*c/sqrt(M)"
