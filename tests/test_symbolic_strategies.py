"""Tests of index_expressions(): reachability of each function, integrality, well-definedness."""

from __future__ import annotations

import random

import pytest
import sympy
from hypothesis import given

from strategies import INDEX_FUNCTIONS, InvalidArgument, index_expressions
from tests._debug import find_any

_CLASS_NAMES = {"FloorDiv": "FloorDiv", "CeilDiv": "FloorDiv", "ModularIndexing": "ModularIndexing", "Mod": "Mod",
                "floor": "floor", "ceiling": "ceiling", "Min": "Min", "Max": "Max"}


@pytest.mark.parametrize("function", INDEX_FUNCTIONS)
def test_every_function_is_reachable(function):
    # CeilDiv constructs a FloorDiv (torch's definition), so it is recognised by that class.
    wanted = _CLASS_NAMES[function]
    find_any(index_expressions(functions=[function]),
             lambda e: any(type(a).__name__ == wanted for a in sympy.preorder_traversal(e)))


@given(index_expressions())
def test_expressions_evaluate_to_integers_under_their_assumptions(expr):
    rng = random.Random(0)
    for _ in range(5):
        values = {s: rng.randint(1 if s.is_positive else 0, 9) for s in expr.free_symbols}
        result = expr.subs(values)
        assert result.is_Integer, f"{expr} at {values} gave {result}"


def test_bad_arguments():
    with pytest.raises(InvalidArgument, match="'Div' is not one of"):
        index_expressions(functions=["Div"])
    with pytest.raises(InvalidArgument, match="must be declared integer=True"):
        index_expressions(symbols=[sympy.Symbol("x")])
