"""Symbolic rewrites under the z3 prover (``conformance.symbolic``).

- ``replace_floor_div`` (reference_lowering.symbolic, the FX wrapper seed's rewrite) is proved on
  drawn floor expressions.
- The index and launch-grid forms a pointwise lowering emits: a flat index decomposed with
  FloorDiv/ModularIndexing recomposes through the plain stride formula, and a 1-D grid of
  ``CeilDiv(numel, BLOCK)`` programs covers every element exactly once.
- What ``reference_lowering.pointwise`` emitted for drawn graphs, static and dynamic: its grids
  (``replace_floor_div`` applied) cover every element with no idle program; the printed index text
  is the sympy expression it came from; every load and store stays inside its tensor.
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
from hypothesis import Phase, given, settings
from hypothesis import strategies as st
from torch.utils._sympy import functions as tf

from conformance.symbolic import INERT, prove_equal, prove_implies
from reference_lowering.pointwise import _index as ix
from reference_lowering.pointwise import lower_pointwise
from reference_lowering.symbolic import replace_floor_div
from strategies import OPS, graphs, index_expressions

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


# --- what reference_lowering.pointwise actually emitted -----------------------------------------------

POINTWISE_ROWS = [row for row in OPS if row.category == "pointwise"]


def _parse_printed(text: str, symbols: dict) -> sympy.Expr:
    """Kernel index text back to sympy: ``//`` is floor division, ``%`` Python's modulo (the printer
    uses them only on non-negative operands, where C's and Python's forms agree)."""
    return eval(text, {"__builtins__": {}}, symbols)  # noqa: S307 - text the lowering itself printed


@given(graphs(ops=POINTWISE_ROWS, constants=False, max_nodes=4, max_inputs=3), st.booleans())
def test_lowered_kernels_index_in_bounds_and_launch_enough_programs(case, dynamic):
    """For every kernel lower_pointwise made for a drawn graph: see ``_check_kernel``."""
    for kernel in lower_pointwise(case.gm, case.example_inputs, dynamic=dynamic).meta["pointwise_kernels"]:
        _check_kernel(kernel)


@pytest.mark.parametrize("dynamic", [False, True])
@pytest.mark.parametrize("shapes", [((2, 3, 4), (4,)), ((3, 1, 5), (3, 4, 1)), ((2, 3, 4, 5), (3, 1, 1))])
def test_lowered_kernels_of_higher_rank_index_in_bounds(shapes, dynamic):
    """Ranks 3 and 4, where dynamic divisors are products of sizes (``x // (ks1 * ks2)``)."""
    import torch.fx as fx

    g = fx.Graph()
    x, y = g.placeholder("x"), g.placeholder("y")
    g.output((g.call_function(torch.ops.aten.mul.Tensor, (g.call_function(torch.ops.aten.exp.default, (x,)), y)),))
    inputs = tuple(torch.randn(s) for s in shapes)
    for kernel in lower_pointwise(fx.GraphModule(torch.nn.Module(), g), inputs, dynamic=dynamic).meta["pointwise_kernels"]:
        _check_kernel(kernel)


def _check_kernel(kernel):
    """The grid expression (rewritten by replace_floor_div) covers the elements with no idle program;
    each printed dim coordinate is the sympy one and in range; every load and store offset stays inside
    its tensor's extent, for all sizes and strides (dynamic) or the specialised ones."""
    code = kernel.code
    n = sympy.Symbol("xnumel", integer=True, nonnegative=True) if code.dynamic else code.numel
    grid, block = kernel.grid, code.block
    assert not grid.has(sympy.floor)
    covers = sympy.And(grid * block >= n, (grid - 1) * block < n)
    result = prove_implies(n >= 1, covers, timeout_ms=TIMEOUT_MS)
    assert result.verdict == "proved", f"grid {grid} for {n} elements: {result}"
    xindex = ix.XINDEX
    in_range = xindex < code.numel
    symbols = {str(s): s for s in code.numel.free_symbols | {xindex}}
    printed = 0
    for line in kernel.source.splitlines():
        name, _, text = line.strip().partition(" = ")
        if not (name.startswith("x") and name[1:].isdigit()):
            continue
        d = int(name[1:])
        emitted = ix.dim_index(code.sizes, d, code.axes)
        _proved(_parse_printed(text, symbols), emitted, assumptions=[in_range])
        result = prove_implies(in_range, sympy.And(emitted >= 0, emitted < code.sizes[d]), timeout_ms=TIMEOUT_MS)
        assert result.verdict == "proved", f"{name} = {text}: {result}"
        printed += 1
    dims = {ix.dim_symbol(d): ix.dim_index(code.sizes, d, code.axes) for d in range(len(code.sizes))}
    used = {s for _, offset, _, _ in code.accesses for s in offset.free_symbols if s in dims}
    assert printed == len(used), f"{printed} dims printed, {len(used)} used"
    # With every coordinate in range (proved above, or xindex itself for a contiguous access):
    for kind, offset, sizes, strides in code.accesses:
        free = [s for s in strides if isinstance(s, sympy.Symbol)]
        extent = sum((size - 1) * stride for size, stride in zip(sizes, strides) if size != 1)
        ranges = [sympy.And(x >= 0, x < code.sizes[int(x.name[1:])]) for x in offset.free_symbols if x in dims]
        premise = sympy.And(in_range, *ranges, *[s >= 0 for s in free])
        result = prove_implies(premise, sympy.And(offset >= 0, offset <= extent), timeout_ms=TIMEOUT_MS)
        assert result.verdict == "proved", f"{kind} at {offset} over sizes {sizes} strides {strides}: {result}"


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


# Unshrunk: a row torch gets wrong stops at its first counterexample, which z3's model in the message
# already makes small; shrinking the drawn arguments ran hundreds of proofs (6 s for CeilDiv's row).
@pytest.mark.parametrize("name", list(_rule_params()))
@settings(phases=[Phase.explicit, Phase.reuse, Phase.generate])
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
