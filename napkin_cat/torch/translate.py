"""A traced model's tensors as a diagram's wires: the operations' axis algebra, then the boxes, in two passes.

Pass 1 walks the model's operations on :class:`Tensor` values (a tensor's dimensions are axis classes,
:mod:`~napkin_cat.torch.classes`): each operation unifies the classes its semantics aligns and records a
:class:`Step`, the box it makes once every class has its name.  Pass 2 (:meth:`Translation.build`) names the
classes and builds the diagram with a :class:`~napkin_cat.syntax.builder.Builder`, renaming an operand's axis
where pass 1 kept two classes apart (a ``renaming`` box: the data unchanged).  This module knows no torch: the
ATen table (:mod:`~napkin_cat.torch.aten`) calls its operations, :mod:`~napkin_cat.torch.exported` feeds it the
exported graph.

A dimension of size 1 is no axis (it carries one index: ``None`` in ``dims``); a dimension an ``expand``
broadcast is a class the array does not carry (``carried`` False).  A view (transpose, permute, unsqueeze) is the
same wire with its dimensions reordered: the signatures spell each wire's axes by name, so no box moves data.

A tensor whose every element is one number known when the model is traced (``known``) has no wire until it is used:
folded, simplified or made a closed constant by :mod:`~napkin_cat.torch.folding` (:class:`Folding`, mixed in here).

>>> import numpy as np, napkin_cat as nc
>>> t = Translation()
>>> x = t.input("x", (3, 4), nc.FP32, claims=[[(2, "n")], [(2, "d")]])
>>> y = t.input("y", (3, 4), nc.FP32, claims=[[(2, "m")], [(2, "e")]])
>>> g = t.contract(["nd", "md"], "nm", [x, y])          # x yᵀ: d and e are one axis
>>> d = t.build([g]); d.dom, d.cod
(Ty(Array(n[3]×d[4]), Array(m[3]×d[4])), Ty(Array(n[3]×m[3])))
>>> X, Y = np.ones((3, 4)), np.ones((3, 4))
>>> bool((nc.evaluate(d, X, Y) == X @ Y.T).all())
True
"""
from __future__ import annotations

from dataclasses import dataclass, field

from napkin_cat.errors import UnsupportedOperationError
from napkin_cat.syntax.array import Array
from napkin_cat.syntax.adapter import Diagram, Ty
from napkin_cat.syntax.axis import Axis, symbol
from napkin_cat.syntax.builder import Builder
from napkin_cat.syntax.construct import cast, einsum, elementwise, reduce, renaming, softmax
from napkin_cat.syntax.dtype import BOOL, INT32
from napkin_cat.syntax.indices import compare, gather, logical, position, select, where
from napkin_cat.torch.classes import AxisClasses
from napkin_cat.torch.folding import Folding
from napkin_cat.torch.traced import Signature, Step, Tensor


