"""What each index function means, one row per function, and the walk that applies the rows.

The rows are the definitional semantics (what the function is documented or named to compute),
not what torch's constructors simplify to: torch's classes and the parser's inert ones share rows,
so "torch evaluates X to Y" can itself be proved or refuted. Python floor semantics throughout;
a divisor is required to be non-zero, and ``CleanDiv`` to be exact (definedness, not a value).
"""

from __future__ import annotations

from fractions import Fraction

import sympy
from torch.utils._sympy import functions as tf

from .._errors import UsageError
from ._inert import INERT


class UnsupportedExpression(UsageError):
    """An expression node the prover has no semantics for (the message names it)."""


def _fdiv(A, a, b):
    """Python's ``a // b`` (towards -inf)."""
    return A.floor(A.mul([a, A.recip(b)]))


def _pmod(A, a, b):
    """Python's ``a % b`` (sign of the divisor): a - b * (a // b)."""
    return A.add([a, A.neg(A.mul([b, _fdiv(A, a, b)]))])


def _cmod(A, a, b):
    """C's ``a % b`` (sign of the dividend): a - b * trunc(a / b)."""
    q = A.mul([a, A.recip(b)])
    trunc = A.ite(A.compare(">=", q, A.const(Fraction(0))), lambda: A.floor(q), lambda: A.neg(A.floor(A.neg(q))))
    return A.add([a, A.neg(A.mul([b, trunc]))])


def _clean_div(A, a, b):
    A.require(A.is_integer(A.mul([a, A.recip(b)])), "CleanDiv(a, b) with b not dividing a")
    return _fdiv(A, a, b)


def _extremum(op):
    def fold(A, *xs):
        acc = xs[0]
        for x in xs[1:]:
            acc = (lambda a, b: A.ite(A.compare(op, a, b), lambda: a, lambda: b))(acc, x)
        return acc
    return fold


# name -> (semantics over an algebra, the classes that mean it). torch's CeilDiv never survives
# construction (it returns a FloorDiv or CleanDiv), so only the inert CeilDiv reaches its row.
SEMANTICS = {
    "FloorDiv": (_fdiv, (tf.FloorDiv,)),  # a // b
    "CleanDiv": (_clean_div, (tf.CleanDiv,)),  # a // b where b divides a (required)
    "CeilDiv": (lambda A, a, b: A.neg(_fdiv(A, A.neg(a), b)), (tf.CeilDiv,)),  # ceil(a / b), any signs
    "ModularIndexing": (lambda A, a, b, c: _pmod(A, _fdiv(A, a, b), c), (tf.ModularIndexing,)),  # (a // b) % c
    "PythonMod": (_pmod, (tf.PythonMod,)),  # a % b, Python
    "Mod": (_pmod, (sympy.Mod,)),  # sympy's Mod is Python's %
    "CMod": (_cmod, (tf.Mod,)),  # torch's Mod: C's %, sign of the dividend
    "floor": (lambda A, x: A.floor(x), (sympy.floor,)),
    "ceiling": (lambda A, x: A.neg(A.floor(A.neg(x))), (sympy.ceiling,)),
    "Abs": (lambda A, x: A.ite(A.compare(">=", x, A.const(Fraction(0))), lambda: x, lambda: A.neg(x)), (sympy.Abs,)),
    "Min": (_extremum("<="), (sympy.Min, tf.Min)),
    "Max": (_extremum(">="), (sympy.Max, tf.Max)),
    "Identity": (lambda A, x: x, (tf.Identity,)),
}

_BY_CLASS = {cls: name for name, (_, classes) in SEMANTICS.items() for cls in classes}
_BY_CLASS.update({cls: name for name, cls in INERT.items()})

_RELATIONS = {sympy.Eq: "==", sympy.Ne: "!=", sympy.StrictLessThan: "<", sympy.LessThan: "<=",
              sympy.StrictGreaterThan: ">", sympy.GreaterThan: ">="}


def is_condition(e) -> bool:
    """A relation or a boolean combination (a value the prover treats as true/false)."""
    return isinstance(e, (sympy.core.relational.Relational, sympy.logic.boolalg.BooleanFunction,
                          sympy.logic.boolalg.BooleanAtom))


