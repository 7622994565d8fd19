"""Two algebras the index semantics are written against: z3 terms, and exact Python values.

A value is a rational. In ``Z3Algebra`` it is a pair ``(P, Q)`` of z3 integer terms (``Q`` may
be a plain int) meaning ``P / Q``: rationals never become z3 reals, so everything stays integer
arithmetic, and ``floor(P / Q)`` is a fresh integer ``k`` with ``Q*k <= P < Q*k + Q`` (the
encoding docs/torch-facts.md section 4 found instant where ``ToInt(ToReal(..))``
timed out). In ``PyAlgebra`` a value is a ``fractions.Fraction`` and nothing is approximate.

Both record definedness: ``require(cond)`` in z3 collects ``path => cond`` (a divisor is non-zero
where its branch is taken), in Python it raises ``Undefined``. Conditional values (``ite``) take
thunks, so a branch is translated under its path condition and evaluated only when taken.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import z3


class Undefined(Exception):
    """A concrete evaluation left the domain (a zero divisor, an inexact CleanDiv, ...)."""


class PyAlgebra:
    """Exact evaluation under an assignment ``env: name -> int``."""

    def __init__(self, env: dict):
        self.env = env

    def const(self, q: Fraction):
        return q

    def symbol(self, name: str):
        return Fraction(self.env[name])

    def add(self, xs):
        return sum(xs, Fraction(0))

    def mul(self, xs):
        return math.prod(xs, start=Fraction(1))

    def neg(self, x):
        return -x

    def recip(self, x):
        self.require(x != 0, "a divisor is 0")
        return 1 / x

    def power(self, x, n: int):
        return x ** n

    def floor(self, x):
        return Fraction(math.floor(x))

    def is_integer(self, x):
        return x.denominator == 1

    def compare(self, op: str, a, b):
        return {"==": a == b, "!=": a != b, "<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]

    def and_(self, xs):
        return all(xs)

    def or_(self, xs):
        return any(xs)

    def not_(self, x):
        return not x

    def true(self, value: bool):
        return value

    def ite(self, cond, then, other):
        return then() if cond else other()

    def require(self, cond, why: str):
        if not cond:
            raise Undefined(why)


class Z3Algebra:
    """Translation into z3 integer arithmetic; ``defs`` and ``requires`` hold the side conditions."""

    def __init__(self, abstract_products: bool = False, ctx: z3.Context | None = None):
        # Its own z3 context unless given one: z3 numbers terms per context, and its models follow those
        # numbers, so in the shared default context a counterexample would depend on every term any
        # earlier proof in the process made (the README's CeilDiv counterexample did, test by test).
        self.ctx = ctx if ctx is not None else z3.Context()
        self.symbols = {}  # name -> z3 Int
        # With ``abstract_products``, a product of two or more non-constant terms is an application of
        # one uninterpreted function (``__mul``), factors in a fixed order: an over-approximation (real
        # multiplication is one interpretation of it), so a claim proved so is proved, and equal factors
        # give equal products by congruence, where z3's nonlinear arithmetic can time out
        # (s0 * floor(floor(s0/2)/2) against s0 * (s0 // 4): unknown after 60 s).
        self.abstract_products = abstract_products
        self.abstracted = False  # whether a product was abstracted (else the two translations agree)
        self._mul_fn = z3.Function("__mul", z3.IntSort(self.ctx), z3.IntSort(self.ctx), z3.IntSort(self.ctx))
        self.defs = []  # defining constraints of fresh integers: always asserted
        self.requires = []  # definedness, each as ``path => cond``
        self._path = []
        self._fresh = itertools.count()
        self._floors = {}  # (P, Q) -> its floor term: one floor(x / n) however often it is written
        self._floor_fn = z3.Function("__floor", z3.IntSort(self.ctx), z3.IntSort(self.ctx), z3.IntSort(self.ctx))

    # values are (P, Q): P a z3 term, Q a Python int (non-zero) or a z3 term
    def const(self, q: Fraction):
        return z3.IntVal(q.numerator, self.ctx), q.denominator

    def symbol(self, name: str):
        if name not in self.symbols:
            self.symbols[name] = z3.Int(name, self.ctx)
        return self.symbols[name], 1

    def add(self, xs):
        xs = list(xs)
        if all(isinstance(q, int) for _, q in xs):
            den = math.lcm(*(q for _, q in xs))
            return _sum([p * (den // q) if den != q else p for p, q in xs]), den
        num, den = xs[0]
        for p, q in xs[1:]:
            num, den = num * q + p * den, den * q
        return num, den

    def _times(self, terms):
        """The product of z3 terms: ``z3.Product``, or with ``abstract_products`` the constants times
        ``__mul`` folded over the other factors (symbols first, then by their text)."""
        if not self.abstract_products:
            return _product(terms)
        terms = [z3.simplify(t) for t in terms]
        consts = [t for t in terms if z3.is_int_value(t)]
        others = sorted((t for t in terms if not z3.is_int_value(t)),
                        key=lambda t: (not z3.is_const(t), t.sexpr()))
        if len(others) < 2:
            return _product(terms)
        self.abstracted = True
        acc = others[0]
        for t in others[1:]:
            acc = self._mul_fn(acc, t)
        return _product([*consts, acc]) if consts else acc

    def mul(self, xs):
        xs = list(xs)
        num = self._times([p for p, _ in xs])
        ints = [q for _, q in xs if isinstance(q, int)]
        terms = [q for _, q in xs if not isinstance(q, int)]
        den = math.prod(ints)
        if terms:
            den = _product(terms) if den == 1 else _product(terms) * den
        return _normalise(num, den)

    def neg(self, x):
        return -x[0], x[1]

    def recip(self, x):
        p, q = x
        p = z3.simplify(p)
        if z3.is_int_value(p):  # a constant divisor: a checked int, no side condition needed
            if p.as_long() == 0:
                self.require(z3.BoolVal(False, self.ctx), "a divisor is 0")
                return z3.IntVal(0, self.ctx), 1
            return _normalise(self._term(q), p.as_long())
        self.require(p != 0, "a divisor is 0")
        return self._term(q), p

    def power(self, x, n: int):
        if n == 0:
            return z3.IntVal(1, self.ctx), 1
        p, q = x
        return self._times([p] * n), q ** n if isinstance(q, int) else _product([q] * n)

    def floor(self, x):
        p, q = x
        p = z3.simplify(p)
        if not isinstance(q, int):
            q = z3.simplify(q)
            q = q.as_long() if z3.is_int_value(q) else q
        p, q = _normalise(p, q)
        if isinstance(q, int) and q == 1:
            return p, 1
        if isinstance(q, int):  # q > 0 after _normalise: z3's div is floor division for a positive divisor
            k = p / q
            self._nested(k, p, q)
            return k, 1
        key = (p.get_id(), q.get_id())
        if key in self._floors:  # FloorDiv(x, n) and ModularIndexing(x, 1, n) share floor(x / n): one integer,
            return self._floors[key], 1  # so their relation stays linear instead of a nonlinear equality
        # An application of one function, not a fresh integer: floor(a / q) == floor(b / q) wherever
        # a == b then follows by congruence, where fresh integers need nonlinear reasoning z3 can time
        # out on (ModularIndexing(floor(s1/2), 2, s0) == ModularIndexing(s1, 4, s0): 10 s, unknown)
        k = self._floors[key] = self._floor_fn(p, q)
        self.defs.append(z3.Implies(q != 0, z3.If(q > 0, z3.And(q * k <= p, p < q * k + q),
                                                   z3.And(q * k >= p, p > q * k + q))))
        self._nested(k, p, q)
        return k, 1

    def _nested(self, k, p, c):
        """Where ``k = floor(p / c)`` and ``p`` is itself ``floor(a / b)`` with ``b`` not a constant or
        ``c`` not one, state ``k == floor(a / (b*c))`` for ``c > 0`` (floor(floor(t) / c) == floor(t / c)
        for every real t and integer c > 0): a floor of a floor by a product of symbols is otherwise
        nonlinear reasoning z3 may time out on
        (ModularIndexing(floor(2*x/s0), s1, s1) == ModularIndexing(2*x, s0*s1, s1): 1.5 s on an idle
        machine, past 10 s under load)."""
        if not z3.is_app(p) or p.num_args() != 2:
            return
        if p.decl().eq(self._floor_fn):
            a, b = p.arg(0), p.arg(1)
        elif p.decl().kind() == z3.Z3_OP_IDIV and z3.is_int_value(p.arg(1)) and p.arg(1).as_long() > 0:
            a, b = p.arg(0), p.arg(1)
        else:
            return
        if z3.is_int_value(b) and isinstance(c, int):  # constants both: z3's linear arithmetic knows it
            return
        outer, _ = self.floor((a, self._times([b, self._term(c)])))
        self.defs.append(k == outer if isinstance(c, int) else z3.Implies(c > 0, k == outer))

    def is_integer(self, x):
        p, q = x
        if isinstance(q, int):
            return z3.BoolVal(True, self.ctx) if q == 1 else p % q == 0
        return z3.Or(q == 0, p % q == 0)  # z3's mod is Euclidean: zero exactly when q divides p

    def compare(self, op: str, a, b):
        (pa, qa), (pb, qb) = a, b
        if isinstance(qa, int) and isinstance(qb, int):  # both positive (normalised)
            lhs, rhs = pa * qb if qb != 1 else pa, pb * qa if qa != 1 else pb
        else:  # sign(a - b) = sign((pa*qb - pb*qa) * qa * qb)
            lhs, rhs = (pa * qb - pb * qa) * qa * qb, z3.IntVal(0, self.ctx)
        return {"==": lambda: lhs == rhs, "!=": lambda: lhs != rhs, "<": lambda: lhs < rhs,
                "<=": lambda: lhs <= rhs, ">": lambda: lhs > rhs, ">=": lambda: lhs >= rhs}[op]()

    def and_(self, xs):
        return z3.And(*xs, self.ctx)

    def or_(self, xs):
        return z3.Or(*xs, self.ctx)

    def not_(self, x):
        return z3.Not(x)

    def true(self, value: bool):
        return z3.BoolVal(value, self.ctx)

    def ite(self, cond, then, other):
        self._path.append(cond)
        a = then()
        self._path[-1] = z3.Not(cond)
        b = other()
        self._path.pop()
        (pa, qa), (pb, qb) = a, b
        if isinstance(qa, int) and isinstance(qb, int) and qa == qb:
            return z3.If(cond, pa, pb), qa
        return z3.If(cond, pa, pb), z3.If(cond, self._term(qa), self._term(qb))

    def require(self, cond, why: str):
        self.requires.append(z3.Implies(z3.And(*self._path, self.ctx), cond) if self._path else cond)

    def _term(self, q):
        return z3.IntVal(q, self.ctx) if isinstance(q, int) else q


def _normalise(p, q):
    """A constant denominator made positive (and 1 kept as 1)."""
    if isinstance(q, int) and q < 0:
        return -p, -q
    return p, q


def _sum(terms):
    return terms[0] if len(terms) == 1 else z3.Sum(terms)


def _product(terms):
    return terms[0] if len(terms) == 1 else z3.Product(terms)