@dataclass
class Translation(Folding):
    """The state of one translation: the classes, the inputs, the steps (see the module docstring)."""
    classes: AxisClasses = field(default_factory=AxisClasses)
    inputs: list = field(default_factory=list)       # (name, Tensor)
    steps: list = field(default_factory=list)
    requirements: list = field(default_factory=list)  # (tensor, check on its values, what the check refuses)
    values: dict = field(default_factory=dict)        # a scalar input's name → its number
    # the operation being translated: where it is (for errors), its ATen name, node, output shape and format
    at: str = ""
    op: str = ""
    node: str = ""
    shape: tuple = ()
    dtype: object = None
    eps: float = 0.0
    wraps: set = field(default_factory=set)           # the dimensions an aten.index counts negative indices along
    negations: dict = field(default_factory=dict)     # id of ¬m → (¬m, m): ¬¬m is m

    def refuse(self, why: str):
        raise UnsupportedOperationError(f"{self.at}: {why}" if self.at else why)

    # ----------------------------------------------------------------------------------------- tensors
    def input(self, name: str, shape, dtype, claims=None) -> Tensor:
        """An input of the diagram (a model input, a parameter, a buffer, a constant) of ``shape``."""
        dims = tuple(None if s == 1 else self.classes.fresh(s, claims=(claims or [()] * len(shape))[p])
                     for p, s in enumerate(shape))
        self.classes.separate(dims)
        t = Tensor(dims, tuple(c is not None for c in dims), dtype)
        self.inputs.append((name, t))
        return t

    def require(self, x: Tensor, check, refused: str):
        """``check`` must hold of ``x``'s values wherever ``x`` is an input (the diagram assumes it)."""
        self.requirements.append((x, check, f"{refused}; assumed by {self.at}" if self.at else refused))

    def size_of(self, x: Tensor) -> list:
        return [1 if c is None else self.classes.size[self.classes.find(c)] for c in x.dims]

    def view(self, x: Tensor, dims, carried=None) -> Tensor:
        """``x``'s array with its dimensions ``dims`` (a permutation, with size-1 dimensions added or dropped)."""
        carried = tuple(carried if carried is not None else
                        (c is not None and x.carried[x.dims.index(c)] if c in x.dims else c is not None
                         for c in dims))
        return Tensor(tuple(dims), carried, x.dtype, base=x, known=x.known)

    def expanded(self, x: Tensor, shape) -> Tensor:
        """``x`` broadcast to ``shape``: a size-1 dimension of size n is a new class the array does not carry."""
        pad = (None,) * (len(shape) - x.rank)
        dims, carried = list(pad + x.dims), list((False,) * len(pad) + x.carried)
        for p, s in enumerate(shape):
            if dims[p] is None and s != 1:
                dims[p], carried[p] = self.classes.fresh(s, claims=[]), False
        self.classes.separate(dims)
        return Tensor(tuple(dims), tuple(carried), x.dtype, base=x, known=x.known)

    def step(self, uses, dims, carried, dtype, make) -> Tensor:
        """Record the box ``make`` on ``uses`` whose output has ``dims``; the operands' renames checked (a known
        operand that reaches a step is a scalar input: :meth:`wired`)."""
        uses = [(self.wired(x), used) for x, used in uses]
        for x, used in uses:
            self.check_renames(x, used)
        roots = [self.classes.find(c) for c, k in zip(dims, carried) if c is not None]
        if len(set(roots)) != len(roots):
            self.refuse("its output would carry one axis twice (two of its dimensions are one axis of the model)")
        self.classes.separate(dims)
        out = Tensor(tuple(dims), tuple(carried), dtype)
        self.steps.append(Step(list(uses), [out], make, self.at))
        return out

    def check_renames(self, x: Tensor, used):
        find = self.classes.find
        kept = {find(c) for c, u, k in zip(x.dims, used, x.carried) if k and c is not None and find(c) == find(u)}
        for c, u, k in zip(x.dims, used, x.carried):
            if k and c is not None and find(c) != find(u) and find(u) in kept:
                self.refuse("it would rename an axis of an operand onto another axis that operand carries (a "
                            "tensor combined with its own transpose); napkin-cat has no box that swaps two axes")

    # ----------------------------------------------------------------------------------------- operations
    def broadcast(self, operands, make, dtype) -> Tensor:
        """An elementwise operation with torch's broadcasting: dimensions aligned from the right are one axis.
        Known operands (see the module docstring): all known, the operation is folded into a known result; else
        each is the closed constant beside an operand that carries an axis."""
        if all(x.known is not None for x in operands):
            return self.folded(operands, make, dtype, max(x.rank for x in operands))
        operands = self.beside(operands)
        rank = max(x.rank for x in operands)
        used = [[None] * (rank - x.rank) + list(x.dims) for x in operands]
        held = [[False] * (rank - x.rank) + list(x.carried) for x in operands]
        dims, carried = [], []
        for p in range(rank):
            cls, k = None, False
            for j in range(len(operands)):
                c = used[j][p]
                if c is None:
                    continue
                if cls is None:
                    cls = c
                elif not self.classes.unify(cls, c):
                    used[j][p] = cls
                k = k or held[j][p]
            dims.append(cls)
            carried.append(k)
        uses = [(x, tuple(u[rank - x.rank:])) for x, u in zip(operands, used)]
        return self.step(uses, dims, carried, dtype, make)

    def contract(self, letters, out: str, operands, dtype=None) -> Tensor:
        """``torch.einsum`` of ``operands`` indexed by ``letters``: a letter's dimensions are one axis, distinct
        letters distinct axes (a letter whose class another letter holds is renamed to a copy)."""
        occurrences = {}
        for j, (ls, x) in enumerate(zip(letters, operands)):
            if len(set(ls)) != len(ls) or len(ls) != x.rank:
                self.refuse(f"operand {j} is indexed {ls!r} for {x.rank} dimensions, or repeats an index (a "
                            f"diagonal); napkin-cat contracts distinct indices")
            for p, L in enumerate(ls):
                occurrences.setdefault(L, []).append((j, p))
        if set(out) - set(occurrences):
            self.refuse(f"the output index {sorted(set(out) - set(occurrences))} is in no operand")
        used = [list(x.dims) for x in operands]
        of = {}
        for L, occ in occurrences.items():
            c0 = None
            for j, p in occ:
                c = used[j][p]
                if c is None:
                    continue
                if c0 is None:
                    c0 = c
                    if self.classes.find(c) in {self.classes.find(k) for k in of.values() if k is not None}:
                        c0 = used[j][p] = self.classes.copy(c)
                    self.classes.separate([c0, *of.values()])
                elif not self.classes.unify(c0, c):
                    used[j][p] = c0
            of[L] = c0
        held = {L: any(operands[j].carried[p] for j, p in occ) for L, occ in occurrences.items()}
        for L in set(occurrences) - set(out):
            if of[L] is not None and not held[L]:
                self.refuse(f"it sums over index {L!r}, a dimension every operand only broadcasts (an expand)")
        def make(sig):
            return einsum(sig.spell(), dtype=dtype or operands[0].dtype, sizes=sig.sized())
        return self.step([(x, tuple(u)) for x, u in zip(operands, used)], [of[L] for L in out],
                         [held[L] and of[L] is not None for L in out], dtype or operands[0].dtype, make)

    def reduce(self, kind: str, x: Tensor, axes, keepdim: bool = False) -> Tensor:
        """``kind`` (sum, mean, max, min, logsumexp) over the dimensions ``axes`` of ``x``."""
        axes = sorted({p % x.rank for p in axes}) if x.rank else []
        dims = [None if p in axes else c for p, c in enumerate(x.dims)] if keepdim else \
            [c for p, c in enumerate(x.dims) if p not in axes]
        reduced = [p for p in axes if x.dims[p] is not None and x.carried[p]]
        broadcast = [x.dims[p] for p in axes if x.dims[p] is not None and not x.carried[p]]
        if broadcast and kind not in ("mean", "max", "min"):
            self.refuse(f"it takes the {kind} over a dimension of size {self.classes.size[broadcast[0]]} the tensor "
                        f"only broadcasts (an expand): napkin-cat reduces arrays, not broadcasts")
        if not reduced:
            return self.view(x, dims, [c is not None and x.carried[x.dims.index(c)] for c in dims])
        return self.step([(x, x.dims)], dims, [c is not None and x.carried[x.dims.index(c)] for c in dims], x.dtype,
                         lambda sig: reduce(kind, sig.spell(), dtype=x.dtype, sizes=sig.sized()))

    def softmax(self, x: Tensor, p: int, beta=1) -> Tensor:
        """SoftMax along dimension ``p`` of ``x`` (β the inverse temperature)."""
        c = x.dims[p % x.rank]
        if c is None or not x.carried[p % x.rank]:
            self.refuse("its softmax runs along a dimension of size 1 or one the tensor only broadcasts")
        return self.step([(x, x.dims)], x.dims, x.carried, x.dtype,
                         lambda sig: softmax(sig.spell(arrow=False), over=sig.name(c), beta=beta, dtype=x.dtype,
                                             sizes=sig.sized()))

    def pointwise(self, kind: str, *operands, const=None) -> Tensor:
        """The elementwise map ``kind`` (add, exp, scale with ``const``, …) with broadcasting."""
        dtype = operands[0].dtype
        return self.broadcast(list(operands), lambda sig: elementwise(kind, sig.spell(), const=const, dtype=dtype,
                                                                       sizes=sig.sized()), dtype)

    def compare(self, op: str, a: Tensor, b: Tensor) -> Tensor:
        if a.dtype != b.dtype:
            self.refuse(f"it compares a {a.dtype.name} tensor with a {b.dtype.name} one")
        return self.broadcast([a, b], lambda sig: compare(op, sig.spell(), dtype=a.dtype, **sig.sized()), BOOL)

    def logical(self, op: str, *masks) -> Tensor:
        """``and``, ``or`` of two masks, ``not`` of one; ``¬¬m = m``: the negation of a negation this translation
        made is its operand (``masked_fill(~m, …)`` is ``where(m, …)``, with no box for the two negations).

        >>> import napkin_cat as nc
        >>> t = Translation()
        >>> m = t.input("m", (3,), nc.BOOL, claims=[[(2, "n")]])
        >>> t.logical("not", t.logical("not", m)) is m
        True
        """
        if op == "not" and id(masks[0]) in self.negations and self.negations[id(masks[0])][0] is masks[0]:
            return self.negations[id(masks[0])][1]
        simplified = self.simplified_logical(op, masks)
        if simplified is not None:
            return simplified
        out = self.broadcast(list(masks), lambda sig: logical(op, sig.spell(), **sig.sized()), BOOL)
        if op == "not":
            self.negations[id(out)] = (out, masks[0])
        return out

    def where(self, mask: Tensor, a: Tensor, other: float) -> Tensor:
        """``mask ? a : other`` (a number); ``a`` where the mask is known true."""
        picked = self.picked(mask, a)
        if picked is not None:
            return picked
        return self.broadcast([mask, a], lambda sig: where(sig.spell(), other=other, dtype=a.dtype, **sig.sized()),
                              a.dtype)

    def select(self, mask: Tensor, a: Tensor, b: Tensor) -> Tensor:
        """``mask ? a : b``; ``a`` or ``b`` where the mask is known (and no broadcast against it widens them)."""
        picked = self.picked(mask, a, b)
        if picked is not None:
            return picked
        return self.broadcast([mask, a, b], lambda sig: select(sig.spell(), dtype=a.dtype, **sig.sized()), a.dtype)

    def cast(self, x: Tensor, to) -> Tensor:
        from_ = x.dtype
        return self.broadcast([x], lambda sig: cast(sig.spell(arrow=False), to=to, dtype=from_, sizes=sig.sized()),
                              to)

    def position(self, c: int) -> Tensor:
        """The positions ``0 … n−1`` along the class ``c``: an int32 array with no input."""
        return self.step([], [c], [True], INT32,
                         lambda sig: position(sig.name(c), **{sig.name(c): sig.sizes[sig.name(c)]}))

    def gather(self, x: Tensor, p: int, index: Tensor) -> Tensor:
        """``torch.gather(x, p, index)`` with one index per row (``index`` of size 1 along ``p``): ``y[i] =
        x[i, index[i]]``, the other dimensions of ``x`` and ``index`` one axis each."""
        p %= x.rank
        if x.dims[p] is None:                  # one element along the dimension: the index can only be 0
            return self.view(x, x.dims)
        if index.rank != x.rank or index.dims[p] is not None:
            self.refuse("it gathers more than one element along the dimension per row; napkin-cat's gather takes "
                        "one (an index of size 1 along it, as x.gather(d, t.unsqueeze(d)))")
        used = list(index.dims)
        for q, (c, i) in enumerate(zip(x.dims, index.dims)):
            if q == p:
                continue
            if (c is None) != (i is None) or (c is not None and not (x.carried[q] and index.carried[q])):
                self.refuse(f"its index is not the shape of the source along dimension {q}; napkin-cat gathers "
                            f"one element per item of the source's other dimensions")
            if c is not None and not self.classes.unify(c, i):
                used[q] = c
        dims = [None if q == p else c for q, c in enumerate(x.dims)]
        return self.step([(x, x.dims), (index, tuple(used))], dims, [c is not None for c in dims], x.dtype,
                         lambda sig: gather(sig.spell(), dtype=x.dtype, index_dtype=index.dtype, **sig.sized()))

    def index(self, x: Tensor, indices) -> Tensor:
        """``x[i₀, …, i_{m−1}]``, the leading dimensions of ``x`` indexed by integer tensors that broadcast together
        (torch's advanced indexing): the output's dimensions are the indices' broadcast ones, then the rest of
        ``x``'s.  One gather per index, the table read where each index points (its FLOPs one per output item,
        whatever the table's length)::

            y[…, r] = x[i₀[…], …, i_{m−1}[…], r]

        The indices are used in order of how many axes they carry (a per-head index before a per-(q, x) one), so
        that the tables read in between stay small.  An index outside the table is refused on the example's
        values by :func:`~napkin_cat.torch.exported.check_indices`, not here."""
        rank = max(i.rank for i in indices)
        used = [[None] * (rank - i.rank) + list(i.dims) for i in indices]
        held = [[False] * (rank - i.rank) + list(i.carried) for i in indices]
        batch = [None] * rank
        for p in range(rank):
            for j in range(len(indices)):
                c = used[j][p]
                if c is None:
                    continue
                if batch[p] is None:
                    batch[p] = c
                elif not self.classes.unify(batch[p], c):
                    used[j][p] = batch[p]
        order = sorted(range(len(indices)), key=lambda j: sum(held[j]))
        cur, table = x, list(range(x.rank))       # cur's dimensions: the batch (once one is read), x's not read
        read, have = [False] * rank, [False] * rank
        for j in order:
            where = {k: (0 if cur is x else rank) + table.index(k) for k in table}
            rest = [k for k in table if k != j]
            gathers = cur.carried[where[j]]   # else the table only broadcasts along j: every index reads one value
            read = [r or c is not None for r, c in zip(read, used[j])]
            have = [h or (gathers and k) for h, k in zip(have, held[j])]
            dims = [c if r else None for c, r in zip(batch, read)] + [x.dims[k] for k in rest]
            carried = have + [cur.carried[where[k]] for k in rest]
            index = self.view(indices[j], (None,) * (rank - indices[j].rank) + indices[j].dims)
            cur = self.take(cur, where[j], (index, tuple(used[j])), dims, carried) if gathers else \
                self.view(cur, dims, carried)
            table = rest
        return cur

    def take(self, x: Tensor, at: int, index, dims, carried) -> Tensor:
        """The gather of ``x`` along its dimension ``at`` at ``index`` (the tensor and the classes it is used
        with), into a tensor of ``dims``: the gathered class is kept apart from the output's (renamed to a copy
        where they are one class), so that no later unification makes it one of the output's axes."""
        table = list(x.dims)
        k = table[at]
        theirs = {self.classes.find(c) for c in dims if c is not None}
        if self.classes.find(k) in theirs:
            table[at] = self.classes.copy(k)
        self.classes.separate([table[at], *theirs])
        return self.step([(x, tuple(table)), index], dims, carried, x.dtype,
                         lambda sig: gather(sig.spell(), dtype=x.dtype, index_dtype=index[0].dtype, **sig.sized()))

    # ----------------------------------------------------------------------------------------- pass 2
    def build(self, outputs) -> Diagram:
        """The diagram: the inputs in order, every step's box, the outputs in torch's dimension order."""
        outputs = [self.wired(t) for t in outputs]
        names = self.classes.names()
        sizes = {names[c]: self.size(c, names) for c in names}

        def array(t: Tensor) -> Array:
            return Array(tuple(Axis(names[c], sizes[names[c]]) for c, k in zip(t.dims, t.carried)
                               if c is not None and k), 0, t.dtype)
        b = Builder(Ty(*(array(t) for _, t in self.inputs)))
        for (_, t), w in zip(self.inputs, b.inputs):
            t.wire = w
        for step in self.live(outputs):
            self.at = step.at
            wires = [self.renamed(b, x, used, names, sizes) for x, used in step.uses]
            outs = [[names[c] for c, k in zip(t.dims, t.carried) if c is not None and k] for t in step.outs]
            sig = Signature([list(w.array.names) for w in wires], outs, sizes, lambda c: names[c])
            out = b(step.make(sig), *wires)
            for t, w in zip(step.outs, out if isinstance(out, tuple) else (out,)):
                t.wire = w
        self.at = ""
        return b.build(*(self.ordered(b, t, names, sizes) for t in outputs))

    def live(self, outputs) -> list:
        """The steps an output depends on, in order: a step whose results nothing reads (the ``~m`` of
        ``masked_fill(~m, …)`` once ``¬¬m = m``) makes no box."""
        def chain(t):
            while t is not None:
                yield id(t)
                t = t.base
        read = {i for t in outputs for i in chain(t)}
        kept = []
        for step in reversed(self.steps):
            if any(i in read for t in step.outs for i in chain(t)):
                kept.append(step)
                read |= {i for x, _ in step.uses for i in chain(x)}
        return kept[::-1]

    def size(self, c: int, names: dict):
        """The size of class ``c``'s axis: the int, or (a dynamic dimension) the axis's own symbol."""
        size = self.classes.size[self.classes.find(c)]
        return size if isinstance(size, int) else symbol(names[c])

    @staticmethod
    def renamed(b: Builder, x: Tensor, used, names, sizes):
        """``x``'s wire, its axes renamed where the step uses them under other classes."""
        wire = x.array_wire()
        new = {names[c]: names[u] for c, u, k in zip(x.dims, used, x.carried) if c is not None and k}
        before = list(wire.array.names)
        after = [new.get(n, n) for n in before]
        if after == before:
            return wire
        return b(renaming(" ".join(before) + " -> " + " ".join(after), level=wire.array.level, dtype=wire.array.dtype,
                          sizes={n: sizes[n] for n in before}), wire)

    def ordered(self, b: Builder, t: Tensor, names, sizes):
        """An output's wire with its axes in the tensor's dimension order (an ``id`` box permutes them)."""
        if not all(k for c, k in zip(t.dims, t.carried) if c is not None):
            self.refuse("an output is a broadcast (an expand) along a dimension; the diagram's arrays are what the "
                        "model computes, without the broadcast: return the tensor before it")
        wire = t.array_wire()
        want = [names[c] for c in t.dims if c is not None]
        have = list(wire.array.names)
        if want == have:
            return wire
        return b(elementwise("id", " ".join(have) + " -> " + " ".join(want), dtype=wire.array.dtype,
                             sizes={n: sizes[n] for n in have}), wire)
