"""Drawing rules for calls whose operands depend on each other: indexing, shape and quantize calls.

An index must lie inside the indexed dim, a gather's index follows its input's rank, a pad cannot
take more than a dim holds: these rules draw the whole call (operands first, as ``operand()`` picks
them: an existing value that fits, or a new leaf of the right shape). The operand helpers here
(``ranked``, ``exact``, ``bias_for``...) serve the compute ops' rules (``compute_calls.py``) and the
chains (``chains.py``) too; ``call.py`` holds the table of every call kind's rule (``CALL_RULES``).

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


def optional_operand(draw, ctx, shape, dtype, domain=C.ANY_VALUE) -> Value | None:
    """Half the time None (what it shrinks to), else an operand of exactly ``shape``."""
    return exact(draw, ctx, shape, dtype, domain) if flag(draw) else None


def bias_for(draw, ctx, out_shape: tuple, dtype) -> Value:
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
    # an edge's split (its pieces what the consumer reads: a cat of them) makes two pieces or more
    # where the dim has room: a one-piece split there is a step the edge did not take
    pieces = ctx.in_edge and n >= 2
    if op is aten.split.Tensor:
        return (x, bound(draw, n, max(1, -(-n // 4)), n - 1 if pieces else n + 1), dim), {}  # past n: one piece
    cuts = sorted(bound(draw, n, 1 if pieces else 0, n - 1 if pieces else n)
                  for _ in range(draw(integers(1 if pieces else 0, 3))))
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


