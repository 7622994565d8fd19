"""Inert function symbols, so the prover sees an expression as written.

torch's ``FloorDiv`` and ``CeilDiv`` simplify on construction, even under ``evaluate=False``
(``CeilDiv(7, -2)`` is already ``-2``), and sympy's ``floor``/``Min`` do too. Parsed text uses these
classes instead: they never evaluate, and the prover gives them the same definitional rows as
torch's classes (``_semantics.SEMANTICS``), so torch's evaluated forms can be checked against them.
"""

from __future__ import annotations

import sympy
from sympy.parsing.sympy_parser import parse_expr

from .._errors import UsageError

# name -> number of arguments (None: any); "Mod" is sympy's (Python's %), "CMod" torch's (C's %).
_ARITY = {"FloorDiv": 2, "CeilDiv": 2, "CleanDiv": 2, "ModularIndexing": 3, "PythonMod": 2, "Mod": 2, "CMod": 2,
          "floor": 1, "ceiling": 1, "Abs": 1, "Min": None, "Max": None}


def _inert(name: str, nargs):
    attrs = {"is_integer": name not in ("Abs", "Min", "Max")}
    if nargs is not None:
        attrs["nargs"] = nargs
    return type(name, (sympy.Function,), attrs)


INERT = {name: _inert(name, n) for name, n in _ARITY.items()}


def parse(text: str, *, symbols=None) -> sympy.Basic:
    """Parse ``text`` with the index functions in scope as inert symbols and free names as integers.

    ``symbols`` maps names to prepared ``sympy.Symbol``s (with assumptions); other names become
    ``Symbol(name, integer=True)``. Raises ``UsageError`` for text that does not parse.

    >>> parse("FloorDiv(s0 + 7, 8)")
    FloorDiv(s0 + 7, 8)
    >>> parse("ceiling(x/2)").free_symbols.pop().is_integer
    True
    """
    scope = dict(INERT)
    try:
        first = parse_expr(text, local_dict=dict(scope), evaluate=False)
        names = {s.name for s in first.free_symbols}
        scope.update({n: sympy.Symbol(n, integer=True) for n in names})
        scope.update(symbols or {})
        return parse_expr(text, local_dict=scope, evaluate=False)
    except Exception as exc:  # noqa: BLE001 - sympy's parser raises tokenize, syntax and evaluation errors alike
        raise UsageError(f"cannot parse {text!r}: {type(exc).__name__}: {exc}") from None
