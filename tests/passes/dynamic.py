"""Passes over graphs with symbolic sizes: planted specialisations, and correct rewrites of the
shape arithmetic that the ``dynamic`` property must not flag."""

from __future__ import annotations

import operator

import torch
import torch.fx as fx


def _placeholders(gm):
    return list(gm.graph.find_nodes(op="placeholder"))


def bake_sizes(gm, example_inputs):
    """PLANTED: each ``sym_size`` node becomes the example's size (an input's, or its traced hint)."""
    ph = _placeholders(gm)
    for node in list(gm.graph.nodes):
        if node.target is torch.ops.aten.sym_size.int:
            x, d = node.args
            size = example_inputs[ph.index(x)].shape[d] if x in ph else node.meta["val"].node.hint
            node.replace_all_uses_with(int(size))
            gm.graph.erase_node(node)
    gm.recompile()
    return gm


def guard_on_sizes(gm):
    """PLANTED: asks whether a size is 2 on the symbolic ``meta['val']`` (``int()`` guards it) and
    rewrites nothing: the guard alone specialises what the pipeline compiles."""
    for node in gm.graph.nodes:
        if node.target is torch.ops.aten.sym_size.int and int(node.meta["val"]) == 2:
            break
    return gm


def floordiv_as_ceil(gm):
    """PLANTED: ``a // k`` becomes ``(a + k - 1) // k``, which is wrong wherever k does not divide a."""
    g = gm.graph
    for node in list(g.nodes):
        if node.target is operator.floordiv and isinstance(node.args[1], int):
            a, k = node.args
            with g.inserting_before(node):
                new = g.call_function(operator.floordiv, (g.call_function(operator.add, (a, k - 1)), k))
            node.replace_all_uses_with(new)
            g.erase_node(node)
    gm.recompile()
    return gm


def stale_size_meta(gm):
    """PLANTED: rewrites nothing that runs, but sets each floordiv node's ``meta['val']`` to the
    example's value (an int where it was a SymInt), as a pass that re-derives meta from hints does."""
    for node in gm.graph.nodes:
        if node.target is operator.floordiv and isinstance(node.meta.get("val"), torch.SymInt):
            node.meta["val"] = node.meta["val"].node.hint
    return gm


def fold_size_arithmetic(gm):
    """CORRECT: ``0 + e`` and ``e + 0`` and ``e - 0`` become ``e``, ``(e // a) // b`` becomes ``e // (a * b)``."""
    g = gm.graph
    for node in list(g.nodes):
        if node.target in (operator.add, operator.sub) and node.args[1] == 0 and isinstance(node.args[0], fx.Node):
            node.replace_all_uses_with(node.args[0])
        elif node.target is operator.add and node.args[0] == 0 and isinstance(node.args[1], fx.Node):
            node.replace_all_uses_with(node.args[1])
        elif (node.target is operator.floordiv and isinstance(node.args[1], int)
              and isinstance(node.args[0], fx.Node) and node.args[0].target is operator.floordiv
              and isinstance(node.args[0].args[1], int)):
            inner = node.args[0]
            node.args = (inner.args[0], inner.args[1] * node.args[1])
    g.eliminate_dead_code()
    gm.recompile()
    return gm


def double_as_sum(gm):
    """CORRECT: ``e * 2`` on sizes becomes ``e + e``."""
    g = gm.graph
    for node in list(g.nodes):
        if node.target is operator.mul and node.args[1] == 2 and isinstance(node.args[0], fx.Node):
            with g.inserting_before(node):
                new = g.call_function(operator.add, (node.args[0], node.args[0]))
            node.replace_all_uses_with(new)
            g.erase_node(node)
    gm.recompile()
    return gm


def ceil_half_as_difference(gm):
    """CORRECT: ``(a + 1) // 2`` becomes ``a - a // 2`` (equal for every integer a, which sympy does
    not simplify: the prover decides)."""
    g = gm.graph
    for node in list(g.nodes):
        inner = node.args[0] if node.target is operator.floordiv and node.args[1] == 2 else None
        if isinstance(inner, fx.Node) and inner.target is operator.add and inner.args[1] == 1 \
                and isinstance(inner.args[0], fx.Node):
            a = inner.args[0]
            with g.inserting_before(node):
                new = g.call_function(operator.sub, (a, g.call_function(operator.floordiv, (a, 2))))
            node.replace_all_uses_with(new)
            g.erase_node(node)
    g.eliminate_dead_code()
    gm.recompile()
    return gm
