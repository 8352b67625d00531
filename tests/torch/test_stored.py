"""A torch op's derivations stored on disk (napkin_cat.torch.stored): read back by another process instead of searched,
searched again when anything they depend on changed (an option, the code), never trusted when a file is damaged.

Each test points ``$NAPKIN_CACHE`` at its own folder, so it starts cold whatever the suite ran before.  A fresh
:class:`~napkin_cat.torch.kernels.Derived` is what a new process makes; the subprocess test is the real thing."""
from __future__ import annotations

import contextlib
import io
import json
import os
import pathlib
import subprocess
import sys
import warnings

import pytest
import sympy

torch = pytest.importorskip("torch", reason="torch is the `kernels` extra (pip install 'napkin-cat[kernels]')")

import napkin_cat as nc  # noqa: E402
from napkin_cat.rewriting.registry import rulebook  # noqa: E402
from napkin_cat.torch import searched_code, stored  # noqa: E402
from napkin_cat.torch.kernels import Derived  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
CPU = torch.device("cpu")
SIZES = {"a": 8, "b": 6, "c": 4}


@pytest.fixture(autouse=True)
def cold(tmp_path, monkeypatch):
    monkeypatch.setenv("NAPKIN_CACHE", str(tmp_path))
    monkeypatch.delenv("NAPKIN_DERIVATION_CACHE", raising=False)
    return tmp_path / "derivations"


def matmul_inputs():
    g = torch.Generator().manual_seed(0)
    return [torch.randn(8, 6, generator=g, dtype=torch.float64), torch.randn(6, 4, generator=g, dtype=torch.float64)]


def run(f, **options):
    """A fresh Derived (what a new process makes) called once on the matmul inputs: (it, its output, its one
    derivation)."""
    d = Derived(f, **options)
    (C,) = d(matmul_inputs())
    (r,) = d.derivations.values()
    return d, C, r


SCRIPT = """
import json, torch, napkin_cat as nc
torch.set_num_threads(1)
op = nc.torch.compile(nc.library.matmul(), memory=16, name="stored_matmul")
g = torch.Generator().manual_seed(0)
A = torch.randn(8, 6, generator=g, dtype=torch.float64, requires_grad=True)
B = torch.randn(6, 4, generator=g, dtype=torch.float64, requires_grad=True)
C = op(A, B)
(C * C).sum().backward()
made = op.napkin
print(json.dumps({"searched": made.forward.searched + made.backward.searched,
                  "recalled": made.forward.recalled + made.backward.recalled,
                  "C": C.tolist(), "dA": A.grad.tolist(), "dB": B.grad.tolist(),
                  "variants": [str(r.variant) for d in (made.forward, made.backward) for r in d.derivations.values()]}))
"""