class Translator:
    """Applies the rows to a sympy expression over one algebra (``Z3Algebra`` or ``PyAlgebra``)."""

    def __init__(self, algebra):
        self.A = algebra

    def number(self, e):
        if is_condition(e):
            raise UnsupportedExpression(f"{e} is a condition where a number is expected")
        return self(e)

    def condition(self, e):
        if not is_condition(e):
            raise UnsupportedExpression(f"{e} is a number where a condition (a relation such as x > 0) is expected")
        return self(e)

    def __call__(self, e):
        A = self.A
        if isinstance(e, sympy.Rational):
            return A.const(Fraction(int(e.p), int(e.q)))
        if isinstance(e, sympy.Symbol):
            if e.is_integer is not True:
                raise UnsupportedExpression(f"symbol {e.name} is not declared integer "
                                            f"(sympy.Symbol({e.name!r}, integer=True)); the prover works over integers")
            return A.symbol(e.name)
        if isinstance(e, sympy.Add):
            return A.add([self.number(a) for a in e.args])
        if isinstance(e, sympy.Mul):
            return A.mul([self.number(a) for a in e.args])
        if isinstance(e, sympy.Pow):
            if not (isinstance(e.exp, sympy.Integer)):
                raise UnsupportedExpression(f"{e}: Pow with exponent {e.exp}, but only integer exponents are supported")
            n = int(e.exp)
            base = self.number(e.base)
            return A.power(base, n) if n >= 0 else A.power(A.recip(base), -n)
        if isinstance(e, sympy.Piecewise):
            return self._piecewise(e.args)
        if isinstance(e, (sympy.logic.boolalg.BooleanTrue, sympy.logic.boolalg.BooleanFalse)):
            return A.true(bool(e))
        for cls in type(e).__mro__:
            if cls in _RELATIONS:
                return A.compare(_RELATIONS[cls], self.number(e.lhs), self.number(e.rhs))
            if cls in _BY_CLASS:
                return SEMANTICS[_BY_CLASS[cls]][0](A, *(self.number(a) for a in e.args))
        if isinstance(e, sympy.And):
            return A.and_([self.condition(a) for a in e.args])
        if isinstance(e, sympy.Or):
            return A.or_([self.condition(a) for a in e.args])
        if isinstance(e, sympy.Not):
            return A.not_(self.condition(e.args[0]))
        raise UnsupportedExpression(f"{type(e).__name__} ({e}) is not supported; supported: Integer, Rational, integer "
                                    f"Symbol, Add, Mul, Pow (integer exponent), relationals, And/Or/Not, Piecewise, "
                                    f"{', '.join(SEMANTICS)}")

    def _piecewise(self, pairs):
        """Each condition is translated under the path where the earlier ones failed (a divisor in a
        condition must be non-zero only where that condition is reached); none holding is undefined."""
        A = self.A

        def branch(i):
            cond = self.condition(pairs[i][1])
            if i == len(pairs) - 1:
                A.require(cond, "no Piecewise condition holds")
                return self.number(pairs[i][0])
            return A.ite(cond, lambda: self.number(pairs[i][0]), lambda: branch(i + 1))
        return branch(0)


def symbol_assumptions(symbols) -> list:
    """The sympy assumptions of integer ``symbols`` as sympy relations (positive -> s > 0, ...).

    Two different symbols with one name (other assumptions, or a Dummy) would become one z3
    variable, and an assumption with no encoding here would be dropped: both raise instead.
    """
    by_name = {}
    for s in symbols:
        if by_name.setdefault(s.name, s) != s:
            raise UnsupportedExpression(f"two different symbols are named {s.name} (different assumptions, or a "
                                        f"Dummy); the prover would merge them: rename one")
        unsupported = [k for k in ("prime", "composite") if getattr(s, f"is_{k}", None)]
        if unsupported:
            raise UnsupportedExpression(f"symbol {s.name} is declared {unsupported[0]}, which the prover cannot "
                                        f"encode (supported: positive, nonnegative, negative, nonpositive, zero, "
                                        f"nonzero, even, odd)")
    out = []
    for s in sorted(symbols, key=lambda s: s.name):
        if s.is_zero:
            out.append(sympy.Eq(s, 0, evaluate=False))
        if s.is_positive:
            out.append(sympy.StrictGreaterThan(s, 0, evaluate=False))
        elif s.is_nonnegative:
            out.append(sympy.GreaterThan(s, 0, evaluate=False))
        elif s.is_negative:
            out.append(sympy.StrictLessThan(s, 0, evaluate=False))
        elif s.is_nonpositive:
            out.append(sympy.LessThan(s, 0, evaluate=False))
        elif s.is_zero is False:
            out.append(sympy.Ne(s, 0, evaluate=False))
        if s.is_even:
            out.append(sympy.Eq(INERT["PythonMod"](s, 2), 0, evaluate=False))
        elif s.is_odd:
            out.append(sympy.Eq(INERT["PythonMod"](s, 2), 1, evaluate=False))
    return out
