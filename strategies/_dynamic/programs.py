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
A step is a row of ``STEPS`` (``steps.py``) applied to values built so far (earliest first); its shape arguments
are expressions of those values' sizes. Shapes are tracked as sympy expressions of the symbols,
so a step is only drawn where it holds for every size (a broadcast between two symbols never is).
Shrinking deletes steps, moves operands towards the first input and rows towards the first row.
"""

from __future__ import annotations

import operator
import threading

import sympy
import torch
from hypothesis import reject
from hypothesis import strategies as st

from .._build.eager import quiet_fake_log
from .._draws import choose, flag, index, integers
from .steps import _KINDS, ARITH, STEP_OPS, STEPS, Step, Value, _Skip
from .._errors import InvalidArgument
from .symshapes import graph_symbolic_shapes, size_symbol
from .._draw.case import GraphCase
from .._draw.focus import Focus
from .._tensors import Layout, tensor_with_layout

MAX_NUMEL = 4096  # at the example sizes; other sizes the harness picks stay near them
FLOATS = (torch.float32, torch.float32, torch.float32, torch.float64, torch.float16, torch.bfloat16)


class _Ctx:
    """The program being drawn: its values, steps and the example sizes of its symbols."""

    def __init__(self, env: dict, focus: tuple = ()):
        self.env, self.focus = env, focus
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
    if ctx.focus and index(draw, 4) != 3:  # three steps in four are of the rows making the focus ops
        kind = choose(draw, ctx.focus)
    else:
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


_STEP = _step()  # one strategy for every step (see _draw/draw.py's _STEP); the program being drawn is in _CURRENT


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


def focus_kinds(ops) -> tuple:
    """The ``STEPS`` rows whose traces hold any of ``ops`` (OpOverloads or names such as
    ``"aten.slice.Tensor"``, ``"aten.slice"`` for every overload); InvalidArgument naming the ops
    no row makes."""
    names = Focus(ops=ops).op_names()

    def makes(row_ops, name) -> bool:
        return any(str(op) == name or str(op).rsplit(".", 1)[0] == name or getattr(op, "__name__", None) == name
                   for op in row_ops)

    missing = [n for n in sorted(names) if not any(makes(row_ops, n) for row_ops in STEP_OPS.values())]
    if missing:
        made = sorted({str(op) for row_ops in STEP_OPS.values() for op in row_ops})
        raise InvalidArgument(f"dynamic=True draws no step that makes {', '.join(missing)}; its steps make "
                              f"{', '.join(made)}")
    return tuple(kind for kind, row_ops in STEP_OPS.items() if any(makes(row_ops, n) for n in names))


@st.composite
def dynamic_graph_cases(draw, *, dtypes, min_nodes: int, max_nodes: int, min_inputs: int, max_inputs: int,
                        focus: tuple = (), seeds: tuple = ()):
    """A ``GraphCase`` traced by ``make_fx(tracing_mode="symbolic")``, ``case.symbolic`` its sizes.
    ``focus``: ``STEPS`` rows drawn three times in four (``focus_kinds``). ``seeds``: the user's
    example programs (``SeedGraph``), half the graphs one of them traced symbolically at new sizes."""
    from torch.fx.experimental.proxy_tensor import make_fx

    if seeds and flag(draw):
        return _seed_case(draw, choose(draw, seeds))

    examples = []
    for _ in range(draw(integers(1, 3))):
        size = draw(integers(2, 7))
        while size in examples:  # distinct, so the tracer's duck sizing keeps the symbols apart
            size += 1
        examples.append(size)
    symbols = [size_symbol(f"s{i}") for i in range(len(examples))]
    ctx = _Ctx({s: sympy.Integer(n) for s, n in zip(symbols, examples)}, focus)
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
    outs += [i for i in range(n_in, len(ctx.vals) - 1) if not _used(ctx.steps, i) and flag(draw)]
    size_out = None
    symbolic_dims = [(i, d) for i, v in enumerate(ctx.vals) for d, s in enumerate(v.shape) if s.free_symbols]
    if symbolic_dims and index(draw, 8) == 7:  # a size as an output, as AOTAutograd forwards return them
        i, d = choose(draw, symbolic_dims)
        size_out = (i, d, choose(draw, ("id", "times2", "plus1")))
    inputs = tuple(layout.apply(base.clone()) for base, layout in recipes)
    program = _program(tuple(ctx.steps), tuple(outs), size_out)
    try:
        with quiet_fake_log():  # a meta kernel's refusal is the tracer's answer, logged as an error
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


def _seed_case(draw, seed):
    """``seed``'s program (its graph where it has none) traced symbolically on fresh inputs: each
    distinct example size above 1 becomes a symbol with a new example size (equal sizes stay equal,
    as the program's shapes need), values drawn anew. Rejected where the trace specialises every
    size (a program with its sizes baked in) or fails."""
    from torch.fx.experimental.proxy_tensor import make_fx

    program = seed.program if seed.program is not None else seed.gm
    resized, used = {}, set()
    for n in sorted({d for t in seed.example_inputs for d in t.shape if d > 1}):
        m = draw(integers(2, 7))
        while m in used:  # distinct, so the tracer's duck sizing keeps the symbols apart
            m += 1
        used.add(m)
        resized[n] = m
    recipes = []
    for t in seed.example_inputs:
        shape = tuple(resized.get(d, d) for d in t.shape)
        if _numel(shape) > MAX_NUMEL:
            reject()
        _, base, _ = tensor_with_layout(draw, t.dtype, shape, noncontiguous=False)
        recipes.append((base, Layout()))

    def as_tuple(*xs):
        out = program(*xs)
        return tuple(out) if isinstance(out, (tuple, list)) else (out,)

    inputs = tuple(layout.apply(base.clone()) for base, layout in recipes)
    try:
        with quiet_fake_log():
            gm = make_fx(as_tuple, tracing_mode="symbolic")(*inputs)
        shapes = graph_symbolic_shapes(gm)
    except Exception:  # noqa: BLE001 - a program torch cannot trace symbolically (or sizes it relates) is not drawn
        reject()
    if not shapes.symbols:
        reject()
    gm.graph.eliminate_dead_code()
    gm.recompile()
    inputs = tuple(layout.apply(base.clone()) for base, layout in recipes)
    return GraphCase(gm, inputs, _features(gm), tuple(recipes), symbolic=shapes)


def _used(steps, i: int) -> bool:
    return any(i in s.operands for s in steps)


# Node kinds a dynamic graph is measured by (``case.features``).
DYNAMIC_FEATURES = ("dynamic", "sym-size", "sym-add", "sym-sub", "sym-mul", "sym-floordiv", "sym-max",
                    "sym-min", "sym-neg", "sym-compare", "size-arg", "size-scalar", "size-output", "runtime-assert")
_SYM_OPS = {operator.add: "sym-add", operator.sub: "sym-sub", operator.mul: "sym-mul",
            operator.floordiv: "sym-floordiv", torch.sym_max: "sym-max", torch.sym_min: "sym-min",
            operator.neg: "sym-neg", operator.ge: "sym-compare"}


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
        elif node.target is torch.ops.aten._assert_scalar.default:
            found.add("runtime-assert")
        elif node.op == "call_function":
            if any(a in sym_nodes for a in node.all_input_nodes):
                found.add("size-arg" if node.target not in (torch.ops.aten.mul.Tensor, torch.ops.aten.add.Tensor)
                          else "size-scalar")
        elif node.op == "output":
            if any(a in sym_nodes for a in node.all_input_nodes):
                found.add("size-output")
    return frozenset(found)
