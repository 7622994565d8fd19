"""Chains: several nodes drawn as one step, the way a decomposition leaves them in real graphs.

Linear's ``t`` + ``addmm`` + ``_unsafe_view``, the RMS-norm chain, ``empty`` then a full write: each
is drawn as a step of its category (``CHAINS``), where ``ops=`` allows every op it emits. Their
operands are drawn as the call rules draw theirs (``calls.py``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from .._build.builder import StepRejected
from .._catalog import vocabulary as C
from .._catalog.ops import rows_named
from .._draws import choose, flag, integers
from .._tensors import scalars
from .call import draw_kwargs
from .operands import operand
from .calls import dtype_of, exact, inner_dim, need_room, ranked, side, wide_dim

aten = torch.ops.aten

# --- chains --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Chain:
    """Several nodes as a decomposition leaves them; drawn as a step of ``category``."""

    name: str
    category: str
    emit: object  # (draw, ctx, rows) -> Value, the chain's last result
    overloads: tuple  # what it emits (a chain is drawn only where ops= allows all of them)

    def __repr__(self) -> str:
        return f"Chain({self.name})"


def _row(overload):
    return rows_named(overload)[0]


def chain_linear(draw, ctx):
    """``linear`` as ATen graphs carry it: ``t`` of the weight, ``addmm`` (or ``mm``, or ``mm`` and an
    ``add`` of the bias), and for a 3-d input ``view`` to 2-d before and ``_unsafe_view`` back after."""
    b = ctx.builder
    need_room(ctx, 5)
    x = ranked(draw, ctx, C.FLOAT, (2, 3), lambda d: (*((side(d, 1, 2),) if flag(d) else ()), wide_dim(d, ctx),
                                                        inner_dim(d, ctx)))
    k, n, dt = x.tensor.shape[-1], wide_dim(draw, ctx), dtype_of(x)
    weight = exact(draw, ctx, (n, k), dt)
    wt = b.call(_row(aten.t.default), aten.t.default, (weight,), {})
    lead = list(x.tensor.shape[:-1])
    x2 = x if len(lead) == 1 else b.call(_row(aten.view.default), aten.view.default, (x, [math.prod(lead), k]), {})
    form = draw(integers(0, 2))
    if form == 0:  # no bias
        out = b.call(_row(aten.mm.default), aten.mm.default, (x2, wt), {})
    elif form == 1:  # the bias fused, as decompositions emit it
        out = b.call(_row(aten.addmm.default), aten.addmm.default, (exact(draw, ctx, (n,), dt), x2, wt), {})
    else:  # as traced from x @ w.t() + b, the add's keyword arguments drawn as its row draws them
        add = _row(aten.add.Tensor)
        out = b.call(_row(aten.mm.default), aten.mm.default, (x2, wt), {})
        bias = exact(draw, ctx, (n,), dt)
        args = (out, bias) if flag(draw) is False else (bias, out)
        out = b.call(add, aten.add.Tensor, args, draw_kwargs(draw, ctx, add, args[0], {}))
    if len(lead) > 1:
        out = b.call(_row(aten._unsafe_view.default), aten._unsafe_view.default, (out, [*lead, n]), {})
    return out


def chain_rms_norm(draw, ctx):
    """RMS norm as models write it: ``x * rsqrt(mean(x ** 2, -1, keepdim) + eps)``, in float32 for
    half-precision inputs (cast there and back), times a weight three times in four."""
    b = ctx.builder
    need_room(ctx, 8)
    x = ranked(draw, ctx, C.FLOAT, (1, 2, 3), lambda d: tuple(side(d) for _ in range(side(d, 1, 3))),
                fits=lambda s: s[-1] > 0)
    dt = dtype_of(x)
    h = x
    if dt in (torch.float16, torch.bfloat16) and flag(draw):
        h = b.call(_row(aten._to_copy.default), aten._to_copy.default, (x,), {"dtype": torch.float32})
    sq = b.call(_row(aten.pow.Tensor_Scalar), aten.pow.Tensor_Scalar, (h, 2), {})
    ms = b.call(_row(aten.mean.dim), aten.mean.dim, (sq, [-1], True), {})
    ms = b.call(_row(aten.add.Tensor), aten.add.Tensor, (ms, choose(draw, (1e-6, 1e-5))), {})
    out = b.call(_row(aten.mul.Tensor), aten.mul.Tensor,
                 (h, b.call(_row(aten.rsqrt.default), aten.rsqrt.default, (ms,), {})), {})
    if h is not x:
        out = b.call(_row(aten._to_copy.default), aten._to_copy.default, (out,), {"dtype": dt})
    if draw(integers(0, 3)):
        weight = exact(draw, ctx, x.tensor.shape[-1:], dt)
        out = b.call(_row(aten.mul.Tensor), aten.mul.Tensor, (weight, out) if flag(draw) else (out, weight), {})
    return out


def chain_empty_write(draw, ctx):
    """``empty`` followed by a write of every element (``copy_`` of a value, or ``fill_``): what
    lowered ``new_empty`` / out-variant code leaves in graphs. The empty tensor is never read first."""
    b = ctx.builder
    need_room(ctx, 2)
    src = operand(draw, ctx, dtypes_ok=C.ANY)
    dtype = dtype_of(src) if flag(draw) else draw(ctx.dtypes)
    empty = b.call(None, aten.empty.memory_format, (list(src.tensor.shape),),
                   {"dtype": dtype}, check=False, pure=False)
    try:
        if flag(draw):
            return b.call(_row(aten.fill_.Scalar), aten.fill_.Scalar,
                          (empty, draw(scalars(dtype, special_values=ctx.special_values))), {})
        return b.call(_row(aten.copy_.default), aten.copy_.default, (empty, src), {})
    except StepRejected:
        b.remove_last(empty)  # never leave the garbage behind
        raise


CHAINS = (
    Chain("linear", C.MATMUL, chain_linear,
          (aten.t.default, aten.view.default, aten.mm.default, aten.addmm.default, aten.add.Tensor,
           aten._unsafe_view.default)),
    Chain("rms_norm", C.NORM, chain_rms_norm,
          (aten._to_copy.default, aten.pow.Tensor_Scalar, aten.mean.dim, aten.add.Tensor, aten.rsqrt.default,
           aten.mul.Tensor)),
    Chain("empty_write", C.FACTORY, chain_empty_write,
          (aten.empty.memory_format, aten.fill_.Scalar, aten.copy_.default)),
)
