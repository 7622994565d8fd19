"""An edge drawn at the argument it feeds: ``bmm(a, transpose(b, 1, 2))``, not only ``bmm(transpose(b), a)``.

A matcher reads ``node.args[1].target is aten.transpose.int`` and the dims the transpose swaps; drawn
producer -> consumer pairs that always fed the consumer's first operand never made it act (issue
56). An edge ``(producer, consumer, name)`` names the consumer's argument (its schema name: ``mat2``,
``self``, ``tensors``, a user op's ``input``), and is drawn *consumer first*: the consumer's call
is drawn by its own rule (so its operands agree: a matmul's inner dims, a norm's weight), then the
value at ``name`` is replaced by a producer call whose result has its shape and dtype:

- views and layout ops are built backwards from that shape (``INVERSES``): a transpose of the
  swapped shape, a permute of the inverse permutation, a view of a flatter or finer shape, an
  expand of ones, a slice of a longer dim, a cat of pieces along a dim, unsqueeze/squeeze/select
  of one dim more or less. Their dims are the pass's own numbers half the time where they are
  dims of that rank (a matcher checking ``transpose(b, 1, 2)`` names 1 and 2), else drawn: the
  relation holding, and missed by a dim;
- any other producer (pointwise, casts, a user's op) is drawn on the replaced value itself as
  its first operand, and the builder keeps the consumer's call only where it runs on the result.

The consumer's integer arguments are then related to the producer's (``relate``): one it shares
by name (``dim``) equal a third of the time and one off a sixth, and a slice's ``start``/``end``
(or a select's ``index``) at a boundary of a cat's pieces the same way (``slice(cat([a, b], d), d,
0, len(a))``: Inductor's and vLLM's slice-of-cat rewrites check exactly that).
"""

from __future__ import annotations

import math
import sys

import torch

from .._build.builder import Fresh, StepRejected, Value
from .._catalog import vocabulary as C
from .._draws import choose, flag, integers
from .call import call_args
from .operands import DrawContext, operand

aten = torch.ops.aten


def tensor_arguments(spec) -> tuple:
    """The names of ``spec``'s tensor arguments (``Tensor``, ``Tensor?``, ``Tensor[]``), in schema order."""
    return tuple(a.name for a in spec.overload._schema.arguments
                 if str(a.type).startswith(("Tensor", "Optional[Tensor]", "List[Tensor]")))


def first_tensor_argument(spec) -> str | None:
    names = tensor_arguments(spec)
    return names[0] if names else None


def find_slot(spec, args: tuple, kwargs: dict, name: str):
    """Where argument ``name`` sits in a drawn call: ``("args", i)`` or ``("kwargs", name)``, or None
    where the call leaves it out (an optional argument at its default)."""
    names = [a.name for a in spec.overload._schema.arguments]
    if name in kwargs:
        return "kwargs", name
    if name in names and names.index(name) < len(args):
        return "args", names.index(name)
    return None


def edge_at(draw, ctx: DrawContext, producer, consumer, name: str, keep) -> Value | None:
    """One call of ``consumer`` whose argument ``name`` is a call of ``producer`` (StepRejected where
    the two cannot be drawn so). Returns the consumer's value."""
    b = ctx.builder
    args, kwargs = call_args(draw, ctx, consumer)
    slot = find_slot(consumer, args, kwargs, name)
    if slot is None:
        raise StepRejected(f"{consumer.name} left {name} out")
    args, where = list(args), slot[1]
    holder = args if slot[0] == "args" else kwargs
    current = holder[where]
    index = None
    if isinstance(current, (list, tuple)):  # a list of tensors (cat's): one of them
        if not current:
            raise StepRejected(f"{consumer.name}'s {name} is empty")
        index = draw(integers(0, len(current) - 1))
        current = current[index]
    source = current.source if isinstance(current, Fresh) else current  # a user op's written buffer: its clone's source
    if not isinstance(source, Value):
        raise StepRejected(f"{consumer.name}'s {name} is no drawn value")
    made, p_args, p_kwargs = _producer_for(draw, ctx, producer, source)
    if isinstance(current, Fresh):
        made_for = Fresh(tuple(made.tensor.shape), made.tensor.dtype, source=made)
    else:
        made_for = made
    if index is None:
        holder[where] = made_for
    else:
        items = list(holder[where])
        items[index] = made_for
        holder[where] = items
    args, kwargs = relate(draw, consumer, tuple(args), kwargs, (producer, p_args, p_kwargs))
    if b.n_calls >= ctx.max_nodes:
        raise StepRejected("no room for the consumer")
    return b.call(consumer, consumer.overload, args, kwargs, keep=keep)


