"""Higher-order ops the generator draws: ``torch.cond`` with drawn branches, ``invoke_subgraph`` (one
drawn block called more than once), as traced ATen graphs hold them (``graphs(hops=...)``); and in
pre-dispatch graphs the regions torch's pre-dispatch export outlines, ``wrap_with_set_grad_enabled``
and ``wrap_with_autocast`` (``REGION_HOPS``): those are drawn as regions of the ATen graph
(``_set_grad_enabled`` and ``_enter_autocast``/``_exit_autocast`` nodes, ``draw.py``), and the
pre-dispatch conversion makes the ops of them with torch's own passes (``_ir/convert.py``).

A branch or a block is a graph of its own, drawn the way the outer graph is: a ``GraphBuilder``
whose placeholders hold copies of the operands' values, steps drawn by the outer draw's own step
strategy over functional rows only (a subgraph may not write its operands, nor hold random ops or
a user's ops), no new leaves (what it reads, it is given). Its output is a value it computed: a
``clone`` where that value is an operand or a view of one (a subgraph's output may not alias its
input), as torch requires of both. The outer graph then gets what a traced program has:

- cond: ``pred = gt(sum(x), 0)``, the two branches as ``get_attr`` submodules, ``cond(pred, true,
  false, (operands,))`` and a ``getitem``. The false branch returns the last value it computed that
  has the true branch's shape and dtype (cond's rule), or the step is rejected.
- invoke_subgraph: the block as one ``get_attr``, called two or three times with its identifier: on
  its operands; then again on the same ones (what CSE may merge; half the time both results are
  added, so both are read), on the last call's result where that has the operand's metadata
  (layers repeated), or on other values of the operands' metadata.

Each call is run eagerly and checked against fake-tensor propagation like any other
(``GraphBuilder.call``): a call either refuses is a rejected step, never a graph that does not run.
"""

from __future__ import annotations

import torch

from .._build.builder import GraphBuilder, StepRejected, Value, _copy_strided, _shares_storage
from .._catalog.ops import rows_named
from .._draws import choose, flag, integers
from .._errors import InvalidArgument
from .operands import DrawContext

HOPS = ("cond", "invoke_subgraph", "wrap_with_set_grad_enabled", "wrap_with_autocast")
# each one's step kind where it is drawn as a region of the ATen graph
REGION_HOPS = {"wrap_with_set_grad_enabled": "grad-region", "wrap_with_autocast": "autocast-region"}
# the IRs whose graphs hold each as a higher-order op
# (a region in aten graphs: its mode nodes, the form make_fx leaves and export's passes outline)
HOP_IRS = {"cond": ("aten", "post-grad"), "invoke_subgraph": ("aten", "post-grad"),
           "wrap_with_set_grad_enabled": ("pre-dispatch", "aten"), "wrap_with_autocast": ("pre-dispatch", "aten")}
# A branch or block: at most this many nodes (they count against the outer graph's node budget too).
MAX_SUBGRAPH_NODES = 4

aten = torch.ops.aten
higher_order = torch.ops.higher_order


def check_hops(hops, ir: str | None = "aten", dynamic: bool = False) -> tuple:
    """``hops`` as a tuple of names of ``HOPS`` (InvalidArgument otherwise), for graphs in ``ir``
    (None: in whichever IR holds each)."""
    if isinstance(hops, str) or not hasattr(hops, "__iter__"):
        raise InvalidArgument(f"hops={hops!r} must be a list of higher-order op names, some of {HOPS}")
    hops = tuple(dict.fromkeys(hops))
    unknown = [h for h in hops if h not in HOPS]
    if unknown:
        raise InvalidArgument(f"hops={list(hops)!r}: {unknown[0]!r} is not a higher-order op the generator draws; "
                              f"it draws {', '.join(HOPS)}")
    for h in hops:
        if ir is not None and (dynamic or ir not in HOP_IRS[h]):
            raise InvalidArgument(f"hops={list(hops)!r}: {h} is drawn in {' and '.join(map(repr, HOP_IRS[h]))} "
                                  f"graphs, not {'dynamic ones' if dynamic else f'ir={ir!r}'}")
    return hops


def hops_in(hops, ir: str) -> tuple:
    """Those of ``hops`` that graphs in ``ir`` hold (a pass's code may name others)."""
    return tuple(h for h in hops if ir in HOP_IRS[h])


def hop_step(draw, ctx: DrawContext, kind: str, draw_steps) -> None:
    """Add one ``kind`` call (``HOPS``) to ``ctx.builder``; ``draw_steps(sub_ctx, n)`` draws up to
    ``n`` steps into a subgraph's context (the outer draw's step strategy)."""
    b = ctx.builder
    tensors = [v for v in b.values if isinstance(v.tensor, torch.Tensor) and v.tensor.numel()]
    if not tensors:
        raise StepRejected("no tensor to hand a subgraph")
    first = tensors[-1] if not flag(draw) else choose(draw, tensors)  # the latest value, mostly
    operands = [first]
    if flag(draw) and len(tensors) > 1:
        second = choose(draw, tensors)
        if second is not first:
            operands.append(second)
    if kind == "cond":
        _cond(draw, ctx, operands, draw_steps)
    else:
        _invoke_subgraph(draw, ctx, operands, draw_steps)


