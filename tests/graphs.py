"""Small ATen graphs built by hand, for tests that need one exact graph."""

from __future__ import annotations

import torch
import torch.fx as fx


def build(n_inputs, body, constants=None):
    """A GraphModule from ``body(graph, call, *placeholders) -> outputs`` (a list, or one node) over aten ops."""
    g = fx.Graph()
    xs = [g.placeholder(f"x{i}") for i in range(n_inputs)]
    root = torch.nn.Module()
    for name, value in (constants or {}).items():
        root.register_buffer(name, value)

    def call(target, *args):
        return g.call_function(target, args)

    outputs = body(g, call, *xs)
    g.output(outputs if isinstance(outputs, fx.Node) else tuple(outputs))  # a lone node: a single output
    return fx.GraphModule(root, g)


def linear_bias(alpha=None):
    """``add(mm(a, b), bias[, alpha=])``, what linear leaves after decomposition: Inductor's post-grad
    table fuses it into ``addmm`` (and drops ``alpha``). Returns ``(gm, inputs)``."""
    kwargs = {} if alpha is None else {"alpha": alpha}
    gm = build(3, lambda g, call, a, b, bias: g.call_function(
        torch.ops.aten.add.Tensor, (call(torch.ops.aten.mm.default, a, b), bias), kwargs))
    return gm, (torch.randn(2, 3), torch.randn(3, 4), torch.randn(4))