def _producer_for(draw, ctx: DrawContext, producer, value: Value) -> tuple:
    """``(result, args, kwargs)``: a call of ``producer`` whose result stands where ``value`` was."""
    b = ctx.builder
    inverse = INVERSES.get(producer.overload)
    shape, dtype = tuple(value.tensor.shape), value.tensor.dtype
    if inverse is not None:
        if dtype not in producer.dtypes:
            raise StepRejected(f"{producer.name} does not take {dtype}")
        drawn = inverse(draw, ctx, shape, dtype)
        if drawn is None:
            raise StepRejected(f"{producer.name} cannot make a {list(shape)} result")
        args, kwargs = drawn
    else:  # on the value itself: what it computes from it stands for it
        ctx.prefer, chained = value, ctx.chained
        ctx.chained = True
        try:
            args, kwargs = call_args(draw, ctx, producer)
        finally:
            ctx.chained = chained
    result = b.call(producer, producer.overload, args, kwargs)
    if result is None:
        raise StepRejected(f"{producer.name} made nothing to read")
    return result, args, kwargs


def relate(draw, consumer, args: tuple, kwargs: dict, producer_call) -> tuple:
    """``(args, kwargs)`` of ``consumer`` related to the producer's call: each integer argument the
    producer also has by name (``dim``, ``dim0``, ``start``) is the producer's value a third of the
    time and one off it a sixth (a matcher's ``dim == cdim``, holding and just failing); a ``dtype``
    is the producer's operand's half the time (a round trip of casts); after a cat, a
    ``start``, ``end`` or ``index`` is one of the offsets of its pieces along its dim a third of the
    time and one off one a sixth."""
    spec, p_args, p_kwargs = producer_call
    names = [a.name for a in spec.overload._schema.arguments]
    theirs = {**dict(zip(names, p_args)), **p_kwargs}
    bounds = _cat_bounds(spec, theirs)
    first = next((a for a in _flat(p_args) if isinstance(a, Value)), None)
    out, kw = list(args), dict(kwargs)
    for i, a in enumerate(consumer.overload._schema.arguments):
        here = out if i < len(out) else kw if a.name in kw else None
        if here is None:
            continue
        key = i if here is out else a.name
        if a.name == "dtype" and first is not None and isinstance(here[key], torch.dtype):
            if flag(draw):
                here[key] = first.tensor.dtype
            continue
        value = theirs.get(a.name)
        if bounds and a.name in ("start", "end", "index"):
            continue  # below, together
        if not _is_int(here[key]) or not _is_int(value):
            continue
        u = draw(integers(0, 5))
        if u < 2:
            here[key] = value
        elif u == 2:
            here[key] = value + (1 if flag(draw) else -1)
    if len(bounds) > 1:
        _piece_bounds(draw, consumer, out, kw, bounds, theirs.get("dim", 0), first.tensor.dim())
    if first is not None and draw(integers(0, 2)) == 0:
        diamond(draw, consumer, out, first, producer_call)
    return tuple(out), kw


