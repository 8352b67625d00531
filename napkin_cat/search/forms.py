"""The prepared forms of a function: what the rule book's ``simplify`` and ``prepare`` rules make of it.

A :class:`Form` is a function reached by ``prepare`` rules (its steps from the start, their names), with its
data-flow graph (:class:`~napkin_cat.search.blocks.OpGraph`), its kernel-split space and, for a large one,
its cut into segments (:mod:`.segments`).  :func:`prepared_forms` lists the forms the search compares.

>>> import napkin_cat as nc
>>> from napkin_cat.rewriting.registry import rulebook
>>> [f.prepared for f in prepared_forms(nc.library.attention(), rulebook())]
[(), ('softmax_contraction_to_unscaled',)]
"""
from __future__ import annotations

from dataclasses import dataclass
from itertools import zip_longest

from napkin_cat.cost.exact_arithmetic import value
from napkin_cat.cost.iocost import cost
from napkin_cat.errors import NapkinError, RewriteError
from napkin_cat.rewriting.fixpoint import fixpoint
from napkin_cat.rewriting.isomorphism import isomorphic
from napkin_cat.rewriting.match import INPUT
from napkin_cat.rewriting.netlist import Netlist, to_netlist
from napkin_cat.rewriting.trace import Step
from napkin_cat.search import segments as segments_module
from napkin_cat.search.blocks import OpGraph
from napkin_cat.search.paths import Space
from napkin_cat.search.recomputation import recomputed_forms
from napkin_cat.search.segments import cut
from napkin_cat.syntax.adapter import Diagram


# ---------------------------------------------------------------------- prepared functions
@dataclass
class Form:
    """A function reached by ``prepare`` rules: its ``steps`` from the start, their rule names.

    ``diagram``: the function, as a diagram or as the netlist a rewrite left (then laid out as a diagram only where
    one is asked for: the search reads the netlist, and a form that does not win is never laid out)."""

    diagram: Diagram | Netlist
    steps: tuple = ()
    prepared: tuple = ()
    share: bool = False   # a kernel loads a value it reads in several places once (the book plays ``share``)
    join: bool = False    # independent operations that read one value may share a kernel (the book plays ``join``)
    recomputed: int = 0   # operations added by recomputation (the book's ``recompute`` rule)
    units: bool = False   # each operation read by one operation alone shares its reader's kernel
    fold: bool = False    # closed values computed by each reader (the book plays ``recompute``: :mod:`.blocks`)
    once: bool = False    # a kernel computes each value once (the book plays ``compute_once``: :mod:`.blocks`)
    apart: bool = False   # a kernel across segments renames its own axes apart (the book plays ``apart``)

    def __post_init__(self):
        given = self.__dict__.pop("_given")
        self.graph = OpGraph(given if isinstance(given, Netlist) else to_netlist(given), share=self.share,
                             fold=self.fold, join=self.join, once=self.once)
        #: the netlist of :attr:`diagram` (the graph's: read once, shared by every scan and comparison of the form;
        #: netlists are values, a rewrite makes a new one)
        self.net = self.graph.net
        self._space = None
        self._cut = None

    @property
    def space(self):
        if self._space is None:
            self._space = Space(self.graph, units=self.graph.units() if self.units else None)
        return self._space

    @property
    def cut(self):
        """``(segments, seams)`` when the form is searched segment by segment (:mod:`.segments`), else None (a
        recomputed form, :mod:`.recomputation`, is searched whole, as its kernels keep units whole)."""
        if self.units or self.recomputed:
            return None
        if self._cut is None:
            large = len(self.graph) > segments_module.SEGMENT_AT
            parts = cut(self.graph) if large else ([self.graph.full], [])
            self._cut = parts if len(parts[0]) > 1 else False
            if self._cut and self.apart:     # kernels seam fusion joins across segments: their own axes apart
                self.graph.cut_at(parts[0])
        return self._cut or None


def _given(form, value):
    form.__dict__["_given"] = value


