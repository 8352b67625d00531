"""The torch tests run the C kernels on one thread (tiny tensors: threads would only add noise), restored after
each module."""
import pytest


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    torch = pytest.importorskip("torch", reason="torch is the `kernels` extra (pip install 'napkin-cat[kernels]')")
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
