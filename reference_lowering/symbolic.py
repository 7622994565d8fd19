"""Symbolic rewrites the lowering applies to index and grid expressions.

``replace_floor_div`` is the FX wrapper codegen seed's rewrite (torch's
``torch._inductor.codegen.wrapper_fxir.replace_floor_div``, docs/torch-facts.md
section 4): ``floor`` of a product with rational or negative-power factors becomes ``FloorDiv``
of the numerator by the denominator, a form that prints as integer ``//`` and becomes an FX node.
``conformance.symbolic`` proves it (``conformance/suite/test_symbolic_rewrites.py``).
"""

from __future__ import annotations

import sympy
from torch.utils._sympy.functions import FloorDiv


def replace_floor_div(expr: sympy.Expr) -> sympy.Expr:
    """Replace every ``floor(a / b)`` in ``expr`` with ``FloorDiv(a, b)``.

    >>> import sympy
    >>> s0 = sympy.Symbol("s0", integer=True, positive=True)
    >>> replace_floor_div(sympy.floor((s0 + 7) / 8))
    ((s0 + 7)//8)
    """

    def replace(arg: sympy.Expr) -> sympy.Expr:
        arg = sympy.together(arg)
        # A division is a Mul with a Rational factor or a Pow with a negative exponent: split the
        # factors into numerator and denominator.
        numerator, denominator = sympy.S.One, sympy.S.One
        for factor in sympy.Mul.make_args(arg):
            if isinstance(factor, sympy.Rational):
                numerator *= factor.numerator
                denominator *= factor.denominator
            elif isinstance(factor, sympy.Pow) and factor.exp.is_negative:
                denominator *= factor.base ** -factor.exp
            else:
                numerator *= factor
        return FloorDiv(numerator, denominator)

    return expr.replace(sympy.floor, replace)


__all__ = ["replace_floor_div"]