#: the form's function as a diagram: the one it was made from, or its netlist's layout (made on first use)
Form.diagram = property(lambda form: form.net.diagram, _given)


def _simplified(diagram, book) -> Form:
    """The function in its normal form: the book's ``simplify`` rules (dead code, identities removed), then its
    ``normalise`` rules (an operation written by hand as the primitive that names it), to a fixpoint (each rule
    scanned again only where a step changed what it read, :func:`~napkin_cat.rewriting.fixpoint.fixpoint`; the
    form is the netlist it leaves, laid out only where a diagram is asked for).

    Every one of these rules shrinks the netlist (its nodes plus wires, or its means: a mean taken as the scaled sum
    it is) or moves a sum's axes one node toward the inputs (a sum through a contraction), so the fixpoint is
    reached within (nodes and wires + 1) × (axes on the wires + 1) steps (the driver's bound); every step is in the
    form's trace.  A merge of a contraction into its one reader (``contraction_merge`` where the book has it play
    ``normalise``) shrinks the netlist too, and as no rule of the normal form makes a contraction, there is at most
    one merge per contraction of the function; the sums a merge carries down to the merged contraction are its
    operands' own only where one of the two contractions had a single operand (else the sum rules, taken first,
    would have moved them), so they move up at most once more.  A scale moves one reduction toward the outputs
    (``scale_through_contraction``: the reductions ahead of each scale drop by one, no scale is made) and two scales
    multiply into one (the netlist shrinks): :mod:`rewrites.scale_normal_form` states that measure.  A variance
    written uncentred taken centred (``uncentred_variance``) shrinks the netlist once the copy law removes the two
    discards it leaves where it reads the program's x − μ (:mod:`rewrites.variance_normal_form`).  Two boxes that
    compute one value (``common_value``: one kind, parameters and signature reading the same values) become one
    box whose value is copied: one box fewer, so at most as many such steps as boxes the other rules leave; its
    nodes and wires (after the copy law) change by at most 2·outputs − 1 − operands (a copy node and a wire for each
    output read once by each box, less the box and a copy's branch for each operand): they shrink for a box of two
    operands and one output, stay for one of one operand, and grow by one for a box reading nothing.  It plays
    ``normalise``, not ``simplify``, as the ``prepare`` rules run after the normal form and one
    (``centred_statistics_pass``) computes x − μ twice on purpose: the normal form merges the user's copies, the
    prepared forms keep theirs."""
    share, fold, join = "share" in book.roles, "recompute" in book.roles, "join" in book.roles
    once, apart = "compute_once" in book.roles, "apart" in book.roles
    rules = tuple(rule for role in ("simplify", "normalise") if role in book.roles for rule in book.role(role))
    if not rules and "apart" not in book.roles:
        return Form(diagram, share=share, fold=fold, join=join, once=once, apart=apart)
    net, steps = to_netlist(diagram), []
    if rules:
        axes = sum(len(w.array.axes) for w in net.wires.values())
        net, steps = fixpoint(net, rules, (len(net.nodes) + len(net.wires) + 1) * (axes + 1))
    return Form(net, tuple(steps), tuple(s.rule for s in steps), share, fold=fold, join=join, once=once,
                apart=apart)


def apart_forms(form, book) -> list:
    """The normal form ``form`` with its axes renamed apart by the book's ``apart`` rule (axes one block's after
    another's, :mod:`napkin_cat.rewriting.apart`), as one more form: ``[]`` where the book has no such rule or it
    has no match.  A function the search cuts into segments (:mod:`.segments`) is renamed apart within each segment
    (``seams=``): alike segments stay alike, so each kind is solved once; a kernel that seam fusion joins across
    segments renames its own axes apart (:meth:`~napkin_cat.search.blocks.OpGraph.renamed_apart`, the form's
    ``apart`` flag), so names decide nothing there either.

    The renamed form joins the forms the search compares (it is not prepared further): the search over the forms
    with names kept is the one it was, so the answer is never worse, and where names kept two blocks' axes as one
    the renamed form's kernels partition each alone (a stack sharing names derives as the stack with its own)."""
    if "apart" not in book.roles:
        return []
    rule = book.role("apart")
    cut = form.cut
    if cut:
        rule = rule.using(seams=" ".join(str(form.graph.nodes[p]) for p in cut[1]))
    first = next((m for m in rule.lazy_candidates(form.net) if rule.failure(m) is None), None)
    if first is None:
        return []
    step = Step.of(rule, first, form.net, rule.fill(first))
    return [Form(step.after_net, form.steps + (step,), form.prepared + (step.rule,), form.share, fold=form.fold,
                 join=form.join, once=form.once, apart=form.apart)]


