"""Axis classes: the dimensions of a traced model's tensors as axis variables, unified by the ops' semantics.

A diagram's axes are named; a tensor's dimensions are not.  Every dimension of every tensor gets a variable; an
operation equates the variables its semantics aligns (a contraction's contracted dimensions, the dimensions an
elementwise map broadcasts together, a reduction's kept ones), and each class of equal variables is one axis.
Two dimensions of one tensor are *apart*: an array carries an axis once.  Unifying two apart classes is refused
(``unify`` answers False): the operation renames one operand's axis instead (``Q Kᵀ`` of a self-attention, whose
queries and keys are both the sequence: the keys' copy is a new class).  Equal sizes never merge two classes;
only an operation does::

    unify(a, b)  ⇒  find(a) == find(b)            separate(a, b)  ⇒  not unify(a, b)

>>> c = AxisClasses()
>>> n, d, m = c.fresh(5, claims=[(2, "x_0")]), c.fresh(4, claims=[(2, "x_1")]), c.fresh(5, claims=[(2, "y_0")])
>>> c.separate([n, d]); c.unify(n, m), c.unify(n, d)
(True, False)
>>> k = c.copy(n)                       # the keys' copy of the sequence axis: apart from it, its name primed
>>> names = c.names(); names[n], names[d], names[k], c.find(m) == c.find(n)
('x_0', 'x_1', "x_0'", True)
"""
from __future__ import annotations

from napkin_cat.errors import AxisError
from napkin_cat.syntax.axis import check_name

#: a claim's priority: a name the user gave (``names=``), a ``torch.export.Dim``'s, an input dimension's default
BY_USER, BY_DIM, BY_INPUT = 0, 1, 2


class AxisClasses:
    """Union-find over dimension variables, with apartness and the claims on each class's name (see module)."""

    def __init__(self):
        self.parent: list[int] = []
        self.size: list = []                    # an int, or a sympy symbol where the dimension is dynamic
        self.apart: list[set[int]] = []
        self.claims: list[list[tuple[int, str, str]]] = []   # (priority, name, where it was claimed)
        self.source: list[int | None] = []      # the class a copy was made from (named after it, primed)

    def fresh(self, size, *, claims=(), source: int | None = None) -> int:
        """A new class of dimensions of ``size``, with ``claims`` ``(priority, name[, where])`` on its name."""
        self.parent.append(len(self.parent))
        self.size.append(size)
        self.apart.append(set())
        self.claims.append([(c[0], c[1], c[2] if len(c) > 2 else c[1]) for c in claims])
        self.source.append(source)
        return len(self.parent) - 1

    def copy(self, c: int) -> int:
        """A new class of ``c``'s size, apart from ``c``: the axis an operation renames ``c`` to."""
        k = self.fresh(self.size[self.find(c)], source=self.find(c))
        self.separate([c, k])
        return k

    def claim(self, c: int, priority: int, name: str, where: str):
        self.claims[c].append((priority, name, where))

    def find(self, c: int) -> int:
        while self.parent[c] != c:
            self.parent[c] = self.parent[self.parent[c]]
            c = self.parent[c]
        return c

    def separate(self, classes):
        """Make ``classes`` pairwise apart (the dimensions of one tensor)."""
        roots = [self.find(c) for c in classes if c is not None]
        for r in roots:
            self.apart[r] |= {s for s in roots if s != r}

    def unify(self, a: int, b: int) -> bool:
        """Make ``a`` and ``b`` one class; False (and nothing changed) where they are apart."""
        a, b = self.find(a), self.find(b)
        if a == b:
            return True
        if b in self.apart[a]:
            return False
        if a > b:                    # the older class is the root: a copy never names the class it joins
            a, b = b, a
        self.parent[b] = a
        self.claims[a] += self.claims[b]
        self.apart[a] |= self.apart[b]
        for r in self.apart[b]:
            self.apart[r].discard(b)
            self.apart[r].add(a)
        if self.source[a] is None:
            self.source[a] = self.source[b]
        return True

    def names(self) -> dict[int, str]:
        """A name for every class (keyed by every variable): its best claim, never one another class took.

        The user's names (``names=``) come first and must not collide (:class:`~napkin_cat.errors.AxisError` naming
        both dimensions); then the ``Dim`` names, then the inputs' defaults; a name another class took goes to the
        next claim, then primed (``seq'``).  A class without a claim (a copy) is named after its source, primed.
        """
        roots = sorted({self.find(c) for c in range(len(self.parent))})
        taken: dict[str, tuple[int, str]] = {}
        name: dict[int, str] = {}
        for r in roots:
            users = sorted({(n, w) for p, n, w in self.claims[r] if p == BY_USER})
            if len({n for n, _ in users}) > 1:
                raise AxisError(f"names= gives one axis two names: {users[0][1]} is {users[0][0]!r} and "
                                f"{users[1][1]} is {users[1][0]!r}, but the model's operations make them one axis")
            for n, w in users:
                check_name(n)
                if n in taken and taken[n][0] != r:
                    raise AxisError(f"names= names two distinct axes {n!r} ({taken[n][1]} and {w}); the model's "
                                    f"operations keep them apart, so they need two names")
                taken[n], name[r] = (r, w), n
        order = sorted((r for r in roots if r not in name and self.claims[r]),
                       key=lambda r: (min(p for p, _, _ in self.claims[r]), r))
        for r in order:
            ranked = sorted(self.claims[r], key=lambda c: c[0])
            free = [n for _, n, _ in ranked if n not in taken]
            name[r] = free[0] if free else self.primed(ranked[0][1], taken)
            taken[name[r]] = (r, name[r])

        def of(r):
            if r not in name:
                src = self.source[r]
                name[r] = self.primed(of(self.find(src)) if src is not None else "a", taken)
                taken[name[r]] = (r, name[r])
            return name[r]
        for r in roots:
            of(r)
        return {c: name[self.find(c)] for c in range(len(self.parent))}

    @staticmethod
    def primed(base: str, taken) -> str:
        out = base + "'"
        while out in taken:
            out += "'"
        return out
