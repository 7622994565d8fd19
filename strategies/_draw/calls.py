"""Drawing rules for ops whose operands depend on each other, one per call kind (``CALL_RULES``).

A matmul's inner dims must agree, a convolution's weight follows its input's channels and groups,
attention's key and value follow its query, an index must lie inside the indexed dim: these rules
draw the whole call (operands first, as ``operand()`` picks them: an existing value that fits, or a
new leaf of the right shape). The operand helpers here serve the chains too (``chains.py``).

Every drawn call is deterministic: writes that could collide (``index_put`` without accumulation,
``scatter`` without a reduction) get unique positions, so eager's order of writes never matters.
"""

from __future__ import annotations

import math

import torch
from hypothesis import strategies as st

from .._build.builder import StepRejected, Value
from .._catalog import vocabulary as C
from .._catalog.ops import QUANTIZE, rows_named
from .._draws import bound, choose, flag, integers
from .._tensors import Layout, scalars
from .args import rule_dims, rule_select, rule_slice
from .operands import DrawContext, broadcasts_into, operand, rule_scalar

aten = torch.ops.aten


# --- sizes and operands --------------------------------------------------------------------------


def side(draw, lo: int = 1, hi: int = 4) -> int:
    return draw(integers(lo, hi))


def wide_dim(draw, ctx: DrawContext) -> int:
    """A matmul dimension: 1-4, or (sizes="large", one time in three) 65-256, past the heuristics'
    thresholds (Inductor pads and picks mm kernels by size)."""
    if ctx.large and draw(integers(0, 2)) == 0:
        return draw(integers(65, 256))
    return side(draw)


def inner_dim(draw, ctx: DrawContext) -> int:
    """A reduction length (matmul's k): sometimes 0, where the result is beta * bias alone."""
    if draw(integers(0, 15)) == 0:
        return 0
    return wide_dim(draw, ctx)


def ranked(draw, ctx, dtypes, ranks, make_shape, *, domain=C.ANY_VALUE, fits=None, target=False, chain=True):
    """An operand of one of ``ranks`` (and ``fits``), or a new leaf of ``make_shape``."""
    return operand(draw, ctx, dtypes_ok=dtypes, domain=domain, target=target, chain=chain,
                   shape_fits=lambda s: len(s) in ranks and (fits is None or fits(s)), make_shape=make_shape)


def exact(draw, ctx, shape, dtype, domain=C.ANY_VALUE) -> Value:
    shape = tuple(shape)
    return operand(draw, ctx, dtypes_ok={dtype}, domain=domain, chain=False,
                   shape_fits=lambda s: s == shape, make_shape=lambda d: shape)


def _optional(draw, ctx, shape, dtype, domain=C.ANY_VALUE) -> Value | None:
    """Half the time None (what it shrinks to), else an operand of exactly ``shape``."""
    return exact(draw, ctx, shape, dtype, domain) if flag(draw) else None


def _bias(draw, ctx, out_shape: tuple, dtype) -> Value:
    """An operand that broadcasts into ``out_shape``: a row, the full shape, a column, or 0-d."""
    out_shape = tuple(out_shape)
    options = [out_shape[-1:], out_shape, (1,) * (len(out_shape) - 1) + out_shape[-1:], ()]
    return operand(draw, ctx, dtypes_ok={dtype}, chain=False, shape_fits=lambda s: broadcasts_into(s, out_shape),
                   make_shape=lambda d: choose(d, options))


def _index_leaf(draw, ctx: DrawContext, shape: tuple, values, dtype=torch.int64) -> Value:
    """An int64 (or ``dtype``) leaf, an input or a constant where allowed, holding ``values`` (flat)."""
    b = ctx.builder
    t = torch.tensor(values, dtype=dtype).reshape(shape)
    kinds = (["input"] if len(b.recipes) < ctx.max_inputs else []) + (["constant"] if ctx.constants else [])
    if not kinds:
        raise StepRejected("no room for an index tensor")
    if choose(draw, kinds) == "input":
        return b.add_input(t, Layout())
    return b.add_constant(t)


