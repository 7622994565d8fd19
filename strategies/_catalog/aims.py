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
- *small* (norms, a user's op): finite values all scaled down by 2**-6, where an additive epsilon
  (``x / sqrt(mean(x**2) + eps)``) is not lost beside them: a fusion that drops or fixes the norm's
  epsilon changes nothing visible at ordinary magnitudes (drawn values are within +-8; a row of
  them has a mean square near 20, and an fp8 result rounds away a change of 1e-1 there);
- *integral* (arithmetic that takes a scalar): an integer or bool operand, where a float scalar
  promotes the result (``pow(int_tensor, 2.0)`` is float, ``x * x`` is not): with special values
  on, every existing float value fits any op, and integer operands became one in nine.

An aimed operand is a new leaf (input or constant), contiguous, its values drawn as usual and
then a drawn half of its positions overwritten by the aim; an aim the operand's domain refuses is
dropped. ``AIMS`` maps an op's packet name to its aims.

**Aims add to special values, never replace them** (issue 56): the positions where the drawn
values hold a special value (NaN, +-inf, -0.0, a huge magnitude) keep it, so an aimed leaf carries
them at the share an unaimed one does (*finite* and *integral* are the two aims that are their
absence). A `sub(x, x) -> zeros_like(x)` is wrong only where x holds NaN or inf: with ties and
the other aims overwriting half of every aimed operand, x held one in 1-6 of the 57-68 focused
`sub(x, x)` of 300 graphs. ``with_nonfinite`` makes a leaf that holds NaN or an infinity for
certain: the operand of an *equal operands* pair (``operands.py``).
"""

from __future__ import annotations

import math

import torch

from .._draws import choose, integers

TIES, UNREPRESENTABLE, LARGE, ZEROS, INTEGRAL, FINITE = "ties", "unrepresentable", "large", "zeros", "integral", "finite"
SMALL = "small"

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
_NORMS = ("native_layer_norm", "native_group_norm", "native_batch_norm", "_native_batch_norm_legit_no_training")

AIMS: dict = {}
for _names, _aim in ((_COMPARE, TIES), (_CASTS, UNREPRESENTABLE), (_EXPONENTIAL, LARGE), (_DIVIDING, ZEROS),
                     (_PROMOTING, INTEGRAL), (_REDUCING, FINITE), (_NORMS, SMALL)):
    for _name in _names:
        AIMS[f"aten.{_name}"] = (*AIMS.get(f"aten.{_name}", ()), _aim)
AIMS["prims.convert_element_type"] = (UNREPRESENTABLE,)


def aims_of(overload) -> tuple:
    """The aims for an op (an OpOverload): those of its packet, or (); a user's op (outside aten,
    prims and the quantized ops) *finite* and *small*: what it computes is its own, and serving ops
    reduce and normalize (norms, quantization scales), where one NaN in a row hides what a fusion
    changed and an epsilon shows only beside small values."""
    name = overload._schema.name.replace("::", ".")
    if name.split(".")[0] not in _TORCH_NAMESPACES:
        return (FINITE, SMALL)
    return AIMS.get(name, ())


_TORCH_NAMESPACES = ("aten", "prims", "quantized_decomposed")


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
    if aim == SMALL:
        return values * 2.0 ** -6 if values.is_floating_point() else None
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
    return torch.where(mask & ~is_special(values), source, values)


def is_special(values: torch.Tensor) -> torch.Tensor:
    """Where a tensor holds a special value: NaN, +-inf, -0.0 or a magnitude past a quarter of its
    dtype's largest (all False for integer and bool tensors)."""
    if not values.is_floating_point():
        return torch.zeros(values.shape, dtype=torch.bool, device=values.device)
    huge = float(torch.finfo(values.dtype).max) / 4
    return ~torch.isfinite(values) | ((values == 0) & values.signbit()) | (values.abs() > huge)


_NONFINITE = (math.nan, math.inf, -math.inf)


def with_nonfinite(draw, values: torch.Tensor) -> torch.Tensor:
    """``values`` (a floating tensor) with a drawn quarter of its positions, one at least, set to NaN,
    inf or -inf (one of them drawn for each of up to four positions, repeated over the rest)."""
    if values.numel() == 0 or not values.is_floating_point():
        return values
    picks = [choose(draw, _NONFINITE) for _ in range(min(values.numel(), 4))]
    flat = torch.tensor(picks * (values.numel() // len(picks) + 1), dtype=values.dtype)[:values.numel()]
    g = torch.Generator().manual_seed(draw(integers(0, 1 << 16)))
    mask = torch.rand(values.shape, generator=g) < 0.25
    mask.view(-1)[draw(integers(0, values.numel() - 1))] = True
    return torch.where(mask.to(values.device), flat.reshape(values.shape).to(values.device), values)


__all__ = ["AIMS", "FINITE", "INTEGRAL", "SMALL", "TIES", "UNREPRESENTABLE", "LARGE", "ZEROS", "aimed", "aims_of", "is_special",
           "with_nonfinite"]
