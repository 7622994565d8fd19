"""Drawing rules for the compute ops' calls: matmul, convolution, pooling, the norms, attention.

Their operands depend on each other: a matmul's inner dims must agree, a convolution's weight
follows its input's channels and groups, a norm's weight and bias its normalized shape, attention's
key and value its query. Each rule draws the whole call, operands first, as the other call rules do
(``calls.py``, whose operand helpers these share).
"""

from __future__ import annotations

import math

import torch

from .._build.builder import StepRejected
from .._catalog import vocabulary as C
from .._draws import choose, flag, integers
from .calls import bias_for, dtype_of, exact, inner_dim, optional_operand, ranked, side, wide_dim
from .operands import operand

aten = torch.ops.aten


def rule_mm(draw, ctx, spec):
    op = spec.overload
    if op is aten.dot.default:
        a = ranked(draw, ctx, spec.dtypes, (1,), lambda d: (inner_dim(d, ctx),))
        return (a, exact(draw, ctx, a.tensor.shape, dtype_of(a))), {}
    if op is aten.addmv.default:
        # k >= 1: with k == 0 and a broadcast bias eager returns the bias's shape (torch 2.13, docs/torch-facts.md)
        mat = ranked(draw, ctx, spec.dtypes, (2,), lambda d: (wide_dim(d, ctx), wide_dim(d, ctx)), fits=lambda s: s[1] > 0)
        m, k = mat.tensor.shape
        vec = exact(draw, ctx, (k,), dtype_of(mat))
        return (bias_for(draw, ctx, (m,), dtype_of(mat)), mat, vec), {}
    batched = op in (aten.bmm.default, aten.baddbmm.default)
    rank = 3 if batched else 2
    lead = (side(draw),) if batched else ()
    a = ranked(draw, ctx, spec.dtypes, (rank,), lambda d: (*lead, wide_dim(d, ctx), inner_dim(d, ctx)))
    k, n = a.tensor.shape[-1], wide_dim(draw, ctx)
    batch = tuple(a.tensor.shape[:-2])
    b = operand(draw, ctx, dtypes_ok={dtype_of(a)}, chain=False,
                shape_fits=lambda s: len(s) == rank and s[-2] == k and s[:-2] == batch,
                make_shape=lambda d: (*batch, k, n))
    if op in (aten.addmm.default, aten.baddbmm.default):
        out = (*batch, a.tensor.shape[-2], b.tensor.shape[-1])
        return (bias_for(draw, ctx, out, dtype_of(a)), a, b), {}
    return (a, b), {}


# --- convolution and pooling -------------------------------------------------------------------------


