"""The arithmetic of the cost fold: sympy expressions, or expanded polynomials in Python numbers.

The cost functor (:mod:`napkin_cat.cost.iocost`) adds and multiplies sizes: an array's values are the product of
its axes' sizes, a partition's trips ``a/g``, a region's transfers the sum of its parts' times its trips.  Those
values live in an *arithmetic*, the ring the fold computes in, given to the fold once:

* :data:`SYMPY`: sympy expressions, as ``nc.cost`` reports them (any expression: a ceiling, a ``Min``);
* :data:`POLYNOMIAL`: :class:`Poly`, Laurent polynomials in the size symbols with exact coefficients (``int``,
  :class:`~fractions.Fraction`), each held expanded as monomial → coefficient.  Its sums and products are Python
  dict and integer arithmetic: what the search costs its candidates in, and evaluates at numeric sizes by
  :func:`~napkin_cat.cost.exact_arithmetic.value` (no sympy object built or substituted per candidate).

Both compute the same cost::

    POLYNOMIAL.of(e).as_expr() == expand(e)            (e a Laurent polynomial in the sizes)
    value(cost(d, arithmetic=POLYNOMIAL).H[ℓ], env) == cost(d).H[ℓ].subs(env)

A value outside the polynomials (a ceiling of a tile, a ``Min``, a root) is a :class:`~napkin_cat.errors.
NotPolynomialError`: the caller costs that diagram with :data:`SYMPY`.

>>> import napkin_cat as nc
>>> q, g, d = nc.symbol("q"), nc.symbol("g_q"), nc.symbol("d")
>>> h = POLYNOMIAL.of(2 * d * q) + POLYNOMIAL.of(q / g) * POLYNOMIAL.of(2 * d * g + 2 * d)
>>> h.as_expr()
4*d*q + 2*d*q/g_q
>>> h == POLYNOMIAL.of(sympy.expand(h.as_expr())), sorted(map(str, h.free_symbols))
(True, ['d', 'g_q', 'q'])
>>> POLYNOMIAL.of(sympy.ceiling(q / g))
Traceback (most recent call last):
...
napkin_cat.errors.NotPolynomialError: ceiling(q/g_q) is not a Laurent polynomial in the sizes ...
"""
from __future__ import annotations

from fractions import Fraction

import sympy

from napkin_cat.cost.by_value import ByValue
from napkin_cat.cost.live import Live, numel
from napkin_cat.cost.poly_sum import PolySum
from napkin_cat.errors import NotPolynomialError
from napkin_cat.cost.expanded import expand


def _number(v):
    """An exact Python number (``int`` or :class:`Fraction`) for a rational number of any kind, else None."""
    if type(v) is int:
        return v
    if isinstance(v, Fraction):
        return v.numerator if v.denominator == 1 else v
    if isinstance(v, sympy.Integer):
        return int(v)
    if isinstance(v, sympy.Rational):
        return Fraction(int(v.p), int(v.q))
    if isinstance(v, int) and not isinstance(v, bool):
        return int(v)
    return None


def _name(item):
    return item[0].name


def _add_term(table: dict, key, value) -> None:
    """``table[key] += value``, the entry dropped where the sum is 0 (a term that cancels, an exponent that does):
    a table of terms or powers holds no zero."""
    total = table.get(key, 0) + value
    if total:
        table[key] = total
    else:
        table.pop(key, None)


def _times(m1: tuple, m2: tuple) -> tuple:
    """The product of two monomials (``((symbol, exponent), …)`` sorted by name, no zero exponent), remembered by
    the pair (:data:`PRODUCTS`: a cost scaled by a partition's trips multiplies the same monomials in every
    candidate; a lookup hashes the symbols once, where the product hashes, sorts and builds)."""
    if not m1:
        return m2
    if not m2:
        return m1
    key = (m1, m2)
    found = PRODUCTS.get(key)
    if found is not None:
        return found
    powers = dict(m1)
    for s, e in m2:
        _add_term(powers, s, e)
    out = tuple(sorted(powers.items(), key=_name))
    if len(PRODUCTS) >= PRODUCTS_LIMIT:     # bounded: a process that multiplies many monomials does not grow
        PRODUCTS.clear()
    PRODUCTS[key] = out
    return out


