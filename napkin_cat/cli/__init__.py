"""The ``napkin`` command (the only layer that may import everything).

``napkin reproduce --out DIR`` reproduces the paper end to end and writes a report;
``napkin table config|clock|overlap`` prints the hardware tables of §5 (the paper's configuration by
default; ``--hardware`` a model's name or file, ``--d``, ``--n``, ``--variant``), ``napkin table cluster`` a
cluster's capacity, links and collective times (``--devices``, ``--link``, ``--bytes``);
``napkin demo`` draws, evaluates and derives FlashAttention; ``napkin gallery --out DIR`` derives, draws and
plots every library algorithm and registered example into one page; ``cost``, ``derive``, ``plan``, ``codegen``
and ``draw`` take a library algorithm by name (with keyword arguments: ``'attention(lse=True)'``) or a Python
file that defines a diagram (``plan`` prints the loop nest, ``codegen`` the Triton, CUDA or C kernel of that
plan, and compiles or runs it);
``derive --grad`` derives the backward pass (``nc.grad`` of the algorithm; ``--saved --aux K`` from what
the forward saved; a file may also define ``nc.grad(...)`` itself).  Bad input gives one line on stderr and
exit status 2; ``reproduce`` exits 1 when a value differs from the paper.

>>> main(["derive", "matmul"]) == 0
0: kernel_formation
...
True
>>> main(["cost", "resnet"])
2
"""
from __future__ import annotations

import argparse
import sys

from napkin_cat.cli import commands, gallery
from napkin_cat.cli.inputs import LIBRARY, CLIError
from napkin_cat.errors import NapkinError

ALGORITHM_HELP = (f"a library algorithm ({', '.join(LIBRARY)}), one with keyword arguments ('attention(lse=True)') "
                  "or a Python file that defines a diagram")


def _natural(text: str) -> int:
    """A whole number ≥ 0 (argparse type)."""
    if not text.isascii() or not text.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number ≥ 0")
    return int(text)


class _Parser(argparse.ArgumentParser):
    """argparse, with usage errors reported in one line (no usage dump, no traceback)."""

    def error(self, message):
        raise CLIError(f"{self.prog}: {message} (see {self.prog} --help)")


def _version() -> str:
    """The installed distribution's version (the source tree's, from pyproject.toml, when not installed)."""
    from importlib import metadata
    try:
        return metadata.version("napkin-cat")
    except metadata.PackageNotFoundError:
        return "0+source"


