"""Correct rounding of fp32 division and square roots in Triton source: ``correctly_rounded``
rewrites an expression or helper definitions (``_RoundedFp32``, over the Python AST) so that fp32
``a / b`` is ``tl.div_rn(a, b)``, ``tl.sqrt(x)`` is ``tl.sqrt_rn(x)`` and ``tl.rsqrt(x)`` is
``tl.div_rn(1.0, tl.sqrt_rn(x))``, correctly rounded as eager CUDA computes them, where a GPU compiles
the plain forms to approximate instructions. The kernel writer (``_kernel.py``) applies it to each
op's expression, ``_helpers.py`` to the helpers whose divisions must be exact.

>>> import torch
>>> correctly_rounded("x / y + tl.sqrt(x)", torch.float32)
'tl.div_rn(x, y) + tl.sqrt_rn(x)'
>>> correctly_rounded("x / y", torch.float64)
'x / y'
"""

from __future__ import annotations

import ast

import torch


def correctly_rounded(source: str, dtype: torch.dtype) -> str:
    """``source`` (an expression or function definitions) with fp32 division and square roots made
    correctly rounded (``_RoundedFp32``); unchanged for other dtypes (fp64 ``/`` and ``tl.sqrt`` are
    ``div.rn.f64``/``sqrt.rn.f64`` already; ``tl.div_rn`` takes fp32 only)."""
    if dtype != torch.float32 or ("/" not in source and "sqrt" not in source):
        return source
    tree = ast.parse(source.strip(), mode="exec")
    out = ast.unparse(ast.fix_missing_locations(_RoundedFp32().visit(tree)))
    return out if "\n" in source.strip() or source.lstrip().startswith(("@", "def ")) else out.strip()



class _RoundedFp32(ast.NodeTransformer):
    """fp32 ``a / b`` -> ``tl.div_rn(a, b)``, ``tl.sqrt(x)`` -> ``tl.sqrt_rn(x)``, ``tl.rsqrt(x)`` ->
    ``tl.div_rn(1.0, tl.sqrt_rn(x))``: a GPU compiles ``/`` to ``div.full.f32`` and ``tl.sqrt`` /
    ``tl.rsqrt`` to ``.approx.ftz`` instructions, while eager CUDA's ``/``, ``sqrt`` and ``rsqrt`` (as
    ``1 / sqrt``) are correctly rounded. A division of two constants stays (Python folds it)."""

    def visit_BinOp(self, node):
        self.generic_visit(node)
        if isinstance(node.op, ast.Div) and not (_constant(node.left) and _constant(node.right)):
            return ast.Call(_tl("div_rn"), [node.left, node.right], [])
        return node

    def visit_Call(self, node):
        self.generic_visit(node)
        name = node.func.attr if isinstance(node.func, ast.Attribute) and getattr(node.func.value, "id", None) == "tl" \
            else None
        if name == "sqrt":
            return ast.Call(_tl("sqrt_rn"), node.args, [])
        if name == "rsqrt":
            return ast.Call(_tl("div_rn"), [ast.Constant(1.0), ast.Call(_tl("sqrt_rn"), node.args, [])], [])
        return node



def _tl(name: str) -> ast.Attribute:
    return ast.Attribute(ast.Name("tl", ast.Load()), name, ast.Load())



def _constant(node) -> bool:
    return isinstance(node, ast.Constant) or isinstance(node, ast.UnaryOp) and isinstance(node.operand, ast.Constant)



__all__ = ["correctly_rounded"]
