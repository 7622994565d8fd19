"""Seed graphs: a user's own example programs, embedded in drawn graphs with fresh values.

A ``SeedGraph`` is an ATen graph (``make_fx`` traced) with example inputs. A focused graph with
seeds replays one, node by node, through the GraphBuilder in the middle of its drawn steps: each
seed input is an existing value of the same dtype and shape (half the time, when there is one) or
a new input drawn fresh (special values included), scalar literals are now and then redrawn from
the focus pool, and what the seed computes feeds the steps drawn after it. So the pattern the
user's pass exists for occurs in many contexts, with many values, beside other ops. A node the
builder cannot replay (a non-tensor result, an in-place op outside the catalog) ends the replay
there: what came before stays in the graph.
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass

import torch
import torch.fx as fx

from .._catalog import vocabulary as C
from .._build.builder import MAX_NUMEL, StepRejected
from .._draws import choose, flag, integers
from .._errors import InvalidArgument
from .._catalog.ops import rows_named
from .._tensors import tensor_with_layout


@dataclass(frozen=True, eq=False)
class SeedGraph:
    """An example program: ``gm`` (ATen ops, one placeholder per tensor input) and its inputs."""

    gm: fx.GraphModule
    example_inputs: tuple
    program: object = None  # the Python program ``gm`` was traced from, if any: what dynamic=True traces again

    def __post_init__(self):
        if not isinstance(self.gm, fx.GraphModule):
            raise InvalidArgument(f"SeedGraph(gm={type(self.gm).__name__}) must be a torch.fx.GraphModule "
                                  f"(trace the program with make_fx)")
        inputs = tuple(self.example_inputs)
        placeholders = [n for n in self.gm.graph.nodes if n.op == "placeholder"]
        if len(placeholders) != len(inputs):
            raise InvalidArgument(f"SeedGraph: the graph has {len(placeholders)} placeholders but "
                                  f"{len(inputs)} example inputs were given")
        for i, t in enumerate(inputs):
            if not isinstance(t, torch.Tensor):
                raise InvalidArgument(f"SeedGraph: example input {i} is a {type(t).__name__}, but should be a tensor")
            if t.dtype not in C.ALL_DTYPES:
                raise InvalidArgument(f"SeedGraph: example input {i} is {t.dtype}; the generator draws "
                                      f"{', '.join(str(d) for d in C.ALL_DTYPES)}")
            if t.numel() > MAX_NUMEL:
                raise InvalidArgument(f"SeedGraph: example input {i} has {t.numel()} elements; at most {MAX_NUMEL} "
                                      f"(give smaller example inputs: the pattern is what matters, not the size)")
        calls = [n for n in self.gm.graph.nodes if n.op == "call_function"]
        if not calls:
            raise InvalidArgument("SeedGraph: the graph has no call_function node, so there is nothing to embed")
        object.__setattr__(self, "example_inputs", tuple(t.detach() for t in inputs))

    def __repr__(self) -> str:
        ops = [str(n.target) for n in self.gm.graph.nodes if n.op == "call_function"]
        return f"SeedGraph({', '.join(ops[:6])}{', ...' if len(ops) > 6 else ''})"


def seed_step(draw, ctx) -> None:
    """Replay one of ``ctx.seeds`` into ``ctx.builder``; its last value becomes ``ctx.prefer``."""
    seed = choose(draw, ctx.seeds)
    b = ctx.builder
    env: dict = {}
    results: dict = {}  # a higher-order op's node in the seed -> the Values of its getitems
    inputs = iter(seed.example_inputs)
    last = None
    try:
        for node in seed.gm.graph.nodes:
            if node.op == "placeholder":
                env[node] = _bind_input(draw, ctx, next(inputs))
            elif node.op == "get_attr":
                attr = getattr(seed.gm, node.target, None)
                if isinstance(attr, fx.GraphModule):  # a higher-order op's subgraph
                    env[node] = b.add_subgraph(attr)
                    continue
                if not isinstance(attr, torch.Tensor) or not ctx.constants:
                    raise StepRejected(f"seed constant {node.target} cannot be embedded")
                env[node] = b.add_constant(attr.detach().clone())
            elif node.op == "call_function" and node.target is operator.getitem and node.args[0] in results:
                if node.args[1] not in results[node.args[0]]:  # the node budget left that result out
                    raise StepRejected(f"seed node {node.name}: its result was not kept")
                env[node] = last = results[node.args[0]][node.args[1]]  # one result of a higher-order op
            elif node.op == "call_function":
                if b.n_calls >= ctx.max_nodes:
                    break
                env[node] = last = _replay(draw, ctx, node, env)
                if isinstance(node.target, torch._ops.HigherOrderOperator):
                    results[node] = _results_of(b, last)
    except StepRejected:
        pass  # a partial seed is still a graph
    if last is not None:
        ctx.prefer = last


def _bind_input(draw, ctx, example: torch.Tensor):
    b = ctx.builder
    same = [v for v in b.values if v.tensor.dtype == example.dtype and tuple(v.tensor.shape) == tuple(example.shape)]
    if same and flag(draw):
        return choose(draw, same)
    if len(b.recipes) >= ctx.max_inputs:
        if same:
            return choose(draw, same)
        raise StepRejected("no room for the seed's inputs")
    _, base, layout = tensor_with_layout(draw, example.dtype, tuple(example.shape),
                                         special_values=ctx.special_values, noncontiguous=ctx.noncontiguous)
    return b.add_input(base, layout)


def _results_of(b, first) -> dict:
    """The Values of a call's getitems, by index, from the first one's (``GraphBuilder.call``)."""
    call = first.node.args[0]
    return {user.args[1]: b.value_of(user) for user in call.users if user.target is operator.getitem}


# The higher-order ops a seed program may hold: run, fake-propagated and drawn around like any call.
SEED_HOPS = ("cond", "invoke_subgraph")


def _replay(draw, ctx, node: fx.Node, env: dict):
    target = node.target
    if isinstance(target, torch._ops.HigherOrderOperator) and target.name() in SEED_HOPS:
        return ctx.builder.call(None, target, _replayed(node.args, env), _replayed(dict(node.kwargs), env))
    if not isinstance(target, torch._ops.OpOverload):
        raise StepRejected(f"seed node {target} is not an ATen op")
    rows = rows_named(target)
    spec = rows[0] if rows else None
    if spec is None and target._schema.is_mutable:
        raise StepRejected(f"seed node {target} writes in place and is not in the catalog")

    scalar_params = {a.name for a in target._schema.arguments if str(a.type) in ("Scalar", "float")}
    positional = [a.name for a in target._schema.arguments if not a.kwarg_only]

    def arg(a, name=None):
        if isinstance(a, (fx.Node, list, tuple)):
            return _replayed(a, env)
        if (name in scalar_params and isinstance(a, (int, float)) and not isinstance(a, bool) and ctx.scalar_pool
                and draw(integers(0, 3)) == 3):
            return _mutated_scalar(draw, ctx, a)  # a literal operand, not a dim or a size
        return a

    args = tuple(arg(a, positional[i] if i < len(positional) else None) for i, a in enumerate(node.args))
    kwargs = {k: arg(v, k) for k, v in node.kwargs.items()}
    value = ctx.builder.call(spec, target, args, kwargs)
    if math.prod(value.tensor.shape) > MAX_NUMEL:
        raise StepRejected("seed value too large")
    return value


def _replayed(a, env: dict):
    """A seed node's argument with each seed node in it replaced by the Value it was replayed as."""
    if isinstance(a, fx.Node):
        if a not in env:
            raise StepRejected(f"seed node {a.name} was not replayed")
        return env[a]
    if isinstance(a, (list, tuple)):
        return type(a)(_replayed(x, env) for x in a)
    if isinstance(a, dict):
        return {k: _replayed(v, env) for k, v in a.items()}
    return a


def _mutated_scalar(draw, ctx, a):
    """Another scalar of ``a``'s type from the focus pool (an int stays an int)."""
    fit = [v for v in ctx.scalar_pool if not isinstance(a, int) or float(v).is_integer()]
    v = choose(draw, fit) if fit else a
    return int(v) if isinstance(a, int) else float(v)