def test_a_second_process_reads_the_derivations_back_and_searches_nothing(tmp_path):
    """The op compiled and differentiated here, then in a new Python process with the same cache folder: there its
    forward and backward are read back (searched 0, recalled 2), and its outputs and gradients are this process's,
    bit for bit, and torch's own matmul's."""
    scope = {}
    with contextlib.redirect_stdout(io.StringIO()) as here:
        exec(SCRIPT, scope)
    first = json.loads(here.getvalue())
    env = {**os.environ, "NAPKIN_CACHE": str(tmp_path), "PYTHONPATH": str(ROOT)}
    env.pop("NAPKIN_DERIVATION_CACHE", None)
    done = subprocess.run([sys.executable, "-c", SCRIPT], env=env, cwd=ROOT, check=True, capture_output=True,
                          text=True, timeout=600)
    second = json.loads(done.stdout.splitlines()[-1])
    assert (first["searched"], first["recalled"]) == (2, 0)
    assert (second["searched"], second["recalled"]) == (0, 2)
    assert {k: second[k] for k in ("C", "dA", "dB", "variants")} == {k: first[k] for k in ("C", "dA", "dB", "variants")}
    A, B = matmul_inputs()
    C = torch.tensor(second["C"], dtype=torch.float64)
    torch.testing.assert_close(C, A @ B, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(torch.tensor(second["dA"], dtype=torch.float64), 2 * C @ B.T, rtol=1e-12, atol=1e-12)


def test_what_is_read_back_is_what_was_searched(cold):
    """Every field the op and its user read: the algorithm, its tiles, H, the variant, memory, level, sizes, blocks;
    and its trace replays from the function to the algorithm."""
    f = nc.library.matmul()
    first, C1, r1 = run(f, memory=16)
    again, C2, r2 = run(f, memory=16)
    assert (first.searched, first.recalled, again.searched, again.recalled) == (1, 0, 0, 1)
    assert torch.equal(C1, C2) and len(list(cold.glob("*.json"))) == 1
    assert r2.diagram == r1.diagram and r2.H == r1.H and str(r2.variant) == str(r1.variant)
    assert r2.variant == r1.variant and r2.variant.kind == r1.variant.kind
    assert r2.optimum.exact_sizes == r1.optimum.exact_sizes and r2.regimes[0].tiles == r1.regimes[0].tiles
    assert (r2.memory, r2.level, r2.sizes, r2.blocks) == (r1.memory, r1.level, r1.sizes, r1.blocks)
    assert r2.trace.replay(f) == r1.diagram
    assert r2.H == nc.cost(r2.diagram, sizes=r2.optimum.sizes).H[1]


def test_a_cpu_models_derivation_reads_back_its_prediction():
    """By predicted time on a CPU model: the tiles and the prediction (time, kernels, sizes) come back equal."""
    f = nc.library.matmul()
    _, _, r1 = run(f, hardware="epyc-zen3-dev")
    again, _, r2 = run(f, hardware="epyc-zen3-dev")
    assert again.recalled == 1 and again.searched == 0
    assert r2.prediction == r1.prediction and r2.prediction.time == r1.prediction.time
    assert r2.optimum.exact_sizes == r1.optimum.exact_sizes and r2.memory == r1.memory


@pytest.mark.parametrize("change", ["memory", "depth", "sizes"])
def test_an_option_changed_searches_again(change, cold):
    """Memory, depth and the reference sizes are in the key: the derivation at the other value is searched (its tiles
    are nc.derive's own at that value), and each stays stored beside the other."""
    f = nc.library.matmul()
    base = {"memory": 32, "depth": 2, "sizes": SIZES}
    other = {**base, **{"memory": {"memory": 16}, "depth": {"depth": 0},
                        "sizes": {"sizes": {"a": 8, "b": 6, "c": 2}}}[change]}
    run(f, **base)
    d, C, r = run(f, **other)
    assert (d.searched, d.recalled) == (1, 0)
    own = nc.derive(f, memory=other["memory"], sizes=other["sizes"], depth=other["depth"])
    assert r.optimum.exact_sizes == own.optimum.exact_sizes and r.sizes == own.sizes
    A, B = matmul_inputs()
    torch.testing.assert_close(C, A @ B, rtol=1e-12, atol=1e-12)
    assert len(list(cold.glob("*.json"))) == 2
    assert run(f, **base)[0].recalled == 1 and run(f, **other)[0].recalled == 1


def test_changed_code_searches_again_under_another_key(monkeypatch, cold):
    """A changed fingerprint (napkin-cat's or the rules' source) is another key: searched again, without a warning
    (no stored file is read and refused), the old one left beside it."""
    f = nc.library.matmul()
    run(f, memory=16)
    monkeypatch.setattr(stored, "fingerprint", lambda book: "other code")
    with warnings.catch_warnings():
        warnings.simplefilter("error", stored.StoredDerivationWarning)
        d, C, _ = run(f, memory=16)
    assert (d.searched, d.recalled) == (1, 0) and len(list(cold.glob("*.json"))) == 2


def test_the_fingerprint_holds_the_rule_books_modules(monkeypatch):
    """The rules' modules (``rewrites``) are fingerprinted with napkin_cat's face and the ops' deriving module; a
    change in their code changes it (:mod:`tests.torch.test_searched_code` edits copies of the files)."""
    book = rulebook()
    before = stored.fingerprint(book)
    asked = []
    real = searched_code.code_fingerprint
    monkeypatch.setattr(searched_code, "code_fingerprint", lambda entries: asked.append(entries) or real(entries))
    assert stored.fingerprint(book) == before
    rules = {rule.rhs.__module__ for rule in book.rules}
    assert {"napkin_cat", "napkin_cat.torch.kernels", "rewrites"} | rules <= set(asked[0])
    monkeypatch.setattr(searched_code, "code_fingerprint", lambda entries: "edited " + real(entries))
    assert stored.fingerprint(book) != before


def damage(path: pathlib.Path, how: str):
    record = json.loads(path.read_text())
    if how == "truncated":
        path.write_text(path.read_text()[:200])
        return "Expecting|Unterminated|delimiter"
    if how == "transfers":
        record["derivation"]["H"] += 1
        why = "moves .* values at level 1 at its tiles"
    elif how == "fingerprint":
        record["fingerprint"] = "0" * 64
        why = "derived by other code"
    elif how == "key":
        record["key"] = "0" * 64
        why = "another key"
    else:   # another function's algorithm
        record["derivation"]["diagram"] = json.loads(nc.dumps(nc.library.attention()))
        why = "its algorithm maps"
    path.write_text(json.dumps(record))
    return why


@pytest.mark.parametrize("how", ["truncated", "transfers", "fingerprint", "key", "signature"])
def test_a_damaged_file_is_searched_again_with_a_warning_naming_it(how, cold):
    """A stored file that fails a check is ignored (a warning names it and the check), searched again and rewritten,
    so the next process reads it back."""
    f = nc.library.matmul()
    run(f, memory=16)
    (path,) = cold.glob("*.json")
    why = damage(path, how)
    with pytest.warns(stored.StoredDerivationWarning, match=rf"{path.name}.*({why})"):
        d, C, r = run(f, memory=16)
    assert (d.searched, d.recalled) == (1, 0)
    A, B = matmul_inputs()
    torch.testing.assert_close(C, A @ B, rtol=1e-12, atol=1e-12)
    with warnings.catch_warnings():
        warnings.simplefilter("error", stored.StoredDerivationWarning)
        assert run(f, memory=16)[0].recalled == 1


def test_the_store_turned_off_writes_and_reads_nothing(monkeypatch, cold):
    monkeypatch.setenv("NAPKIN_DERIVATION_CACHE", "off")
    f = nc.library.matmul()
    assert [run(f, memory=16)[0].searched for _ in range(2)] == [1, 1]
    assert not cold.exists() or not list(cold.iterdir())


def test_a_switch_value_it_cannot_read_is_a_typed_error(monkeypatch):
    monkeypatch.setenv("NAPKIN_DERIVATION_CACHE", "maybe")
    with pytest.raises(nc.ArgumentError, match=r"NAPKIN_DERIVATION_CACHE='maybe': 'on' or 'off'"):
        run(nc.library.matmul(), memory=16)


def test_a_folder_it_cannot_write_is_a_warning_and_the_op_runs_on(cold):
    cold.write_text("a file where the folder should be")
    f = nc.library.matmul()
    with pytest.warns(stored.StoredDerivationWarning, match=r"could not store the derivation in .*derivations"):
        d, C, _ = run(f, memory=16)
    A, B = matmul_inputs()
    torch.testing.assert_close(C, A @ B, rtol=1e-12, atol=1e-12)
    with pytest.warns(stored.StoredDerivationWarning):
        assert run(f, memory=16)[0].searched == 1


def test_a_store_named_by_its_code_reads_back_what_that_code_wrote_and_nothing_else(tmp_path):
    """``DerivationStore(folder, code=...)``: keys and the check read that name, not this process's fingerprint (a
    GPU benchmark's derivations, searched on a CPU machine, read on the device whose Python and libraries differ).
    Another name is another key (nothing read), and a file written under another name is refused with a warning."""
    f, sizes = nc.library.matmul(), {"a": 8, "b": 6, "c": 4}
    r = nc.derive(f, memory=64, sizes=sizes)
    mine, other = stored.DerivationStore(tmp_path, code="sha256:aa"), stored.DerivationStore(tmp_path, code="b")
    key = mine.key(f, sizes, 64, depth=2)
    assert key != other.key(f, sizes, 64, depth=2) != stored.DerivationStore(tmp_path).key(f, sizes, 64, depth=2)
    mine.save(key, r)
    back = mine.load(key, f)
    assert back.diagram == r.diagram and back.H == r.H and back.optimum.exact_sizes == r.optimum.exact_sizes
    assert other.load(other.key(f, sizes, 64, depth=2), f) is None
    with pytest.warns(stored.StoredDerivationWarning, match="other code than b"):
        assert other.load(key, f) is None       # (the file of mine's key, read by a store of another code)
    with pytest.raises(nc.ArgumentError, match="non-empty str"):
        stored.DerivationStore(tmp_path, code="")


def test_a_derivation_at_a_density_is_keyed_by_it_and_read_back_with_it(tmp_path):
    """A mask from data at density ρ: its H is the count at ρ (nc.derive(density=)), so the check recounts at the
    stored density (at 1 it would count more and refuse the file), the key holds ρ (a derivation at another density
    is another file; 1 keeps the dense key), and what is read back states ρ as the search did."""
    f, sizes = nc.library.document_attention(), {"q": 64, "x": 64, "d": 16}
    half = nc.derive(f, memory=4096, sizes=sizes, density=0.5)
    dense_H = nc.cost(half.diagram, sizes=half.optimum.sizes).H[1]
    assert half.H < dense_H       # (else the recount could not tell the densities apart)
    store = stored.DerivationStore(tmp_path, code="test")
    keys = {rho: store.key(f, sizes, 4096, depth=2, density=rho) for rho in (1, 0.5, 0.25)}
    assert len(set(keys.values())) == 3 and keys[1] == store.key(f, sizes, 4096, depth=2)
    store.save(keys[0.5], half)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        back = store.load(keys[0.5], f)
    assert back.H == half.H and back.diagram == half.diagram
    assert [(str(a.symbol), a.value) for a in back.assumptions] == [(str(a.symbol), a.value) for a in half.assumptions]
    assert [a.value for a in back.assumptions] == [sympy.Rational(1, 2)]