def _indices(draw, n: int, count: int, *, negative: bool = True) -> list:
    """``count`` indices into a dim of size ``n`` (negative ones a quarter of the time)."""
    if count and n == 0:
        raise StepRejected("no index into an empty dim")
    out = [draw(integers(0, n - 1)) for _ in range(count)]
    return [i - n if negative and draw(integers(0, 3)) == 0 else i for i in out]


def _unique(draw, n: int, count: int, *, negative: bool = True) -> list:
    """``count`` distinct positions (modulo ``n``) of a dim of size ``n``."""
    if count > n:
        raise StepRejected("more unique indices than positions")
    perm = list(draw(st.permutations(range(n)))) if n else []
    return [i - n if negative and draw(integers(0, 3)) == 0 else i for i in perm[:count]]


def _dim(draw, rank: int) -> int:
    d = draw(integers(0, rank - 1))
    return d - rank if draw(integers(0, 2)) == 2 else d


def dtype_of(v: Value):
    return v.tensor.dtype


def need_room(ctx: DrawContext, nodes: int) -> None:
    """Reject a chain that would take the graph past its node budget, before it emits anything."""
    if ctx.builder.n_calls + nodes > ctx.builder.max_nodes:
        raise StepRejected(f"no room for {nodes} more nodes")


# --- matmul ----------------------------------------------------------------------------------------


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
        return (_bias(draw, ctx, (m,), dtype_of(mat)), mat, vec), {}
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
        return (_bias(draw, ctx, out, dtype_of(a)), a, b), {}
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
    bias = _optional(draw, ctx, (cout,), dtype_of(x))
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
    return (x, shape, _optional(draw, ctx, shape, dt), _optional(draw, ctx, shape, dt), choose(draw, _EPS)), {}


def _channels_first(draw, ctx, spec, fits=None):
    return ranked(draw, ctx, spec.dtypes, (2, 3, 4),
                   lambda d: (side(d, 1, 3), side(d), *(side(d) for _ in range(side(d, 0, 2)))),
                   fits=lambda s: s[1] > 0 and (fits is None or fits(s)))


def rule_batch_norm(draw, ctx, spec):
    x = _channels_first(draw, ctx, spec)
    c, dt = x.tensor.shape[1], dtype_of(x)
    weight, bias = _optional(draw, ctx, (c,), dt), _optional(draw, ctx, (c,), dt)
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
    weight, bias = _optional(draw, ctx, (c,), dt), _optional(draw, ctx, (c,), dt)
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


# --- indexing -------------------------------------------------------------------------------------------


def _any_ranked(draw, ctx, spec, min_rank=1, target=False, fits=None):
    return ranked(draw, ctx, spec.dtypes, tuple(range(min_rank, 4)),
                   lambda d: tuple(side(d) for _ in range(side(d, min_rank, 3))), target=target, fits=fits)


def rule_index(draw, ctx, spec):
    x = _any_ranked(draw, ctx, spec)
    rank = x.tensor.dim()
    lead = 1 if rank >= 2 and draw(integers(0, 3)) == 0 else 0
    indexed = draw(integers(1, min(2, rank - lead)))
    if not lead and draw(integers(0, 3)) == 0:  # a bool mask over the leading dims
        shape = tuple(x.tensor.shape[:indexed])
        values = [flag(draw) for _ in range(math.prod(shape))]
        return (x, [_index_leaf(draw, ctx, shape, values, torch.bool)]), {}
    shape = tuple(side(draw, 1, 3) for _ in range(draw(integers(0, 2))))
    idx = [_index_leaf(draw, ctx, shape, _indices(draw, x.tensor.shape[lead + i], math.prod(shape)))
           for i in range(indexed)]
    return (x, [None] * lead + idx), {}


