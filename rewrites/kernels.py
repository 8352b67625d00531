"""Kernels from functions: kernel formation and kernel fusion (paper §2.2).

=======================  ===================================================================
rule                     lhs → rhs
=======================  ===================================================================
``kernel_formation``     f (a primitive at level 0) → Kernel_ℓ(Load ; f@ℓ ; Save)
``kernel_fusion``        Kernel(f) ; Kernel(g) → Kernel(f ; g)  (Save ; Load eliminated)
=======================  ===================================================================

Cost claims (each rule's obligation): a formed kernel moves its inputs and the outputs someone reads once at its
level; a fusion saves the transfers of each value passed from one kernel to the other that no one else reads.
The partitions of a kernel (streams, groups) are :mod:`rewrites.partition`.

>>> import napkin_cat as nc
>>> from napkin_cat.rewriting import rewrite
>>> r = rewrite(nc.library.attention(), [kernel_formation])
>>> [s.rule for s in r.trace], [type(b).__name__ for b in r.diagram.boxes]
(['kernel_formation', 'kernel_formation', 'kernel_formation'], ['Kernel', 'Kernel', 'Kernel'])
"""
from __future__ import annotations

import weakref

import sympy

import napkin_cat as nc
from napkin_cat.rewriting.match import OUTPUT, Pattern, is_convex
from napkin_cat.syntax.relabel import map_box
from napkin_cat.cost.iocost import numel
from napkin_cat.rewriting import Condition, Obligation, Rule
from rewrites.softmax import softmax_contraction_to_unscaled
from napkin_cat.syntax.flat import from_layers
from rewrites.kernel_nodes import FUNCTION_BOX, PLAIN_KERNEL, is_function_box, is_plain_kernel, one_box


def _level(m) -> int:
    return int(m.params.get("level", 1))


#: per netlist (immutable: a rewrite makes a new one), its privately closed boxes (:func:`privately_closed`)
_PRIVATE = weakref.WeakKeyDictionary()


def privately_closed(net) -> frozenset:
    """The boxes that are closed *privately*: a level-0 primitive with one output wire, whose every input wire comes
    directly (not through a copy) from such a box (a box reading nothing is one).  One pass in topological order,
    once per netlist: kernel formation asks it of every candidate ``f`` of every step, and walking each candidate's
    producers down to an input made forming the kernels of ``n`` maps in a row cost ``n³`` (200 maps: 1.35 M calls).

    >>> import napkin_cat as nc
    >>> from napkin_cat.rewriting.netlist import to_netlist
    >>> net = to_netlist(nc.library.causal_mask(q=4, x=4))
    >>> sorted(net.nodes[n].name for n in privately_closed(net))
    ['pos', 'pos', '≤']
    """
    found = _PRIVATE.get(net)
    if found is None:
        made = set()
        for nid, node in net.nodes.items():        # topological: producers first
            if is_function_box(net, node) and len(net.outs[nid]) == 1 and \
                    all(net.wires[w].src[0] in made for w in net.ins[nid]):
                made.add(nid)
        found = _PRIVATE[net] = frozenset(made)
    return found


def _private_closed(net, nid) -> list:
    """The closed boxes (:mod:`napkin_cat.rewriting.closed`) that feed ``nid`` directly and no one else, each
    reading such boxes only (a tree: a position, a comparison of two), producers first: the privately closed
    producers of ``nid`` and, below each, its own (each has one output wire, so each tree is walked once)."""
    made, out = privately_closed(net), []
    for w in net.ins[nid]:
        p = net.wires[w].src[0]
        if p in made:
            out += _private_closed(net, p) + [p]
    return out


def _discards(net, nodes):
    """The discards of f's outputs (a kernel saves only what someone reads), and the closed values that f alone
    reads (a kernel computes them instead of loading them)."""
    ends = [net.wires[w].dst[0] for w in net.outs[nodes["f"]]]
    found = {f"drop{j}": e for j, e in enumerate(x for x in ends if x != OUTPUT and net.nodes[x].kind == "discard")}
    found.update({f"closed{j}": c for j, c in enumerate(_private_closed(net, nodes["f"]))})
    return found


def _kernel_rhs(m):
    b, wires = m.wiring()
    var = {nid: v for v, nid in m.nodes.items()}
    made = {}
    for nid in (n for n in m.net.nodes if n in var and m.net.nodes[n].kind == "box"):   # the closed tree, then f
        src = [m.net.wires[w].src for w in m.net.ins[nid]]
        out = b(one_box(m, var[nid]), *(made[s] if s in made else wires[(var[nid], p)] for p, s in enumerate(src)))
        made.update({(nid, p): o for p, o in enumerate(out if isinstance(out, tuple) else (out,))})
    f = m.nodes["f"]
    return nc.kernel(m.finish(b, {("f", p): made[(f, p)] for p in range(len(m.node("f").cod))}), _level(m))


