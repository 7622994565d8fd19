"""``graphs(dynamic=True)``: graphs over symbolic sizes, as ``make_fx(tracing_mode="symbolic")`` makes them.

Re-tracing static graphs symbolically gives no SymInt arithmetic: their shape arguments are
literals, which specialise (torch-facts section 12). So here the *program* is drawn with its shape
arguments computed from its inputs' sizes (``x.size(0) * x.size(1)``, ``x.size(d) // 2``,
``sym_max``), and torch's tracer turns it into what real dynamic graphs hold: placeholders whose
``meta['val']`` has SymInt sizes of one ``ShapeEnv``, ``sym_size.int`` nodes, ``operator`` and
``sym_max`` arithmetic feeding ``view``/``expand``/``full``/``arange``/``slice``, and guards.

How it draws (and shrinks): first the symbols (1-3, distinct example sizes 2-7, shrinking towards
small ones), then the inputs (each dim a symbol, some inputs sharing one, or a static 1 where
broadcasting needs it), then a list of steps, each drawn as its own unit after a "one more?" flag.
A step is a row of ``STEPS`` applied to values built so far (earliest first); its shape arguments
are expressions of those values' sizes. Shapes are tracked as sympy expressions of the symbols,
so a step is only drawn where it holds for every size (a broadcast between two symbols never is).
Shrinking deletes steps, moves operands towards the first input and rows towards the first row.
"""

from __future__ import annotations

import operator
import threading
from dataclasses import dataclass

import sympy
import torch
from hypothesis import reject
from hypothesis import strategies as st
from torch.utils._sympy.functions import FloorDiv

from ._draws import choose, flag, index, integers
from ._errors import InvalidArgument
from ._symshapes import graph_symbolic_shapes, size_symbol

MAX_NUMEL = 4096  # at the example sizes; other sizes the harness picks stay near them
FLOATS = (torch.float32, torch.float32, torch.float32, torch.float64, torch.float16, torch.bfloat16)


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
    if ctx.ev(size) < 1:
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
    "duplicate": (None, None),  # an earlier step again, same operands (CSE bait): see _step
}
_KINDS = tuple(STEPS)


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


class _Ctx:
    """The program being drawn: its values, steps and the example sizes of its symbols."""

    def __init__(self, env: dict, max_steps: int):
        self.env, self.max_steps = env, max_steps
        self.vals, self.steps = [], []

    def ev(self, expr) -> int:
        return int(sympy.sympify(expr).xreplace(self.env))

    def add(self, shape: tuple, dtype) -> Value:
        v = Value(tuple(sympy.sympify(s) for s in shape), tuple(self.ev(s) for s in shape), dtype)
        self.vals.append(v)
        return v


@st.composite
def _step(draw) -> None:
    ctx = _CURRENT.ctx
    kind = _KINDS[index(draw, len(_KINDS))]
    ranked = [i for i, v in enumerate(ctx.vals) if v.shape]  # 0-d results (full reductions) are left alone
    if not ranked:
        return
    if kind == "duplicate":  # values are the inputs, then one per step
        if ctx.steps:
            i = index(draw, len(ctx.steps))
            result = ctx.vals[len(ctx.vals) - len(ctx.steps) + i]
            ctx.steps.append(ctx.steps[i])
            ctx.vals.append(result)
        return
    x = choose(draw, ranked)
    try:
        operands, params, shape = STEPS[kind][1](draw, ctx, x)
    except _Skip:
        return
    example = [ctx.ev(s) for s in shape]
    if any(n < 0 for n in example) or _numel(example) > MAX_NUMEL:
        return
    ctx.steps.append(Step(kind, operands, params))
    ctx.add(shape, ctx.vals[x].dtype)


_STEP = _step()  # one strategy for every step (see _graphs._STEP); the program being drawn is in _CURRENT


class _Local(threading.local):
    ctx = None


_CURRENT = _Local()


def _numel(shape) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def _program(steps: tuple, outs: tuple, size_out):
    def program(*xs):
        vals = list(xs)
        for step in steps:
            vals.append(step.run(vals))
        results = [vals[i] for i in outs]
        if size_out is not None:
            i, d, arith = size_out
            results.append(ARITH[arith][0](vals[i].size(d)))
        return tuple(results)
    return program