def rule_convolution(draw, ctx, spec):
    nd = choose(draw, (2, 1, 3))
    spatial_max = 3 if nd == 3 else 5
    x = ranked(draw, ctx, spec.dtypes, (nd + 2,),
                lambda d: (side(d, 1, 2), side(d), *(side(d, 1, spatial_max) for _ in range(nd))),
                fits=lambda s: s[1] > 0)
    cin = x.tensor.shape[1]
    groups = choose(draw, [g for g in range(1, cin + 1) if cin % g == 0])
    cout = groups * side(draw, 1, 3)
    transposed = draw(integers(0, 3)) == 0
    kernel = [side(draw, 1, 3) for _ in range(nd)]
    stride = [side(draw, 1, 2) for _ in range(nd)]
    dilation = [side(draw, 1, 2) for _ in range(nd)]
    padding = [draw(integers(0, (k - 1) * dl)) for k, dl in zip(kernel, dilation)]
    if transposed:
        weight_shape = (cin, cout // groups, *kernel)
        output_padding = [draw(integers(0, max(s, dl) - 1)) for s, dl in zip(stride, dilation)]
    else:
        weight_shape = (cout, cin // groups, *kernel)
        output_padding = [0] * nd
    weight = exact(draw, ctx, weight_shape, dtype_of(x))
    bias = optional_operand(draw, ctx, (cout,), dtype_of(x))
    return (x, weight, bias, stride, padding, dilation, transposed, output_padding, groups), {}


def rule_pool(draw, ctx, spec):
    x = ranked(draw, ctx, spec.dtypes, (3, 4),
                lambda d: (*((side(d, 1, 2),) if flag(d) else ()), side(d, 1, 3), side(d, 1, 5), side(d, 1, 5)))
    op = spec.overload
    if op is aten._adaptive_avg_pool2d.default:
        return (x, [side(draw), side(draw)]), {}
    kernel = [side(draw, 1, 3), side(draw, 1, 3)]
    stride = [] if flag(draw) else [side(draw, 1, 2), side(draw, 1, 2)]
    padding = [draw(integers(0, k // 2)) for k in kernel]
    if op is aten.max_pool2d_with_indices.default:
        return (x, kernel, stride, padding, [side(draw, 1, 2), side(draw, 1, 2)], flag(draw)), {}
    divisor = choose(draw, (None, 1, 3))
    return (x, kernel, stride, padding, flag(draw), not flag(draw), divisor), {}


# --- normalization ------------------------------------------------------------------------------------


_EPS = (1e-5, 1e-6, 1e-12)


def rule_layer_norm(draw, ctx, spec):
    x = ranked(draw, ctx, spec.dtypes, (1, 2, 3), lambda d: tuple(side(d) for _ in range(side(d, 1, 3))))
    rank = x.tensor.dim()
    shape = list(x.tensor.shape[rank - draw(integers(1, min(2, rank))):])
    dt = dtype_of(x)
    return (x, shape, optional_operand(draw, ctx, shape, dt), optional_operand(draw, ctx, shape, dt), choose(draw, _EPS)), {}


def _channels_first(draw, ctx, spec, fits=None):
    return ranked(draw, ctx, spec.dtypes, (2, 3, 4),
                   lambda d: (side(d, 1, 3), side(d), *(side(d) for _ in range(side(d, 0, 2)))),
                   fits=lambda s: s[1] > 0 and (fits is None or fits(s)))


def rule_batch_norm(draw, ctx, spec):
    x = _channels_first(draw, ctx, spec)
    c, dt = x.tensor.shape[1], dtype_of(x)
    weight, bias = optional_operand(draw, ctx, (c,), dt), optional_operand(draw, ctx, (c,), dt)
    momentum, eps = 0.1, choose(draw, (1e-5, 1e-3))
    if spec.overload is aten.native_batch_norm.default and flag(draw):
        # Training, without running stats: with them it would update them in place, which the
        # schema does not declare (functionalized graphs carry the _functional overload instead).
        return (x, weight, bias, None, None, True, momentum, eps), {}
    mean = exact(draw, ctx, (c,), dt)
    var = exact(draw, ctx, (c,), dt, C.POSITIVE)
    if spec.overload is aten.native_batch_norm.default:
        return (x, weight, bias, mean, var, False, momentum, eps), {}
    return (x, weight, bias, mean, var, momentum, eps), {}


def rule_group_norm(draw, ctx, spec):
    x = _channels_first(draw, ctx, spec)
    n, c = x.tensor.shape[:2]
    hw = math.prod(x.tensor.shape[2:])
    dt = dtype_of(x)
    group = choose(draw, [g for g in range(1, c + 1) if c % g == 0])
    weight, bias = optional_operand(draw, ctx, (c,), dt), optional_operand(draw, ctx, (c,), dt)
    if any(v is not None and not v.tensor.is_contiguous() for v in (weight, bias)):
        # eager's CPU kernel reads them as contiguous, past their storage (docs/torch-facts.md 8)
        raise StepRejected("native_group_norm reads a strided weight or bias wrongly")
    return (x, weight, bias, n, c, hw, group, choose(draw, _EPS)), {}


# --- attention ----------------------------------------------------------------------------------------


# The overloads the composite dispatches to, each with its own kernel (the CPU flash one, the CUDA ones).
_CUDA_FLASH = aten._scaled_dot_product_flash_attention.default
_BIASED = (aten._scaled_dot_product_efficient_attention.default, aten._scaled_dot_product_cudnn_attention.default)
_CUDA_FUSED = (_CUDA_FLASH, *_BIASED)
_FUSED = (aten._scaled_dot_product_flash_attention_for_cpu.default, *_CUDA_FUSED)


def rule_sdpa(draw, ctx, spec):
    op = spec.overload
    flash = op is aten._scaled_dot_product_flash_attention_for_cpu.default
    fused = op in _FUSED
    head = (lambda d: wide_dim(d, ctx)) if ctx.large else (lambda d: side(d))
    if op in _CUDA_FUSED:
        # the CUDA kernels take head sizes in multiples of 8 (the composite pads others first; the H100,
        # torch 2.11: flash "head_size must be a multiple of 8", cuDNN "hidden_dim should be multiple of
        # 8", efficient attention on f16/bf16 "cutlassF: no kernel found to launch")
        head = (lambda d: 8 * side(d, 1, 16 if ctx.large else 2))
    q = ranked(draw, ctx, spec.dtypes, (4,),
                lambda d: (side(d, 1, 2), side(d, 1, 2), side(d), head(d)), fits=lambda s: s[-1] > 0)
    bsz, heads, length, e = q.tensor.shape
    dt = dtype_of(q)
    s = side(draw)
    if fused and 0 in (heads, length, s):
        # the CPU flash kernel divides by these: SIGFPE, the process dies (docs/torch-facts.md 8); the
        # fused CUDA kernels are not launched empty either (the composite returns before them)
        raise StepRejected("a fused attention kernel on an empty head, query or key dim")
    k = exact(draw, ctx, (bsz, heads, s, e), dt)
    v = exact(draw, ctx, (bsz, heads, s, e if fused else side(draw)), dt)
    kinds = ["none", "float", "bool"] if not fused else ["none"] if op is _CUDA_FLASH else ["none", "float"]
    kind = choose(draw, kinds)
    mask = None
    if kind == "float":
        # the CUDA kernels take the bias as the composite hands it over: expanded to 4-d
        shapes = [(bsz, heads, length, s)] if op in _BIASED else [(length, s), (bsz, 1, length, s)]
        mask = exact(draw, ctx, choose(draw, shapes), dt)
    elif kind == "bool":
        mask = exact(draw, ctx, (length, s), torch.bool)
    causal = mask is None and flag(draw)
    if fused and any(t is not None and t.tensor.dim() and t.tensor.shape[-1] > 1 and t.tensor.stride(-1) != 1
                     for t in (q, k, v, mask)):
        # the CPU flash kernel reads the last dim as if its stride were 1 (docs/torch-facts.md 8); the
        # composite makes it so before calling any fused kernel
        raise StepRejected("a fused attention kernel needs a unit stride in the last dim")
    kwargs = {}
    if flag(draw):
        kwargs["scale"] = choose(draw, (0.5, 0.125, 1.0))
    if flash:
        if mask is not None:
            kwargs["attn_mask"] = mask
        return (q, k, v, 0.0, causal), kwargs
    if op is _CUDA_FLASH:
        return (q, k, v, 0.0, causal), kwargs
    if op in _BIASED:  # the log-sum-exp is not computed: only the first result is drawn (FIRST_RESULT_ONLY)
        return (q, k, v, mask, False, 0.0, causal), kwargs
    return (q, k, v, mask, 0.0, causal), kwargs
