"""A small GPT trained with napkin-cat ops beside the same model in plain PyTorch (issue 33, item 7).

``examples/gpt.py``'s model takes its RMSNorm, causal attention, MLP and linear cross-entropy from ``nc.torch.compile``
of the library's diagrams (forward and derived backward run as C kernels); the reference takes them from torch
(``F.rms_norm``, ``F.scaled_dot_product_attention``, the MLP's formula, ``F.cross_entropy``) and differentiates
them with torch's autograd.  Both start from the same weights and train with AdamW on the same batches: each
step's loss is checked against the reference's (the second route: torch's forward and autograd), so a wrong
forward fails at step 0 and a wrong backward at the first step after it.

The CI variant trains 5 steps on one batch (so each step's loss must fall) at tiny sizes; every op is compiled
once, and every layer and step reuses it: one derivation of each forward and each backward.  The issue's 50 steps
on fresh batches run with ``NAPKIN_SLOW=1``.
"""
from __future__ import annotations

import os
import pathlib

import pytest

torch = pytest.importorskip("torch", reason="torch is the `kernels` extra (pip install 'napkin-cat[kernels]')")

import napkin_cat as nc  # noqa: E402
from tests.scripts import load_script  # noqa: E402

EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "gpt.py"
TOLERANCE = 1e-4            # the issue's: relative, at every step, in float64
#: what float64 allows the same maths summed in another order (measured: 2e-16 at step 0, 0 after): a wrong
#: backward that moves a loss by less than the issue's 1e-4 (a 10 % error in GELU's cubic term) fails here
FLOAT64 = 1e-10


def load_example():
    return load_script(EXAMPLE, "napkin_gpt_example", register=True)   # (dataclasses resolve their module)


gpt = load_example()


@pytest.fixture(scope="module")
def tiny():
    vocab, data = gpt.batches(gpt.corpus(400), 1, batch=2, context=8)
    return gpt.Config(len(vocab), context=8, width=8, heads=2, hidden=16, layers=2), data


@pytest.fixture(scope="module")
def ops(tiny):
    return gpt.napkin_ops(tiny[0])


@pytest.fixture(scope="module")
def trained(tiny, ops):
    config, data = tiny
    return gpt.side_by_side(config, data * 5, ops=ops)


def test_each_steps_loss_equals_the_plain_torch_models(trained):
    expected, found, worst = trained
    assert len(found) == 5
    gaps = [abs(a - b) / abs(a) for a, b in zip(expected, found)]
    assert max(gaps) == worst <= FLOAT64 < TOLERANCE, gaps


def test_every_parameters_gradient_equals_torch_autograds(tiny, ops):
    """One step's gradients, parameter by parameter: the derived backwards against torch's autograd."""
    config, data = tiny
    torch.manual_seed(1)
    reference = gpt.GPT(config).double()
    model = gpt.GPT(config).double()
    model.load_state_dict(reference.state_dict())
    reference(*data[0], gpt.torch_ops()).backward()
    model(*data[0], ops).backward()
    for (name, a), b in zip(reference.named_parameters(), model.parameters()):
        assert torch.allclose(b.grad, a.grad, rtol=FLOAT64, atol=FLOAT64 * a.grad.abs().max()), name


def test_the_loss_falls_at_every_step(trained):
    expected, found, _ = trained
    assert all(b < a for a, b in zip(found, found[1:])), found
    assert found[-1] < 0.9 * found[0], found


def test_the_model_ran_the_napkin_ops_each_derived_once(trained, ops):
    """Both layers and every step ran the four compiled ops (their kernels, not torch's), each forward and each
    backward derived once."""
    assert set(ops.compiled) == {"norm", "attention", "mlp", "loss"}
    for name, op in ops.compiled.items():
        made = op.napkin
        assert len(made.forward.derivations) == 1 == len(made.backward.derivations), name
        assert made.forward.kernels and made.backward.kernels, name
    (backward,) = ops.compiled["attention"].napkin.backward.derivations.values()
    assert "SoftMax" not in str(backward.variant) and "LSE" not in str(backward.variant)   # O and L were read


@pytest.mark.parametrize("depth", [-1, 1.5, True])
def test_a_search_depth_it_cannot_take_is_a_typed_error(depth):
    with pytest.raises(nc.ArgumentError, match=r"depth=.*an int ≥ 0"):
        nc.torch.compile(nc.library.matmul(), memory=64, depth=depth, name="gpt_depth")


def test_the_search_depth_is_part_of_the_op():
    f = nc.library.matmul()
    shallow, deep = (nc.torch.compile(f, memory=64, depth=k, name="gpt_depth") for k in (0, 2))
    assert shallow.napkin.name != deep.napkin.name
    assert (shallow.napkin.forward.depth, deep.napkin.forward.depth) == (0, 2)


@pytest.mark.parametrize("options", [{"memory": 64}, {"hardware": "epyc-zen3-dev"}], ids=["memory", "cpu-model"])
def test_every_search_of_the_op_chains_its_depth(options, monkeypatch):
    """The forward's and the backward's searches, by transfers or by a CPU model's time, get the op's depth."""
    monkeypatch.setenv("NAPKIN_DERIVATION_CACHE", "off")     # searched here, not read back from an earlier run
    seen = []
    for name in ("derive", "derive_for_cpu_time"):
        search = getattr(nc.torch.kernels, name)
        monkeypatch.setattr(nc.torch.kernels, name,
                            lambda *a, _search=search, _name=name, **kw: seen.append((_name, kw["depth"]))
                            or _search(*a, **kw))
    op = nc.torch.compile(nc.library.matmul(), depth=1, name="gpt_depth_searched", **options)
    A = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
    B = torch.randn(3, 2, dtype=torch.float64)
    C = op(A, B)
    C.sum().backward()
    assert torch.allclose(C, A @ B) and torch.allclose(A.grad, torch.ones(4, 2, dtype=torch.float64) @ B.T)
    searched = "derive" if "memory" in options else "derive_for_cpu_time"
    assert seen == [(searched, 1), (searched, 1)]


@pytest.mark.skipif(not os.environ.get("NAPKIN_SLOW"), reason="50 steps at the example's sizes: set NAPKIN_SLOW=1")
def test_fifty_steps_on_fresh_batches_agree_at_every_step():
    vocab, data = gpt.batches(gpt.corpus(4000), 50, batch=4, context=16)
    config = gpt.Config(len(vocab), context=16, width=16, heads=2, hidden=32, layers=2)
    expected, found, worst = gpt.side_by_side(config, data)
    assert worst <= TOLERANCE, worst
    assert sum(found[-10:]) < 0.8 * sum(found[:10]), found