@st.composite
def dynamic_graph_cases(draw, *, dtypes, min_nodes: int, max_nodes: int, min_inputs: int, max_inputs: int):
    """A ``GraphCase`` traced by ``make_fx(tracing_mode="symbolic")``, ``case.symbolic`` its sizes."""
    from torch.fx.experimental.proxy_tensor import make_fx

    from ._graphs import GraphCase
    from ._tensors import Layout, tensor_with_layout

    examples = []
    for _ in range(draw(integers(1, 3))):
        size = draw(integers(2, 7))
        while size in examples:  # distinct, so the tracer's duck sizing keeps the symbols apart
            size += 1
        examples.append(size)
    symbols = [size_symbol(f"s{i}") for i in range(len(examples))]
    ctx = _Ctx({s: sympy.Integer(n) for s, n in zip(symbols, examples)}, max_nodes)
    dtype = draw(dtypes)
    if not dtype.is_floating_point:
        raise InvalidArgument(f"dtypes drew {dtype}, but dynamic=True draws floating graphs only")
    recipes = []
    for _ in range(draw(integers(min_inputs, max_inputs))):
        shape = tuple(symbols[k] if k < len(symbols) else sympy.Integer(1)
                      for k in (index(draw, len(symbols) + 1) for _ in range(draw(integers(1, 3)))))
        value = ctx.add(shape, dtype)
        _, base, _ = tensor_with_layout(draw, dtype, value.example)
        recipes.append((base, Layout()))
    target = max(draw(integers(min_nodes, max_nodes)), draw(integers(min_nodes, max_nodes)))
    outer, _CURRENT.ctx = _CURRENT.ctx, ctx
    try:
        for _ in range(3 * target):
            if len(ctx.steps) >= target:
                break
            draw(_STEP)
    finally:
        _CURRENT.ctx = outer
    if len(ctx.steps) < min_nodes:
        reject()
    n_in = len(recipes)
    outs = [len(ctx.vals) - 1]
    outs += [i for i in range(n_in, len(ctx.vals) - 1) if not _used(ctx.steps, i, n_in) and flag(draw)]
    size_out = None
    symbolic_dims = [(i, d) for i, v in enumerate(ctx.vals) for d, s in enumerate(v.shape) if s.free_symbols]
    if symbolic_dims and index(draw, 8) == 7:  # a size as an output, as AOTAutograd forwards return them
        i, d = choose(draw, symbolic_dims)
        size_out = (i, d, choose(draw, ("id", "times2", "plus1")))
    inputs = tuple(layout.apply(base.clone()) for base, layout in recipes)
    program = _program(tuple(ctx.steps), tuple(outs), size_out)
    try:
        gm = make_fx(program, tracing_mode="symbolic")(*inputs)
    except Exception:  # noqa: BLE001 - a program torch cannot trace symbolically is not drawn
        reject()
    try:
        shapes = graph_symbolic_shapes(gm)
    except InvalidArgument:  # a guard made one input size an expression of another's (s1 = 2*s0)
        reject()
    if not shapes.symbols:  # the tracer specialised every size (a guard such as Eq(s0, 2)): nothing dynamic
        reject()
    gm.graph.eliminate_dead_code()  # as the graphs passes are handed (AOTAutograd's are), and make_fx's are not
    gm.recompile()
    inputs = tuple(layout.apply(base.clone()) for base, layout in recipes)
    return GraphCase(gm, inputs, _features(gm), tuple(recipes), symbolic=shapes)


def _used(steps, i: int, n_in: int) -> bool:
    return any(i in s.operands for s in steps)


# Node kinds a dynamic graph is measured by (``case.features``).
DYNAMIC_FEATURES = ("dynamic", "sym-size", "sym-add", "sym-sub", "sym-mul", "sym-floordiv", "sym-max",
                    "size-arg", "size-scalar", "size-output")
_SYM_OPS = {operator.add: "sym-add", operator.sub: "sym-sub", operator.mul: "sym-mul",
            operator.floordiv: "sym-floordiv", torch.sym_max: "sym-max"}


def _features(gm) -> frozenset:
    found = {"dynamic"}
    sym_nodes = set()
    for node in gm.graph.nodes:
        if node.target is torch.ops.aten.sym_size.int:
            found.add("sym-size")
            sym_nodes.add(node)
        elif node.target in _SYM_OPS:
            found.add(_SYM_OPS[node.target])
            sym_nodes.add(node)
        elif node.op == "call_function":
            if any(a in sym_nodes for a in node.all_input_nodes):
                found.add("size-arg" if node.target not in (torch.ops.aten.mul.Tensor, torch.ops.aten.add.Tensor)
                          else "size-scalar")
        elif node.op == "output":
            if any(a in sym_nodes for a in node.all_input_nodes):
                found.add("size-output")
    return frozenset(found)