def rule_index_put(draw, ctx, spec):
    inplace = spec.category == C.INPLACE
    x = _any_ranked(draw, ctx, spec, target=inplace)
    shape = tuple(x.tensor.shape)
    lead = 1 if len(shape) >= 2 and draw(integers(0, 3)) == 0 else 0
    n = shape[lead]
    accumulate = flag(draw)
    count = draw(integers(0, 4)) if accumulate else draw(integers(0, min(n, 4)))
    positions = _indices(draw, n, count) if accumulate else _unique(draw, n, count)
    idx = _index_leaf(draw, ctx, (count,), positions)
    result = (*shape[:lead], count, *shape[lead + 1:])
    values = operand(draw, ctx, dtypes_ok={dtype_of(x)}, chain=False, shape_fits=lambda s: broadcasts_into(s, result),
                     make_shape=lambda d: choose(d, [result, result[-1:], ()]))
    return (x, [None] * lead + [idx], values, accumulate), {}


def rule_gather(draw, ctx, spec):
    x = _any_ranked(draw, ctx, spec)
    rank = x.tensor.dim()
    dim = _dim(draw, rank)
    n = x.tensor.shape[dim]
    if spec.overload is aten.index_select.default:
        count = side(draw, 0, 4)
        return (x, dim, _index_leaf(draw, ctx, (count,), _indices(draw, n, count, negative=False))), {}
    shape = tuple(side(draw, 1, 4) if d == dim % rank else draw(integers(0, s)) for d, s in enumerate(x.tensor.shape))
    idx = _index_leaf(draw, ctx, shape, _indices(draw, n, math.prod(shape), negative=False))
    return (x, dim, idx), {}


def rule_scatter(draw, ctx, spec):
    op = spec.overload
    inplace = spec.category == C.INPLACE
    x = _any_ranked(draw, ctx, spec, target=inplace)
    shape = tuple(x.tensor.shape)
    rank = len(shape)
    dim = _dim(draw, rank)
    d = dim % rank
    n = shape[d]
    adding = op in (aten.scatter_add.default, aten.scatter_add_.default, aten.scatter.reduce)
    idx_shape = tuple(draw(integers(0, s)) for s in shape)
    if adding:
        positions = _indices(draw, n, math.prod(idx_shape), negative=False)
    else:  # unique along ``dim`` on every line: one permutation, rotated per line
        perm = list(draw(st.permutations(range(n)))) if n else []
        lines = math.prod(idx_shape) // max(idx_shape[d], 1)
        rotations = [draw(integers(0, max(n - 1, 0))) for _ in range(lines)]
        grid = torch.tensor([perm[(i + r) % n] for r in rotations for i in range(idx_shape[d])] if n else [],
                            dtype=torch.int64)
        moved = (*idx_shape[:d], *idx_shape[d + 1:], idx_shape[d])
        positions = grid.reshape(moved).movedim(-1, d).flatten().tolist()
    idx = _index_leaf(draw, ctx, idx_shape, positions)
    if op is aten.scatter.value:
        return (x, dim, idx, rule_scalar(draw, ctx, x, C.ANY_VALUE, inplace=True)), {}
    src = operand(draw, ctx, dtypes_ok={dtype_of(x)}, chain=False,
                  shape_fits=lambda s: len(s) == rank and all(a >= b for a, b in zip(s, idx_shape)),
                  make_shape=lambda dr: idx_shape)
    kwargs = {"reduce": choose(draw, ("add", "multiply"))} if op is aten.scatter.reduce else {}
    return (x, dim, idx, src), kwargs


def rule_slice_scatter(draw, ctx, spec):
    x = _any_ranked(draw, ctx, spec)
    if spec.overload is aten.select_scatter.default:
        where = rule_select(draw, x.tensor)
        part = aten.select.int(x.tensor, *where)
    else:
        where = rule_slice(draw, x.tensor)
        part = aten.slice.Tensor(x.tensor, *where)
    return (x, exact(draw, ctx, part.shape, dtype_of(x)), *where), {}