def _function_instance(rng):
    kinds = [lambda: nc.einsum("q d, x d -> q x"), lambda: nc.softmax("q x", over="x"),
             lambda: nc.elementwise("exp", "q x"), lambda: nc.reduce("sum", "q x -> q"),
             lambda: nc.library.attention(), lambda: nc.library.mlp(),
             lambda: softmax_contraction_to_unscaled.apply(nc.library.attention()),
             lambda: nc.library.causal_attention(), lambda: nc.library.alibi_attention()]
    return kinds[int(rng.integers(len(kinds)))]()


def _kernel_cost(lhs, rhs, m):
    box, net = m.box("f"), m.net
    read = [a for a, w in zip(box.cod.inside, net.outs[m.nodes["f"]]) if net.wires[w].dst[0] not in m.nodes.values()]
    moved = sum((numel(a) for a in (*m.dom.inside, *read)), sympy.Integer(0))
    got = nc.cost(rhs).H.get(_level(m), 0) - nc.cost(lhs).H.get(_level(m), 0)
    assert sympy.simplify(got - moved) == 0, f"kernel formation moves {got}, expected {moved}"


kernel_formation = Rule(
    "kernel_formation",
    Pattern({"f": FUNCTION_BOX}, absorb=_discards),
    _kernel_rhs,
    obligation=Obligation(_function_instance, cost=_kernel_cost),
    local=True,     # the kernel of the hole's boxes: read off the hole alone
    doc="""f → Kernel_ℓ(Load ; f@ℓ ; Save): a primitive becomes its own kernel (level assignment).

    Paper §2.2 (algorithms embedded in a hierarchy): inputs are loaded to the level
    below, the function runs there, the outputs someone reads are saved (a discarded output
    stays inside).  A closed value that f alone reads (made from no input: a position, a comparison of
    two) is computed inside instead of loaded (:mod:`napkin_cat.rewriting.closed`: a closed diagram is a
    deterministic constant, so computing it where it is read is the same function).  Cost claim: moves
    exactly f's inputs from outside the kernel (not the closed values it computes) and read outputs once.""")


# ---------------------------------------------------------------------- kernel fusion
def _permutation(src, dst):
    """The level-0 map that writes ``src`` in ``dst``'s axis order (what a transfer woven at one position in and
    another out does besides moving), or None when the orders agree."""
    if src.names == dst.names:
        return None
    return nc.elementwise("id", f"{' '.join(src.names)} -> {' '.join(dst.names)}", level=0, dtype=src.dtype,
                          sizes={a.name: a.size for a in src.axes}).boxes[0]


def strip(kernel_box) -> nc.Diagram:
    """The function inside an unpartitioned kernel: Loads and Saves dropped, recoloured to level 0; a transfer
    that permutes its array's axes (woven at one position in and another out) leaves that permutation."""
    to0 = lambda a: a.replace(level=0)  # noqa: E731
    items = []
    for layer in kernel_box.arg.inside:
        left, box, right = layer.boxes_or_types[:3]
        if getattr(box, "data", None) is not None and getattr(box.data, "kind", None) in ("load", "save"):
            box = _permutation(to0(box.dom.inside[0]), to0(box.cod.inside[0]))
            if box is None:
                continue
        else:
            box = map_box(box, to0, lambda n: n)
        items.append((nc.Ty(*map(to0, left.inside)), box, nc.Ty(*map(to0, right.inside))))
    return from_layers(nc.Ty(*map(to0, kernel_box.dom.inside)), nc.Ty(*map(to0, kernel_box.cod.inside)), items)


def _same_level(m):
    a, b = m.box("k1").params["level"], m.box("k2").params["level"]
    return a == b or f"the kernels run at levels {a} and {b}"


def _fed_by(net, k1):
    """Nodes fed by ``k1``'s outputs directly, and the copy nodes that fan those outputs out."""
    direct, copies = [], []
    for w in net.outs[k1]:
        dst = net.wires[w].dst[0]
        if dst == OUTPUT:
            continue
        if net.nodes[dst].kind == "copy":
            copies.append(dst)
            direct += [net.wires[c].dst[0] for c in net.outs[dst] if net.wires[c].dst[0] != OUTPUT]
        else:
            direct.append(dst)
    return direct, copies


def _fusion_partner(net, nodes):
    """The first kernel fed by k1 (through wires or copies of k1's outputs) that fuses with it convexly,
    with those copies: fusing through a copy keeps the copied value flowing to its other consumers."""
    k1 = nodes["k1"]
    direct, copies = _fed_by(net, k1)
    for k2 in sorted(set(direct), key=net.position.get):
        if k2 == k1 or not is_plain_kernel(net, net.nodes[k2]):
            continue
        used = [c for c in copies if any(net.wires[w].dst[0] == k2 for w in net.outs[c])]
        extra = {"k2": k2, **{f"copy{j}": c for j, c in enumerate(used)}}
        if is_convex(net, {k1, *extra.values()}):
            return extra
    return None


