"""Filling the hole of a match: the netlist with the matched nodes replaced, in time proportional to the change.

:func:`splice` puts a replacement netlist where the matched nodes were and :func:`normalize` flattens the copy
chains that may leave; :func:`splice_rebuild` is the same splice built from scratch (its specification, what
a test compares it with).  A derivation of a 32-block transformer makes thousands of rewrites on a netlist of
thousands of nodes: each costs the copies of its tables and the sort of the stretch it touches, not a
rebuild of the whole.  The nodes' order keys (:attr:`~.netlist.Netlist.position`) are carried over as well:
the stretch is keyed between its neighbours' keys (spaced :data:`~.netlist.POSITION_GAP` apart), so that a
splice does not number every node again.

>>> import napkin_cat as nc
>>> from napkin_cat.rewriting.match import Pattern, find, kind
>>> d = nc.elementwise("exp", "q") >> nc.elementwise("neg", "q") >> nc.elementwise("tanh", "q")
>>> m = find(Pattern({"f": kind("neg")}), d)[0]
>>> [n.name for n in m.fill(nc.elementwise("relu", "q")).nodes.values()]
['exp', 'relu', 'tanh']
"""
from __future__ import annotations

from dataclasses import replace

from napkin_cat.errors import RewriteError
from napkin_cat.rewriting.netlist import INPUT, OUTPUT, POSITION_GAP, Netlist, Wire, stable_order


def splice(net: Netlist, chosen: set, input_wires, output_wires, rn: Netlist) -> Netlist:
    """Replace the nodes ``chosen`` (with these boundary wires) by the netlist ``rn``.

    In time proportional to the change (plus copies of the tables): wires away from the hole keep their ids,
    and only the stretch of the topological order between the first and the last replaced node is sorted
    again, with the new nodes where the first replaced node was.  The result is the netlist
    :func:`splice_rebuild` builds from scratch, but for the wire ids.
    """
    offset, fresh = net.fresh_ids
    top_node, top_wire = offset, fresh
    srcs = [net.wires[w].src for w in input_wires]
    dsts = [net.wires[w].dst for w in output_wires]
    wires, ins, outs = dict(net.wires), dict(net.ins), dict(net.outs)
    for n in chosen:
        for w in (*net.ins[n], *net.outs[n]):
            wires.pop(w, None)
        del ins[n], outs[n]
    new = {n.id + offset: replace(n, id=n.id + offset) for n in rn.nodes.values()}
    for nid, n in new.items():
        ins[nid], outs[nid] = [None] * len(n.dom), [None] * len(n.cod)
    inputs, outputs = list(net.inputs), list(net.outputs)
    patched = {}        # an outside node's port tuple, made mutable once

    def port(table, owner, k, wid, boundary):
        if owner in (INPUT, OUTPUT):
            boundary[k] = wid
            return
        ports = table[owner]
        if not isinstance(ports, list):
            ports = patched.setdefault((id(table), owner), list(ports))
            table[owner] = ports
        ports[k] = wid

    def array_of(end, side):
        owner, k = end
        if owner == INPUT:
            return net.dom[k]
        if owner == OUTPUT:
            return net.cod[k]
        return getattr(new[owner] if owner in new else net.nodes[owner], side)[k]
    for w in rn.wires.values():
        src = srcs[w.src[1]] if w.src[0] == INPUT else (w.src[0] + offset, w.src[1])
        dst = dsts[w.dst[1]] if w.dst[0] == OUTPUT else (w.dst[0] + offset, w.dst[1])
        for end, side in ((src, "cod"), (dst, "dom")):
            if array_of(end, side) != w.array:
                raise RewriteError(f"netlist: a wire carrying {w.array} is plugged into port {end[1]} of "
                                   f"node #{end[0]}, which carries {array_of(end, side)}")
        wires[fresh] = Wire(fresh, w.array, src, dst)
        port(outs, src[0], src[1], fresh, inputs)
        port(ins, dst[0], dst[1], fresh, outputs)
        fresh += 1
    pos, order = net.position, net.order
    if chosen:       # the nodes before the stretch, the stretch sorted, the nodes after it (copied, not walked)
        lo = order.index(min(chosen, key=pos.__getitem__))
        hi = order.index(max(chosen, key=pos.__getitem__), lo)
        old = net.nodes
        placed = _sorted(list(new.values()) + [old[nid] for nid in order[lo:hi + 1] if nid not in chosen], wires, ins)
        ids = [n.id for n in placed]
        order = order[:lo] + ids + order[hi + 1:]
        nodes = dict(zip(order[:lo], map(old.__getitem__, order[:lo])))
        nodes.update(zip(ids, placed))
        after = order[lo + len(ids):]
        nodes.update(zip(after, map(old.__getitem__, after)))
    else:
        lo = len(order)
        placed = _sorted(list(new.values()), wires, ins)
        ids = [n.id for n in placed]
        order = order + ids
        nodes = dict(net.nodes)
        nodes.update(zip(ids, placed))
    made = [(table, nid) for nid in new for table in (ins, outs)]       # the port lists made or patched
    made += [(ins if key == id(ins) else outs, owner) for key, owner in patched]
    for table, nid in made:
        ports = table[nid]
        if None in ports:
            raise RewriteError(f"netlist: port {ports.index(None)} of node #{nid} is not connected")
        table[nid] = tuple(ports)
    out = Netlist(net.dom, net.cod, nodes, wires, ins, outs, tuple(inputs), tuple(outputs))
    out.__dict__["order"] = order
    keys = _keys(pos, order, lo, len(ids), chosen)
    if keys is not None:
        out.__dict__["position"] = keys
    # its fresh ids where they are known without a scan (what is added is numbered past every old id)
    top_node = offset + max(rn.nodes) + 1 if new else top_node if top_node - 1 in nodes or not nodes else None
    top_wire = fresh if fresh > top_wire else top_wire if top_wire - 1 in wires or not wires else None
    if top_node is not None and top_wire is not None:
        out.__dict__["fresh_ids"] = (top_node, top_wire)
    return out


