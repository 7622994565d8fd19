"""Dtypes inside a kernel: what register type holds a torch dtype, how values are cast, how
constants are printed.

A value of a node lives in a *register type*: its own dtype, except f16/bf16 (held in fp32, rounded
to the narrow type after every node, so results round where eager's do; the interpreter cannot do
bf16 arithmetic at all) and bool (``tl.int1``). Arithmetic on bools is done in int8 and turned
back into bool with ``!= 0``, as torch does (``True + True`` is ``True``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from .._errors import LoweringError

TL = {
    torch.float16: "tl.float16",
    torch.bfloat16: "tl.bfloat16",
    torch.float32: "tl.float32",
    torch.float64: "tl.float64",
    torch.int8: "tl.int8",
    torch.uint8: "tl.uint8",
    torch.int16: "tl.int16",
    torch.int32: "tl.int32",
    torch.int64: "tl.int64",
    torch.bool: "tl.int1",
}

NARROW_FLOATS = (torch.float16, torch.bfloat16)


def check_dtype(dtype: torch.dtype, where: str) -> None:
    if dtype not in TL:
        raise LoweringError(f"dtype={dtype} {where}, but should be one of "
                            f"{', '.join(str(d).replace('torch.', '') for d in TL)} (no Triton row for it)")


def register(dtype: torch.dtype) -> torch.dtype:
    """The Triton element type (as a torch dtype; bool is ``tl.int1``) a value of ``dtype`` is held in."""
    return torch.float32 if dtype in NARROW_FLOATS else dtype


def arithmetic(dtype: torch.dtype) -> torch.dtype:
    """The element type an op whose operands are converted to ``dtype`` computes in (bools in int8)."""
    return torch.int8 if dtype == torch.bool else register(dtype)


@dataclass(frozen=True)
class Value:
    """A kernel value: Triton expression ``expr`` of element type ``held``, standing for a torch value of
    ``dtype`` (narrow floats are held in fp32 already rounded to ``dtype``)."""

    expr: str
    held: torch.dtype
    dtype: torch.dtype


def convert(value: Value, dtype: torch.dtype, *, arith: bool = False) -> Value:
    """``value`` converted as torch converts to ``dtype`` (bool: ``!= 0``; float to int: toward zero;
    to f16/bf16: round to nearest even); held in ``register(dtype)``, or ``arithmetic(dtype)`` when
    ``arith`` (an op's operand)."""
    want = arithmetic(dtype) if arith else register(dtype)
    if value.dtype == dtype and value.held == want:
        return value
    if dtype == torch.bool and value.dtype != torch.bool:
        expr = f"({value.expr} != 0)"
        held = torch.bool
    else:
        expr, held = value.expr, value.held
    if dtype in NARROW_FLOATS and value.dtype != dtype:
        if held != torch.float32:
            expr = f"{expr}.to(tl.float32)"
        # round to the narrow type, held in fp32 (bf16 by bits: see _helpers.py)
        expr = f"{expr}.to(tl.float16).to(tl.float32)" if dtype == torch.float16 else f"bf16_round_f32({expr})"
        held = torch.float32
    if held != want:
        expr = f"{expr}.to({TL[want]})"
    return Value(expr, want, dtype)


def narrowed(value: float, dtype: torch.dtype) -> float:
    """``value`` rounded to the f16/bf16 ``dtype`` as torch converts (nearest even), as a float."""
    return float(torch.tensor(value, dtype=dtype))


def constant(value, dtype: torch.dtype, *, rounded: bool = False) -> str:
    """A Python scalar as a Triton constant of ``arithmetic(dtype)``: torch converts a scalar operand
    to the op's dtype first (``int(2.7)`` for integers); for f16/bf16 arithmetic eager reads the scalar
    in the fp32 compute type, unrounded (``TensorIterator::original_scalar_value``), while ops that
    work in the tensor's own dtype (comparisons, pow's exponent) round it to f16/bf16: ``rounded``."""
    compute = arithmetic(dtype)
    if compute.is_floating_point:
        v = float(value)
        if rounded and dtype in NARROW_FLOATS:  # ops that compare or compute in the tensor's own dtype
            v = narrowed(v, dtype)
        if math.isnan(v):
            text = 'float("nan")'
        elif math.isinf(v):
            text = 'float("inf")' if v > 0 else 'float("-inf")'
        else:
            text = repr(v)
        # A bare literal is an fp32 constant to Triton's compiler: give fp64 arithmetic the full value.
        return f"tl.full([], {text}, tl.float64)" if compute == torch.float64 else text
    if isinstance(value, float) and not math.isfinite(value):
        raise LoweringError(f"scalar={value} cannot be converted to {dtype}")
    return str(int(value))
