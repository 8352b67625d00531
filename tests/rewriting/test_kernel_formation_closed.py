"""Kernel formation absorbs the closed values that ``f`` alone reads, found in time linear in the netlist; a plain
kernel is told apart once per node.

Found from outside (issue 35): ``nc.derive`` of 200 elementwise maps in a row took 6.5 CPU s (100 maps: 1.6 s),
three quarters of it in building the winner: kernel formation's pattern asks, for every candidate ``f`` of every
step, which closed boxes feed ``f`` privately (``rewrites.kernels._discards``), and that walked each candidate's
producers down to an input (1.35 M recursive calls for 200 maps: n candidates × n steps × n deep).  The privately
closed boxes are now read off once per netlist (:func:`rewrites.kernels.privately_closed`): 200 maps 2.5 CPU s.

Checked by two routes: the absorbed trees equal the definition's (a box feeding ``f`` directly and no one else,
reading such boxes only: the recursive walk, written here) on library functions with masks from positions, on
random programs and on a chain of maps; and the work of one scan of the candidates is linear (the calls of the
node test ``is_function_box`` counted, not timed).
"""
from __future__ import annotations

from types import SimpleNamespace

import napkin_cat as nc
import rewrites.kernel_nodes as kernel_nodes
import rewrites.kernels as kernels
from napkin_cat.rewriting.netlist import INPUT, OUTPUT, to_netlist
from napkin_cat.testing.programs import random_program
from rewrites.kernel_nodes import is_function_box


def defined(net, nid) -> list:
    """The closed boxes feeding ``nid`` privately, by the definition: each feeds ``nid`` directly with its one output
    and reads only such boxes (a walk down every producer)."""
    out = []
    for w in net.ins[nid]:
        p = net.wires[w].src[0]
        if p in (INPUT, OUTPUT) or not is_function_box(net, net.nodes[p]) or len(net.outs[p]) != 1:
            continue
        below = defined(net, p)
        if all(net.wires[v].src[0] in below for v in net.ins[p]):
            out += below + [p]
    return out


def maps(n):
    b = nc.Builder(nc.types("a b"))
    x = b.inputs[0]
    for i in range(n):
        x = b(nc.elementwise(["exp", "tanh", "neg", "relu"][i % 4], "a b"), x)
    return b.build(x)


def test_the_absorbed_closed_trees_are_the_definitions():
    L = nc.library
    diagrams = [L.causal_attention(), L.prefix_lm_attention(3), L.alibi_attention(), L.sliding_window_attention(4),
                L.document_attention(causal=True), L.softcap_attention(mask=L.causal_mask()), maps(12)]
    diagrams += [random_program(seed).diagram for seed in range(25)]
    trees = 0
    for d in diagrams:
        net = to_netlist(d)
        for nid, node in net.nodes.items():
            if is_function_box(net, node):
                found = kernels.kernel_formation.pattern.absorb(net, {"f": nid})
                want = defined(net, nid)
                assert [v for k, v in found.items() if k.startswith("closed")] == want, (d, node.name)
                trees += bool(want)
    assert trees >= 6        # the masks' comparisons of positions are absorbed into their readers


def test_one_scan_of_kernel_formation_is_linear_in_the_boxes(monkeypatch):
    """Scanning 120 maps in a row for kernel formation asks the node test a bounded number of times per node (the
    walk to the input per candidate asked it 7,260 times, n²/2)."""
    calls = []

    def counted(net, n):
        calls.append(1)
        return is_function_box(net, n)

    monkeypatch.setattr(kernels, "is_function_box", counted)
    net = to_netlist(maps(120))
    matches = kernels.kernel_formation.candidates(net)
    assert len(matches) == 120
    assert len(calls) <= 2 * len(net.nodes), len(calls)


def test_a_plain_kernel_is_told_apart_once_per_node_and_as_defined(monkeypatch):
    """``is_plain_kernel`` (no region inside the kernel yet) equals its definition on plain and partitioned
    kernels, and lists a node's boxes once however often it is asked (fusing a block asked it of every pair of
    kernels at every step: 400 maps, 160,001 asks; derive 9.3 -> 6.6 CPU s)."""
    plain = to_netlist(nc.kernel(nc.library.attention()))
    parted = to_netlist(nc.derive(nc.library.attention(), memory=256, sizes={"q": 32, "x": 32, "d": 4}).diagram)
    regions = [(net, n) for net in (plain, parted) for n in net.nodes.values() if n.kind == "region"]
    want = [isinstance(n.box, nc.Kernel) and not any(isinstance(b, nc.Region) for b in n.box.arg.boxes)
            for _, n in regions]
    assert [kernel_nodes.is_plain_kernel(net, n) for net, n in regions] == want
    assert True in want and False in want

    asked = []

    class Counted(type):
        def __instancecheck__(cls, obj):
            asked.append(obj)
            return isinstance(obj, nc.Region)

    class Region(metaclass=Counted):
        pass

    monkeypatch.setattr(kernel_nodes, "nc", SimpleNamespace(Kernel=nc.Kernel, Grid=nc.Grid, Region=Region))
    net = to_netlist(nc.kernel(nc.library.attention()))
    (node,) = [n for n in net.nodes.values() if n.kind == "region"]
    assert all(kernel_nodes.is_plain_kernel(net, node) for _ in range(10))
    assert len(asked) == len(node.box.arg.boxes)
