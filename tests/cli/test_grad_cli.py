"""``napkin derive --grad``: the backward pass searched from the command line, a file's own ``nc.grad(...)``,
the gradient from what the forward saved (``--saved --aux K``, on ``'attention(lse=True)'``: a library algorithm
with keyword arguments), and one-line errors (exit 2) for a bad ``--wrt``, ``--aux`` or keyword argument, or a
primitive without a vector-Jacobian product.

The derived backward's numbers change as rules land (the recomputation rule), so these tests assert
properties: the gradient's inputs and outputs, that it moves at least what the forward moves, that the
strip is drawn from the trace the JSON lists.
"""
import contextlib
import functools
import io
import json

import pytest

import napkin_cat as nc
from napkin_cat.cli import main

SMALL = ["--memory", "2^11..2^12", "--sizes", "q=64,x=64,d=16"]


def run_json(argv, capsys):
    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


@functools.cache
def derived(*argv) -> dict:
    """``napkin ARGV --json``, run once for the module: several tests read the same derivation (the backward of
    attention at :data:`SMALL`, the one with ``--wrt 2,0``), each searched once (read it, do not change it)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main([*argv, "--json"]) == 0
    return json.loads(out.getvalue())


def test_help_names_grad_and_wrt(capsys):
    with pytest.raises(SystemExit) as e:
        main(["derive", "--help"])
    out = capsys.readouterr().out
    assert e.value.code == 0 and "--grad" in out and "--wrt POSITIONS" in out and "cotangent" in out
    assert "--saved" in out and "--aux K" in out and "attention(lse=True)" in out


def test_grad_of_attention_takes_the_cotangent_and_moves_more_than_the_forward(capsys):
    back = derived("derive", "attention", "--grad", *SMALL)
    forward = run_json(["derive", "attention", *SMALL], capsys)
    att = nc.library.attention()
    ins, outs = [str(a) for a in att.dom.inside], [str(a) for a in att.cod.inside]
    assert back["algorithm"] == "grad(attention)"
    assert back["grad"] == {"inputs": ins + outs, "outputs": ins}        # (Q, K, V, dO) → (dQ, dK, dV)
    assert "grad" not in forward
    assert [r["M"] for r in back["rows"]] == [r["M"] for r in forward["rows"]] == ["2048", "4096"]
    for b, f in zip(back["rows"], forward["rows"], strict=True):
        assert int(b["H_star"]) >= int(f["H_star"]) > 0, (b, f)


def test_the_strip_is_the_winners_derivation_at_the_largest_memory(tmp_path, capsys):
    strip = tmp_path / "backward.png"
    data = run_json(["derive", "matmul", "--grad", "--memory", "2^8..2^10", "--sizes", "a=64,b=64,c=64",
                     "--strip", str(strip)], capsys)
    assert data["strip"] == str(strip) and strip.stat().st_size > 1000
    from PIL import Image
    with Image.open(strip) as im:          # one row (2.6 in at 100 dpi) per rule of the last row's trace
        assert im.size[1] == pytest.approx(260 * len(data["rows"][-1]["trace"]), rel=0.01)


def test_wrt_picks_the_gradients_in_the_order_given():
    data = derived("derive", "attention", "--grad", "--wrt", "2,0", *SMALL)
    assert data["algorithm"] == "grad(attention, wrt=2,0)"
    assert data["grad"]["outputs"] == ["x×d", "q×d"] and len(data["grad"]["inputs"]) == 4


def test_grad_without_memory_searches_symbolically(capsys):
    assert main(["derive", "matmul", "--grad"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "grad(matmul): (a×b, b×c, a×c) → (a×b, b×c)"
    assert "H* = " in out and "M" in out.splitlines()[1]


def test_a_file_may_define_the_gradient_itself(tmp_path, capsys):
    src = tmp_path / "backward.py"
    src.write_text("import napkin_cat as nc\n"
                   "diagram = nc.grad(nc.library.attention(), wrt=[2, 0])\n")
    data = run_json(["derive", str(src), *SMALL], capsys)
    by_flag = derived("derive", "attention", "--grad", "--wrt", "2,0", *SMALL)       # the previous test's run
    assert data["algorithm"] == "backward"
    assert [r["H_star"] for r in data["rows"]] == [r["H_star"] for r in by_flag["rows"]]
    # the rule book's derivation is the forward's: without --memory the file's gradient is refused, with a hint
    assert main(["derive", str(src)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "rule book's derivation does not apply" in err and "--memory" in err


def test_saved_and_aux_give_the_gradient_flashattention2_reads(capsys):
    """``--grad --saved --aux 1`` on attention(lse=True): the gradient takes Q, K, V, the saved O and L, and dO (no
    cotangent for L); it recomputes no SoftMax or log-sum-exp, and where everything fits it moves exactly its
    inputs and outputs once, which the gradient from the inputs alone (recomputing the statistics) does not."""
    at = ["--memory", "2^12", "--sizes", "q=64,x=64,d=16"]
    saved = run_json(["derive", "attention(lse=True)", "--grad", "--saved", "--aux", "1", *at], capsys)
    # the gradient from the inputs alone at 2^12: the row of the backward derived at SMALL (2^11 and 2^12)
    (plain,) = [r for r in derived("derive", "attention", "--grad", *SMALL)["rows"] if r["M"] == "4096"]
    qd, xd = "q×d", "x×d"
    assert saved["algorithm"] == "grad(attention(lse=True), saved, aux=1)"
    assert saved["grad"] == {"inputs": [qd, xd, xd, qd, "q", qd], "outputs": [qd, xd, xd]}
    (row,) = saved["rows"]
    assert "SoftMax" not in json.dumps(row["variant"]) and "LSE" not in json.dumps(row["variant"]), row["variant"]
    q, x, d = 64, 64, 16
    compulsory = (q * d + 2 * x * d) + (q * d + q) + q * d + (q * d + 2 * x * d)   # Q K V, O L, dO; dQ dK dV
    assert int(row["H_star"]) == compulsory == 8256
    assert int(plain["H_star"]) > compulsory


def test_a_library_algorithm_takes_keyword_arguments():
    from napkin_cat.cli.inputs import algorithm
    label, d = algorithm("sliding_window_attention(window=8)")
    assert label == "sliding_window_attention(window=8)"
    assert nc.dumps(d) == nc.dumps(nc.library.sliding_window_attention(8))
    label, d = algorithm(" attention( lse = True ) ")
    assert label == "attention(lse=True)" and len(d.cod) == 2


BAD = [
    (["derive", "attention", "--grad", "--wrt", "3"], "the diagram has no input 3; its inputs are 0: q×d, 1: x×d"),
    (["derive", "attention", "--grad", "--wrt", "x"], "malformed --wrt 'x'"),
    (["derive", "attention", "--grad", "--wrt", "1,1"], "an input is named twice"),
    (["derive", "attention", "--wrt", "1"], "--wrt says how --grad differentiates: add --grad"),
    (["derive", "attention", "--saved"], "--saved says how --grad differentiates: add --grad"),
    (["derive", "attention(lse=True)", "--aux", "1"], "--aux says how --grad differentiates: add --grad"),
    (["derive", "attention", "--grad", "--saved", "--aux", "1"], "aux=1: f has 1 output(s); aux is 0 … 0"),
    (["derive", "attention(lse=True)", "--grad", "--aux", "2"], "aux=2: f has 2 output(s); aux is 0 … 1"),
    (["derive", "attention", "--grad", "--aux", "-1"], "argument --aux: '-1' is not a whole number ≥ 0"),
    (["derive", "attention(lse=maybe)", "--grad"], "lse=maybe is not a literal"),
    (["derive", "attention(lse=[1])", "--grad"], "lse=[1] is not a literal"),
    (["derive", "attention(1)", "--grad"], "give attention's arguments by keyword (q, x, d, formats, lse)"),
    (["derive", "attention(window=3)"], "attention takes no argument 'window'; its arguments: q, x, d, formats, lse"),
    (["derive", "attention(lse=True, lse=False)"], "'lse' is given twice"),
    (["derive", "resnet(depth=50)"], "unknown algorithm 'resnet' in 'resnet(depth=50)': give one of matmul"),
    (["derive", "sliding_window_attention()"], "missing 1 required positional argument: 'window'"),
    (["derive", "attention(lse=True"], "unknown algorithm 'attention(lse=True'"),
]


@pytest.mark.parametrize("argv, message", BAD, ids=[b[1][:24] for b in BAD])
def test_bad_flags_and_arguments_are_one_line_and_status_2(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("napkin: error: ") and message in err, err


def test_a_primitive_without_a_vjp_is_refused_by_name(tmp_path, capsys):
    declare = ("import napkin_cat as nc\n"
               "if 'cli_cube' not in nc.engine.KINDS:\n"
               "    nc.declare('cli_cube', lambda xs, core: [xs[0] ** 3], flops=lambda core: {'general': 2})\n")
    plain, inside = tmp_path / "cube.py", tmp_path / "cube_grad.py"
    plain.write_text(declare + "diagram = nc.einsum('a b, b -> a') >> nc.apply('cli_cube', 'a')\n")
    inside.write_text(declare + "diagram = nc.grad(nc.apply('cli_cube', 'a'))\n")
    try:
        assert main(["derive", str(plain), "--grad", "--memory", "2^10", "--sizes", "a=32,b=32"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "'cli_cube'" in err and "no vector-Jacobian product" in err, err
        assert main(["derive", str(inside), "--memory", "2^10", "--sizes", "a=32"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "raised NoVJPError" in err and "'cli_cube'" in err, err
    finally:
        nc.engine.KINDS.pop("cli_cube", None)
