"""Drawing rules: one function per non-operand argument kind of the op catalog (``SHAPE_RULES``).

A shape, a dim, a slice, a permutation: each is drawn from the first operand's tensor, so it is
valid for it, and shrinks towards the simplest form (no reshape move, the first dim). ``rule_cat``
draws ``cat``'s tensor list, the one kind whose operands are a list.
"""


from __future__ import annotations

import functools
import operator
import sys

import torch
from hypothesis import strategies as st

from .._build.builder import StepRejected
from .._catalog import vocabulary as C
from .._draws import bound, choose, flag, integers
from .operands import operand


def _dim(draw, rank, *, extra=0):
    """A dim index valid for ``rank + extra`` positions, negative about a third of the time."""
    n = max(rank + extra, 1)
    d = draw(integers(0, n - 1))
    return d - n if draw(integers(0, 2)) == 2 else d


_RESHAPE_MOVES = ("same", "flatten", "merge", "split", "unsqueeze", "squeeze")


def rule_shape(draw, t):
    shape = list(t.shape)
    move = choose(draw, _RESHAPE_MOVES)
    if move == "flatten":
        shape = [t.numel()]
    elif move == "merge" and len(shape) >= 2:
        i = draw(integers(0, len(shape) - 2))
        shape[i:i + 2] = [shape[i] * shape[i + 1]]
    elif move == "split" and shape:
        i = draw(integers(0, len(shape) - 1))
        divisors = [d for d in range(1, shape[i] + 1) if shape[i] % d == 0] or [1]
        d = choose(draw, divisors)
        shape[i:i + 1] = [d, shape[i] // d] if shape[i] else [0, 1]
    elif move == "unsqueeze":
        shape.insert(draw(integers(0, len(shape))), 1)
    elif move == "squeeze" and 1 in shape:
        shape.remove(1)
    if shape and t.numel() and flag(draw):
        shape[draw(integers(0, len(shape) - 1))] = -1
    return [shape]


def rule_expand_shape(draw, t):
    shape = [n if n != 1 or flag(draw) else draw(integers(1, 3)) for n in t.shape]
    shape = [-1 if draw(integers(0, 3)) == 0 else n for n in shape]
    lead = [draw(integers(1, 3)) for _ in range(draw(integers(0, 2)))]
    return [lead + shape]


def rule_slice(draw, t):
    rank = t.dim()
    if rank == 0:
        raise StepRejected("slice needs a dimension")
    dim = _dim(draw, rank)
    n = t.shape[dim]
    start = bound(draw, n, -n - 1, n + 1)
    end = sys.maxsize if draw(integers(0, 3)) == 3 else bound(draw, n, -n - 1, n + 2)  # traced graphs say INT64_MAX
    step = draw(integers(1, 3))
    return [dim, start, end, step]


def rule_select(draw, t):
    dims = [d for d, n in enumerate(t.shape) if n > 0]
    if not dims:
        raise StepRejected("select needs a non-empty dimension")
    dim = choose(draw, dims)
    n = t.shape[dim]
    index = bound(draw, n, -n, n - 1)
    return [dim - t.dim() if flag(draw) else dim, index]


def rule_flatten(draw, t):
    rank = max(t.dim(), 1)
    start = draw(integers(0, rank - 1))
    end = draw(integers(start, rank - 1))
    return [start, end - rank if flag(draw) else end]


def rule_strided(draw, t):
    # Only over a tensor that owns its storage densely: then the result depends on values alone.
    if not t.is_contiguous() or t.storage_offset() != 0 or t.untyped_storage().nbytes() != t.numel() * t.element_size():
        raise StepRejected("as_strided is only drawn over densely owned storage")
    n = t.numel()
    size = [draw(integers(0, 4)) for _ in range(draw(integers(0, 3)))]
    stride = [draw(integers(0, 4)) for _ in size]
    extent = 1 + sum((s - 1) * st_ for s, st_ in zip(size, stride)) if all(size) else 0
    if extent > n:
        raise StepRejected("as_strided extent exceeds the storage")
    offset = draw(integers(0, max(n - extent, 0))) if n else 0
    return [size, stride, offset]


def rule_diagonal(draw, t):
    if t.dim() < 2:
        raise StepRejected("diagonal needs two dimensions")
    d1 = _dim(draw, t.dim())
    d2 = _dim(draw, t.dim())
    if d1 % t.dim() == d2 % t.dim():
        raise StepRejected("diagonal needs two different dimensions")
    return [draw(integers(-2, 2)), d1, d2]


def rule_unfold(draw, t):
    dim = _dim(draw, t.dim())
    n = t.shape[dim] if t.dim() else 1
    return [dim, bound(draw, n, 1, max(n, 1)), draw(integers(1, 3))]


def rule_dims(draw, t):
    rank = t.dim()
    if rank == 0:
        return [choose(draw, ([0], [-1], []))]
    picked = [d for d in range(rank) if flag(draw)]
    return [[d - rank if flag(draw) else d for d in picked]]  # [] reduces every dim


@functools.lru_cache(maxsize=16)
def _permutations(rank):
    return st.permutations(range(rank))


def rule_perm(draw, t):
    return [list(draw(_permutations(t.dim())))]


def rule_squeezable_dim(draw, t):
    ones = [d for d, n in enumerate(t.shape) if n == 1]
    if ones and flag(draw) is False:
        return [choose(draw, ones)]
    return [_dim(draw, t.dim())]


SHAPE_RULES = {
    C.SHAPE: rule_shape,
    C.EXPAND_SHAPE: rule_expand_shape,
    C.PERM: rule_perm,
    C.SLICE: rule_slice,
    C.SELECT: rule_select,
    C.FLATTEN: rule_flatten,
    C.STRIDED: rule_strided,
    C.DIAGONAL: rule_diagonal,
    C.UNFOLD: rule_unfold,
    C.DIMS: rule_dims,
    C.SQUEEZABLE_DIM: rule_squeezable_dim,
    C.DIM: lambda draw, t: [_dim(draw, t.dim())],
    C.DIM_INSERT: lambda draw, t: [_dim(draw, t.dim(), extra=1)],
    C.KEEPDIM: lambda draw, t: [flag(draw)],
}


def rule_view_dtype(draw, t, complex_ok: bool = False):
    """Another dtype of the catalog for ``t``'s bits: one of its element size half the time, else
    one of another size where eager allows it (the last dim contiguous; to a wider dtype its size,
    the other strides and the offset divisible by the ratio): the last dim then grows or shrinks by
    the ratio, what a pass that takes ``view.dtype`` for a shape-keeping view gets wrong.
    ``complex_ok``: a complex dtype may be the target (where complex leaves are drawn: focused graphs)."""
    size = t.dtype.itemsize
    kept = [d for d in C.ALL_DTYPES if complex_ok or not d.is_complex]
    same = [d for d in kept if d is not t.dtype and d.itemsize == size]
    other = [d for d in kept if d.itemsize != size and d is not torch.bool and _bits_fit(t, d.itemsize)]
    if other and (not same or flag(draw)):
        return [choose(draw, other)]
    if not same:
        raise StepRejected(f"no other dtype of {t.dtype}'s size in the catalog")
    return [choose(draw, same)]


def _bits_fit(t, itemsize: int) -> bool:
    """Whether eager views ``t`` as a dtype of ``itemsize`` bytes (``Tensor.view(dtype)``'s rules), and
    FakeTensorProp does too: an empty tensor is never viewed as a wider dtype, since its strides are
    not one thing (eager views an empty ``[0, 0]`` with strides ``(2, 1)`` where the fake ``view`` gives
    ``(1, 1)``, and widening then needs ``stride(0)`` even: a correct pass's meta refresh raised)."""
    if t.dim() == 0 or t.stride(-1) != 1 or t.dtype is torch.bool:
        return False
    if itemsize < t.dtype.itemsize:
        return True
    if t.numel() == 0:
        return False
    ratio = itemsize // t.dtype.itemsize
    return (t.shape[-1] % ratio == 0 and t.storage_offset() % ratio == 0
            and all(s % ratio == 0 for s in t.stride()[:-1]))


SHAPE_RULES[C.VIEW_DTYPE] = rule_view_dtype


# The argument kinds whose integers index a dim or bound one (what a matcher compares with its own
# numbers: ``dim == 0``, ``start == 0``, ``step == 1``), with the positions in each rule's list that are
# dims (the rest bound a dim) and, for a slice, the step's.
INDEX_KINDS = {C.DIM: (0,), C.DIM_INSERT: (0,), C.SQUEEZABLE_DIM: (0,), C.SLICE: (0,), C.SELECT: (0,),
                C.FLATTEN: (0, 1), C.UNFOLD: (0,), C.DIAGONAL: (1, 2)}


def own_indices(draw, ctx, kind, drawn: list, t) -> list:
    """In a focus step, each integer of an index argument's rule (``slice``'s dim, start, end and step)
    is one of the pass's own numbers a third of the time, where one fits there: a dim of the operand's
    rank, a step of 1-3, a bound of the dim (the rest as drawn: the relation holding and just
    missing both come up)."""
    rank = max(t.dim(), 1)
    dims = INDEX_KINDS[kind]
    out = list(drawn)
    for i, v in enumerate(out):
        if not isinstance(v, int) or isinstance(v, bool) or draw(integers(0, 2)) != 0:
            continue
        if i in dims:
            limit = rank + (1 if kind == C.DIM_INSERT else 0)
            fits = [int(c) for c in ctx.pass_scalars if float(c).is_integer() and -limit <= c < limit]
        elif kind == C.SLICE and i == 3:
            fits = [int(c) for c in ctx.pass_scalars if float(c).is_integer() and 1 <= c <= 3]
        else:
            fits = [int(c) for c in ctx.pass_scalars if float(c).is_integer() and abs(c) <= 64]
        if fits:
            out[i] = choose(draw, fits)
    return out


def whole_or_nearly(draw, drawn: list, t) -> list:
    """In a focus step, a slice ``[dim, start, end, step]`` spans its dim a sixth of the time (from 0 by
    1 to its size, past it or INT64_MAX: what no-op slice eliminations drop) and just misses it a
    sixth (ending one short, starting at 1, or by 2: where their off-by-one bugs live); else as drawn."""
    i = draw(integers(0, 5))
    if i >= 2 or t.dim() == 0:
        return drawn
    dim = drawn[0]
    n = t.shape[dim]
    end = choose(draw, [n, n + 1, sys.maxsize])
    if i == 0:
        return [dim, 0, end, 1]
    return choose(draw, [[dim, 0, n - 1, 1], [dim, 1, end, 1], [dim, 0, end, 2]])


def rule_cat(draw, ctx, spec):
    first = operand(draw, ctx, dtypes_ok=spec.dtypes)
    t = first.tensor
    if t.dim() == 0:
        raise StepRejected("cat needs at least one dimension")
    dim = _dim(draw, t.dim())
    if ctx.focus_step and ctx.pass_scalars:
        dim = own_indices(draw, ctx, C.DIM, [dim], t)[0]
    d = dim % t.dim()

    def same_but_dim(v):
        s = v.tensor.shape
        return v.tensor.dim() == t.dim() and all(a == b for i, (a, b) in enumerate(zip(s, t.shape)) if i != d)

    siblings = _siblings(ctx, first)
    if ctx.focus_step and len(siblings) > 1 and (ctx.in_edge or draw(integers(0, 3)) != 0):
        # every result of one split (chunk, unbind) in order, three times in four (always for an edge's
        # consumer, whose producer is the split): what split-cat eliminations match
        return (siblings, dim), {}
    others = []
    for _ in range(draw(integers(0, 2))):
        candidates = [v for v in ctx.builder.values if same_but_dim(v) and v.tensor.dtype in spec.dtypes]
        others.append(choose(draw, candidates))
    return ([first, *others], dim), {}


def _siblings(ctx, first) -> list:
    """Where ``first`` is a getitem of a multi-result call, the getitems of that call in index order
    (each result once), else []."""
    node = first.node
    if node.op != "call_function" or node.target is not operator.getitem:
        return []
    source = node.args[0]
    items = {v.node.args[1]: v for v in ctx.builder.values
             if v.node.op == "call_function" and v.node.target is operator.getitem and v.node.args[0] is source}
    return [items[i] for i in sorted(items)] if sorted(items) == list(range(len(items))) else []
