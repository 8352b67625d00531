"""What a derived diagram writes to level 0 between its kernels (the tests' helper for the backward's checks).

A value a kernel (a Region) outputs is *intermediate* when it reaches no output of the diagram (through
copies): it is written to level 0 only to be read back by another kernel.  Read off the netlist's wires, not
the arrays' types, so an intermediate of an output's shape (dS beside the bias's gradient) is still seen."""
from __future__ import annotations

from napkin_cat.rewriting.netlist import to_netlist


def _reaches_output(net, end) -> bool:
    if end[0] == "out":
        return True
    if end[0] == "in":
        return False
    node = net.nodes[end[0]]
    return node.kind == "copy" and any(_reaches_output(net, e) for e in net.consumers(end[0]))


def intermediates(diagram) -> list:
    """The arrays the kernels of ``diagram`` write to level 0 that no output of it is."""
    net = to_netlist(diagram)
    return [net.wires[w].array for nid, node in net.nodes.items()
            if node.kind == "region" for w in net.outs[nid]
            if not _reaches_output(net, net.wires[w].dst)]


def crosses(arrays, *axes) -> list:
    """The arrays among ``arrays`` that carry every one of ``axes`` (a q×x array: the query and key axes)."""
    return [a for a in arrays if set(axes) <= set(a.names)]


def kernels(diagram) -> int:
    net = to_netlist(diagram)
    return sum(1 for n in net.nodes.values() if n.kind == "region")

