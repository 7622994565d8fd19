"""Grad-mode regions: ``_set_grad_enabled`` pairs become one ``wrap_with_set_grad_enabled`` node each.

A pre-dispatch graph switches grad mode with ``torch._C._set_grad_enabled(False)`` ...
``(True)``, hard-coding the restore: called under ``no_grad`` it turns grad mode on and leaves it
on (docs/torch-facts.md, section 2). Each region here becomes one higher-order op
node whose body is a functional subgraph of the region's nodes; the op sets the mode for the body
and restores the caller's afterwards. Values the region computes that later nodes use (new values
of written storages included) are the body's outputs, so writes inside a region reach later uses.
"""

from __future__ import annotations

import operator

import torch
import torch.fx as fx

_GRAD = torch._C._set_grad_enabled
_HOP = torch.ops.higher_order.wrap_with_set_grad_enabled
_EPILOGUE = (torch.ops.aten.copy_.default, torch.ops.aten.as_strided_.default)


def regions(graph: fx.Graph) -> list:
    """``[(mode, [nodes])]``: a marker opens a region under its value; the next marker with the other
    value closes it (back to the caller's mode); a region left open ends at the epilogue or output."""
    found, current, mode = [], None, None
    for node in graph.nodes:
        if node.op == "call_function" and node.target is _GRAD:
            value = bool(node.args[0])
            if current is None:
                mode, current = value, []
            elif value != mode:
                found.append((mode, current))
                current = None
            continue
        if current is not None:
            if node.op == "output" or node.target in _EPILOGUE:
                found.append((mode, current))
                current = None
            elif node.op == "call_function":
                current.append(node)
    return found


def outline_grad_regions(gm: fx.GraphModule) -> fx.GraphModule:
    """Replace each grad-mode region of ``gm`` (in place) with a ``wrap_with_set_grad_enabled`` node."""
    graph = gm.graph
    for index, (mode, nodes) in enumerate(regions(graph)):
        if nodes:
            _outline(gm, f"grad_region_{index}", mode, nodes)
    for node in [n for n in graph.nodes if n.op == "call_function" and n.target is _GRAD]:
        graph.erase_node(node)
    graph.lint()
    gm.recompile()
    return gm


def _outline(gm: fx.GraphModule, name: str, mode: bool, nodes: list) -> None:
    members = set(nodes)
    inputs = []
    for node in nodes:
        for arg in node.all_input_nodes:
            if arg not in members and arg not in inputs:
                inputs.append(arg)
    position = {n: i for i, n in enumerate(gm.graph.nodes)}
    for arg in inputs:  # a constant read inside the region span: read it before the region instead
        if arg.op == "get_attr" and position[arg] > position[nodes[0]]:
            nodes[0].prepend(arg)
    outputs = [n for n in nodes if any(u not in members for u in n.users)]
    body = fx.Graph()
    env = {a: body.placeholder(a.name) for a in inputs}
    for node in nodes:
        env[node] = body.node_copy(node, lambda a: env[a])
    body.output(tuple(env[n] for n in outputs))
    gm.add_submodule(name, fx.GraphModule(gm, body))
    graph = gm.graph
    with graph.inserting_before(nodes[0]):
        sub = graph.get_attr(name)
        hop = graph.call_function(_HOP, (mode, sub, *inputs))
        results = [graph.call_function(operator.getitem, (hop, i)) for i in range(len(outputs))]
    for node, result in zip(outputs, results):
        node.replace_all_uses_with(result, delete_user_cb=lambda user: user not in members)
    for node in reversed(nodes):
        graph.erase_node(node)