def diamond(draw, consumer, out: list, first: Value, producer_call) -> None:
    """A diamond: another tensor operand of the consumer is the producer's own first operand
    (``mul(x, sigmoid(x))``, ``add(x, mm(x, w))``), where it fits there without changing the
    call's shape: what a pattern that ties two of its operands together matches, and a matcher that
    forgets to check the tie rewrites anywhere."""
    kinds = consumer.args
    slots = [i for i, a in enumerate(out) if i < len(kinds) and (
        (isinstance(a, Value) and (a.call is None or a.call[0] is not producer_call[0]) and a is not first
         and kinds[i] in (C.TENSOR, C.TENSOR_OR_SCALAR))
        or (kinds[i] == C.TENSOR_OR_SCALAR and type(a) in (int, float, bool)))]  # a number where a tensor may go
    if not slots or first.tensor.dtype not in consumer.dtypes or consumer.category == C.INPLACE:
        return
    i = choose(draw, slots)
    shapes = [tuple(a.tensor.shape) for a in out if isinstance(a, Value)]
    tied = [tuple(first.tensor.shape) if j == i else tuple(a.tensor.shape) for j, a in enumerate(out) if isinstance(a, Value)]
    try:
        if torch.broadcast_shapes(*tied) != torch.broadcast_shapes(*shapes):
            return
    except RuntimeError:
        return
    out[i] = first


def _piece_bounds(draw, consumer, out: list, kw: dict, bounds: tuple, cdim, rank: int) -> None:
    """A consumer's ``start`` and ``end`` (or ``index``) at one piece of a cat, a ``step`` of 1: all half
    the time (``slice(cat([a, b]), 0, len(a), len(a) + len(b))``), one of the bounds one off a sixth;
    with them, its ``dim`` the cat's ``cdim`` half the time and the next dim of the ``rank``
    a quarter (else as drawn), so the bounds and the dim agree as often as a slice-of-cat rewrite
    needs, and the bounds fit the cat's pieces on another dim as often as its bug does."""
    def slot(name):  # (the list or dict that holds it, its key), as find_slot finds it
        found = find_slot(consumer, out, kw, name)
        return None if found is None else (out if found[0] == "args" else kw, found[1])

    u = draw(integers(0, 5))
    if u > 3:
        return
    i = draw(integers(0, len(bounds) - 2))
    at = {"start": bounds[i], "end": bounds[i + 1], "index": bounds[i]}
    if u == 3:  # the relation just missed: one of them one off
        which = choose(draw, [n for n in at if slot(n) is not None] or ["start"])
        at[which] += 1 if flag(draw) else -1
    at["step"] = 1
    v = draw(integers(0, 3))
    if _is_int(cdim) and v < 3 and rank > 0:
        at["dim"] = cdim if v < 2 or rank == 1 else (cdim % rank + 1) % rank
    for name, value in at.items():
        place = slot(name)
        if place is not None and _is_int(place[0][place[1]]):
            place[0][place[1]] = value


def _cat_bounds(spec, theirs: dict) -> tuple:
    """The offsets of a cat's pieces along its dim (0, the end of each piece), or () for another op."""
    tensors = theirs.get("tensors")
    if spec.overload is not aten.cat.default or not isinstance(tensors, (list, tuple)) or not tensors:
        return ()
    first = tensors[0].tensor
    if first.dim() == 0:
        return ()
    d = theirs.get("dim", 0) % first.dim()
    offsets = [0]
    for t in tensors:
        if t.tensor.dim() != first.dim():
            return ()
        offsets.append(offsets[-1] + t.tensor.shape[d])
    return tuple(dict.fromkeys(offsets))


def _flat(items) -> list:
    out = []
    for item in items:
        out.extend(_flat(item) if isinstance(item, (list, tuple)) else [item])
    return out


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


# --- producers built backwards from the shape they must make ------------------------------------------