#: monomial products by their pair of monomials (a pure function of the key), at most :data:`PRODUCTS_LIMIT`
PRODUCTS: dict = {}
PRODUCTS_LIMIT = 2 ** 16


class Poly:
    """A Laurent polynomial in sympy symbols with exact numeric coefficients: ``{monomial: coefficient}``, each
    monomial ``((symbol, exponent), …)`` sorted by name; no zero coefficient is kept.  Immutable (its terms are never
    changed once made), hashable, equal to a number where it is that constant.

    >>> import napkin_cat as nc
    >>> q, g = Poly.variable(nc.symbol("q")), Poly.variable(nc.symbol("g_q"))
    >>> (q / g * (g + 2)).as_expr(), (q - q) == 0, (q / q) == 1
    (q + 2*q/g_q, True, True)
    """

    __slots__ = ("terms", "_hash")

    def __init__(self, terms: dict):
        self.terms = terms
        self._hash = None

    @classmethod
    def hashed(cls, terms: dict, h=None) -> "Poly":
        """The polynomial of ``terms`` (no zero coefficient) whose hash is known: ``h``, the hash it would compute
        (:class:`~napkin_cat.cost.poly_sum.PolySum`'s, kept as the terms changed), or None (it hashes itself).  A
        constant hashes as its number, always computed."""
        out = cls(terms)
        if h is not None and not (len(terms) == 1 and () in terms):
            out._hash = h
        return out

    @classmethod
    def variable(cls, symbol) -> "Poly":
        return cls({((symbol, 1),): 1})

    @classmethod
    def constant(cls, c) -> "Poly":
        return cls({(): c} if c else {})

    @staticmethod
    def lift(other):
        """``other`` as a Poly (a Poly, or an exact number of any kind), else None."""
        if isinstance(other, Poly):
            return other
        c = _number(other)
        return None if c is None else Poly.constant(c)

    @property
    def free_symbols(self) -> set:
        return {s for m in self.terms for s, _ in m}

    @property
    def is_number(self) -> bool:
        return all(not m for m in self.terms)

    def __add__(self, other):
        if not isinstance(other, Poly):
            other = Poly.lift(other)
            if other is None:
                return NotImplemented
        if not other.terms:
            return self
        if not self.terms:
            return other
        out = dict(self.terms)
        for m, c in other.terms.items():
            _add_term(out, m, c)
        return Poly(out)

    __radd__ = __add__

    def __neg__(self):
        return Poly({m: -c for m, c in self.terms.items()})

    def __sub__(self, other):
        other = Poly.lift(other)
        return NotImplemented if other is None else self + (-other)

    def __rsub__(self, other):
        other = Poly.lift(other)
        return NotImplemented if other is None else other + (-self)

    def __mul__(self, other):
        if not isinstance(other, Poly):
            c = _number(other)
            if c is None:
                return NotImplemented
            if c == 1:
                return self
            return Poly({m: k * c for m, k in self.terms.items()} if c else {})
        if len(other.terms) == 1:      # a monomial: its product with each term is a distinct term
            ((m2, c2),) = other.terms.items()
            if not m2:
                return self * c2
            return Poly({_times(m1, m2): c1 * c2 for m1, c1 in self.terms.items()})
        if len(self.terms) == 1:
            return other * self
        out: dict = {}
        for m1, c1 in self.terms.items():
            for m2, c2 in other.terms.items():
                _add_term(out, _times(m1, m2), c1 * c2)
        return Poly(out)

    __rmul__ = __mul__

    def inverse(self) -> "Poly":
        """``1/self``: a monomial's inverse (the inverse of a sum of terms is no Laurent polynomial)."""
        if len(self.terms) != 1:
            raise NotPolynomialError(f"1/({self.as_expr()}) is not a Laurent polynomial in the sizes")
        ((m, c),) = self.terms.items()
        return Poly({tuple((s, -e) for s, e in m): _number(Fraction(1, c) if isinstance(c, int) else 1 / c)})

    def __truediv__(self, other):
        c = _number(other)
        if c is not None:
            return self * Fraction(1, c) if isinstance(c, int) else self * (1 / c)
        if not isinstance(other, Poly):
            return NotImplemented
        return self * other.inverse()

    def __rtruediv__(self, other):
        other = Poly.lift(other)
        return NotImplemented if other is None else other * self.inverse()

    def __pow__(self, k: int):
        if not isinstance(k, int):
            raise NotPolynomialError(f"({self.as_expr()})**{k} is not a Laurent polynomial in the sizes")
        base = self if k >= 0 else self.inverse()
        out = Poly.constant(1)
        for _ in range(abs(k)):
            out = out * base
        return out

    def __eq__(self, other):
        if type(other) is int:     # (the fold asks ``!= 0`` of every column)
            return (not self.terms) if other == 0 else (len(self.terms) == 1 and self.terms.get(()) == other)
        other = Poly.lift(other)
        return other is not None and self.terms == other.terms

    def __hash__(self):
        if self._hash is None:
            constant = not self.terms or (len(self.terms) == 1 and () in self.terms)
            # a constant hashes as its number (they are equal)
            self._hash = hash(self.terms.get((), 0)) if constant else hash(frozenset(self.terms.items()))
        return self._hash

    def __bool__(self):
        return bool(self.terms)

    def evaluate(self, env, value_of=None):
        """``Σ c · Π env[s]^e``: the polynomial at ``env`` (symbol → a number, or any value with ``+``, ``*`` and
        integer powers, such as a :class:`~napkin_cat.cost.exact_arithmetic.Laurent`); a KeyError names a symbol
        missing from ``env``."""
        total = 0
        for m, c in self.terms.items():
            v = c
            for s, e in m:
                x = env[s]
                if e < 0 and type(x) is int:
                    x = Fraction(1, x)
                    e = -e
                v = v * (x ** e if e != 1 else x)
            total = total + v
        return total

    def as_expr(self) -> sympy.Expr:
        """The polynomial as a sympy expression (expanded)."""
        return sympy.Add(*(sympy.Rational(c.numerator, c.denominator) * sympy.Mul(*(s ** e for s, e in m))
                           if isinstance(c, Fraction) else sympy.Integer(c) * sympy.Mul(*(s ** e for s, e in m))
                           for m, c in self.terms.items()))

    def xreplace(self, values: dict) -> "Poly":
        """The polynomial with the symbols of ``values`` bound to exact numbers (a density bound, say)."""
        out = Poly({})
        for m, c in self.terms.items():
            term = Poly.constant(c)
            for s, e in m:
                x = values.get(s)
                term = term * (Poly({((s, e),): 1}) if x is None else Poly.constant(_number(x)) ** e)
            out = out + term
        return out

    def __repr__(self):
        return f"Poly({self.as_expr()})"


