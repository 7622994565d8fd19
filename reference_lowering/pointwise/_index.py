"""Index expressions, built in sympy and printed into the kernel.

A kernel walks its iteration space (the shape every output has) by one flat index ``xindex``. Dim
``d`` of the space is ``x_d = ModularIndexing(xindex, prod(S[d+1:]), S[d])``; a tensor operand, its
shape aligned to the right and broadcast (size-1 dims do not move), is read at
``sum(x_d * stride_d)``. Sizes and strides are integers when the kernel is specialised and symbols
(kernel arguments) when ``dynamic=True``; a size-1 dimension stays 1 in both (the 0/1 specialisation
torch.compile also makes), so broadcasting is decided when the kernel is made.
"""

from __future__ import annotations

import math

import sympy
from torch.utils._sympy.functions import FloorDiv, ModularIndexing

XINDEX = sympy.Symbol("xindex", integer=True, nonnegative=True)
YINDEX = sympy.Symbol("yindex", integer=True, nonnegative=True)


def size_symbol(d: int) -> sympy.Symbol:
    return sympy.Symbol(f"ks{d}", integer=True, positive=True)


def stride_symbol(tensor: int, d: int) -> sympy.Symbol:
    return sympy.Symbol(f"in{tensor}_st{d}", integer=True)


def dim_symbol(d: int) -> sympy.Symbol:
    return sympy.Symbol(f"x{d}", integer=True, nonnegative=True)


def product(values) -> sympy.Expr:
    return sympy.Mul(*values) if values else sympy.Integer(1)


def flat_axes(rank: int) -> tuple:
    """One flat index walking the space in row-major order: ``((XINDEX, (0, 1, ..., rank-1)),)``."""
    return ((XINDEX, tuple(range(rank))),)


def dim_index(sizes: tuple, d: int, axes: tuple | None = None) -> sympy.Expr:
    """``x_d`` in terms of the index of the axis walking dim ``d``. ``axes`` are ``(index symbol, dims
    outer to inner)``: one flat ``xindex`` over every dim (the default), or a 2-D tile (``yindex``
    over some dims, ``xindex`` over the others)."""
    for symbol, dims in axes or flat_axes(len(sizes)):
        if d in dims:
            i = dims.index(d)
            inner = product([sizes[e] for e in dims[i + 1:]])
            if i == 0:
                return FloorDiv(symbol, inner) if inner != 1 else symbol
            return ModularIndexing(symbol, inner, sizes[d])
    raise ValueError(f"dim {d} is on no axis of {axes}")


def offset(sizes: tuple, shape: tuple, strides: tuple, axes: tuple | None = None) -> sympy.Expr:
    """Where a tensor of ``shape``/``strides`` (broadcast to ``sizes``) is read for the axes' indices:
    ``xindex`` itself when one flat index walks the tensor's memory in order (dense in that order)."""
    axes = axes or flat_axes(len(sizes))
    if len(axes) == 1 and tuple(shape) == tuple(sizes):
        order = axes[0][1]
        dense = dense_strides(sizes, tuple(reversed(order)))
        if all(sympy.expand(strides[d] - dense[d]) == 0 or sizes[d] == 1 for d in range(len(sizes))):
            return XINDEX
    lead = len(sizes) - len(shape)
    return sympy.Add(*[dim_symbol(j + lead) * stride for j, (size, stride) in enumerate(zip(shape, strides))
                       if size != 1])


def dense_strides(sizes: tuple, order: tuple) -> tuple:
    """Strides of a dense tensor of ``sizes`` whose dims, innermost first, are ``order``."""
    out, running = [None] * len(sizes), sympy.Integer(1)
    for d in order:
        out[d] = running
        running = running * sizes[d]
    return tuple(out)


def stride_order(shape: tuple, strides: tuple) -> tuple:
    """The dims of a dense tensor innermost first (ties, from size-1 dims, broken towards the last dim)."""
    return tuple(sorted(range(len(shape)), key=lambda d: (strides[d], -d)))


def fits_int32(numel: int, shape_strides) -> bool:
    reach = max([numel] + [sum((s - 1) * abs(st) for s, st in zip(sh, sts)) for sh, sts in shape_strides])
    return reach < 2 ** 31


def next_power_of_2(n: int) -> int:
    return 1 if n <= 1 else 2 ** math.ceil(math.log2(n))


def pexpr(e: sympy.Expr) -> str:
    """A sympy index expression as Triton (and Python) source: ``//`` and ``%`` only on non-negative
    operands, where C's truncating forms and Python's flooring forms agree."""
    if isinstance(e, sympy.Integer):
        return str(int(e))
    if isinstance(e, sympy.Symbol):
        return e.name
    if isinstance(e, FloorDiv):
        return f"({_operand(e.args[0])} // {_operand(e.args[1])})"
    if isinstance(e, ModularIndexing):
        base, divisor, modulus = e.args
        inner = _operand(base) if divisor == 1 else f"({_operand(base)} // {_operand(divisor)})"
        return f"({inner} % {_operand(modulus)})"
    if isinstance(e, sympy.Add):
        terms = sorted(e.args, key=sympy.default_sort_key)
        return "(" + " + ".join(pexpr(t) for t in terms) + ")"
    if isinstance(e, sympy.Mul):
        return " * ".join(_operand(f) for f in sorted(e.args, key=sympy.default_sort_key))
    if isinstance(e, sympy.Pow) and e.exp.is_Integer and e.exp > 0:
        return " * ".join([_operand(e.base)] * int(e.exp))
    raise ValueError(f"cannot print index expression {e!r}")


def _operand(e: sympy.Expr) -> str:
    """``e`` printed to be an operand of ``*``, ``//`` or ``%`` (products and powers parenthesised:
    ``x // (a * b)``, never ``x // a * b``)."""
    text = pexpr(e)
    return f"({text})" if isinstance(e, (sympy.Mul, sympy.Pow)) and not e.is_Integer else text
