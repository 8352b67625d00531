"""A compiled op's calls read their sizes and look up their derivation and kernel once per call key
(:func:`napkin_cat.torch.kernels.call_key`: each input's shape, dtype and device, and torch's thread count).

Second routes: the outputs against numpy's product of the same arrays; the kernel a remembered call runs against
the one a fresh :class:`~napkin_cat.torch.kernels.Derived` (nothing remembered) makes at the same sizes; the
derivation a CPU model times against ``nc.derive(hardware=)`` at the call's dtype and threads.

Mutations caught: the dtype left out of the call key (the float32 call runs the float64 kernel: refused by the
kernel, and ``looked_up`` stays); the threads left out (no new derivation for two threads); the shapes left out
(the second size runs the first size's kernel)."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is the `kernels` extra (pip install 'napkin-cat[kernels]')")

import napkin_cat as nc  # noqa: E402
from napkin_cat.torch.kernels import Derived  # noqa: E402


@pytest.fixture
def no_store(monkeypatch):
    """Every derivation searched in this process (``searched`` counts them)."""
    monkeypatch.setenv("NAPKIN_DERIVATION_CACHE", "off")


def arrays(a, b, c, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(a, b, generator=g, dtype=dtype), torch.randn(b, c, generator=g, dtype=dtype)]


def product(xs):
    return np.asarray(xs[0].numpy(), np.float64) @ np.asarray(xs[1].numpy(), np.float64)


def test_a_call_seen_before_reads_and_looks_up_nothing_and_a_new_size_or_dtype_does(no_store, monkeypatch):
    f = Derived(nc.library.matmul(), memory=64)
    xs = arrays(8, 6, 4, torch.float64)
    (C,) = f(xs)
    assert np.allclose(C.numpy(), product(xs)) and (f.looked_up, f.searched) == (1, 1)

    # the same shapes, dtypes, devices and threads: nothing read off the tensors, nothing looked up
    seen = arrays(8, 6, 4, torch.float64, seed=1)
    with monkeypatch.context() as m:
        m.setattr(f.signature, "sizes", lambda *a: pytest.fail("sizes read again"))
        m.setattr(f, "kernel", lambda *a: pytest.fail("kernel looked up again"))
        (C,) = f(seen)
    assert np.allclose(C.numpy(), product(seen)) and f.looked_up == 1

    # another size: read and derived again, and the kernel is the one a fresh op makes at that size
    other = arrays(8, 6, 5, torch.float64)
    (C,) = f(other)
    assert np.allclose(C.numpy(), product(other)) and (f.looked_up, f.searched, len(f.derivations)) == (2, 2, 2)
    sizes = {"a": 8, "b": 6, "c": 5}
    fresh = Derived(nc.library.matmul(), memory=64).kernel(sizes, torch.float64, torch.device("cpu"))
    assert f.call(other)[3].source == fresh.source

    # another dtype at the same sizes: another kernel (float), the output in that dtype
    single = [x.float() for x in other]
    (C,) = f(single)
    assert C.dtype == torch.float32 and np.allclose(C.numpy(), product(single), rtol=1e-5, atol=1e-5)
    assert f.looked_up == 3 and "double" not in f.call(single)[3].source


def test_a_cpu_models_derivation_is_made_again_for_another_dtype_or_thread_count(no_store):
    """A CPU model times the kernel in the call's real dtype on torch's threads: each is part of what the call
    derives, so a call that changes one derives again (the derivation ``nc.derive(hardware=)`` makes there)."""
    model = nc.hardware.load_cpu("epyc-zen3-dev")
    f = Derived(nc.library.matmul(), hardware=model)
    before = torch.get_num_threads()
    made = []
    try:
        for dtype, threads in ((torch.float64, 1), (torch.float64, 1), (torch.float32, 1), (torch.float64, 2)):
            torch.set_num_threads(threads)
            xs = arrays(16, 12, 8, dtype)
            (C,) = f(xs)
            assert np.allclose(C.numpy(), product(xs), rtol=1e-5, atol=1e-5)
            made.append((f.looked_up, f.searched))
    finally:
        torch.set_num_threads(before)
    assert made == [(1, 1), (1, 1), (2, 2), (3, 3)]
    keys = {key[1] for key in f.derivations}
    assert keys == {("epyc-zen3-dev", 1, torch.float64), ("epyc-zen3-dev", 1, torch.float32),
                    ("epyc-zen3-dev", 2, torch.float64)}
    own = nc.derive(nc.library.matmul(), sizes={"a": 16, "b": 12, "c": 8}, hardware=model, threads=2,
                    value_bytes=8)
    assert f.derivations[((("a", 16), ("b", 12), ("c", 8)), ("epyc-zen3-dev", 2, torch.float64))].diagram == \
        own.diagram


def test_an_ops_forward_and_backward_look_up_once_per_call_key(no_store):
    """Through ``nc.torch.compile``: forward and backward twice on the same shapes look each up once (the
    backward's block tables and its run share the look-up); the gradient is numpy's."""
    op = nc.torch.compile(nc.library.matmul(), memory=64, name="test_op_calls_matmul")
    A, B = (x.requires_grad_() for x in arrays(8, 6, 4, torch.float64))
    for _ in range(2):
        A.grad = None
        op(A, B).sum().backward()
    assert (op.napkin.forward.looked_up, op.napkin.backward.looked_up) == (1, 1)
    assert np.allclose(A.grad.numpy(), np.ones((8, 4)) @ B.detach().numpy().T)


def test_a_call_that_is_not_tensors_is_still_refused_by_name():
    f = Derived(nc.library.matmul(), memory=64)
    with pytest.raises(nc.NapkinError, match="must be a torch tensor"):
        f([np.ones((8, 6)), torch.ones(6, 4)])
    with pytest.raises(nc.ShapeError, match="axis 'b' is 6 on input 0"):
        f([torch.ones(8, 6), torch.ones(5, 4)])