def sympified(x):
    """``x`` as a value of some arithmetic: a :class:`Poly` as it is, anything else through ``sympy.sympify``."""
    return x if isinstance(x, Poly) else sympy.sympify(x)


def as_expr(x) -> sympy.Expr:
    """A value of either arithmetic as a sympy expression, expanded (what a message shows)."""
    return x.as_expr() if isinstance(x, Poly) else expand(x)


def add_all(values: list):
    """The sum of ``values`` (at least one): in one ``sympy.Add`` where they are sympy expressions."""
    if any(isinstance(v, Poly) for v in values):
        total = values[0]
        for v in values[1:]:
            total = total + v
        return total
    return sympy.Add(*values)


class Sympy:
    """The arithmetic of sympy expressions (``nc.cost``'s): a value is the expression itself."""

    name = "sympy"
    zero, one = sympy.Integer(0), sympy.Integer(1)

    def of(self, expr):
        return sympy.sympify(expr)

    def numel(self, arr):
        return numel(arr)

    def product(self, values):
        return sympy.Mul(*values)

    def live(self) -> Live:
        """The live data of a walk, its totals sympy sums (:class:`~napkin_cat.cost.live.Live`)."""
        return Live()

    def expand(self, v):
        return expand(v)


class Polynomial:
    """The arithmetic of :class:`Poly` (the search's): a sympy value is expanded once into its terms."""

    name = "polynomial"
    zero, one = Poly.constant(0), Poly.constant(1)

    def of(self, expr) -> Poly:
        """``expr`` (a sympy expression or an exact number) as a :class:`Poly`, or a NotPolynomialError where it is
        not a Laurent polynomial in its symbols (a ceiling, a ``Min``, a root)."""
        if isinstance(expr, Poly):
            return expr
        c = _number(expr)
        if c is not None:
            return Poly.constant(c)
        if isinstance(expr, sympy.Symbol):
            return Poly.variable(expr)
        expr = sympy.sympify(expr)
        try:
            return Poly.lift(_walk(expr))
        except (NotPolynomialError, TypeError):
            raise NotPolynomialError(f"{expr} is not a Laurent polynomial in the sizes (cost it with sympy)") \
                from None

    def numel(self, arr) -> Poly:
        """The number of values of ``arr`` (kept on the array: it is immutable)."""
        found = arr.__dict__.get("_numel_poly")
        if found is None:
            found = NUMELS.get(arr)      # an equal array (a fresh image of the same relabelling) counted before
            if found is None:
                found = Poly.constant(1)
                for a in arr.axes:
                    found = found * self.of(a.size)
                found = NUMELS.put(arr, found)
            arr.__dict__["_numel_poly"] = found
        return found

    def product(self, values) -> Poly:
        out = self.one
        for v in values:
            out = out * self.of(v)
        return out

    def terms_of(self, arr) -> tuple:
        """``numel(arr)`` as ``(monomial, coefficient)`` pairs (a :class:`Live` total's terms), kept on the array
        (immutable: a wire's array is met at every layer it crosses)."""
        found = arr.__dict__.get("_numel_poly_terms")
        if found is None:
            found = arr.__dict__["_numel_poly_terms"] = tuple(self.numel(arr).terms.items())
        return found

    @staticmethod
    def total(terms: dict) -> Poly:
        """The :class:`Poly` of ``terms`` (monomial → coefficient), zero coefficients dropped."""
        return Poly({m: c for m, c in terms.items() if c})

    def live(self) -> Live:
        """The live data of a walk, its totals :class:`Poly` (:class:`~napkin_cat.cost.live.Live`), each level's kept
        as its terms change (:class:`~napkin_cat.cost.poly_sum.PolySum`: a column costs what changed in it)."""
        return Live(self.terms_of, self.total, running=_running_poly)

    def expand(self, v):
        return v


def _running_poly() -> PolySum:
    """A level's running :class:`Poly` total (:class:`Live`'s, in this arithmetic)."""
    return PolySum(Poly.hashed)


def _walk(node) -> Poly:
    if node.is_Symbol:
        return Poly.variable(node)
    c = _number(node)
    if c is not None:
        return Poly.constant(c)
    if node.is_Add:
        total = Poly({})
        for a in node.args:
            total = total + _walk(a)
        return total
    if node.is_Mul:
        total = Poly.constant(1)
        for a in node.args:
            total = total * _walk(a)
        return total
    if node.is_Pow and node.exp.is_Integer:
        return _walk(node.base) ** int(node.exp)
    raise NotPolynomialError(f"{node} is not a Laurent polynomial in the sizes")


SYMPY = Sympy()
POLYNOMIAL = Polynomial()
#: an array's number of values as a :class:`Poly`, by value (:mod:`.by_value`)
NUMELS = ByValue()

__all__ = ["Poly", "SYMPY", "POLYNOMIAL", "Sympy", "Polynomial", "add_all", "as_expr", "sympified"]
