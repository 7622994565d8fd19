"""z3 proofs for symbolic shape and index rewrites, with exactly confirmed counterexamples.

>>> import sympy
>>> from torch.utils._sympy.functions import FloorDiv
>>> s0 = sympy.Symbol("s0", integer=True, positive=True)
>>> prove_equal(FloorDiv(FloorDiv(s0, 2), 3), FloorDiv(s0, 6)).verdict
'proved'
"""

from ._inert import INERT, parse
from ._prove import Proved, Refuted, Unknown, prove_equal, prove_implies
from ._semantics import SEMANTICS, UnsupportedExpression

__all__ = ["INERT", "Proved", "Refuted", "SEMANTICS", "Unknown", "UnsupportedExpression", "parse", "prove_equal",
           "prove_implies"]
