"""Symbolic rewrites under the z3 prover (``conformance.symbolic``).

- ``replace_floor_div`` (reference_lowering.symbolic, the FX wrapper seed's rewrite) is proved on
  drawn floor expressions.
- The index and launch-grid forms a pointwise lowering emits: a flat index decomposed with
  FloorDiv/ModularIndexing recomposes through the plain stride formula, and a 1-D grid of
  ``CeilDiv(numel, BLOCK)`` programs covers every element exactly once.
- torch.utils._sympy's own simplifications, a third party: what ``FloorDiv``, ``CeilDiv``,
  ``CleanDiv``, ``ModularIndexing`` and ``PythonMod`` evaluate to on drawn arguments is proved
  equal to the definitional meaning (the inert forms). Each unsound rule is a strict xfail whose
  reason carries a counterexample and the torch version; the test itself raises the one it found.

Unknown is never a pass: every claim here is linear or has constant divisors, and must be decided.
"""

from __future__ import annotations

import sympy
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from torch.utils._sympy import functions as tf

from conformance.symbolic import INERT, prove_equal, prove_implies
from reference_lowering.symbolic import replace_floor_div
from strategies import index_expressions

pytestmark = pytest.mark.conformance

S0, S1 = sympy.symbols("s0 s1", integer=True, positive=True)
X = sympy.Symbol("x", integer=True)  # any sign
I0 = sympy.Symbol("i0", integer=True, nonnegative=True)
TIMEOUT_MS = 10_000


def _proved(lhs, rhs, assumptions=()):
    result = prove_equal(lhs, rhs, assumptions=assumptions, timeout_ms=TIMEOUT_MS)
    assert result.verdict == "proved", f"{lhs} == {rhs}: {result}"


# --- replace_floor_div -------------------------------------------------------------------------------

floor_inputs = index_expressions(symbols=(S0, S1, X, I0), functions=("FloorDiv", "ModularIndexing", "floor",
                                                                      "ceiling", "Min", "Max"), max_leaves=5)


@given(floor_inputs, st.integers(1, 16))
def test_replace_floor_div_is_sound(inner, divisor):
    expr = sympy.floor(inner / divisor)  # at least one floor of a quotient, whatever was drawn
    rewritten = replace_floor_div(expr)
    assert not rewritten.has(sympy.floor)
    _proved(expr, rewritten)


@given(st.integers(-9, 9), st.integers(-9, 9), st.integers(-50, 50), st.sampled_from([2, 3, 4, 7, 8, 16]))
def test_replace_floor_div_on_affine_quotients_of_any_sign(a, b, c, q):
    expr = sympy.floor((a * X + b * S0 + c) / q)
    _proved(expr, replace_floor_div(expr))


def test_replace_floor_div_with_symbolic_denominators():
    for expr in (sympy.floor(X / S0), sympy.floor((X + 1) / (S1 * S1 + 1)), sympy.floor((X * S1 + 3) / (2 * S1))):
        _proved(expr, replace_floor_div(expr))


# --- index and grid expressions of a pointwise lowering ---------------------------------------------


@given(st.integers(1, 3))
def test_flat_index_decomposition_recomposes_through_the_strides(rank):
    """A contiguous flat index x over symbolic sizes, split per dim with FloorDiv/ModularIndexing (as
    kernels index broadcast and strided inputs), recomposes to x through the contiguous strides."""
    sizes = sympy.symbols(f"n0:{rank}", integer=True, positive=True)
    numel = sympy.Mul(*sizes)
    x = sympy.Symbol("xindex", integer=True, nonnegative=True)
    strides = [sympy.Mul(*sizes[d + 1:]) for d in range(rank)]
    coords = [tf.FloorDiv(x, strides[0])] + [tf.ModularIndexing(x, strides[d], sizes[d]) for d in range(1, rank)]
    _proved(sum(c * s for c, s in zip(coords, strides)), x, assumptions=[x < numel])
    for d, c in enumerate(coords):  # each coordinate in range
        result = prove_implies(x < numel, sympy.And(c >= 0, c < sizes[d]), timeout_ms=TIMEOUT_MS)
        assert result.verdict == "proved", f"coordinate {d}: {result}"


@pytest.mark.parametrize("block", [64, 128, 1024])
def test_launch_grid_covers_every_element_exactly_once(block):
    """grid = CeilDiv(numel, BLOCK) programs; program p handles p*BLOCK + j (j < BLOCK) under the
    mask < numel. Every element x < numel has p = x // BLOCK < grid and j = x % BLOCK, and the
    grid has no program whose whole block is masked off."""
    numel = sympy.Symbol("numel", integer=True, positive=True)
    x = sympy.Symbol("x", integer=True, nonnegative=True)
    grid = tf.CeilDiv(numel, block)
    pid, j = tf.FloorDiv(x, block), tf.PythonMod(x, block)
    covered = sympy.And(pid < grid, j >= 0, j < block)
    assert prove_implies(x < numel, covered, timeout_ms=TIMEOUT_MS).verdict == "proved"
    _proved(pid * block + j, x)  # one (program, lane) per element: the pair is x's quotient and remainder
    last_block_used = sympy.And((grid - 1) * block < numel, grid * block >= numel)
    assert prove_implies(sympy.true, last_block_used, timeout_ms=TIMEOUT_MS).verdict == "proved"


# --- torch.utils._sympy's simplifications, as a third party -----------------------------------------


