"""``index_expressions()``: sympy integer expressions of the kind lowering emits for indexing.

Divisors and moduli are always positive (a constant or a positive symbol), so every drawn
expression is well defined for every assignment that satisfies the symbols' assumptions.
"""

from __future__ import annotations

import sympy
from hypothesis import strategies as st
from torch.utils._sympy.functions import CeilDiv, FloorDiv, ModularIndexing

from ._errors import InvalidArgument
from ._validation import check_int_range

FUNCTIONS = ("FloorDiv", "CeilDiv", "ModularIndexing", "Mod", "floor", "ceiling", "Min", "Max")


def default_symbols() -> tuple:
    """``s0, s1`` (positive sizes) and ``i0`` (a non-negative index), all integers."""
    s0, s1 = sympy.symbols("s0 s1", integer=True, positive=True)
    i0 = sympy.Symbol("i0", integer=True, nonnegative=True)
    return (s0, s1, i0)


def index_expressions(*, symbols=None, functions=None, max_leaves: int = 8,
                      min_constant: int = -4, max_constant: int = 8) -> st.SearchStrategy:
    """Draw integer sympy expressions over ``symbols`` using FloorDiv, CeilDiv, ModularIndexing,
    Mod, floor, ceiling, Min and Max (``functions`` picks a subset by name).

    Shrinks towards a single symbol, then towards small constants and shallow trees.

    >>> e = index_expressions(functions=["FloorDiv"]).example()
    >>> e.is_integer is not False
    True
    """
    symbols = default_symbols() if symbols is None else tuple(symbols)
    if not symbols or not all(isinstance(s, sympy.Symbol) for s in symbols):
        raise InvalidArgument(f"symbols={symbols!r} must be a non-empty sequence of sympy Symbols")
    bad = [s for s in symbols if s.is_integer is not True]
    if bad:
        raise InvalidArgument(f"symbols={symbols!r}: {bad[0]} must be declared integer=True")
    functions = FUNCTIONS if functions is None else tuple(functions)
    unknown = [f for f in functions if f not in FUNCTIONS]
    if unknown:
        raise InvalidArgument(f"functions={functions!r}: {unknown[0]!r} is not one of {FUNCTIONS}")
    check_int_range(max_leaves, "max_leaves", min_value=1)
    if min_constant > max_constant:
        raise InvalidArgument(f"min_constant={min_constant!r} must not exceed max_constant={max_constant!r}")

    positive = [s for s in symbols if s.is_positive]
    divisor = st.integers(1, max(2, max_constant)).map(sympy.Integer)
    if positive:
        divisor = st.one_of(divisor, st.sampled_from(positive))
    leaves = st.one_of(st.sampled_from(symbols), st.integers(min_constant, max_constant).map(sympy.Integer))

    def extend(sub):
        makers = {
            "FloorDiv": st.builds(FloorDiv, sub, divisor),
            "CeilDiv": st.builds(CeilDiv, sub, divisor),
            "ModularIndexing": st.builds(ModularIndexing, sub, divisor, divisor),
            "Mod": st.builds(sympy.Mod, sub, divisor),
            "floor": st.builds(lambda a, d: sympy.floor(a / d), sub, divisor),
            "ceiling": st.builds(lambda a, d: sympy.ceiling(a / d), sub, divisor),
            "Min": st.builds(sympy.Min, sub, sub),
            "Max": st.builds(sympy.Max, sub, sub),
        }
        arithmetic = [st.builds(sympy.Add, sub, sub), st.builds(sympy.Mul, sub, sub)]
        return st.one_of(*arithmetic, *(makers[f] for f in functions))

    return st.recursive(leaves, extend, max_leaves=max_leaves)
