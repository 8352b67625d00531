"""A local rule's replacement is built once per hole (issue 35: the blocks of a stack are made alike).

``Rule.fill(m, made)`` reuses, for a rule whose right-hand side reads only the match's
:attr:`~napkin_cat.rewriting.match.Match.hole` (``Rule.local``: kernel formation, kernel fusion), the replacement
built at an earlier match of an equal hole.  Checked by two routes that do not use the record:

* equal holes ⇒ equal replacements, each built by the rule's right-hand side (every match of the two local rules
  in a two-block transformer stack, random programs, and two alike blocks whose kernels are wired in swapped
  orders, where the holes must differ);
* ``nc.derive`` of a stack of blocks, made with the record, replays step by step without it
  (:meth:`~napkin_cat.rewriting.trace.Trace.replay` fills each step by the rule and checks it against the recorded
  netlist), to the same algorithm.
"""
import pytest

import napkin_cat as nc
from napkin_cat.rewriting.netlist import to_netlist
from napkin_cat.testing.programs import random_program
from rewrites import kernel_formation, kernel_fusion

SMALL = {"n": 8, "e": 8, "h": 2, "d": 4, "f": 16}


def stack(k):
    return nc.library.transformer_stack(k)


def swapped():
    """Two alike blocks: a kernel computing ``exp(x)`` and ``tanh(x)``, read by a kernel ``a − b`` as
    ``exp − tanh`` and as ``tanh − exp``: the same boxes and boundary, the wires between the kernels swapped."""
    two = nc.Builder(nc.types("q"))
    (u,) = two.inputs
    pair = nc.kernel(two.build(two(nc.elementwise("exp", "q"), u), two(nc.elementwise("tanh", "q"), u)))
    sub = nc.kernel(nc.elementwise("sub", "q, q -> q"))
    b = nc.Builder(nc.types("q"))
    (x,) = b.inputs
    e, t = b(pair, x)
    e2, t2 = b(pair, x)
    return b.build(b(sub, e, t), b(sub, t2, e2))


def _kernels(diagram):
    """Every operation its own kernel (kernel formation at its first legal match until none is left)."""
    net = to_netlist(diagram)
    while (ms := kernel_formation.matches(net)):
        net = kernel_formation.fill(ms[0])
    return net


def _by_hole(rule, net) -> dict:
    """``{hole: [replacement, …]}`` over the legal matches of ``rule`` in ``net``, each built by the rule."""
    out: dict = {}
    for m in rule.matches(net):
        out.setdefault(m.hole, []).append(rule.rhs(m))
    return out


CASES = {"two blocks": lambda: stack(2), "swapped": swapped,
         **{f"random_program({s})": (lambda s=s: random_program(s).diagram) for s in (2, 5, 8, 11)}}


@pytest.mark.parametrize("name", list(CASES))
def test_equal_holes_equal_replacements(name):
    diagram = CASES[name]()
    for rule, net in ((kernel_formation, to_netlist(diagram)), (kernel_fusion, _kernels(diagram))):
        assert rule.local
        for hole, made in _by_hole(rule, net).items():
            assert all(r == made[0] for r in made[1:]), (name, rule.name)


def test_alike_blocks_share_holes_and_swapped_wiring_does_not():
    net = _kernels(stack(2))
    holes = _by_hole(kernel_fusion, net)
    assert any(len(made) > 1 for made in holes.values())      # the second block's fusions meet the first's holes
    net = _kernels(swapped())
    holes = _by_hole(kernel_fusion, net)
    assert sum(len(made) for made in holes.values()) == 2 and len(holes) == 2
    a, b = (made[0] for made in holes.values())
    assert a != b


def test_fill_with_the_record_is_the_rules_fill():
    net, made = _kernels(stack(2)), {}
    for m in kernel_fusion.matches(net):
        assert kernel_fusion.fill(m, made).same_as(kernel_fusion.fill(m))
    assert len(made) < len(kernel_fusion.matches(net))


def test_a_stack_made_with_shared_replacements_replays_without_them():
    f = stack(2)
    r = nc.derive(f, memory=2 ** 9, sizes=SMALL)
    assert nc.isomorphic(r.trace.replay(f), r.diagram)


def test_a_local_conditions_verdict_with_the_record_is_its_own():
    """``kernel_common_value``'s condition (a value computed twice) read off the hole: with one record for a kernel
    that computes ``S`` twice and one that does not, each verdict is the one found without the record."""
    from rewrites.compute_once import kernel_common_value, operand_gradients_apart
    twice, once = nc.kernel(operand_gradients_apart()), nc.kernel(nc.library.attention())
    b = nc.Builder(nc.Ty(*twice.dom.inside, *once.dom.inside))
    ins = b.inputs
    outs = [b(twice, *ins[:len(twice.dom)]), b(once, *ins[len(twice.dom):])]
    net = to_netlist(b.build(*(w for o in outs for w in (o if isinstance(o, tuple) else (o,)))))
    made = {}
    with_record = [kernel_common_value.failure(m, made) is None for m in kernel_common_value.candidates(net)]
    alone = [kernel_common_value.failure(m) is None for m in kernel_common_value.candidates(net)]
    assert with_record == alone and sorted(alone) == [False, True] and made