def _source(draw, ctx: DrawContext, shape: tuple, dtype) -> Value:
    """An operand of exactly ``shape`` and ``dtype``: an existing value or a new leaf."""
    shape = tuple(shape)
    if math.prod(shape) > ctx.max_numel:
        raise StepRejected("source too large")
    return operand(draw, ctx, dtypes_ok={dtype}, chain=False, shape_fits=lambda s: s == shape,
                   make_shape=lambda d: shape)


def _own_ints(ctx: DrawContext) -> list:
    """The pass's numbers of integral value, as ints, in their order."""
    return [int(v) for v in ctx.pass_scalars if _is_int(v) or (isinstance(v, float) and v.is_integer())]


def _own_dims(ctx: DrawContext, rank: int) -> list:
    """The pass's numbers that are dims of a tensor of ``rank`` (in their order, once each by the dim
    they name)."""
    dims = []
    for d in _own_ints(ctx):
        if -rank <= d < rank and d % rank not in [x % rank for x in dims]:
            dims.append(d)
    return dims


def _dim(draw, ctx: DrawContext, rank: int, taken=()) -> int:
    """A dim of ``rank`` not in ``taken``: one of the pass's own half the time where it has one,
    else drawn (negative a third of the time)."""
    own = [d for d in _own_dims(ctx, rank) if d % rank not in [t % rank for t in taken]]
    if own and flag(draw):
        return choose(draw, own)
    free = [d for d in range(rank) if d not in [t % rank for t in taken]]
    if not free:
        raise StepRejected("no dim left")
    d = choose(draw, free)
    return d - rank if draw(integers(0, 2)) == 2 else d


def _own_pairs(ctx: DrawContext, rank: int) -> list:
    """Two of the pass's numbers it names one after the other that are two dims of ``rank`` (a matcher
    checking ``transpose(b, 1, 2)`` names 1, 2), in that order."""
    own = _own_ints(ctx)
    return [(a, b) for a, b in zip(own, own[1:]) if -rank <= a < rank and -rank <= b < rank and a % rank != b % rank]


def _transpose(draw, ctx, shape, dtype):
    rank = len(shape)
    if rank < 2:
        return None
    pairs = _own_pairs(ctx, rank)
    if pairs and draw(integers(0, 2)) == 0:  # the two dims the pass names together, a third of the time
        d0, d1 = choose(draw, pairs)
    else:
        d0 = _dim(draw, ctx, rank)
        d1 = _dim(draw, ctx, rank, taken=(d0,))
    src = list(shape)
    src[d0 % rank], src[d1 % rank] = shape[d1 % rank], shape[d0 % rank]
    return (_source(draw, ctx, src, dtype), d0, d1), {}


def _t(draw, ctx, shape, dtype):
    if len(shape) > 2:
        return None
    return (_source(draw, ctx, tuple(reversed(shape)), dtype),), {}


def _permute(draw, ctx, shape, dtype):
    rank = len(shape)
    order = list(range(rank))
    for i in range(rank - 1, 0, -1):  # a drawn permutation (Fisher-Yates), shrinking to the identity
        j = draw(integers(0, i))
        order[i], order[j] = order[j], order[i]
    src = [0] * rank
    for i, p in enumerate(order):  # result.shape[i] == src[order[i]]
        src[p] = shape[i]
    return (_source(draw, ctx, src, dtype), order), {}


