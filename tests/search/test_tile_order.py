"""A derivation's tiles come in an order the hash seed does not change (a kernel's streams are a set: their tiles,
each 1, were listed in set order, so the plan printed ``s_h=1, s_f=1`` under one ``PYTHONHASHSEED`` and
``s_f=1, s_h=1`` under another, and the gallery's committed pseudocode changed with the seed).

Second route: an interpreter under a seed that listed them out of order before the fix (1), read back."""
import json
import os
import subprocess
import sys

PROGRAM = """
import json, napkin_cat as nc
r = nc.derive(nc.library.transformer_block(), sizes=dict(n=16, e=16, h=2, d=8, f=16), memory=1024)
print(json.dumps([str(k) for k in r.optimum.sizes]))
"""


def keys_under(seed: int, tmp_path) -> list:
    env = {**os.environ, "PYTHONHASHSEED": str(seed), "NAPKIN_CACHE": str(tmp_path / f"cache{seed}")}
    out = subprocess.run([sys.executable, "-c", PROGRAM], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_kernels_stream_tiles_come_in_one_order_under_every_hash_seed(tmp_path):
    one = keys_under(1, tmp_path)      # (seed 1 listed s_h before s_f: the set's order)
    streams = [k for k in one if k.startswith("s_")]
    assert len(streams) >= 2, one        # (the case: a kernel streaming two axes, h and f)
    assert streams == sorted(streams)
