"""The threads that issue a kernel's tensor-core products come from the GPU's hierarchy (its scaling unit and its
first instruction's ``m``), so a GPU without warpgroups (Ampere) is timed, not refused for want of shared memory."""
from pathlib import Path

import pytest

import napkin_cat.hardware

import napkin_cat as nc
from napkin_cat.hardware.model import load
from napkin_cat.hardware.issuing import issuing_threads


@pytest.mark.parametrize("gpu, unit_threads, m", [("a100", 32, 16), ("h100-sxm5", 128, 64), ("h200", 128, 64)])
def test_one_unit_per_instruction_rows_at_most_256_threads(gpu, unit_threads, m):
    g = load(gpu)
    for rows in (1, 8, 16, 32, 64, 128, 256, 512):
        units = max(1, min(256 // unit_threads, rows // m))       # the rule, written out apart
        assert issuing_threads(g, rows) == unit_threads * units, (gpu, rows)


def test_an_ampere_gpu_times_an_mlp_and_attention():
    """Every tile assignment used to be refused on the A100 (it has no warpgroup), reported as no tile fitting its
    shared memory; now each kernel is timed with a whole number of warps, one per 16 rows of its products."""
    r = nc.derive(nc.library.mlp(), sizes=dict(n=64, i=128, f=256, o=64), hardware="a100")
    assert r.prediction.time > 0
    for k in r.prediction.kernels:
        assert k.bytes["threads"] % 32 == 0 and 32 <= k.bytes["threads"] <= 256
        assert k.bytes["on_chip_per_block"] <= load("a100").smem_per_block
    a = nc.derive(nc.library.attention(), sizes=dict(q=1024, x=1024, d=64), hardware="a100")
    (k,) = a.prediction.kernels
    g_q = a.prediction.sizes["g_q"]
    assert k.bytes["threads"] == 32 * max(1, min(8, g_q // 16))
    assert "warps of the a100, one per 16 rows" in " ".join(a.prediction.assumptions)


def test_a_refusal_says_what_refused_the_tiles(tmp_path):
    """With two registers per thread every assignment is refused by the registers, not the shared memory: the
    error says so (it used to name only the shared memory)."""
    src = (Path(napkin_cat.hardware.__file__).parent / "models" / "h100-sxm5.toml").read_text()
    assert 'registers_per_thread = "255 registers"' in src
    path = tmp_path / "tiny-registers.toml"
    path.write_text(src.replace('registers_per_thread = "255 registers"', 'registers_per_thread = "2 registers"')
                    .replace('name = "h100-sxm5"', 'name = "tiny-registers"'))
    with pytest.raises(nc.MemoryLimitError, match="registers per thread, over half the tiny-registers's 2"):
        nc.derive(nc.library.mlp(), sizes=dict(n=64, i=128, f=256, o=64), hardware=str(path))