def _cond(draw, ctx: DrawContext, operands: list, draw_steps) -> None:
    b = ctx.builder
    if b.n_calls + 5 > ctx.max_nodes:  # sum, gt, cond, its getitem, and room for a reader
        raise StepRejected("no room for a cond")
    true_gm, out = _subgraph(draw, ctx, operands, draw_steps)
    false_gm, _ = _subgraph(draw, ctx, operands, draw_steps, like=out)
    pred = _call(b, aten.gt.Scalar, (_call(b, aten.sum.default, (operands[0],)), 0))
    k = b.n_subgraphs  # named as torch's tracers name them
    branches = (b.add_subgraph(true_gm, f"true_graph_{k}", copy_it=False),
                b.add_subgraph(false_gm, f"false_graph_{k}", copy_it=False))
    b.call(None, higher_order.cond, (pred, *branches, tuple(operands)), {})


def _invoke_subgraph(draw, ctx: DrawContext, operands: list, draw_steps) -> None:
    b = ctx.builder
    if b.n_calls + 4 > ctx.max_nodes:  # two calls and their getitems
        raise StepRejected("no room for two calls of a block")
    block, _ = _subgraph(draw, ctx, operands, draw_steps)
    k = b.n_subgraphs
    module = b.add_subgraph(block, f"repeated_subgraph{k}", copy_it=False)
    name = f"subgraph_{k}"
    result = b.call(None, higher_order.invoke_subgraph, (module, name, *operands), {})
    for _ in range(draw(integers(1, 2))):
        if b.n_calls + 2 > ctx.max_nodes:
            return
        again, how = list(operands), draw(integers(0, 2))  # 0: the same operands (what CSE may merge)
        if how == 1 and _same_meta(result.tensor, operands[0].tensor):
            again[0] = result  # the block applied to its own result: a layer repeated
        elif how == 2:  # other values of the operands' metadata (another input of the same shape)
            for i, v in enumerate(operands):
                others = [o for o in b.values if o is not v and isinstance(o.tensor, torch.Tensor)
                          and _same_meta(o.tensor, v.tensor)]
                if others:
                    again[i] = choose(draw, others)
        previous = result
        result = b.call(None, higher_order.invoke_subgraph, (module, name, *again), {})
        if how == 0 and b.n_calls < ctx.max_nodes and flag(draw):
            result = _call(b, aten.add.Tensor, (previous, result))  # both read: f(x) + f(x), what CSE merges


def _subgraph(draw, ctx: DrawContext, operands: list, draw_steps, like: torch.Tensor | None = None) -> tuple:
    """``(GraphModule, output tensor)``: a subgraph over ``operands`` (see the module docstring);
    ``like``: its output must have that tensor's shape and dtype."""
    outer = ctx.builder
    sub = GraphBuilder(special_values=outer.special_values, fake_mode=outer.fake_mode, max_nodes=MAX_SUBGRAPH_NODES,
                       max_numel=outer.max_numel, device=outer.device, run_device=outer.run_device,
                       support=outer.support)
    try:
        args = [sub.add_operand(_copy_strided(v.tensor)) for v in operands]
    except RuntimeError:  # an expanded operand (elements sharing memory): no copy with its strides
        raise StepRejected("a subgraph's operand overlaps itself") from None
    sub_ctx = DrawContext(sub, ctx.dtypes, ctx.shapes, max_inputs=0, constants=False,
                          special_values=ctx.special_values, max_nodes=MAX_SUBGRAPH_NODES, large=ctx.large)
    draw_steps(sub_ctx, draw(integers(1, MAX_SUBGRAPH_NODES - 1)))
    made = [v for v in sub.values if v.node.op == "call_function" and isinstance(v.tensor, torch.Tensor)]
    if not made and like is None:
        raise StepRejected("a subgraph that computes nothing")  # a bare clone tests no pass
    if like is not None:
        made = [v for v in made if v.tensor.shape == like.shape and v.tensor.dtype == like.dtype]
        if not made:
            made = [v for v in args if v.tensor.shape == like.shape and v.tensor.dtype == like.dtype]
    out = made[-1] if made else None
    if out is None:
        raise StepRejected("no value of the other branch's shape and dtype")
    if out.node.op == "placeholder" or any(_shares_storage(out.tensor, a.tensor) for a in args):
        out = _call(sub, aten.clone.default, (out,))
    sub.output([out])
    return sub.graph_module(), out.tensor


def _call(b: GraphBuilder, target, args: tuple) -> Value:
    rows = rows_named(target)
    return b.call(rows[0] if rows else None, target, args, {})


def _same_meta(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and a.stride() == b.stride()