def prepared_forms(diagram, book, depth: int = 2, limit: int = 6, *, sizes: dict | None = None) -> list:
    """The function and what the ``prepare`` rules make of it (breadth first, up to ``depth`` steps and
    ``limit`` forms, isomorphic ones once; each form's rewrites taken the rules in turn, :func:`in_turn`, so that
    one rule's many choices do not crowd the others out of the limit).  A large function (searched segment by
    segment) is prepared one rule at a time at every place it applies, so that its alike blocks are prepared alike,
    and is not given recomputed forms (:func:`~napkin_cat.search.recomputation.recomputed_forms`; the others are).
    There one choice is taken at each place: the one whose replacement does the least work at ``sizes`` (axis name →
    size; the rule's own order where ``sizes`` are not given or tie), :func:`least_work_first`.  Last, where the
    book's ``apart`` rule renames some axes apart, the normal form so renamed (:func:`apart_forms`).

    A function searched whole is also given the forms of one rule at every place (:func:`_prepared_everywhere`), after
    the breadth-first ones (so a tie still goes to those): where a rule applies at more places than the limit leaves
    forms for, breadth first would never apply it at all of them.  The normal form merges each contraction into its
    one reader; a three-operand contraction alone needs a large memory (its partitions keep two operands' tiles
    beside its output's), so a chain ``x·W₁·W₂ → relu → ·W₃·W₄`` with one of its two merges left in every form moved
    4.3× what its four products and the relu each alone move at ``M = 4096``
    (``tests/search/test_prepared_everywhere.py``)."""
    rules = book.role("prepare") if "prepare" in book.roles else ()
    forms = [_simplified(diagram, book)]
    return _prepared(forms, rules, book, depth, limit, sizes) + apart_forms(forms[0], book)


def _prepared(forms, rules, book, depth, limit, sizes) -> list:
    """:func:`prepared_forms` of the normal form ``forms[0]``, but the one its axes renamed apart."""
    if len(forms[0].graph) > segments_module.SEGMENT_AT:
        return _prepared_everywhere(forms, rules, depth, limit, sizes, book)
    forms = _breadth_first(forms, rules, book, depth, limit)
    for g in _prepared_everywhere([forms[0]], rules, depth, limit, sizes, book)[1:]:
        if not any(isomorphic(g.net, h.net) for h in forms):
            forms.append(g)
    return forms + recomputed_forms(forms, book, depth, limit)


def _breadth_first(forms, rules, book, depth, limit) -> list:
    """The forms of up to ``depth`` rewrites from ``forms[0]`` and up to ``limit`` in all, breadth first, one place
    at a time (:func:`in_turn`), each tidied, isomorphic ones once."""
    queue = [forms[0]]
    while queue and len(forms) < limit:
        f = queue.pop(0)
        if len(f.prepared) - len(forms[0].prepared) >= depth:
            continue
        net = f.net
        for rule, m in in_turn(rules, net):
            after = rule.fill(m)
            tidy = tidied(net, after, book)
            new = (tidy[-1][1] if tidy else after).diagram
            seen = to_netlist(new)
            if any(isomorphic(seen, g.net) for g in forms):
                continue
            step = Step.of(rule, m, net, after)
            g = Form(new, f.steps + (step,) + tuple(t for t, _ in tidy), f.prepared + (rule.name,), f.share,
                     fold=f.fold, join=f.join, once=f.once, apart=f.apart)
            forms.append(g)
            queue.append(g)
            if len(forms) >= limit:
                return forms
    return forms