def rule_embedding(draw, ctx, spec):
    weight = ranked(draw, ctx, spec.dtypes, (2,), lambda d: (side(d, 1, 6), side(d)), fits=lambda s: s[0] > 0)
    shape = tuple(side(draw) for _ in range(side(draw, 1, 2)))
    idx = _index_leaf(draw, ctx, shape, _indices(draw, weight.tensor.shape[0], math.prod(shape), negative=False))
    return (weight, idx), {}


# --- sorting, splitting, padding, repeating ---------------------------------------------------------------


def rule_topk(draw, ctx, spec):
    x = _any_ranked(draw, ctx, spec)
    dim = _dim(draw, x.tensor.dim())
    n = x.tensor.shape[dim]
    return (x, bound(draw, n, 0, n), dim, not flag(draw), True), {}


def rule_stats(draw, ctx, spec):
    """var / std / var_mean over some dims, population or sample statistics (the correction only
    where more elements than it are reduced: eager warns and returns inf or NaN otherwise)."""
    x = _any_ranked(draw, ctx, spec, min_rank=0)
    (dims,) = rule_dims(draw, x.tensor)
    shape = x.tensor.shape
    count = math.prod(shape[d] for d in dims) if dims and x.tensor.dim() else x.tensor.numel()
    correction = draw(integers(0, 1))
    if correction >= count:
        raise StepRejected("the correction is not below the number of reduced elements")
    return (x, dims), {"correction": correction}