def _reshape_source(draw, shape) -> list:
    """A shape of the same number of elements: flattened, two dims merged, one split, a 1 added."""
    n = math.prod(shape)
    move = draw(integers(0, 3))
    src = list(shape)
    if move == 0 or not src:
        src = [n] if src or flag(draw) else [1]
    elif move == 1 and len(src) >= 2:
        i = draw(integers(0, len(src) - 2))
        src[i:i + 2] = [src[i] * src[i + 1]]
    elif move == 2:
        i = draw(integers(0, len(src) - 1))
        divisors = [d for d in range(1, src[i] + 1) if src[i] % d == 0] or [1]
        d = choose(draw, divisors)
        src[i:i + 1] = [d, src[i] // d] if src[i] else [0, 1]
    else:
        src.insert(draw(integers(0, len(src))), 1)
    return src


def _view(draw, ctx, shape, dtype):
    size = list(shape)
    if size and math.prod(shape) and draw(integers(0, 3)) == 0:
        size[draw(integers(0, len(size) - 1))] = -1
    return (_source(draw, ctx, _reshape_source(draw, shape), dtype), size), {}


def _expand(draw, ctx, shape, dtype):
    lead = draw(integers(0, min(len(shape), 1)))
    src = [1 if flag(draw) else n for n in shape[lead:]]
    size = [-1 if i >= lead and src[i - lead] == n and draw(integers(0, 3)) == 0 else n for i, n in enumerate(shape)]
    return (_source(draw, ctx, src, dtype), size), {}


def _along(draw, ctx, shape):
    """``(rank, d, n)``: a dim ``d`` of ``shape`` to build along (the pass's own half the time) and its
    size; None for a 0-d shape."""
    rank = len(shape)
    if rank == 0:
        return None
    d = _dim(draw, ctx, rank)
    return rank, d, shape[d % rank]


def _slice(draw, ctx, shape, dtype):
    along = _along(draw, ctx, shape)
    if along is None:
        return None
    rank, d, n = along
    step = 1 if draw(integers(0, 2)) else 2
    start = draw(integers(0, 2))
    length = start + (n * step - (step - 1) if n else 0) + draw(integers(0, 2))
    end = start + (n * step - (step - 1) if n else 0)
    src = list(shape)
    src[d % rank] = length
    if end == length and flag(draw):
        end = sys.maxsize  # as traced graphs write a slice to the end
    return (_source(draw, ctx, src, dtype), d, start, end) + ((step,) if step != 1 or flag(draw) else ()), {}


def _cat(draw, ctx, shape, dtype):
    along = _along(draw, ctx, shape)
    if along is None:
        return None
    rank, d, n = along
    pieces = draw(integers(2, 3))
    cuts = sorted(draw(integers(0, n)) for _ in range(pieces - 1))
    sizes = [b - a for a, b in zip([0, *cuts], [*cuts, n])]
    tensors = []
    for size in sizes:
        src = list(shape)
        src[d % rank] = size
        tensors.append(_source(draw, ctx, src, dtype))
    return ((tensors, d) if d != 0 or flag(draw) else (tensors,)), {}


def _unsqueeze(draw, ctx, shape, dtype):
    ones = [i for i, n in enumerate(shape) if n == 1]
    if not ones:
        return None
    d = choose(draw, ones)
    src = list(shape[:d]) + list(shape[d + 1:])
    return (_source(draw, ctx, src, dtype), d - len(shape) if draw(integers(0, 2)) == 2 else d), {}


def _squeeze(draw, ctx, shape, dtype):
    d = draw(integers(0, len(shape)))
    src = list(shape[:d]) + [1] + list(shape[d:])
    return (_source(draw, ctx, src, dtype), d - len(src) if draw(integers(0, 2)) == 2 else d), {}


def _select(draw, ctx, shape, dtype):
    d = draw(integers(0, len(shape)))
    n = draw(integers(1, 4))
    src = list(shape[:d]) + [n] + list(shape[d:])
    index = draw(integers(-n, n - 1))
    return (_source(draw, ctx, src, dtype), d, index), {}


INVERSES = {
    aten.transpose.int: _transpose,
    aten.t.default: _t,
    aten.permute.default: _permute,
    aten.view.default: _view,
    aten.reshape.default: _view,
    aten._unsafe_view.default: _view,
    aten.expand.default: _expand,
    aten.slice.Tensor: _slice,
    aten.cat.default: _cat,
    aten.unsqueeze.default: _unsqueeze,
    aten.squeeze.dim: _squeeze,
    aten.select.int: _select,
}

__all__ = ["INVERSES", "edge_at", "find_slot", "first_tensor_argument", "relate", "tensor_arguments"]