def parser() -> argparse.ArgumentParser:
    """The ``napkin`` command line's argument parser: one subcommand per verb, each with its options."""
    p = _Parser(prog="napkin", description="FlashAttention on a napkin: neural circuit diagrams, verified "
                "rewrites, IO-cost functors, plans and pictures.")
    p.add_argument("--version", action="version", version=f"napkin {_version()}")
    sub = p.add_subparsers(dest="cmd", required=True, parser_class=_Parser, metavar="COMMAND")

    s = sub.add_parser("reproduce", help="reproduce the paper end to end; write DIR/report.md and report.json")
    s.add_argument("--out", default="out", help="output folder (default: out)")
    s.add_argument("--json", action="store_true", help="print the claims as JSON")
    s.add_argument("--no-progress", action="store_true", help="no progress bar")
    s.set_defaults(fn=commands.cmd_reproduce)

    s = sub.add_parser("demo", help="draw, evaluate and derive FlashAttention; print its IO cost")
    s.add_argument("--out", default="out", help="output folder for the drawings (default: out)")
    s.set_defaults(fn=commands.cmd_demo)

    def algorithm_args(s):
        s.add_argument("algorithm", help=ALGORITHM_HELP)
        s.add_argument("--name", help="which diagram of the Python file (default: `diagram`, or the only one)")

    s = sub.add_parser("cost", help="IO cost (H, M, FLOPs per level) of an algorithm, unfused or --derived")
    algorithm_args(s)
    s.add_argument("--derived", action="store_true", help="cost the tiled/streamed form derived by the rules")
    s.add_argument("--sizes", help="concrete axis sizes, e.g. q=4096,x=4096,d=64")
    s.add_argument("--memory", help="the memory for the optimum (a symbol name; default M)")
    s.add_argument("--json", action="store_true", help="print JSON")
    s.set_defaults(fn=commands.cmd_cost)

    s = sub.add_parser("derive", help="derive the algorithm by rewrite rules: the paper's derivation (its trace), "
                       "or with --memory the cheapest algorithm per memory size found by the search")
    algorithm_args(s)
    s.add_argument("--memory", help="search the cheapest algorithm per memory: a number (2^14), a range of powers of "
                   "two (2^10..2^20) with --sizes, or a symbol (M) for the piecewise closed form")
    s.add_argument("--sizes", help="axis sizes for a numeric search, e.g. q=4096,x=4096,d=128")
    s.add_argument("--level", type=int, default=1, help="the memory level searched (default 1)")
    s.add_argument("--tiles", choices=("divisors", "any"), default="divisors",
                   help="numeric search: tiles divide their axes (default), or any size with a shorter last tile")
    s.add_argument("--plot", help="with --memory: plot every candidate's H*(M), the envelope and the bound (PNG/SVG)")
    s.add_argument("--strip", help="draw the derivation (one row per rewrite) to this PNG/SVG path; with --memory "
                   "the derivation of the winner at the largest memory")
    s.add_argument("--grad", action="store_true", help="derive the backward pass: differentiate first (nc.grad: "
                   "the inputs, then one cotangent per output → the inputs' gradients) and search its algorithms "
                   "(--memory; default the symbol M)")
    s.add_argument("--wrt", metavar="POSITIONS", help="with --grad: the inputs to differentiate, by position, e.g. "
                   "0,2 (default: every input)")
    s.add_argument("--saved", action="store_true", help="with --grad: the gradient also takes the forward's outputs "
                   "as it saved them (after the inputs, before the cotangents) and reads them instead of recomputing "
                   "them (nc.grad(f, saved=True)): FlashAttention-2's backward from 'attention(lse=True)' --aux 1")
    s.add_argument("--aux", type=_natural, default=0, metavar="K", help="with --grad: the algorithm's last K outputs "
                   "are auxiliary (saved statistics such as a log-sum-exp): no cotangent for them (default 0)")
    s.add_argument("--cluster", metavar="GPU:P:LINK", help="the device form of least predicted step time on P GPUs "
                   "joined by LINK (e.g. h100-sxm5:8:nvlink4; a fourth part names the link between nodes), at --sizes "
                   "or over --sweep (docs/distributed.md)")
    s.add_argument("--sweep", metavar="AXES=LO..HI", help="with --cluster: set AXES (e.g. q,x) to each power of two "
                   "from LO to HI, the other axes from --sizes; --plot draws each form's predicted time")
    s.add_argument("--layout", metavar="AXES", help="with --cluster: the axis each input arrives sharded along, "
                   "one per input ('-': whole on every device), e.g. q,x,x")
    s.add_argument("--compute", choices=("time", "transfers"), default="time", help="with --cluster: each device's "
                   "algorithm by least predicted time (default) or by fewest transfers (faster, cruder)")
    s.add_argument("--json", action="store_true", help="print JSON")
    s.set_defaults(fn=commands.cmd_derive)

    s = sub.add_parser("plan", help="the loop-nest plan of an algorithm (pseudocode and its variables)")
    algorithm_args(s)
    s.add_argument("--sizes", required=True, help="axis sizes, and tile sizes if you fix them: q=4096,x=4096,d=64")
    s.add_argument("--hardware", default="h100-sxm5",
                   help="GPU model (name or file) whose shared memory per thread block bounds the tiles chosen by "
                        "nc.optimal for tiles not in --sizes (default h100-sxm5)")
    s.add_argument("--json", action="store_true", help="print JSON")
    s.set_defaults(fn=commands.cmd_plan)

    s = sub.add_parser("table", help="the paper's hardware tables: config (Tables 1-2), clock (Table 3), "
                       "overlap (§5.7)",
                       description="Tables of FlashAttention configured for a GPU's toy hierarchy (paper §5). "
                       "Defaults are the paper's configuration: FP8 queries and keys, FP16 otherwise, "
                       "t_q = 1, s_x = u_x = 64, d = 128, d' = 32, d'' = 8, on H100 SXM5.")
    s.add_argument("which", choices=("config", "clock", "overlap", "cluster"),
                   help="config: variables, bytes per block and per warpgroup, N_max (Tables 1-2); clock: clocks "
                        "per thread per trip (Table 3); overlap: tensor utilisation of overlap strategies (§5.7); "
                        "cluster: --devices GPUs of --hardware joined by --link: each device's capacity, the links, "
                        "the time of NCCL's ring collectives of a --bytes array (docs/distributed.md)")
    s.add_argument("--hardware", default="h100-sxm5", help="a GPU model's name (h100-sxm5, h100-pcie, h200, h800, "
                   "a100) or the path of a model file (docs/adding-a-hardware-model.md); default h100-sxm5")
    s.add_argument("--variant", default="paper", choices=("paper", "fp16", "fa3-fp16", "fa3-fp8"),
                   help="number formats: paper (FP8 Q, K; FP16 otherwise), fp16 (FP16 throughout: GPUs without "
                        "FP8 tensor cores), fa3-fp16, fa3-fp8 (FlashAttention-3, §6); default paper")
    s.add_argument("--d", type=int, default=128, help="head dimension (default 128)")
    s.add_argument("--n", type=int, help="config: scaling units (warpgroups on Hopper) per thread block for the "
                                         "excess columns (default: the most that fit)")
    s.add_argument("--strategy", choices=("intra", "inter"), help="config with a FlashAttention-3 variant: its "
                   "overlap strategy, whose iterations in flight are buffered (default: intra for fa3-fp16, inter "
                   "for fa3-fp8; Appendix A.5)")
    s.add_argument("--overhead", help="overlap: overhead per pipeline, e.g. special=2/3,general=1 "
                                      "(default §5.7's: special=1/2,general=1)")
    s.add_argument("--no-strict", action="store_true", help="config: show a table that overflows instead of "
                                                            "refusing it")
    s.add_argument("--devices", type=int, metavar="P", help="cluster: the number of GPUs")
    s.add_argument("--link", default="nvlink4", help="cluster: the link within a node (a shipped link: "
                   "nvlink4, nvlink5, pcie5, ib-ndr, ib-hdr, or a link file; default nvlink4)")
    s.add_argument("--inter-node-link", help="cluster: the link between nodes (ib-ndr, ib-hdr or a file) where "
                   "--devices exceeds a node")
    s.add_argument("--gpus-per-node", type=int, help="cluster: GPUs per node (default: the link's)")
    s.add_argument("--bytes", default="1 GiB", help="cluster: the size of the array each collective moves, with "
                   "its unit (default '1 GiB')")
    s.add_argument("--json", action="store_true", help="print JSON")
    s.set_defaults(fn=commands.cmd_table)

    s = sub.add_parser("codegen", help="the kernel of an algorithm's plan: Triton, CUDA C++ or C/OpenMP; save, "
                       "compile or run it", description="Plan the algorithm as `napkin plan` does (a function is "
                       "first derived by the rules; tiles not in --sizes are chosen by nc.optimal), then print the "
                       "kernel's source (stdout) or save it with a launcher (--out); --compile reports what the "
                       "compiler allocates beside the plan, --run checks the kernel against the numpy runner.")
    algorithm_args(s)
    s.add_argument("--target", required=True, choices=commands.TARGETS, help="the backend")
    s.add_argument("--sizes", help="axis sizes, and tile sizes if you fix them: q=4096,x=4096,d=64")
    s.add_argument("--derivation", help="the rule book's derivation to apply to a function (default: tiled_matmul "
                   "for matmul, else flash_attention); a diagram already partitioned is planned as it is")
    s.add_argument("--hardware", help="GPU model (name or file) whose shared memory per thread block bounds the tiles "
                   "(default: the model of --compile's architecture, else h100-sxm5)")
    s.add_argument("--out", metavar="DIR", help="save the kernel and its launcher (launch.py) into DIR")
    s.add_argument("--compile", nargs="?", const="default", metavar="ARCH",
                   help="compile it: cuda (nvcc -Xptxas -v: registers, spills, shared memory vs the plan's; ARCH "
                        "sm_90 or sm_80, default sm_90), triton (triton.compile for ARCH: shared memory), c (cc "
                        "-O3 -fopenmp, no ARCH)")
    s.add_argument("--run", action="store_true", help="run it on random inputs (c; triton under its interpreter) and "
                   "print the largest error against the numpy runner (exit 1 beyond tolerance)")
    s.add_argument("--seed", type=_natural, default=0, help="seed of --run's random inputs (default 0)")
    s.add_argument("--json", action="store_true", help="print JSON (the source included unless --out)")
    s.set_defaults(fn=commands.cmd_codegen)

    s = sub.add_parser("gallery", help="every library algorithm and registered example: drawn as written and "
                       "derived, H*(M) against the unfused one and the bound, variants per memory range, pseudocode",
                       description="For every algorithm of nc.library and every example registered in "
                       "napkin_cat/cli/gallery/examples.py: derive it at each memory of --memory (nc.derive, as "
                       "`napkin derive --memory` does), draw it as written and derived, plot its H*(M) against the "
                       "unfused algorithm and the lower bound, write each variant's pseudocode (as `napkin plan` "
                       "prints it) under DIR/<entry>/ and the page DIR.md (docs/gallery.md is `napkin gallery --out "
                       "docs/gallery`).")
    s.add_argument("--out", default="gallery", metavar="DIR", help="folder of the pictures and pseudocode "
                   "(default: gallery)")
    s.add_argument("--markdown", metavar="PATH", help="the page (default: DIR.md beside the folder)")
    s.add_argument("--only", metavar="NAMES", help="comma-separated entries to build (default: all)")
    s.add_argument("--memory", default=gallery.DEFAULT_MEMORY, help="the memories, a range of powers of two "
                   f"(default {gallery.DEFAULT_MEMORY})")
    s.add_argument("--sizes", help="axis sizes for every entry that has the axis, e.g. q=1024,x=1024 (default: "
                   f"{gallery.DEFAULT_SIZE} per axis, " + ", ".join(f"{k}={v}" for k, v in gallery.AXIS_SIZES.items())
                   + ")")
    s.add_argument("--format", default="png", choices=gallery.FORMATS, help="the pictures' format (default png)")
    s.add_argument("--json", action="store_true", help="print JSON (entries, variants per range, seconds)")
    s.add_argument("--no-progress", action="store_true", help="no progress bar")
    s.set_defaults(fn=gallery.command)

    s = sub.add_parser("draw", help="draw an algorithm to PNG/SVG in the paper's style")
    algorithm_args(s)
    s.add_argument("path", help="output .png or .svg")
    s.add_argument("--derived", action="store_true", help="draw the form derived by the rules")
    s.set_defaults(fn=commands.cmd_draw)
    return p


def main(argv=None) -> int:
    """Run ``napkin``; return the exit status (2 for bad input, with one line on stderr)."""
    try:
        args = parser().parse_args(argv)
        return args.fn(args)
    except (NapkinError, OSError) as e:
        message = str(e).splitlines()[0] if str(e) else type(e).__name__
        print(f"napkin: error: {message}", file=sys.stderr)
        return 2


def entry() -> None:  # pragma: no cover  (the console script)
    """The console script ``napkin``: :func:`main`'s exit status as the process's."""
    sys.exit(main())
