"""CPU models: the shipped file loads and agrees with this machine's sysfs where it describes it; bad files
get named errors; the tiles a CPU model chooses fit its level-1 memory and keep the optimal transfers."""
from __future__ import annotations

import platform

import pytest

import napkin_cat as nc
from napkin_cat.hardware import HardwareError, cpus, load_cpu, this_cpu

GOOD = """format = 1
name = "tiny"
[caches]
l1d = "16 KiB"
l2 = "64 KiB"
l3 = "1 MiB"
line = "64 B"
"""


def test_the_zen4_model_ships_and_gives_level_one_memory_in_values():
    assert "epyc-zen4" in cpus()
    zen4 = load_cpu("epyc-zen4")
    assert (zen4.l1d, zen4.l2, zen4.l3, zen4.line, zen4.vector) == (32 * 1024, 2 ** 20, 32 * 2 ** 20, 64, 64)
    assert zen4.memory(1, "fp32") == 2 ** 18 and zen4.memory(1, "fp16") == 2 ** 19
    assert "57647" in zen4.sources["caches"]


def _zen4_here() -> bool:
    try:
        text = open("/proc/cpuinfo").read()
    except OSError:
        return False
    return "AuthenticAMD" in text and "\ncpu family\t: 25\n" in text and "avx512f" in text


@pytest.mark.skipif(platform.system() != "Linux" or not _zen4_here(), reason="not an AMD Zen 4 (family 25 with "
                    "AVX-512) running Linux: the shipped epyc-zen4 file does not describe this machine")
def test_the_zen4_file_matches_this_machines_sysfs():
    here, zen4 = this_cpu(), load_cpu("epyc-zen4")
    assert here is not None
    assert (here["l1d"], here["l2"], here["line"]) == (zen4.l1d, zen4.l2, zen4.line)
    assert here["l3"] <= zen4.l3      # a guest may see one CCD's L3 or less of it


def test_sysfs_is_read_from_its_index_folders(tmp_path):
    for k, (level, kind, size) in enumerate([("1", "Data", "48K"), ("1", "Instruction", "32K"),
                                             ("2", "Unified", "2048K"), ("3", "Unified", "96M")]):
        d = tmp_path / f"index{k}"
        d.mkdir()
        for name, value in (("level", level), ("type", kind), ("size", size), ("coherency_line_size", "64")):
            (d / name).write_text(value + "\n")
    assert this_cpu(tmp_path) == {"l1d": 48 * 1024, "l2": 2 * 2 ** 20, "l3": 96 * 2 ** 20, "line": 64}
    assert this_cpu(tmp_path / "missing") is None


def test_a_users_file_loads(tmp_path):
    f = tmp_path / "tiny.toml"
    f.write_text(GOOD)
    assert load_cpu(f).memory(1) == 64 * 1024 // 4 and load_cpu(str(f)).vector is None


@pytest.mark.parametrize("change, message", [
    (('l2 = "64 KiB"\n', ''), r"\[caches\] needs l2"),
    (('l2 = "64 KiB"', 'l2 = "2 MiB"'), r"caches must grow outwards"),
    (('line = "64 B"', 'line = "64 GHz"'), r"'GHz' is a unit of frequency"),
    (('[caches]', '[caches]\nl4 = "1 GiB"'), r"unknown field\(s\) \['l4'\]"),
    (('format = 1', 'format = 3'), r"format must be one of \(1, 2\)"),
])
def test_bad_files_are_named(tmp_path, change, message):
    f = tmp_path / "bad.toml"
    f.write_text(GOOD.replace(*change))
    with pytest.raises(HardwareError, match=message):
        load_cpu(f)


def test_unknown_names_and_levels_are_named():
    with pytest.raises(HardwareError, match="no CPU model called 'pentium'; shipped CPU models are epyc-zen3-dev, "
                                            "epyc-zen4"):
        load_cpu("pentium")
    with pytest.raises(HardwareError, match="level 1 only"):
        load_cpu("epyc-zen4").memory(2)


FLASH = nc.group(nc.stream(nc.library.attention(), "x", "s_x"), "q", "g_q")


@pytest.mark.parametrize("n", [1024, 4096, 8192])
def test_tiles_fit_level_one_and_keep_the_optimal_transfers(n, tmp_path):
    """The groups are nc.optimal's at the model's L2; the stream is the longest that keeps H* and fits, so the
    next longer one either does not fit or moves more."""
    c = nc.cost(FLASH)
    sizes = {"q": n, "x": n, "d": 64}
    for cpu in (load_cpu("epyc-zen4"), _tiny(tmp_path)):
        memory = cpu.memory(1)
        o = cpu.tiles(c, sizes)
        tiles = {str(k): int(v) for k, v in o.sizes.items() if str(k) not in sizes}
        at = {sym: {**sizes, **tiles}[str(sym)] for sym in c.M[1].free_symbols}
        assert int(c.M[1].subs(at)) <= memory
        assert o.H == nc.optimal(c, memory=memory, level=1, sizes=sizes).H
        longer = 2 * tiles["s_x"]
        if longer <= n:
            try:
                assert nc.optimal(c, memory=memory, level=1, sizes=sizes, streams=longer).H > o.H
            except nc.MemoryLimitError:
                pass


def test_a_smaller_cache_gives_smaller_tiles(tmp_path):
    c, sizes = nc.cost(FLASH), {"q": 4096, "x": 4096, "d": 64}
    big = {str(k): int(v) for k, v in load_cpu("epyc-zen4").tiles(c, sizes).sizes.items() if str(k) not in sizes}
    small = {str(k): int(v) for k, v in _tiny(tmp_path).tiles(c, sizes).sizes.items() if str(k) not in sizes}
    assert big == {"g_q": 1024, "s_x": 64}
    assert small["g_q"] * small["s_x"] < big["g_q"] * big["s_x"]


def _tiny(tmp_path):
    f = tmp_path / "tiny.toml"
    f.write_text(GOOD)
    return load_cpu(f)


@pytest.mark.parametrize("n, blocks", [(1024, 2), (2048, 8), (4096, 2), (4096, 8)])
def test_tiles_leave_at_least_one_block_per_thread(n, blocks):
    c, sizes = nc.cost(FLASH), {"q": n, "x": n, "d": 64}
    zen4 = load_cpu("epyc-zen4")
    free = {str(k): int(v) for k, v in zen4.tiles(c, sizes).sizes.items() if str(k) not in sizes}
    o = zen4.tiles(c, sizes, blocks=blocks)
    tiles = {str(k): int(v) for k, v in o.sizes.items() if str(k) not in sizes}
    assert n // tiles["g_q"] >= blocks
    if n // free["g_q"] >= blocks:
        assert tiles == free                      # already enough blocks: the same tiles
    else:
        assert o.H > nc.optimal(c, memory=zen4.memory(1), level=1, sizes=sizes).H
        assert tiles["g_q"] == n // blocks        # the cheapest legal group: the largest that gives enough


def test_this_cpu_name_is_the_model_name_linux_gives(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nvendor_id\t: Made Up\nmodel name\t: Made Up 9000 16-Core\nflags\t: fpu\n")
    assert nc.hardware.this_cpu_name(info) == "Made Up 9000 16-Core"
    assert nc.hardware.this_cpu_name(tmp_path / "absent")      # another OS: what platform says, never empty
