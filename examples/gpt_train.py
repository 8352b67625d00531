"""Train a small GPT with napkin-cat ops beside the same model in plain PyTorch (issue 33, item 7).

    python examples/gpt_train.py                       # 50 steps in float64, both loss curves, the largest gap
    python examples/gpt_train.py --dtype float32 --steps 20

Both models start from the same weights and see the same batches of a character corpus made here; AdamW trains
each.  The napkin-cat model's attention, MLP, RMSNorm and loss are ``nc.torch.compile`` ops (see ``gpt.py``);
the script prints each step's two losses and their relative difference, and exits 1 where a step's differ by more
than the tolerance (1e-4 relative in float64; float32's is given with ``--tolerance``).
"""
from __future__ import annotations

import argparse
import pathlib
import sys
import time

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from gpt import Config, batches, corpus, napkin_ops, side_by_side  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--dtype", choices=("float64", "float32"), default="float64")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--context", type=int, default=16)
    ap.add_argument("--width", type=int, default=16)
    ap.add_argument("--heads", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=32)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--memory", type=int, default=64, help="values at level 1 the ops are derived at")
    ap.add_argument("--depth", type=int, default=0, help="prepare rewrites each search chains (nc.derive's depth)")
    ap.add_argument("--tolerance", type=float, default=1e-4, help="largest relative difference of a step's losses")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)        # the C kernels take torch's threads; on tensors this small one is fastest
    vocab, data = batches(corpus(4000), args.steps, batch=args.batch, context=args.context)
    config = Config(len(vocab), context=args.context, width=args.width, heads=args.heads, hidden=args.hidden,
                    layers=args.layers)
    print(f"{config}, {args.steps} steps of AdamW in {args.dtype}, batch {args.batch}")
    start = time.perf_counter()
    expected, found, worst = side_by_side(config, data, dtype=getattr(torch, args.dtype),
                                          ops=napkin_ops(config, memory=args.memory, depth=args.depth))
    print(f"{'step':>4}  {'torch':>18}  {'napkin-cat':>18}  {'relative gap':>12}")
    for step, (a, b) in enumerate(zip(expected, found)):
        print(f"{step:>4}  {a:>18.12f}  {b:>18.12f}  {abs(a - b) / abs(a):>12.3e}")
    print(f"largest relative difference {worst:.3e} (tolerance {args.tolerance:g}); loss {expected[0]:.4f} -> "
          f"{expected[-1]:.4f}; {time.perf_counter() - start:.1f} s")
    return 0 if worst <= args.tolerance else 1


if __name__ == "__main__":
    sys.exit(main())
