"""Values aimed at what a rewrite changes: in a focus step, a fresh operand of some ops holds the
values where a rewrite of that op goes wrong, not just any values.

- *ties* (comparisons, min/max, arg- and sort-like reductions): the second operand equals the first
  at about half the positions (``a < b`` flipped to ``b > a`` is right, to ``not (a > b)`` is wrong
  exactly there; ``maximum`` and ``fmax`` differ only at NaN, ties decide an argmax);
- *unrepresentable* (casts): values the narrower dtypes cannot hold (past float16's 65504, between
  integers, past int8/uint8/int16 ranges, past float32's 24-bit mantissa), which a dropped round
  trip through them keeps;
- *large* (exp-like ops, softmax, pow): magnitudes where ``exp`` overflows in float16 (past ~11) or
  float32 (past ~88) and an identity such as ``log(exp(x)) = x`` or a softmax without its max
  subtracted breaks;
- *zeros* (divisions, ``log``, ``sqrt``, ``pow``): zeros among the values, where the op's domain
  allows them;
- *finite* (matmul, convolution, norms): ordinary values, no NaN or infinity, in a graph drawn with
  special values: one NaN in a reduced row turns the whole output row into NaN, and a rewrite's
  wrong bias or scale is then invisible behind it (``add(mm, y, alpha=2) -> addmm(y, ...)``);
- *integral* (arithmetic that takes a scalar): an integer or bool operand, where a float scalar
  promotes the result (``pow(int_tensor, 2.0)`` is float, ``x * x`` is not): with special values
  on, every existing float value fits any op, and integer operands became one in nine.

An aimed operand is a new leaf (input or constant), contiguous, its values drawn as usual and
then a drawn half of its positions overwritten by the aim; an aim the operand's domain refuses is
dropped. ``AIMS`` maps an op's packet name to its aims.
"""

from __future__ import annotations

import torch

from .._draws import choose, integers

TIES, UNREPRESENTABLE, LARGE, ZEROS, INTEGRAL, FINITE = "ties", "unrepresentable", "large", "zeros", "integral", "finite"

_COMPARE = ("eq", "ne", "lt", "le", "gt", "ge", "maximum", "minimum", "fmax", "fmin", "clamp", "where",
            "argmax", "argmin", "max", "min", "amax", "amin", "sort", "topk", "atan2", "copysign", "sub", "div")
_CASTS = ("_to_copy", "to", "convert_element_type", "copy_", "view")
_EXPONENTIAL = ("exp", "exp2", "expm1", "_softmax", "_log_softmax", "logsumexp", "sigmoid", "tanh", "pow",
                "softplus", "exp_", "sigmoid_", "tanh_", "pow_", "mul", "cumprod", "prod")
_DIVIDING = ("div", "div_", "remainder", "fmod", "floor_divide", "reciprocal", "log", "log2", "log1p", "sqrt",
             "rsqrt", "pow", "atan2")

_PROMOTING = ("pow", "mul", "add", "sub", "rsub", "div", "remainder", "fmod", "floor_divide", "masked_fill", "clamp",
              "pow_", "mul_", "add_", "sub_", "div_")

_REDUCING = ("mm", "bmm", "addmm", "baddbmm", "addmv", "dot", "convolution", "native_layer_norm",
             "native_group_norm", "native_batch_norm", "_native_batch_norm_legit_no_training", "scaled_dot_product_attention")

AIMS: dict = {}
for _names, _aim in ((_COMPARE, TIES), (_CASTS, UNREPRESENTABLE), (_EXPONENTIAL, LARGE), (_DIVIDING, ZEROS),
                     (_PROMOTING, INTEGRAL), (_REDUCING, FINITE)):
    for _name in _names:
        AIMS[f"aten.{_name}"] = (*AIMS.get(f"aten.{_name}", ()), _aim)
AIMS["prims.convert_element_type"] = (UNREPRESENTABLE,)


def aims_of(overload) -> tuple:
    """The aims for an op (an OpOverload): those of its packet, or ()."""
    name = overload._schema.name.replace("::", ".")
    return AIMS.get(name, ())


# Values a float dtype holds and a narrower one (float16, bfloat16, or an integer dtype) does not.
_UNREPRESENTABLE = {
    torch.float64: (65520.0, 1e5 + 0.5, 16777217.0, 3.0e38, 0.1, -2.5, 1e-8, 257.25),
    torch.float32: (65520.0, 1e5 + 0.5, 3.0e38, 0.1, -2.5, 1e-8, 257.25, 16777216.0),
    torch.float16: (0.1, -2.5, 257.0, 1e-5, 2049.0, 300.5),
    torch.bfloat16: (0.1, -2.5, 257.0, 1e-5, 300.0),
    torch.int64: (128, 255, 256, -1, 32768, -129, 2**31, 2**24 + 1),
    torch.int32: (128, 255, 256, -1, 32768, -129, 2**24 + 1),
    torch.int16: (128, 255, 256, -1, -129, 300),
    torch.int8: (-1, -128, 127),
    torch.uint8: (128, 255),
}
_LARGE = {
    torch.float64: (12.0, 89.0, 100.0, 710.0, -100.0, -750.0, 1e4),
    torch.float32: (12.0, 89.0, 100.0, -100.0, -110.0, 1e4),
    torch.float16: (11.5, 12.0, 20.0, -20.0, 100.0),
    torch.bfloat16: (12.0, 89.0, 100.0, -100.0, 1e4),
}


def aimed(draw, aim: str, values: torch.Tensor, like: torch.Tensor | None) -> torch.Tensor | None:
    """``values`` (a contiguous leaf) with a drawn half of its positions set by ``aim``, or None where
    the aim does not apply (ties with no first operand of the same shape and dtype, no table row)."""
    if values.numel() == 0 or aim in (INTEGRAL, FINITE):  # (the leaf itself is the aim: see _args)
        return None
    if aim == TIES:
        if like is None or like.shape != values.shape or like.dtype != values.dtype:
            return None
        source = like.detach().to(values.device).contiguous()
    elif aim == ZEROS:
        source = torch.zeros_like(values)
    else:
        table = (_UNREPRESENTABLE if aim == UNREPRESENTABLE else _LARGE).get(values.dtype)
        if not table:
            return None
        picks = [choose(draw, table) for _ in range(min(values.numel(), 4))]
        flat = torch.tensor(picks * (values.numel() // len(picks) + 1), dtype=values.dtype)[:values.numel()]
        source = flat.reshape(values.shape).to(values.device)
    g = torch.Generator().manual_seed(draw(integers(0, 1 << 16)))
    mask = (torch.rand(values.shape, generator=g) < 0.5).to(values.device)
    if not mask.any():
        mask.view(-1)[0] = True
    return torch.where(mask, source, values)


__all__ = ["AIMS", "FINITE", "INTEGRAL", "TIES", "UNREPRESENTABLE", "LARGE", "ZEROS", "aimed", "aims_of"]