class Preparation:
    """The prepared forms one call makes, shared by the searches it runs (a GPU derive searches without and with a
    parallelism requirement): :func:`prepared_forms` of a function, rule book, depth and sizes, made once.  A form's
    graph, kernel-split space and segments (:class:`Form`) depend on nothing else, so the searches read the same
    ones::

        Preparation().forms(f, book, depth, sizes) == prepared_forms(f, book, depth, sizes=sizes)

    The key holds everything the forms depend on: the function and the rule book (by identity, both held, so an
    equal id is the same object), the depth and the sizes.  A call makes its own (no module-level cache).

    >>> import napkin_cat as nc
    >>> from napkin_cat.rewriting.registry import rulebook
    >>> p, f, book = Preparation(), nc.library.attention(), rulebook()
    >>> p.forms(f, book, 2, None) is p.forms(f, book, 2, None), p.forms(f, book, 2, None) is p.forms(f, book, 1, None)
    (True, False)
    """

    def __init__(self):
        self._made = {}

    def forms(self, diagram, book, depth: int, sizes: dict | None) -> list:
        key = (id(diagram), id(book), depth, None if sizes is None else tuple(sorted(dict(sizes).items())))
        found = self._made.get(key)
        if found is None:
            found = self._made[key] = (diagram, book, prepared_forms(diagram, book, depth, sizes=sizes))
        return found[2]


def in_turn(rules, net) -> list:
    """The legal rewrites ``(rule, match)`` of ``net`` by ``rules``, the rules in turn: each rule's first match, then
    each one's second, and so on.  Within a rule its own order stands (its choices cheapest first where it ranks
    them); across rules none waits for all of another's: a rule with ``k`` matches is reached among the first
    ``r · k`` rewrites of ``r`` rules, whatever the rules before it offer.

    >>> import napkin_cat as nc
    >>> from rewrites import contraction_reassociation, pairwise_contraction
    >>> b = nc.Builder(nc.types("q d, x d, x e, e f"))
    >>> Q, K, V, W = b.inputs
    >>> chain = b.build(b(nc.einsum("q e, e f -> q f"), b(nc.einsum("q d, x d, x e -> q e"), Q, K, V), W))
    >>> [r.name for r, _ in in_turn((contraction_reassociation, pairwise_contraction), to_netlist(chain))][:4]
    ['contraction_reassociation', 'pairwise_contraction', 'contraction_reassociation', 'pairwise_contraction']
    """
    offered = [[(rule, m) for m in rule.matches(net)] for rule in rules]
    return [pair for turn in zip_longest(*offered) for pair in turn if pair is not None]


def least_work_first(rule, choices, sizes, works: dict | None = None) -> list:
    """``choices`` (matches of ``rule`` at one place) ordered by the FLOPs of their replacements at ``sizes``, all
    pipelines together (ties, and every choice where ``sizes`` do not give each axis, in the rule's own order).

    ``works``: the caller's record ``{replacement diagram: its FLOPs}`` (a replacement's FLOPs are a function of
    the diagram alone, so a rule offering equal replacements at alike places, the blocks of a stack, has them
    costed once per call; the key is the whole diagram, compared by value).

    >>> import napkin_cat as nc
    >>> from rewrites import pairwise_contraction
    >>> chain = nc.einsum("a b, b c, c e -> a e")       # (A B) C or A (B C): B C is small where b, e are
    >>> ms = pairwise_contraction.matches(chain)
    >>> [m.params["order"] for m in least_work_first(pairwise_contraction, ms, dict(a=256, b=16, c=256, e=16))]
    ['(0 (1 2))', '((0 1) 2)', '((0 2) 1)']
    """
    if not sizes or len(choices) < 2:
        return list(choices)
    env = {}

    works = {} if works is None else works

    def work(m):
        rhs = rule.rhs(m)
        flops = works.get(rhs)
        if flops is None:
            flops = works[rhs] = sum(cost(rhs).flops.values())
        env.update({s: sizes[s.name] for s in getattr(flops, "free_symbols", ()) if s.name in sizes})
        try:
            return value(flops, env)
        except NapkinError:
            return None
    works = [work(m) for m in choices]
    if any(w is None for w in works):
        return list(choices)
    return [m for _, _, m in sorted(zip(works, range(len(choices)), choices), key=lambda t: t[:2])]