class UnsoundRule(AssertionError):
    """torch's evaluated form differs from the function's meaning (the message holds the counterexample)."""


_LINEAR = st.builds(lambda a, b, c: a * S0 + b * X + c, st.integers(-3, 3), st.integers(-3, 3), st.integers(-9, 9))
_POS = st.integers(1, 9).map(sympy.Integer)
_NEG = st.integers(-9, -1).map(sympy.Integer)
_BOTH_NEGATIVE_MOD = st.builds(lambda c, m, k: (-c * S0 - m - k, sympy.Integer(-m)),
                               st.integers(1, 3), st.integers(2, 9), st.integers(0, 5))
TORCH = f"torch {torch.__version__}"

# name -> (arguments, torch's evaluated form and the definitional one, why it is unsound or None)
RULES = {
    "FloorDiv": (st.tuples(_LINEAR, st.one_of(_POS, _NEG)),
                 lambda a, b: (tf.FloorDiv(a, b), INERT["FloorDiv"](a, b)), None),
    "FloorDiv-nested-positive": (st.tuples(_LINEAR, _POS, _POS),
                                 lambda a, b, c: (tf.FloorDiv(tf.FloorDiv(a, b), c),
                                                  INERT["FloorDiv"](INERT["FloorDiv"](a, b), c)), None),
    "FloorDiv-nested-negative-outer": (
        st.tuples(st.builds(lambda k: -k * S0 - 1, st.integers(1, 3)), st.integers(2, 9).map(sympy.Integer), _NEG),
        lambda a, b, c: (tf.FloorDiv(tf.FloorDiv(a, b), c), INERT["FloorDiv"](INERT["FloorDiv"](a, b), c)),
        f"{TORCH}: FloorDiv(FloorDiv(a, b), c) evaluates to FloorDiv(a, b*c), true only for c > 0: "
        f"a=-3*s0-6, b=5, c=-3 at s0=2 gives 0, but (-12//5)//-3 is 1"),
    "CeilDiv": (st.tuples(_LINEAR, _POS), lambda a, b: (tf.CeilDiv(a, b), INERT["CeilDiv"](a, b)), None),
    "CeilDiv-negative-divisor": (
        st.tuples(_LINEAR, _NEG), lambda a, b: (tf.CeilDiv(a, b), INERT["CeilDiv"](a, b)),
        f"{TORCH}: CeilDiv(a, b) evaluates to FloorDiv(a + b - 1, b), ceil(a/b) only for b > 0: "
        f"CeilDiv(0, -1) is 2, but ceil(0/-1) is 0"),
    "CleanDiv": (st.tuples(_LINEAR, _POS), lambda a, b: (tf.CleanDiv(a * b, b), INERT["CleanDiv"](a * b, b)), None),
    "ModularIndexing": (st.tuples(_LINEAR, st.one_of(_POS, _NEG), st.one_of(_POS, _NEG)),
                        lambda a, b, c: (tf.ModularIndexing(a, b, c), INERT["ModularIndexing"](a, b, c)), None),
    "ModularIndexing-of-FloorDiv": (
        st.tuples(_LINEAR, _POS, _POS, _POS),
        lambda a, b, c, d: (tf.ModularIndexing(tf.FloorDiv(a, d), b, c),
                            INERT["ModularIndexing"](INERT["FloorDiv"](a, d), b, c)), None),
    "PythonMod": (st.tuples(_LINEAR, _POS), lambda a, b: (tf.PythonMod(a, b), INERT["PythonMod"](a, b)), None),
    "PythonMod-both-negative": (
        _BOTH_NEGATIVE_MOD, lambda a, b: (tf.PythonMod(a, b), INERT["PythonMod"](a, b)),
        f"{TORCH}: PythonMod(p, q) evaluates to p when p < q and p/q > 0, true only for 0 <= p < q: "
        f"PythonMod(-s0-9, -9) is -s0-9, but at s0=1 -10 % -9 is -1"),
    "Mod-nonnegative": (st.tuples(st.builds(lambda a, c: a * S0 + c, st.integers(0, 3), st.integers(0, 9)), _POS),
                        lambda a, b: (tf.Mod(a, b), INERT["CMod"](a, b)), None),
}


def _rule_params():
    for name, (_, _, unsound) in RULES.items():
        marks = [pytest.mark.xfail(strict=True, raises=UnsoundRule, reason=unsound)] if unsound else []
        yield pytest.param(name, marks=marks, id=name)


@pytest.mark.parametrize("name", list(_rule_params()))
@given(data=st.data())
def test_torch_sympy_simplification(name, data):
    arguments, build, _ = RULES[name]
    args = data.draw(arguments, label="arguments")
    evaluated, meaning = build(*args)
    result = prove_equal(evaluated, meaning, timeout_ms=TIMEOUT_MS)
    if result.verdict == "refuted":
        raise UnsoundRule(f"{TORCH}: {meaning} evaluates to {evaluated}, which is {result.lhs_value} at "
                          f"{result.counterexample}, but should be {result.rhs_value}")
    assert result.verdict == "proved", f"{meaning} vs {evaluated}: {result}"


def test_every_torch_index_function_has_a_rule():
    covered = {name.split("-")[0] for name in RULES}
    assert covered >= {"FloorDiv", "CeilDiv", "CleanDiv", "ModularIndexing", "PythonMod", "Mod"}