def _fusion_rhs(m):
    """``Kernel(f ; g)``, then a copy outside it for each absorbed copy that still feeds readers outside: the fused
    kernel saves a value once however many readers outside take it (``f ; copy = copy ; (f ⊗ f)`` read backwards,
    the copy law), as kernel formation saves a value once for all its readers."""
    k1, k2 = m.box("k1"), m.box("k2")
    inner, wires = m.wiring()
    net, n1 = m.net, m.node("k1")
    out1 = inner(strip(k1), *[wires[("k1", p)] for p in range(len(n1.dom))])
    out1 = out1 if isinstance(out1, tuple) else (out1,)
    made = {(m.nodes["k1"], p): w for p, w in enumerate(out1)}
    copies = [v for v in m.nodes if v.startswith("copy")]
    for v in copies:
        (w_in,) = net.ins[m.nodes[v]]
        for j, _ in enumerate(net.outs[m.nodes[v]]):
            made[(m.nodes[v], j)] = made[net.wires[w_in].src]
    args = [made.get(net.wires[w].src, wires.get(("k2", p))) for p, w in enumerate(net.ins[m.nodes["k2"]])]
    out2 = inner(strip(k2), *args)
    out2 = out2 if isinstance(out2, tuple) else (out2,)
    value = {("k1", p): out1[p] for p in range(len(out1))}
    value.update({("k2", p): out2[p] for p in range(len(out2))})
    value.update({(v, j): made[(m.nodes[v], j)] for v in copies for j in range(len(net.outs[m.nodes[v]]))})
    saved = list(dict.fromkeys(value[port] for port in m.outputs))       # each value once, in boundary order
    fused = nc.kernel(inner.build(*saved), k1.params["level"])
    outer, ins = m.wiring()
    got = outer(fused, *(ins[port] for port in m.inputs))
    got = got if isinstance(got, tuple) else (got,)
    by_value = dict(zip(saved, got))
    return m.finish(outer, {port: by_value[value[port]] for port in m.outputs})


def read_thrice() -> nc.Diagram:
    """``T = Q Kᵀ`` read by ``Tᵀ W``, ``Σ_q −T`` and ``max_x T``: fused with one of its readers, ``T`` is still
    saved, once, for the other two.

    >>> [a.names for a in read_thrice().cod.inside]
    [('x', 'e'), ('x',), ('q',)]
    """
    b = nc.Builder(nc.types("q d, x d, q e"))
    Q, K, W = b.inputs
    T = b(nc.einsum("q d, x d -> q x"), Q, K)
    return b.build(b(nc.einsum("q x, q e -> x e"), T, W),
                   b(nc.reduce("sum", "q x -> x"), b(nc.elementwise("neg", "q x"), T)),
                   b(nc.reduce("max", "q x -> q"), T))


def _fusion_instance(rng):
    chains = [lambda: nc.library.attention(), lambda: nc.library.mlp(activation="relu"),
              lambda: nc.elementwise("exp", "q x") >> nc.reduce("sum", "q x -> q"),
              lambda: nc.library.rms_norm(),
              lambda: softmax_contraction_to_unscaled.apply(nc.library.attention()),
              read_thrice]
    return nc.unfused(chains[int(rng.integers(len(chains)))]())


def _fusion_cost(lhs, rhs, m):
    """Fusion removes exactly the round trips inside: k2's loads of what k1 computed (directly or
    through a copy) and k1's saves of outputs no one outside the fused kernel reads."""
    net, k1 = m.net, m.nodes["k1"]
    chosen = set(m.nodes.values())
    loads = sum((numel(net.wires[w].array) for w in net.ins[m.nodes["k2"]]
                 if net.wires[w].src[0] in chosen), sympy.Integer(0))
    saves = sympy.Integer(0)
    for w in net.outs[k1]:
        dst = net.wires[w].dst[0]
        ends = [net.wires[c].dst[0] for c in net.outs[dst]] if dst in chosen and net.nodes[dst].kind == "copy" \
            else [dst]
        if all(e in chosen for e in ends):
            saves += numel(net.wires[w].array)
    lvl = m.box("k1").params["level"]
    got = nc.cost(lhs).H[lvl] - nc.cost(rhs).H[lvl]
    assert sympy.simplify(got - loads - saves) == 0, f"fusion saves {got}, expected {loads + saves}"


kernel_fusion = Rule(
    "kernel_fusion",
    Pattern({"k1": PLAIN_KERNEL}, absorb=_fusion_partner),
    _fusion_rhs,
    conditions=(Condition("same_level", _same_level, "both kernels must run at one level"),),
    obligation=Obligation(_fusion_instance, cost=_fusion_cost),
    local=True,     # the two kernels, the copies between them and which of their values leave: the hole's
    doc="""Kernel(f) ; Kernel(g) → Kernel(f ; g): Save ; Load of the intermediates eliminated.

    Paper §1 and Fig. SoftMax_MatMul_algorithm (fusion computes all sequential steps on
    low-level memory).  g may read f's outputs through several wires and through copies (a value
    f computes that others read too is still saved for them, once however many they are: the fused kernel
    saves it and a copy outside hands it to each, as kernel formation saves a value once for all its
    readers).  Cost claim: H drops by exactly g's loads of f's values and f's saves that no one outside
    reads.""")


__all__ = ["kernel_formation", "kernel_fusion", "strip", "read_thrice"]
