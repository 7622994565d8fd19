"""A small custom-op library of the kind serving stacks write (vLLM's ``_C`` ops, with CPU kernels).

Out-variant ops write a ``result`` the caller allocates and return nothing; ``fused_add_rms_norm``
writes both of its first two arguments. Each op has a fake impl (what torch's tracers and fake-tensor
propagation run), so graphs holding them trace to every IR, and ``post-grad`` graphs hold them as
``auto_functionalized_v2`` nodes, as vLLM's passes see them.

Importing this module registers the ops under ``torch.ops.mylib``.
"""

from __future__ import annotations

import torch

FP8 = torch.float8_e4m3fn
FP8_MAX = torch.finfo(FP8).max


def _rms(x: torch.Tensor, weight: torch.Tensor, epsilon: float) -> torch.Tensor:
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + epsilon) * weight.float()).to(x.dtype)


@torch.library.custom_op("mylib::rms_norm", mutates_args=("result",))
def rms_norm(result: torch.Tensor, input: torch.Tensor, weight: torch.Tensor, epsilon: float) -> None:
    """``result = input / sqrt(mean(input**2, -1) + epsilon) * weight``."""
    result.copy_(_rms(input, weight, epsilon))


@rms_norm.register_fake
def _(result, input, weight, epsilon) -> None:
    return None


@torch.library.custom_op("mylib::fused_add_rms_norm", mutates_args=("input", "residual"))
def fused_add_rms_norm(input: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, epsilon: float) -> None:
    """``residual += input``, then ``input = rms_norm(residual)``: both written in place."""
    residual.add_(input)
    input.copy_(_rms(residual, weight, epsilon))


@fused_add_rms_norm.register_fake
def _(input, residual, weight, epsilon) -> None:
    return None


@torch.library.custom_op("mylib::silu_and_mul", mutates_args=("result",))
def silu_and_mul(result: torch.Tensor, input: torch.Tensor) -> None:
    """``result = silu(input[..., :d]) * input[..., d:]`` where ``d = input.shape[-1] // 2``."""
    d = input.shape[-1] // 2
    result.copy_(torch.nn.functional.silu(input[..., :d]) * input[..., d:])


@silu_and_mul.register_fake
def _(result, input) -> None:
    return None


@torch.library.custom_op("mylib::static_scaled_fp8_quant", mutates_args=("result",))
def static_scaled_fp8_quant(result: torch.Tensor, input: torch.Tensor, scale: torch.Tensor) -> None:
    """``result = clamp(input / scale, -max, max)`` as float8_e4m3fn (``scale``: one float32)."""
    result.copy_((input.float() / scale).clamp(-FP8_MAX, FP8_MAX).to(FP8))


@static_scaled_fp8_quant.register_fake
def _(result, input, scale) -> None:
    return None


@torch.library.custom_op("mylib::rms_norm_static_fp8_quant", mutates_args=("result",))
def rms_norm_static_fp8_quant(result: torch.Tensor, input: torch.Tensor, weight: torch.Tensor, scale: torch.Tensor,
                              epsilon: float) -> None:
    """``rms_norm`` then ``static_scaled_fp8_quant`` in one op (what the fusion pass emits)."""
    result.copy_((_rms(input, weight, epsilon).float() / scale).clamp(-FP8_MAX, FP8_MAX).to(FP8))


@rms_norm_static_fp8_quant.register_fake
def _(result, input, weight, scale, epsilon) -> None:
    return None


@torch.library.custom_op("mylib::fused_add_rms_norm_static_fp8_quant", mutates_args=("result", "residual"))
def fused_add_rms_norm_static_fp8_quant(result: torch.Tensor, input: torch.Tensor, residual: torch.Tensor,
                                        weight: torch.Tensor, scale: torch.Tensor, epsilon: float) -> None:
    """``fused_add_rms_norm`` then the quant in one op: ``residual += input``, ``result = quant(rms_norm(residual))``
    (``input`` is read, not written)."""
    residual.add_(input)
    result.copy_((_rms(residual, weight, epsilon).float() / scale).clamp(-FP8_MAX, FP8_MAX).to(FP8))


@fused_add_rms_norm_static_fp8_quant.register_fake
def _(result, input, residual, weight, scale, epsilon) -> None:
    return None