def _keys(pos: dict, order: list, lo: int, m: int, chosen) -> dict | None:
    """The :attr:`~.netlist.Netlist.position` of a spliced netlist: the old keys (``pos``) but for the stretch
    ``order[lo:lo + m]`` keyed evenly between its neighbours' keys, or None where no room is left there (the netlist
    then keys its nodes afresh)."""
    out = dict(pos)
    for c in chosen:
        del out[c]
    ids = order[lo:lo + m]
    a = out[order[lo - 1]] if lo > 0 else None
    b = out[order[lo + m]] if lo + m < len(order) else None
    if a is None and b is None:
        a, b = -POSITION_GAP, m * POSITION_GAP
    elif a is None:
        a = b - (m + 1) * POSITION_GAP
    elif b is None:
        b = a + (m + 1) * POSITION_GAP
    if b - a <= m:
        return None
    out.update(zip(ids, (a + (b - a) * (i + 1) // (m + 1) for i in range(m))))
    return out


def _sorted(stretch: list, wires: dict, ins: dict) -> list:
    """The nodes of ``stretch`` (a stretch of a topological order, new nodes first) sorted topologically,
    keeping their given order where legal (the order of :meth:`Netlist.build`'s stable sort)."""
    return stable_order(stretch, ((wires[w].src[0], n.id) for n in stretch for w in ins[n.id]))


def splice_rebuild(net: Netlist, chosen: set, input_wires, output_wires, rn: Netlist) -> Netlist:
    """:func:`splice` from scratch (every wire renumbered, the whole order sorted): its specification."""
    offset = net.fresh_ids[0]
    srcs = [net.wires[w].src for w in input_wires]
    dsts = [net.wires[w].dst for w in output_wires]
    conns = [(w.array, w.src, w.dst) for w in net.wires.values()
             if w.src[0] not in chosen and w.dst[0] not in chosen]
    for w in rn.wires.values():
        s = srcs[w.src[1]] if w.src[0] == INPUT else (w.src[0] + offset, w.src[1])
        d = dsts[w.dst[1]] if w.dst[0] == OUTPUT else (w.dst[0] + offset, w.dst[1])
        conns.append((w.array, s, d))
    new = [replace(n, id=n.id + offset) for n in rn.nodes.values()]
    nodes, placed = [], False
    for nid, n in net.nodes.items():
        if nid in chosen:
            if not placed:
                nodes.extend(new)
                placed = True
            continue
        nodes.append(n)
    if not placed:
        nodes.extend(new)
    return Netlist.build(net.dom, net.cod, nodes, conns)


def _copy_chains(net: Netlist):
    """``(copies, root, fanout, through)``: the copy nodes in order, each copy fed by a copy → the first copy of
    its chain (``root``), each other copy → its outputs once its chain is merged into it (``fanout``), and the
    merged copies with one output (``through``: a wire)."""
    copies = net.of_kind(("copy", None))
    root = {}
    for c in copies:  # topological order: a parent copy comes first
        parent = net.wires[net.ins[c][0]].src[0]
        if parent in root or (parent in net.nodes and net.nodes[parent].kind == "copy"):
            root[c] = root.get(parent, parent)
    fanout = {c: 0 for c in copies if c not in root}
    for c in copies:
        for w in net.outs[c]:
            if net.wires[w].dst[0] not in root:
                fanout[root.get(c, c)] += 1
    through = {c for c, k in fanout.items() if k == 1}
    return copies, root, fanout, through


def normalize(net: Netlist, near=None) -> Netlist:
    """Flatten copies of copies into one copy node and dissolve one-output copies.

    Splicing a replacement can leave such chains; :func:`to_netlist` never does.  ``near`` (node ids): where a
    splice changed the netlist; when no copy there is chained or has one output, the netlist is returned as it is
    without a scan (a netlist is normal away from its last splice).

    In time proportional to the copies (plus copies of the tables), not a rebuild: the order of the nodes is kept
    (a merged copy's readers already come after the chain's first copy, a dissolved copy's after what feeds it),
    each wire out of a copy keeps its id and its place among the wires, and a copy's outputs are numbered in
    the order of its wires.  The result is the netlist :func:`normalize_rebuild` builds from scratch, but for
    the wire ids (a test compares them).
    """
    if near is not None and not any(_abnormal(net, n) for n in near if n in net.nodes):
        return net
    copies, root, fanout, through = _copy_chains(net)
    if not root and not through:
        return net
    wires, ins, outs = dict(net.wires), dict(net.ins), dict(net.outs)
    inputs = list(net.inputs)
    rank = {w: k for k, w in enumerate(net.wires)}
    merged: dict = {c: [] for c in fanout}        # each kept copy → its outputs' wires, in the wires' order
    for c in copies:
        for w in net.outs[c]:
            if net.wires[w].dst[0] in root:
                del wires[w]                      # the wire from a parent copy into a merged copy
            else:
                merged[root.get(c, c)].append(w)
    for c in root:
        del ins[c], outs[c]
    nodes = dict(net.nodes)
    for c, ws in merged.items():
        ws.sort(key=rank.__getitem__)
        if c in through:                          # a copy with one output is a wire: its feed plugged into its reader
            (w,), into = ws, net.ins[c][0]
            owner, port = net.wires[into].src
            del wires[into], ins[c], outs[c], nodes[c]
            wires[w] = replace(wires[w], src=(owner, port))
            if owner == INPUT:
                inputs[port] = w
            else:
                outs[owner] = tuple(w if x == into else x for x in outs[owner])
            continue
        for port, w in enumerate(ws):
            if wires[w].src != (c, port):
                wires[w] = replace(wires[w], src=(c, port))
        outs[c] = tuple(ws)
        if len(ws) != len(net.nodes[c].cod):
            nodes[c] = replace(net.nodes[c], cod=net.nodes[c].dom * len(ws))
    for c in root:
        del nodes[c]
    out = Netlist(net.dom, net.cod, nodes, wires, ins, outs, tuple(inputs), net.outputs)
    gone = set(root) | through                    # the order and keys kept: only copies are dropped
    order = list(net.order)
    for c in gone:
        order.remove(c)
    out.__dict__["order"] = order
    if "position" in net.__dict__:
        pos = dict(net.position)
        for c in gone:
            del pos[c]
        out.__dict__["position"] = pos
    if "fresh_ids" in net.__dict__:              # still one past the largest ids where those are kept
        top_node, top_wire = net.fresh_ids
        if top_node - 1 in nodes and top_wire - 1 in wires:
            out.__dict__["fresh_ids"] = (top_node, top_wire)
    return out


def normalize_rebuild(net: Netlist) -> Netlist:
    """:func:`normalize` from scratch (every wire renumbered, the whole order sorted): its specification."""
    _, root, fanout, through = _copy_chains(net)
    if not root and not through:
        return net
    ports = dict.fromkeys(fanout, 0)
    conns = []
    for w in net.wires.values():
        (a, _), (b, _) = w.src, w.dst
        if b in root:
            continue  # the wire from a parent copy into a merged copy
        src = w.src
        if a in root or a in fanout:
            top = root.get(a, a)
            src = (top, ports[top])
            ports[top] += 1
        conns.append([w.array, src, w.dst])
    if through:  # a copy with one output is a wire
        feed = {c: net.wires[net.ins[c][0]].src for c in through}
        conns = [c for c in conns if c[2][0] not in through]
        for c in conns:
            while c[1][0] in through:
                c[1] = feed[c[1][0]]
    nodes = []
    for nid, n in net.nodes.items():
        if nid in root or nid in through:
            continue
        nodes.append(replace(n, cod=n.dom * fanout[nid]) if nid in fanout else n)
    return Netlist.build(net.dom, net.cod, nodes, [tuple(c) for c in conns])


def _abnormal(net: Netlist, nid) -> bool:
    """A copy node with one output, or fed by a copy, or feeding one."""
    node = net.nodes[nid]
    if node.kind != "copy":
        return False
    if len(node.cod) == 1:
        return True
    src = net.wires[net.ins[nid][0]].src[0]
    if src in net.nodes and net.nodes[src].kind == "copy":
        return True
    return any(net.wires[w].dst[0] in net.nodes and net.nodes[net.wires[w].dst[0]].kind == "copy"
               for w in net.outs[nid])