def tidied(before, after, book) -> list:
    """The book's ``simplify`` rules at the discards a step (``before`` → ``after``, netlists) left: ``[(Step,
    netlist after it)]``, empty where it left none.

    A prepare rule that reads a value it no longer needs (a log-sum-exp read off a SoftMax's state leaves the scores
    it read) leaves a discard on a branch of a copy, and one that reads again a value only a discard read (the
    SoftMax's running maximum) puts that discard on a branch of a new copy; the copy law removes it
    (``copy_discard``), as the search's blocks never count it: kernel formation would save a value only a discard
    reads (a q×x output the stream partition then refuses; a running maximum stored and never read, so that derive's
    H was not what its algorithm moves)."""
    drops = {n for n in after.nodes if after.nodes[n].kind == "discard"
             and (n not in before.nodes or _branch_of_new_copy(before, after, n))}
    if not drops or "simplify" not in book.roles:
        return []
    out, net = [], after
    while drops:
        options = [(r, m) for r in book.role("simplify") for m in r.matches(net)
                   if set(m.nodes.values()) & drops and r.failure(m) is None]
        if not options:
            break
        r, m = options[0]
        new = r.fill(m)
        out.append((Step.of(r, m, net, new), new))
        drops &= set(new.nodes)
        net = new
    return out


def _branch_of_new_copy(before, after, n) -> bool:
    """Whether discard ``n`` of ``after`` reads a branch of a copy the step made or widened (a value the step's
    right-hand side reads again, such as a SoftMax's running maximum, whose reader before was that discard)."""
    src = after.wires[after.ins[n][0]].src[0]
    if src == INPUT or after.nodes[src].kind != "copy":
        return False
    return src not in before.nodes or len(before.outs[src]) != len(after.outs[src])


def _everywhere(f: Form, rule, sizes=None, works=None, book=None):
    """``f`` with ``rule`` applied at each place it legally applies (found in one scan, applied one after the
    other where the place is still there; at each, the choice :func:`least_work_first` puts first that still
    applies), each step tidied by the ``book``'s simplify rules as the breadth-first forms are (:func:`tidied`), or
    None where it applies nowhere."""
    net = f.net
    places: dict = {}
    for m in rule.matches(net):
        places.setdefault(m.key, []).append(m)
    steps = []
    for key, choices in places.items():
        if not {n for _, n in key} <= net.nodes.keys():
            continue
        for m0 in least_work_first(rule, choices, sizes, works):
            try:
                m = rule.relocate(net, *m0.identity)
            except RewriteError:
                continue
            if rule.failure(m) is not None:
                continue
            after = rule.fill(m)
            steps.append(Step.of(rule, m, net, after))
            tidy = tidied(net, after, book) if book is not None else []
            steps += [t for t, _ in tidy]
            net = tidy[-1][1] if tidy else after
            break
    if not steps:
        return None
    return Form(net, f.steps + tuple(steps), f.prepared + (rule.name,), f.share, fold=f.fold, join=f.join,
                once=f.once, apart=f.apart)


def _prepared_everywhere(forms, rules, depth, limit, sizes=None, book=None) -> list:
    queue, works = [forms[0]], {}     # the replacements' FLOPs, by diagram, for this call
    while queue and len(forms) < limit:
        f = queue.pop(0)
        if len(f.prepared) - len(forms[0].prepared) >= depth:
            continue
        for rule in rules:
            g = _everywhere(f, rule, sizes, works, book)
            if g is None or any(isomorphic(g.net, h.net) for h in forms):
                continue
            forms.append(g)
            queue.append(g)
            if len(forms) >= limit:
                return forms
    return forms