def rule_split(draw, ctx, spec):
    op = spec.overload
    x = _any_ranked(draw, ctx, spec)
    dim = _dim(draw, x.tensor.dim())
    n = x.tensor.shape[dim]
    if op is aten.unbind.int:
        if not 1 <= n <= 4:
            raise StepRejected("unbind is drawn over dims of 1-4")
        return (x, dim), {}
    if op is aten.chunk.default:
        return (x, side(draw), dim), {}
    if op is aten.split.Tensor:
        return (x, bound(draw, n, max(1, -(-n // 4)), n + 1), dim), {}  # a size past n: one piece
    cuts = sorted(bound(draw, n, 0, n) for _ in range(draw(integers(0, 3))))
    sizes = [b - a for a, b in zip([0, *cuts], [*cuts, n])]
    return (x, sizes, dim), {}


def rule_pad(draw, ctx, spec):
    x = _any_ranked(draw, ctx, spec)
    # pairs from the last dim backwards; a pad of -n crops the dim to nothing
    sizes = x.tensor.shape[::-1]
    pad = [bound(draw, sizes[i // 2], -sizes[i // 2], 2) for i in range(2 * draw(integers(1, min(3, x.tensor.dim()))))]
    return (x, pad, rule_scalar(draw, ctx, x, C.ANY_VALUE, floats_ok=False)), {}


def rule_repeat(draw, ctx, spec):
    x = _any_ranked(draw, ctx, spec, min_rank=0)
    return (x, [side(draw, 1, 3) for _ in range(x.tensor.dim() + draw(integers(0, 1)))]), {}


def rule_roll(draw, ctx, spec):
    x = _any_ranked(draw, ctx, spec)
    rank = x.tensor.dim()
    if draw(integers(0, 3)) == 0:
        return (x, [draw(integers(-4, 4))], []), {}  # rolls the flattened tensor
    dims = list(draw(st.permutations(range(rank))))[:draw(integers(1, rank))]
    return (x, [draw(integers(-4, 4)) for _ in dims], dims), {}


def rule_stack(draw, ctx, spec):
    x = _any_ranked(draw, ctx, spec, min_rank=0)
    others = [exact(draw, ctx, x.tensor.shape, dtype_of(x)) for _ in range(draw(integers(0, 2)))]
    rank = x.tensor.dim()
    return ([x, *others], draw(integers(-rank - 1, rank))), {}


def rule_expand_as(draw, ctx, spec):
    x = _any_ranked(draw, ctx, spec, min_rank=0)
    shape = tuple(x.tensor.shape)

    def make(d):
        lead = [side(d, 1, 3) for _ in range(d(integers(0, 1)))]
        return (*lead, *(side(d, 1, 3) if n == 1 and flag(d) else n for n in shape))

    other = operand(draw, ctx, dtypes_ok=C.ANY, chain=False, shape_fits=lambda s: broadcasts_into(shape, s),
                    make_shape=make)
    return (x, other), {}


# --- factories and quantization --------------------------------------------------------------------------


def rule_fill(draw, ctx, spec):
    op = spec.overload
    dtype = draw(ctx.dtypes)
    if dtype not in spec.dtypes:
        raise StepRejected(f"{spec.name} is not drawn for {dtype}")
    kwargs = {"dtype": dtype} if draw(integers(0, 3)) else {}
    value = draw(scalars(dtype, special_values=ctx.special_values))
    if op is aten.scalar_tensor.default:
        return (value,), kwargs
    if op is aten.arange.default:
        return (side(draw, 0, 8),), kwargs
    if op is aten.arange.start_step:
        start, step = draw(integers(-4, 4)), choose(draw, (1, 2, -1, 0.5))
        end = start + step * side(draw, 0, 8)
        if step != int(step) and kwargs.get("dtype") in C.INTEGRAL:
            # the step truncates to 0 in the dtype: eager repeats the start (or returns nothing), and
            # torch's fake propagation refuses ("step must be nonzero"): no pipeline hands that over
            raise StepRejected("a fractional step of an integer arange")
        return (start, end, step), kwargs
    size = list(draw(ctx.shapes))
    if op is aten.full.default:
        return (size, value), kwargs
    return (size,), kwargs


_QUANT = ((torch.int8, -128, 127, (0, -3, 5)), (torch.uint8, 0, 255, (128, 0, 10)))


def _qparams(draw):
    dtype, lo, hi, zero_points = choose(draw, _QUANT)
    return choose(draw, (0.05, 0.125, 0.5, 1 / 127)), choose(draw, zero_points), lo, hi, dtype


def rule_quantize(draw, ctx, spec):
    if spec.overload is QUANTIZE:
        x = operand(draw, ctx, dtypes_ok=spec.dtypes)
        return (x, *_qparams(draw)), {}
    quantized = [v for v in ctx.builder.values if dtype_of(v) in (torch.int8, torch.uint8)]
    if quantized and flag(draw):
        q = choose(draw, quantized)
        params = q.call[1][1:] if q.call is not None and q.call[0] is not None else _qparams(draw)
        if draw(integers(0, 3)) == 0:  # now and then with other parameters than it was quantized with
            params = (*_qparams(draw)[:4], dtype_of(q))
    else:
        need_room(ctx, 2)
        x = operand(draw, ctx, dtypes_ok={torch.float32})
        params = _qparams(draw)
        q = ctx.builder.call(rows_named(QUANTIZE)[0], QUANTIZE, (x, *params), {})
    return (q, *params), {}


CALL_RULES = {
    C.MM: rule_mm,
    C.CONVOLUTION: rule_convolution,
    C.POOL: rule_pool,
    C.LAYER_NORM: rule_layer_norm,
    C.BATCH_NORM: rule_batch_norm,
    C.GROUP_NORM: rule_group_norm,
    C.SDPA: rule_sdpa,
    C.INDEX: rule_index,
    C.INDEX_PUT: rule_index_put,
    C.GATHER: rule_gather,
    C.SCATTER: rule_scatter,
    C.SLICE_SCATTER: rule_slice_scatter,
    C.EMBEDDING: rule_embedding,
    C.TOPK: rule_topk,
    C.STATS: rule_stats,
    C.SPLIT: rule_split,
    C.PAD: rule_pad,
    C.REPEAT: rule_repeat,
    C.ROLL: rule_roll,
    C.STACK: rule_stack,
    C.EXPAND_AS: rule_expand_as,
    C.FILL: rule_fill,
    C.QUANTIZE: rule_quantize,
}
