"""``prove_equal`` and ``prove_implies``: z3 decides, exact evaluation confirms.

A claim is proved when no integer assignment satisfying the assumptions (the symbols' own and
the given ones) and the definedness conditions (non-zero divisors, exact CleanDiv, a Piecewise
branch that applies) breaks it. z3's counterexample is re-evaluated exactly (``PyAlgebra``, no
z3) before it is reported; one that does not confirm, a timeout, or z3's "unknown" is ``Unknown``,
which is never a pass.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from fractions import Fraction

import sympy
import z3

from .._errors import UsageError
from ._algebra import PyAlgebra, Undefined, Z3Algebra
from ._inert import parse
from ._semantics import Translator, is_condition, symbol_assumptions


@dataclass(frozen=True)
class Proved:
    """The claim holds for every integer assignment allowed by the assumptions."""

    time_ms: float
    verdict: str = field(default="proved", init=False)


@dataclass(frozen=True)
class Refuted:
    """A confirmed counterexample: ``counterexample`` maps symbol names to ints; the two sides'
    exact values there (numbers for ``prove_equal``, truth values for ``prove_implies``)."""

    counterexample: dict
    lhs_value: object
    rhs_value: object
    time_ms: float
    verdict: str = field(default="refuted", init=False)


@dataclass(frozen=True)
class Unknown:
    """Neither proved nor refuted (timeout, a nonlinear problem z3 gave up on, an unconfirmed model)."""

    reason: str
    time_ms: float
    verdict: str = field(default="unknown", init=False)


def prove_equal(lhs, rhs, *, assumptions=(), timeout_ms: int = 10_000):
    """Prove ``lhs == rhs`` for all integers satisfying ``assumptions``, or refute it.

    Args:
        lhs, rhs: sympy expressions (or text, parsed with ``parse``) over integer symbols.
        assumptions: sympy relations (or text) that the symbols satisfy; the symbols' own sympy
            assumptions (positive, nonnegative, ...) are added.
        timeout_ms: z3's time limit; past it the answer is ``Unknown``.

    Returns:
        ``Proved``, ``Refuted`` (with a confirmed counterexample) or ``Unknown``.

    >>> import sympy
    >>> from torch.utils._sympy.functions import FloorDiv
    >>> s0 = sympy.Symbol("s0", integer=True)
    >>> prove_equal(sympy.floor((s0 + 7) / 8), FloorDiv(s0 + 7, 8)).verdict
    'proved'
    >>> r = prove_equal(FloorDiv(s0, 2) * 2, s0)
    >>> r.verdict, r.counterexample["s0"] % 2  # any odd s0 refutes it
    ('refuted', 1)
    """
    lhs, rhs = _expr(lhs, "lhs"), _expr(rhs, "rhs")
    for side, e in (("lhs", lhs), ("rhs", rhs)):
        if is_condition(e):
            raise UsageError(f"{side}={e} is a condition; prove_equal compares numbers (use prove_implies)")
    return _prove(lambda A, T: A.compare("==", T.number(lhs), T.number(rhs)), (lhs, rhs), assumptions, timeout_ms)


def prove_implies(hypothesis, conclusion, *, assumptions=(), timeout_ms: int = 10_000):
    """Prove ``hypothesis => conclusion`` (both conditions) under ``assumptions``, or refute it.

    >>> import sympy
    >>> x = sympy.Symbol("x", integer=True)
    >>> prove_implies(x > 3, x >= 4).verdict
    'proved'
    """
    hyp, concl = _expr(hypothesis, "hypothesis"), _expr(conclusion, "conclusion")
    return _prove(lambda A, T: A.or_([A.not_(T.condition(hyp)), T.condition(concl)]), (hyp, concl), assumptions,
                  timeout_ms, premise=hyp)


def _expr(e, what: str):
    if isinstance(e, str):
        return parse(e)
    if isinstance(e, bool):
        return sympy.true if e else sympy.false
    try:
        return sympy.sympify(e, strict=True)
    except sympy.SympifyError:
        raise UsageError(f"{what}={e!r} is not a sympy expression") from None


_ABSTRACT_MS = 2_000  # the first attempt, with products abstracted (UF and linear arithmetic: quick or never)


def _prove(claim, sides, assumptions, timeout_ms, premise=None):
    if not isinstance(timeout_ms, int) or timeout_ms <= 0:
        raise UsageError(f"timeout_ms={timeout_ms!r}, but should be a positive integer")
    start = time.perf_counter()
    given = [_expr(a, "assumption") for a in assumptions]
    symbols = set().union(*(e.free_symbols for e in (*sides, *given)))
    assumed = [*symbol_assumptions(symbols), *given]

    def translated(abstract_products: bool):
        z = Z3Algebra(abstract_products)
        for s in sorted(symbols, key=lambda s: s.name):  # z3's model depends on creation order: make it fixed
            z.symbol(s.name)
        T = Translator(z)
        goal = claim(z, T)
        hypotheses = [T.condition(a) for a in assumed]
        if premise is not None:  # an implication whose hypothesis never holds (where defined) proves nothing
            hypotheses.append(T.condition(premise))
        solver = z3.Solver(ctx=z.ctx)
        solver.add(*z.defs, *z.requires, *hypotheses)
        return z, goal, solver

    elapsed = lambda: round((time.perf_counter() - start) * 1e3, 3)  # noqa: E731
    # First with products of non-constant terms abstracted (Z3Algebra): congruence proves what nonlinear
    # arithmetic may not; a claim not proved so is decided by the exact translation below.
    z, goal, solver = translated(abstract_products=True)
    if z.abstracted:
        solver.set(timeout=min(timeout_ms, _ABSTRACT_MS))
        proved_abstractly = solver.check(z3.Not(goal)) == z3.unsat
        z, goal, solver = translated(abstract_products=False)  # one exact translation for both uses below
        solver.set(timeout=timeout_ms)
        if proved_abstractly and solver.check() == z3.sat:  # and the premises hold somewhere, exactly
            return Proved(elapsed())
    solver.set(timeout=timeout_ms)
    answer = solver.check(z3.Not(goal))
    if answer == z3.unsat:
        premises = solver.check()  # no counterexample: is there any assignment at all?
        if premises == z3.sat:
            return Proved(elapsed())
        if premises == z3.unsat:
            return Unknown("vacuous: the assumptions and definedness conditions (non-zero divisors, exact CleanDiv, "
                           "a Piecewise branch that applies) exclude every assignment", elapsed())
        return Unknown(f"z3 could not show the assumptions satisfiable: {solver.reason_unknown()}", elapsed())
    if answer == z3.unknown:
        return Unknown(f"z3: {solver.reason_unknown()}", elapsed())
    model = solver.model()
    env = {name: model.eval(var, model_completion=True).as_long() for name, var in sorted(z.symbols.items())}
    return _confirm(claim, sides, assumed, env, elapsed)


def _confirm(claim, sides, assumed, env, elapsed):
    """Re-evaluate z3's assignment exactly: a Refuted only if the claim really fails there."""
    py = PyAlgebra(env)
    T = Translator(py)
    try:
        if not all(T(a) for a in assumed):
            return Unknown(f"z3's assignment {env} violates an assumption (a translation fault)", elapsed())
        values = [_plain(T(side)) for side in sides]
        holds = claim(py, T)
    except Undefined as exc:
        return Unknown(f"z3's assignment {env} is outside the domain ({exc}) (a translation fault)", elapsed())
    if holds:
        return Unknown(f"z3's assignment {env} does not refute the claim when evaluated exactly "
                       f"(both sides: {values[0]}, {values[1]}) (a translation fault)", elapsed())
    return Refuted(env, values[0], values[1], elapsed())


def _plain(v):
    if isinstance(v, Fraction) and v.denominator == 1:
        return int(v)
    return v
