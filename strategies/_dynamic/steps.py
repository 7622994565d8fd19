"""The rows ``graphs(dynamic=True)`` draws its programs from (``programs.py``): per step kind, how it
runs on tensors (at trace time on SymInt sizes) and how its parameters and its result's symbolic
shape are drawn. Shapes are tuples of sympy expressions over the size symbols; a row raises
``_Skip`` where the drawn operands do not suit it, so a step is only drawn where it holds for
every size.
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy
import torch
from torch.utils._sympy.functions import FloorDiv

from .._draws import choose, flag, index


def _half(s):
    return s // 2


def _ceil_half(s):
    return (s + 1) // 2


# Size arithmetic a step applies to a size it reads: name -> (on SymInts at trace time, on sympy).
ARITH = {
    "id": (lambda s: s, lambda e: e),
    "half": (_half, lambda e: FloorDiv(e, 2)),  # operator.floordiv
    "ceil_half": (_ceil_half, lambda e: FloorDiv(e + 1, 2)),
    "plus1": (lambda s: s + 1, lambda e: e + 1),  # operator.add
    "times2": (lambda s: s * 2, lambda e: 2 * e),  # operator.mul
    "minus1": (lambda s: s - 1, lambda e: e - 1),  # operator.sub
    "max3": (lambda s: torch.sym_max(s, 3), lambda e: sympy.Max(e, 3)),  # torch.sym_max
}
UNARY = ("relu", "neg", "abs", "sin", "tanh", "sigmoid", "exp")
BINARY = ("add", "mul", "sub", "maximum")
REDUCE = ("sum", "mean", "prod")  # amax over a symbolic dim does not trace (zero-size check)


@dataclass(frozen=True)
class Value:
    """A value of the program: its shape over the symbols (sympy) and at the example sizes."""

    shape: tuple
    example: tuple
    dtype: torch.dtype


@dataclass(frozen=True)
class Step:
    """One drawn operation: a ``STEPS`` row name, operand indices into the values, parameters."""

    kind: str
    operands: tuple
    params: tuple

    def run(self, values: list):
        return STEPS[self.kind][0](*(values[i] for i in self.operands), *self.params)


def _sizes(x):
    return [x.size(d) for d in range(x.dim())]


# --- the rows: name -> (run on tensors, draw parameters or raise _Skip) ----------------------------


class _Skip(Exception):
    """The drawn step does not apply to the drawn operands (tried again with other draws)."""


def _run_unary(x, fn):
    return getattr(torch, fn)(x)


def _run_binary(a, b, fn):
    return getattr(torch, fn)(a, b)


def _run_size_scalar(x, d, arith):
    return x * ARITH[arith][0](x.size(d))  # aten.mul.Tensor(x, SymInt)


def _run_flatten(x, start, end):
    sizes = _sizes(x)
    n = sizes[start]
    for k in range(start + 1, end + 1):
        n = n * sizes[k]
    return x.reshape(*sizes[:start], n, *sizes[end + 1:])


def _run_unflatten(x, d, k):
    sizes = _sizes(x)
    return x.reshape(*sizes[:d], sizes[d] // k, k, *sizes[d + 1:])


def _run_expand(x, src, d, sd):
    sizes = [-1] * x.dim()
    sizes[d] = src.size(sd)
    return x.expand(*sizes)


def _run_expand_new(x, src, sd):
    return x.unsqueeze(0).expand(src.size(sd), *([-1] * x.dim()))


def _run_arange(x):
    return x + torch.arange(x.size(-1), dtype=x.dtype, device=x.device)


def _run_full(x, d, arith, fill):
    return torch.full((ARITH[arith][0](x.size(d)),), fill, dtype=x.dtype, device=x.device)


def _run_narrow(x, d, arith, start):
    return x.narrow(d, start, ARITH[arith][0](x.size(d)) - start)


def _run_cat(a, b, d):
    return torch.cat([a, b], d)


def _run_pad(x, left, right):
    return torch.nn.functional.pad(x, (left, right))


def _run_repeat(x, d, k):
    reps = [1] * x.dim()
    reps[d] = k
    return x.repeat(*reps)


def _run_reduce(x, fn, d, keepdim):
    return getattr(torch, fn)(x, d, keepdim=keepdim)


def _run_noop(x, variant, d):
    """What real passes remove as no-ops, with symbolic sizes in the arguments."""
    if variant == "slice_all":
        return x.narrow(d, 0, x.size(d))  # slice(x, d, 0, s): the whole dim
    if variant == "view_same":
        return x.reshape(*_sizes(x))  # view to its own shape
    if variant == "expand_same":
        return x.expand(*_sizes(x))
    if variant == "add0":
        return x + 0
    return x * 1


NOOPS = ("slice_all", "view_same", "expand_same", "add0", "mul1")


def _run_transpose(x, d0, d1):
    return x.transpose(d0, d1)


INT64_MAX = 9223372036854775807  # the end ``x[a:]`` traces to, and what real slices clamp with


def _run_slice_sym(x, d, variant, arith):
    """Slices whose bounds are SymInt expressions as real graphs hold them: a negative start
    (``x[..., -f(s):]``), a negative end (``x[..., :-f(s)]``), an end ``sym_min(s, INT64_MAX)``."""
    aten = torch.ops.aten
    f = ARITH[arith][0](x.size(d))
    if variant == "neg_start":
        return aten.slice.Tensor(x, d, -f, INT64_MAX)
    if variant == "neg_end":
        return aten.slice.Tensor(x, d, 0, -f)
    return aten.slice.Tensor(x, d, 0, torch.sym_min(x.size(d), INT64_MAX))


SLICES = ("neg_start", "neg_end", "min_end")


def _run_slice_scatter(x, d, arith):
    """``slice_scatter`` of the tail of ``x`` along ``d`` from a SymInt start ``f(s)``: the source is
    that tail, negated (``x[..., f(s):]`` written with ``-x[..., :s - f(s)]``)."""
    aten = torch.ops.aten
    s = x.size(d)
    start = ARITH[arith][0](s)
    src = aten.neg.default(aten.slice.Tensor(x, d, 0, s - start))
    return aten.slice_scatter.default(x, src, d, start, s)


def _run_assert(x, d, bound):
    """A runtime assertion on a size (``_assert_scalar``, as export and AOTAutograd insert them),
    then ``x`` itself: what the program goes on with."""
    torch.ops.aten._assert_scalar.default(x.size(d) >= bound, f"x.size({d}) >= {bound}")
    return torch.ops.aten.alias.default(x)


# Each draw function returns (operands, params, result shape) or raises _Skip.
def _draw_unary(draw, ctx, x):
    vals = ctx.vals
    return (x,), (choose(draw, UNARY),), vals[x].shape


def _draw_binary(draw, ctx, x):
    vals = ctx.vals
    partners = [i for i, v in enumerate(vals) if _broadcast(vals[x].shape, v.shape) is not None]
    y = choose(draw, partners)
    return (x, y), (choose(draw, BINARY),), _broadcast(vals[x].shape, vals[y].shape)


def _draw_size_scalar(draw, ctx, x):
    vals = ctx.vals
    v = vals[x]
    d = index(draw, len(v.shape))
    return (x,), (d, choose(draw, ("id", "half", "plus1", "max3"))), v.shape


def _draw_flatten(draw, ctx, x):
    vals = ctx.vals
    v = vals[x]
    if len(v.shape) < 2:
        raise _Skip
    start = index(draw, len(v.shape) - 1)
    end = start + 1 + index(draw, len(v.shape) - start - 1)
    merged = sympy.Mul(*v.shape[start:end + 1])
    return (x,), (start, end), (*v.shape[:start], merged, *v.shape[end + 1:])


def _draw_unflatten(draw, ctx, x):
    vals = ctx.vals
    v = vals[x]
    d = index(draw, len(v.shape))
    k = choose(draw, (2, 3))
    if v.example[d] % k or v.example[d] < k:
        raise _Skip  # the view needs k | size: a guard (Eq(Mod(s, k), 0)) the example must satisfy
    return (x,), (d, k), (*v.shape[:d], FloorDiv(v.shape[d], k), sympy.Integer(k), *v.shape[d + 1:])


def _draw_expand(draw, ctx, x):
    vals = ctx.vals
    v = vals[x]
    ones = [d for d, s in enumerate(v.shape) if s == 1]
    sources = [(i, sd) for i, w in enumerate(vals) for sd, s in enumerate(w.shape) if s.free_symbols]
    if not ones or not sources:
        raise _Skip
    d = choose(draw, ones)
    src, sd = choose(draw, sources)
    shape = list(v.shape)
    shape[d] = vals[src].shape[sd]
    return (x, src), (d, sd), tuple(shape)


def _draw_expand_new(draw, ctx, x):
    vals = ctx.vals
    sources = [(i, sd) for i, w in enumerate(vals) for sd, s in enumerate(w.shape) if s.free_symbols]
    if not sources or len(vals[x].shape) >= 3:
        raise _Skip
    src, sd = choose(draw, sources)
    return (x, src), (sd,), (vals[src].shape[sd], *vals[x].shape)


def _draw_arange(draw, ctx, x):
    vals = ctx.vals
    return (x,), (), vals[x].shape


def _draw_full(draw, ctx, x):
    vals = ctx.vals
    v = vals[x]
    d = index(draw, len(v.shape))
    arith = choose(draw, tuple(ARITH))
    size = ARITH[arith][1](v.shape[d])
    if ctx.ev(size) < 1 or not size.free_symbols:  # a static full is a constant: what folding exists for
        raise _Skip
    return (x,), (d, arith, choose(draw, (0.5, 1.0, -2.0))), (size,)


def _draw_narrow(draw, ctx, x):
    vals = ctx.vals
    v = vals[x]
    d = index(draw, len(v.shape))
    arith, start = choose(draw, (("half", 0), ("ceil_half", 0), ("id", 1), ("minus1", 0)))
    length = ARITH[arith][1](v.shape[d]) - start
    if ctx.ev(length) < 1:
        raise _Skip
    return (x,), (d, arith, start), (*v.shape[:d], length, *v.shape[d + 1:])


def _draw_cat(draw, ctx, x):
    vals = ctx.vals
    v = vals[x]
    d = index(draw, len(v.shape))
    partners = [i for i, w in enumerate(vals) if len(w.shape) == len(v.shape) and w.dtype == v.dtype
                and all(a == b for j, (a, b) in enumerate(zip(v.shape, w.shape)) if j != d)]
    y = choose(draw, partners)
    shape = list(v.shape)
    shape[d] = v.shape[d] + vals[y].shape[d]
    return (x, y), (d,), tuple(shape)


def _draw_pad(draw, ctx, x):
    vals = ctx.vals
    v = vals[x]
    left, right = index(draw, 3), index(draw, 3)
    return (x,), (left, right), (*v.shape[:-1], v.shape[-1] + left + right)


def _draw_repeat(draw, ctx, x):
    vals = ctx.vals
    v = vals[x]
    d, k = index(draw, len(v.shape)), choose(draw, (2, 3))
    shape = list(v.shape)
    shape[d] = k * v.shape[d]
    return (x,), (d, k), tuple(shape)


def _draw_reduce(draw, ctx, x):
    vals = ctx.vals
    v = vals[x]
    d, keepdim = index(draw, len(v.shape)), flag(draw)
    shape = list(v.shape)
    if keepdim:
        shape[d] = sympy.Integer(1)
    else:
        del shape[d]
    return (x,), (choose(draw, REDUCE), d, keepdim), tuple(shape)


def _draw_noop(draw, ctx, x):
    v = ctx.vals[x]
    return (x,), (choose(draw, NOOPS), index(draw, len(v.shape))), v.shape


def _draw_transpose(draw, ctx, x):
    vals = ctx.vals
    v = vals[x]
    if len(v.shape) < 2:
        raise _Skip
    d0 = index(draw, len(v.shape))
    d1 = (d0 + 1 + index(draw, len(v.shape) - 1)) % len(v.shape)
    shape = list(v.shape)
    shape[d0], shape[d1] = shape[d1], shape[d0]
    return (x,), (d0, d1), tuple(shape)


def _symbolic_dim(draw, v) -> int:
    """A dim of ``v`` whose size is an expression of the symbols (``_Skip`` where none is)."""
    symbolic = [d for d, s in enumerate(v.shape) if s.free_symbols]
    if not symbolic:
        raise _Skip
    return choose(draw, symbolic)


def _draw_slice_sym(draw, ctx, x):
    v = ctx.vals[x]
    d = _symbolic_dim(draw, v)
    variant = choose(draw, SLICES)
    arith = choose(draw, ("half", "ceil_half", "minus1"))
    f = ARITH[arith][1](v.shape[d])
    length = {"neg_start": f, "neg_end": v.shape[d] - f, "min_end": v.shape[d]}[variant]
    if ctx.ev(length) < 1 or ctx.ev(f) < 1:  # -0 is 0: the slice would change meaning at that size
        raise _Skip
    return (x,), (d, variant, arith), (*v.shape[:d], length, *v.shape[d + 1:])


def _draw_slice_scatter(draw, ctx, x):
    v = ctx.vals[x]
    d = _symbolic_dim(draw, v)
    arith = choose(draw, ("half", "ceil_half"))
    return (x,), (d, arith), v.shape


def _draw_assert(draw, ctx, x):
    v = ctx.vals[x]
    d = _symbolic_dim(draw, v)
    # a symbol is at least 2 (0 and 1 specialise); an expression of one (s // 2) at least 1
    bound = choose(draw, (1, 2)) if isinstance(v.shape[d], sympy.Symbol) else 1
    return (x,), (d, bound), v.shape


# name -> (run, draw). The first row is what a step shrinks to.
STEPS = {
    "unary": (_run_unary, _draw_unary),
    "binary": (_run_binary, _draw_binary),
    "size_scalar": (_run_size_scalar, _draw_size_scalar),  # a size as a scalar operand
    "flatten": (_run_flatten, _draw_flatten),  # reshape to a product of sizes
    "unflatten": (_run_unflatten, _draw_unflatten),  # reshape by size // k: a divisibility guard
    "expand": (_run_expand, _draw_expand),  # a size-1 dim to another value's size
    "expand_new": (_run_expand_new, _draw_expand_new),  # a new leading dim of another value's size
    "arange": (_run_arange, _draw_arange),  # x + arange(size)
    "full": (_run_full, _draw_full),  # full((f(size),)) with f in ARITH: floordiv, add, mul, sym_max
    "narrow": (_run_narrow, _draw_narrow),  # slice to f(size): floordiv, sub
    "cat": (_run_cat, _draw_cat),  # a size that is a sum
    "pad": (_run_pad, _draw_pad),  # constant_pad_nd: size + k
    "repeat": (_run_repeat, _draw_repeat),  # k * size
    "reduce": (_run_reduce, _draw_reduce),
    "transpose": (_run_transpose, _draw_transpose),
    "noop": (_run_noop, _draw_noop),  # what remove_noop_ops exists for, sizes symbolic
    "slice_sym": (_run_slice_sym, _draw_slice_sym),  # negative SymInt bounds, sym_min(s, INT64_MAX)
    "slice_scatter": (_run_slice_scatter, _draw_slice_scatter),  # a SymInt start
    "assert": (_run_assert, _draw_assert),  # _assert_scalar on a size
    "duplicate": (None, None),  # an earlier step again, same operands (CSE bait): see _step
}
_KINDS = tuple(STEPS)

# The ops each row's trace holds (besides sym_size and SymInt arithmetic): what ``focus`` picks rows by.
_A = torch.ops.aten
STEP_OPS = {
    "unary": {getattr(_A, f).default for f in UNARY},
    "binary": {_A.add.Tensor, _A.mul.Tensor, _A.sub.Tensor, _A.maximum.default},
    "size_scalar": {_A.mul.Tensor, torch.sym_max},
    "flatten": {_A.view.default}, "unflatten": {_A.view.default},
    "expand": {_A.expand.default}, "expand_new": {_A.expand.default, _A.unsqueeze.default},
    "arange": {_A.arange.default, _A.arange.start_step, _A.add.Tensor},
    "full": {_A.full.default, torch.sym_max}, "narrow": {_A.slice.Tensor, _A.narrow.default},
    "cat": {_A.cat.default}, "pad": {_A.constant_pad_nd.default}, "repeat": {_A.repeat.default},
    "reduce": {_A.sum.dim_IntList, _A.mean.dim, _A.prod.dim_int},
    "transpose": {_A.transpose.int},
    "noop": {_A.slice.Tensor, _A.view.default, _A.expand.default, _A.add.Tensor, _A.mul.Tensor},
    "slice_sym": {_A.slice.Tensor, torch.sym_min},
    "slice_scatter": {_A.slice_scatter.default, _A.slice.Tensor, _A.neg.default},
    "assert": {_A._assert_scalar.default, _A.alias.default},
}


def _broadcast(a: tuple, b: tuple):
    """The broadcast of two symbolic shapes, or None where it does not hold at every size."""
    out = []
    for i in range(1, max(len(a), len(b)) + 1):
        x = a[-i] if i <= len(a) else sympy.Integer(1)
        y = b[-i] if i <= len(b) else sympy.Integer(1)
        if x == y or y == 1:
            out.append(x)
        elif x == 1:
            out.append(y)
        else:
            return None
    return tuple(reversed(out))
